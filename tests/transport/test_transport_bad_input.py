"""A live server facing bad bytes: the offending connection is closed with a logged reason, others live on."""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest

from broker.protocol.command import RemotingCommand, encode
from broker.transport import RemotingServer, connect

BAD_FRAMES = {
    # Announces 64 MiB, above the 1 MiB limit configured below.
    "oversized": (struct.pack(">i", 64 * 1024 * 1024) + b"\0" * 16, "FrameTooLarge"),
    # Header length word claims more bytes than the frame holds.
    "truncated-header": (struct.pack(">ii", 8, 500) + b"{}{}", "MalformedFrame"),
    "negative-length": (struct.pack(">i", -5) + b"\0" * 8, "MalformedFrame"),
    "garbage": (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "FrameTooLarge"),
    "bad-json-header": (struct.pack(">ii", 4 + 9, 9) + b"not json!", "HeaderError"),
    "unknown-serialize-type": (struct.pack(">ii", 4 + 2, (7 << 24) | 2) + b"{}", "HeaderError"),
}


@pytest.mark.parametrize("case", sorted(BAD_FRAMES))
def test_bad_frame_closes_only_that_connection(arun, caplog, case: str) -> None:
    payload, error_name = BAD_FRAMES[case]

    async def body() -> None:
        server = RemotingServer("127.0.0.1", 0, max_frame_length=1024 * 1024)
        server.register(1, lambda conn, cmd: cmd.response(0, body=cmd.body))
        await server.start()
        good = await connect(("127.0.0.1", server.port))
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        # A valid request first: the connection works until the bad bytes arrive.
        writer.write(encode(RemotingCommand(code=1, opaque=1, body=b"ok")))
        await writer.drain()
        length = int.from_bytes(await reader.readexactly(4), "big")
        await reader.readexactly(length)
        writer.write(payload)
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 2) == b""  # server closed it
        reply = await good.invoke(RemotingCommand(code=1, body=b"still served"), 2)
        assert reply.body == b"still served"
        assert len(server.connections) == 1
        writer.close()
        good.close()
        await server.shutdown()

    with caplog.at_level(logging.WARNING, logger="broker.transport"):
        arun(body())
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("closing connection from 127.0.0.1:" in m and error_name in m for m in messages), messages


def test_truncated_frame_at_eof_is_logged(arun, caplog) -> None:
    async def body() -> None:
        server = RemotingServer("127.0.0.1", 0)
        server.register(1, lambda conn, cmd: cmd.response(0))
        await server.start()
        good = await connect(("127.0.0.1", server.port))
        _reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        frame = encode(RemotingCommand(code=1, body=b"x" * 100))
        writer.write(frame[:40])  # half a frame, then the peer hangs up
        await writer.drain()
        writer.close()
        await asyncio.sleep(0.2)
        assert (await good.invoke(RemotingCommand(code=1), 2)).code == 0
        assert len(server.connections) == 1
        good.close()
        await server.shutdown()

    with caplog.at_level(logging.WARNING, logger="broker.transport"):
        arun(body())
    assert any("truncated frame" in r.getMessage() and "127.0.0.1:" in r.getMessage() for r in caplog.records)
