"""Logging of our server processes: one format (text or JSON) for the broker, the NameServer and the
broker's helper processes, on the console and in a size-rotated file (docs/operations.md, "Logs").

formats: the two formats; settings: the config keys; setup: a server's handlers; relay: helper processes.
Nothing is imported here, so a helper process imports only `broker.logs.relay` (no pydantic).
"""
