"""Flow control and lifecycle over real TCP: slow readers, in-flight caps, idle close, graceful shutdown."""

from __future__ import annotations

import asyncio
import socket

import pytest

from broker.protocol.codes import ResponseCode
from broker.protocol.command import FrameDecoder, RemotingCommand, encode
from broker.transport import (
    CloseReason,
    ConnectionClosedError,
    ConnectionConfig,
    RemotingConnection,
    RemotingServer,
    connect,
)

MIB = 1024 * 1024


class _StalledReader(asyncio.Protocol):
    """A peer that sends requests but does not read replies until told to."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder()
        self.responses: list[RemotingCommand] = []
        self.got_all = asyncio.Event()
        self.expected = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.responses.extend(self.decoder.feed(data))
        if len(self.responses) >= self.expected:
            self.got_all.set()


def test_slow_reader_pauses_reading_and_bounds_buffering(arun) -> None:
    requests = 200

    async def body() -> None:
        config = ConnectionConfig(write_high_water=MIB, write_low_water=256 * 1024)
        server = RemotingServer("127.0.0.1", 0, config=config)
        big = b"x" * MIB
        handled = 0

        def big_reply(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
            nonlocal handled
            handled += 1
            return cmd.response(ResponseCode.SUCCESS, body=big)

        server.register(11, big_reply)
        await server.start()
        loop = asyncio.get_running_loop()
        sock = socket.socket()
        # A small fixed receive buffer (set before connecting, so the kernel does not autotune it to 32 MiB).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.connect(("127.0.0.1", server.port))
        sock.setblocking(False)
        _transport, peer = await loop.create_connection(_StalledReader, sock=sock)
        peer.transport.pause_reading()  # uvloop starts reading after connection_made, so pause here
        peer.expected = requests
        peer.transport.write(b"".join(encode(RemotingCommand(code=11, opaque=i)) for i in range(requests)))
        await asyncio.sleep(0.5)
        (server_conn,) = server.connections
        # 200 MiB of replies are due, but the server stopped handling requests after a few.
        assert server_conn.reading_paused
        assert handled < 40, handled
        assert server_conn.write_buffer_size <= 3 * MIB
        peer.transport.resume_reading()
        await asyncio.wait_for(peer.got_all.wait(), 30)
        assert handled == requests
        assert sorted(r.opaque for r in peer.responses) == list(range(requests))
        assert all(len(r.body) == MIB for r in peer.responses)
        assert not server_conn.reading_paused
        peer.transport.close()
        await server.shutdown()

    arun(body(), timeout=40)


def test_in_flight_handler_cap_pauses_reading(arun) -> None:
    async def body() -> None:
        server = RemotingServer("127.0.0.1", 0, config=ConnectionConfig(max_in_flight_handlers=4))
        release = asyncio.Event()
        running = 0
        peak = 0

        async def parked(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await release.wait()
            running -= 1
            return cmd.response(0)

        server.register(12, parked)
        await server.start()
        conn = await connect(("127.0.0.1", server.port))
        calls = [asyncio.ensure_future(conn.invoke(RemotingCommand(code=12), 10)) for _ in range(20)]
        await asyncio.sleep(0.3)
        (server_conn,) = server.connections
        assert peak == 4 and server_conn.reading_paused
        release.set()
        assert [r.code for r in await asyncio.gather(*calls)] == [0] * 20
        assert peak <= 4
        conn.close()
        await server.shutdown()

    arun(body())


def test_idle_connection_is_closed(arun) -> None:
    async def body() -> None:
        server = RemotingServer("127.0.0.1", 0, idle_timeout=0.3)
        server.register(1, lambda conn, cmd: cmd.response(0))
        reasons: list[CloseReason] = []
        server.add_close_listener(lambda conn, reason: reasons.append(reason))
        await server.start()
        idle = await connect(("127.0.0.1", server.port))
        active = await connect(("127.0.0.1", server.port))
        for _ in range(8):
            await asyncio.sleep(0.1)
            assert (await active.invoke(RemotingCommand(code=1), 1)).code == 0
        assert await asyncio.wait_for(idle.closed, 2) == CloseReason.PEER_CLOSED
        assert reasons == [CloseReason.IDLE]
        assert not active.is_closing
        active.close()
        await server.shutdown()

    arun(body())


def test_graceful_shutdown_finishes_in_flight_requests(arun) -> None:
    async def body() -> None:
        server = RemotingServer("127.0.0.1", 0)

        async def slow(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
            await asyncio.sleep(float(cmd.ext_fields["delay"]))
            return cmd.response(0, remark="done")

        server.register(2, slow)
        await server.start()
        port = server.port
        conn = await connect(("127.0.0.1", port))
        finishing = asyncio.ensure_future(conn.invoke(RemotingCommand(code=2, ext_fields={"delay": "0.3"}), 5))
        too_slow = asyncio.ensure_future(conn.invoke(RemotingCommand(code=2, ext_fields={"delay": "10"}), 15))
        await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await server.shutdown(grace=0.6)
        assert loop.time() - started < 3
        assert (await finishing).remark == "done"
        with pytest.raises(ConnectionClosedError):
            await too_slow
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)

    arun(body())
