"""MasterStream: the slave's end of the HA connection, an asyncio Protocol that buffers the master's
block stream for the replication session (broker.ha.slave) and carries the slave's reports back.

No StreamReader: incoming bytes are kept as they arrive and handed over in batches (`take()`), so the
session parses every complete block of a batch in one pass and copies each body once, into the mapped
CommitLog file. Reading pauses while more than `max_buffer` bytes wait (the store is slower than the
network), which pushes back on the master through TCP.
"""

from __future__ import annotations

import asyncio
import logging

__all__ = ["MasterStream"]

log = logging.getLogger(__name__)

MAX_BUFFER = 8 * 1024 * 1024


class MasterStream(asyncio.Protocol):
    def __init__(self, max_buffer: int = MAX_BUFFER) -> None:
        self.max_buffer = max_buffer
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._wake = asyncio.Event()
        self._paused = False
        self.closed = False

    # -- asyncio callbacks -----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport is no asyncio.Transport

    def data_received(self, data: bytes) -> None:
        self._buf += data
        self._wake.set()
        if len(self._buf) > self.max_buffer and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake.set()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake.set()

    # -- session side ------------------------------------------------------------------------------------

    async def take(self) -> bytearray:
        """Everything received since the last call (the caller owns it); waits when there is nothing.

        Raises ConnectionError once the connection is closed and nothing is left.
        """
        while not self._buf:
            if self.closed:
                raise ConnectionError("the master closed the HA connection")
            self._wake.clear()
            await self._wake.wait()
        buf, self._buf = self._buf, bytearray()
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return buf

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
