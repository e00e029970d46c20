"""RocketCluster: a RocketMQ-compatible NameServer, Broker and client, in Python."""

__version__ = "0.1.0"
