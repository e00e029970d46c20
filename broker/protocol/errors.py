"""Errors raised by the sans-I/O protocol layer.

`LocalProtocolError` means our own code tried to build something the protocol cannot carry;
`RemoteProtocolError` means the peer sent bytes we cannot accept. Transports catch the remote kind
at the receive boundary, log the reason and close that one connection.
"""

from __future__ import annotations

from broker.protocol.codes import ResponseCode

__all__ = [
    "FrameTooLarge",
    "HeaderError",
    "LocalProtocolError",
    "MalformedFrame",
    "ProtocolError",
    "RemoteProtocolError",
]


class ProtocolError(Exception):
    """Base of every protocol error; `response_code` is what a server should answer, if it answers."""

    response_code: int = ResponseCode.SYSTEM_ERROR


class LocalProtocolError(ProtocolError):
    """We tried to encode something the wire format cannot carry (e.g. a code above int16 in binary)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that are not a valid remoting frame. The connection cannot be resynchronised."""


class FrameTooLarge(RemoteProtocolError):
    """The length prefix announces more than the configured maximum frame length."""


class MalformedFrame(RemoteProtocolError):
    """The length prefix or header length word is inconsistent (negative, shorter than the header...)."""


class HeaderError(RemoteProtocolError):
    """The header could not be decoded: bad JSON, bad binary layout, wrong field types."""
