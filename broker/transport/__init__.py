"""Asyncio (uvloop) transport for the remoting protocol: server, client connections, dispatch.

Imported by the NameServer, the Broker, the client SDK and the CLI entry points.
"""

from __future__ import annotations

from broker.transport.client import RemotingClient, connect, parse_addr
from broker.transport.connection import ConnectionConfig, RemotingConnection
from broker.transport.dispatcher import Dispatcher
from broker.transport.errors import (
    CloseReason,
    ConnectError,
    ConnectionClosedError,
    RemotingError,
    RequestTimeout,
    TooManyRequests,
)
from broker.transport.loop import loop_factory, new_event_loop, run
from broker.transport.server import DEFAULT_IDLE_TIMEOUT, RemotingServer

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "CloseReason",
    "ConnectError",
    "ConnectionClosedError",
    "ConnectionConfig",
    "Dispatcher",
    "RemotingClient",
    "RemotingConnection",
    "RemotingError",
    "RemotingServer",
    "RequestTimeout",
    "TooManyRequests",
    "connect",
    "loop_factory",
    "new_event_loop",
    "parse_addr",
    "run",
]
