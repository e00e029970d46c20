"""Bounds against hostile senders and readers, on real loopback sockets against a RemotingServer.

- Large incomplete frames share one byte budget: a frame that does not fit waits (its connection stops
  reading) or, when not even what was read fits, is refused; small requests go on meanwhile.
- A frame that takes longer than the frame timeout is closed (a trickle never trips the idle timer).
- A peer that does not read is dropped past the write-buffer limit, and `when_writable` produces nothing
  for it until it reads; a large response body is queued once however many peers it goes to.
The budget's rules and the decoder's large-frame path are also checked as tables, without sockets.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
import tracemalloc

import pytest

from broker.protocol.codes import ResponseCode
from broker.protocol.command import GATHER_FRAMES_FROM, FrameDecoder, RemotingCommand, encode
from broker.transport import CloseReason, ConnectionConfig, RemotingConnection, RemotingServer
from broker.transport.budget import FrameBudget

KIB = 1024
MIB = 1024 * KIB
ECHO = 1  # request code answered with the length of the body it carried


def _echo_length(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(ResponseCode.SUCCESS, remark=str(len(cmd.body)))


def _frame(body_size: int, opaque: int = 1) -> bytes:
    return encode(RemotingCommand(code=ECHO, opaque=opaque, body=b"b" * body_size))


async def _open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def _reply(reader: asyncio.StreamReader, timeout: float = 5.0) -> RemotingCommand:
    decoder = FrameDecoder()
    while True:
        chunk = await asyncio.wait_for(reader.read(1 << 16), timeout)
        assert chunk, "the server closed the connection instead of answering"
        commands = decoder.feed(chunk)
        if commands:
            return commands[0]


async def _until(predicate: object, what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


# ---------------------------------------------------------------------------------------------- tables


def test_budget_reserves_waits_in_line_and_refuses() -> None:
    budget = FrameBudget(limit=100)
    granted: list[str] = []
    a = budget.reserve(60, held=10, granted=lambda: granted.append("a"))
    assert a is not None and not a.waiting and budget.used == 60
    b = budget.reserve(60, held=10, granted=lambda: granted.append("b"))
    assert b is not None and b.waiting and budget.used == 70  # waits with what it has read
    c = budget.reserve(20, held=5, granted=lambda: granted.append("c"))
    assert c is not None and c.waiting and budget.used == 75  # fits, but nobody jumps the line
    assert budget.reserve(50, held=30, granted=lambda: None) is None  # not even its read bytes fit
    assert budget.reserve(101, held=1, granted=lambda: None) is None  # larger than the whole budget
    a.release()
    assert granted == ["b", "c"] and budget.used == 80 and budget.waiting == 0
    b.release()
    c.release()
    assert budget.used == 0
    c.release()  # a second release gives nothing back twice
    assert budget.used == 0


def test_waiting_reservation_released_on_close_leaves_the_line() -> None:
    budget = FrameBudget(limit=100)
    a = budget.reserve(90, held=50, granted=lambda: None)
    b = budget.reserve(50, held=5, granted=lambda: pytest.fail("a released waiter must not be granted"))
    assert a is not None and b is not None and b.waiting
    b.release()  # its connection closed while it waited
    assert budget.waiting == 0 and budget.used == 90
    a.release()
    assert budget.used == 0


@pytest.mark.parametrize("piece", [1, 7, 4096, 65536, 300 * KIB])
def test_decoder_gathers_a_large_frame_across_reads(piece: int) -> None:
    big = RemotingCommand(code=ECHO, opaque=7, ext_fields={"k": "v"}, body=bytes(range(256)) * 1200)
    small = RemotingCommand(code=ECHO, opaque=8, body=b"after")
    stream = encode(big) + encode(small) + encode(big)[:10]
    assert len(encode(big)) > GATHER_FRAMES_FROM
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    sizes_seen: set[int] = set()
    for at in range(0, len(stream), piece):
        got += decoder.feed(stream[at : at + piece])
        if decoder.frame_size:
            sizes_seen.add(decoder.frame_size)
    assert [(c.opaque, c.body, c.ext_fields) for c in got] == [(7, big.body, {"k": "v"}), (8, b"after", {})]
    assert type(got[0].body) is bytes
    assert decoder.buffered == 10 and decoder.frame_size == len(encode(big))
    assert len(encode(big)) in sizes_seen
    # the big frame, maybe the small one (if a read ended inside it) and the trailing one: all counted
    assert decoder.frames_begun >= 2


def test_decoder_counts_a_frame_once_however_many_reads_it_takes() -> None:
    frame = _frame(100 * KIB)
    decoder = FrameDecoder()
    for at in range(0, 2000, 1):  # the length word arrives byte by byte, then the frame continues
        decoder.feed(frame[at : at + 1])
    assert decoder.frames_begun == 1 and decoder.buffered == 2000
    assert decoder.feed(frame[2000:])[0].body == b"b" * 100 * KIB
    assert decoder.buffered == 0 and decoder.frames_begun == 1


# ---------------------------------------------------------------------------------------------- live


def test_large_frames_wait_for_the_budget_while_small_requests_are_served(arun) -> None:
    async def body() -> None:
        server = RemotingServer("127.0.0.1", 0, incomplete_frames_limit=MIB)
        server.register(ECHO, _echo_length)
        await server.start()
        budget = server.frame_budget
        assert budget is not None
        first = _frame(700 * KIB, opaque=1)
        second = _frame(600 * KIB, opaque=2)
        ra, wa = await _open(server.port)
        wa.write(first[: 350 * KIB])
        await _until(lambda: budget.used == len(first), "the first frame's reservation")
        rb, wb = await _open(server.port)
        wb.write(second[:14])  # its length word and a little: that much fits, the whole frame does not
        await _until(lambda: budget.waiting == 1, "the second frame to wait")
        wb.write(second[14:])  # the server does not read it while it waits
        rc, wc = await _open(server.port)
        wc.write(_frame(10, opaque=3))
        small = await _reply(rc)
        assert (small.opaque, small.remark) == (3, "10")
        assert budget.waiting == 1
        wa.write(first[350 * KIB :])
        assert (await _reply(ra)).remark == str(700 * KIB)
        assert (await _reply(rb)).remark == str(600 * KIB)  # granted once the first frame completed
        assert budget.used == 0 and budget.waiting == 0
        for w in (wa, wb, wc):
            w.close()
        await server.shutdown()

    arun(body())


def test_a_frame_larger_than_the_budget_is_refused_and_logged(arun, caplog) -> None:
    async def body() -> None:
        server = RemotingServer("127.0.0.1", 0, incomplete_frames_limit=MIB)
        server.register(ECHO, _echo_length)
        await server.start()
        reader, writer = await _open(server.port)
        writer.write(_frame(2 * MIB)[: 64 * KIB])
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server
        rc, wc = await _open(server.port)
        wc.write(_frame(10))
        assert (await _reply(rc)).remark == "10"
        assert server.frame_budget is not None and server.frame_budget.used == 0
        writer.close()
        wc.close()
        await server.shutdown()

    with caplog.at_level(logging.WARNING, logger="broker.transport"):
        arun(body())
    assert any(
        "does not fit the 1048576 bytes that incomplete frames may hold" in r.getMessage() for r in caplog.records
    )


def test_a_trickling_frame_is_closed_after_the_frame_timeout(arun, caplog) -> None:
    async def body() -> None:
        server = RemotingServer("127.0.0.1", 0, frame_timeout=0.5, idle_timeout=120)
        server.register(ECHO, _echo_length)
        await server.start()
        reader, writer = await _open(server.port)
        closed_reasons: list[CloseReason] = []
        server.add_close_listener(lambda conn, reason: closed_reasons.append(reason))
        frame = _frame(100)
        started = time.monotonic()
        sent = 0
        while not reader.at_eof() and sent < len(frame) - 1:  # never the last byte
            writer.write(frame[sent : sent + 1])
            sent += 1
            try:
                assert await asyncio.wait_for(reader.read(), 0.1) == b""
                break
            except TimeoutError:
                pass
        elapsed = time.monotonic() - started
        assert closed_reasons == [CloseReason.FRAME_TIMEOUT], (sent, elapsed)
        print(f"trickling frame closed after {elapsed:.2f} s and {sent} bytes (frame timeout 0.5 s)")
        # a client that sends whole frames is not affected
        rc, wc = await _open(server.port)
        wc.write(frame)
        assert (await _reply(rc)).remark == "100"
        wc.close()
        writer.close()
        await server.shutdown()

    with caplog.at_level(logging.WARNING, logger="broker.transport"):
        arun(body())
    assert any("its frame is not complete" in r.getMessage() for r in caplog.records)


def _tiny_buffers(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * KIB)


async def _server_side(server: RemotingServer, count: int) -> list[RemotingConnection]:
    await _until(lambda: len(server.connections) == count, f"{count} accepted connections")
    conns = list(server.connections)
    for conn in conns:
        assert conn.transport is not None
        _tiny_buffers(conn.transport.get_extra_info("socket"))
    return conns


def _stalled_client(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * KIB)
    return sock


def test_a_peer_that_does_not_read_is_dropped_past_the_write_limit(arun, caplog) -> None:
    async def body() -> None:
        config = ConnectionConfig(write_high_water=MIB, write_low_water=256 * KIB, write_buffer_limit=8 * MIB)
        server = RemotingServer("127.0.0.1", 0, config=config)
        await server.start()
        sock = _stalled_client(server.port)
        (conn,) = await _server_side(server, 1)
        for opaque in range(20):  # replies no request of this peer can hold back (like woken long polls)
            conn.send_response(RemotingCommand(code=0, opaque=opaque, body=bytes(MIB)))
            await asyncio.sleep(0)
        await asyncio.wait_for(conn.closed, 5)
        assert conn.close_reason is CloseReason.WRITE_OVERFLOW
        sock.close()
        await server.shutdown()

    with caplog.at_level(logging.WARNING, logger="broker.transport"):
        arun(body())
    assert any("does not read (limit 8388608)" in r.getMessage() for r in caplog.records)


def test_when_writable_waits_for_the_peer_to_read(arun) -> None:
    async def body() -> None:
        config = ConnectionConfig(write_high_water=MIB, write_low_water=256 * KIB)
        server = RemotingServer("127.0.0.1", 0, config=config)
        await server.start()
        sock = _stalled_client(server.port)
        (conn,) = await _server_side(server, 1)
        ran: list[int] = []
        conn.when_writable(lambda: ran.append(1))
        assert ran == [1]  # nothing queued: at once
        conn.send_response(RemotingCommand(code=0, body=bytes(4 * MIB)))
        await asyncio.sleep(0.05)
        assert conn.write_backlogged
        conn.when_writable(lambda: ran.append(2))
        await asyncio.sleep(0.1)
        assert ran == [1]  # the peer reads nothing: nothing is produced for it
        loop = asyncio.get_running_loop()
        sock.setblocking(False)
        while ran == [1]:
            try:
                await loop.sock_recv(sock, 1 << 20)
            except BlockingIOError:
                await asyncio.sleep(0.01)
        assert ran == [1, 2]
        sock.close()
        await server.shutdown()

    arun(body())


def test_one_large_body_sent_to_many_peers_is_held_once(arun) -> None:
    peers = 40

    async def body() -> None:
        server = RemotingServer("127.0.0.1", 0)
        await server.start()
        socks = [_stalled_client(server.port) for _ in range(peers)]
        conns = await _server_side(server, peers)
        shared = bytes(MIB)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for conn in conns:
                conn.send_response(RemotingCommand(code=0, opaque=5, body=shared))
            await asyncio.sleep(0.1)
            held = max(conn.write_buffer_size for conn in conns)
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert held > MIB // 2  # the peers do not read: most of each reply is still queued
        print(f"{peers} replies of a 1 MiB body queued; Python allocations grew {grown / MIB:.2f} MiB")
        assert grown < 4 * MIB  # one copy per peer would be 40 MiB
        for sock in socks:
            sock.close()
        await server.shutdown()

    arun(body())


def test_frame_size_is_read_from_the_length_word() -> None:
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">i", 100)[:3])
    assert decoder.frame_size == 0 and decoder.buffered == 3
    decoder.feed(struct.pack(">i", 100)[3:] + b"\0" * 10)
    assert decoder.frame_size == 104 and decoder.buffered == 14 and decoder.frames_begun == 1
