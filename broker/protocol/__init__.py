"""The RocketMQ remoting protocol: frames, codes, headers, bodies and the message codec; no I/O.

The bottom layer: every other package may import it, and it imports none of them (an import-linter
contract in pyproject.toml). Before this file the folder was a namespace package, which import-linter
cannot see.
"""
