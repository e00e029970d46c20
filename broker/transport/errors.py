"""Exceptions of the transport layer, raised to whoever calls `invoke` on a connection.

Callers (the broker's outgoing requests, the client SDK, HA) catch `RemotingError` for any transport
failure, or one of its subclasses when the reaction differs (retry on `RequestTimeout`, back off on
`TooManyRequests`, reconnect on `ConnectionClosedError`).
"""

from __future__ import annotations

import logging
from enum import Enum

__all__ = [
    "CloseReason",
    "ConnectError",
    "ConnectionClosedError",
    "RemotingError",
    "RequestTimeout",
    "TooManyRequests",
]

log = logging.getLogger(__name__)


class CloseReason(Enum):
    """Why a connection ended; passed to close listeners and recorded on the connection."""

    PEER_CLOSED = "peer closed the connection"
    LOCAL_CLOSE = "closed locally"
    PROTOCOL_ERROR = "protocol error"
    IDLE = "idle timeout"
    SHUTDOWN = "server shutdown"
    CONNECTION_LOST = "connection lost"
    FRAME_REFUSED = "frame refused: incomplete frames are over their memory bound"
    FRAME_TIMEOUT = "frame not completed in time"
    WRITE_OVERFLOW = "peer does not read: write buffer over its bound"


class RemotingError(Exception):
    """Base of every transport failure."""


class ConnectError(RemotingError):
    """The TCP connection could not be established."""


class RequestTimeout(RemotingError):
    """No response arrived within the request's timeout."""


class TooManyRequests(RemotingError):
    """The in-flight request cap of the connection stayed full for the whole timeout."""


class ConnectionClosedError(RemotingError):
    """The connection closed before the response arrived (or before the request could be sent)."""

    def __init__(self, message: str, reason: CloseReason | None = None) -> None:
        super().__init__(message)
        self.reason = reason
