"""The broker's memory stays bounded under clients that send half a frame or do not read.

A real broker subprocess (its RSS is its own, read from /proc/<pid>/status) with default bounds; the
clients are plain sockets writing frames by hand:
- 600 connections each park a long poll and then stop reading; one 1 MiB message wakes them all. The
  broker reads it once and queues the same body to every puller (it used to take +610 MiB, a copy each).
- 1 000 connections each send half of a 16 MiB frame and wait. Large incomplete frames share
  serverIncompleteFramesMaxBytes (256 MiB by default): those that fit are held, the rest are refused.
In both, a normal send on another connection is answered; its latency is printed, not asserted.
"""

from __future__ import annotations

import resource
import selectors
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.protocol.codes import RequestCode
from broker.protocol.command import FrameDecoder, RemotingCommand, encode
from broker.protocol.message import decode_records
from tests.hostile_cluster import BrokerProcs, RawClient, pull_header, rss_mib, running_pair, send_header

MIB = 1024 * 1024
INCOMPLETE_FRAMES_LIMIT_MIB = 256  # the broker's default serverIncompleteFramesMaxBytes
SLACK_MIB = 64  # interpreter, connections, the stored message's mapped pages, allocator rounding
UNSUPPORTED = 9999  # any code the broker does not serve: answered at once, in order


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcs]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 <= hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard))
    with running_pair(tmp_path_factory.mktemp("hostile-memory")) as procs:
        yield procs


def _peak_rss(pid: int, seconds: float) -> float:
    peak = 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, rss_mib(pid))
        time.sleep(0.05)
    return peak


def _settled_rss(pid: int) -> float:
    """RSS once the broker has handled the closes: the last of 2 s of samples."""
    time.sleep(2.0)
    return rss_mib(pid)


def _kernel_tcp_mib() -> float:
    """Memory the kernel holds in TCP socket buffers, machine-wide (not in anyone's RSS)."""
    for line in Path("/proc/net/sockstat").read_text().splitlines():
        if line.startswith("TCP:"):
            fields = line.split()
            return int(fields[fields.index("mem") + 1]) * 4096 / MIB
    return 0.0


def _read_reply(sock: socket.socket, opaque: int) -> RemotingCommand:
    decoder = FrameDecoder()
    while True:
        data = sock.recv(1 << 20)
        assert data, "the broker closed the connection"
        for cmd in decoder.feed(data):
            if cmd.opaque == opaque:
                return cmd


def test_600_held_pulls_woken_by_one_1_mib_message(pair: BrokerProcs) -> None:
    topic, group = "HostileHeld", "HostileHeldCG"
    client = RawClient(pair.broker_port)
    seed = client.send(topic, 0, b"seed")
    assert seed.code == 0, seed.remark
    offset = int(seed.ext_fields["queueOffset"]) + 1
    pid = pair.pid("mqbroker")
    pull = encode(RemotingCommand(code=RequestCode.PULL_MESSAGE, opaque=1,
                                  ext_fields=pull_header(topic, 0, offset, group, suspend_ms=20_000)))  # fmt: skip
    probe = encode(RemotingCommand(code=UNSUPPORTED, opaque=2))
    pullers: list[socket.socket] = []
    try:
        for _ in range(600):
            sock = socket.create_connection(("127.0.0.1", pair.broker_port), timeout=10)
            sock.sendall(pull + probe)
            pullers.append(sock)
        for sock in pullers:  # the probe's answer comes first: the pull before it is held
            assert _read_reply(sock, 2).opaque == 2
        before, kernel_before = rss_mib(pid), _kernel_tcp_mib()
        message = bytes(range(256)) * (MIB // 256)
        woke, wake_ms = client.timed_send(topic, 0, message)
        assert woke.code == 0, woke.remark
        latencies = []
        for i in range(20):  # the pullers read nothing; other clients are still served
            reply, ms = client.timed_send(topic, 1, b"normal %d" % i)
            assert reply.code == 0, reply.remark
            latencies.append(ms)
        peak = _peak_rss(pid, 2.0)
        kernel = _kernel_tcp_mib() - kernel_before
        for sock in pullers[:3]:  # the woken pulls did carry the message
            reply = _read_reply(sock, 1)
            assert reply.code == 0, reply.remark
            assert [m.body for m in decode_records(reply.body)] == [message]
    finally:
        for sock in pullers:
            sock.close()
        client.close()
    after = _settled_rss(pid)
    print(
        f"600 held pulls woken by a 1 MiB message: broker RSS {before:.0f} MiB before, peak {peak:.0f} MiB "
        f"(+{peak - before:.1f}), {after:.0f} MiB after the pullers closed; kernel TCP buffers +{kernel:.0f} MiB; "
        f"the waking send took {wake_ms:.2f} ms, "
        f"20 normal sends meanwhile: median {sorted(latencies)[10]:.2f} ms, max {max(latencies):.2f} ms"
    )
    assert peak - before < SLACK_MIB, f"+{peak - before:.0f} MiB for 600 woken pulls of one 1 MiB message"


def _half_frames(port: int, count: int, frame_length: int) -> tuple[list[socket.socket], int, int]:
    """Open `count` connections, each sending the first half of one SEND_MESSAGE_V2 frame of `frame_length`.

    Sends without blocking until every connection is done, refused by the broker or stalled (the broker
    holds its reading). Returns the sockets still open, how many were refused and how many sent their half.
    """
    header = encode(RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=send_header("HostileHalf", 0)))
    header_len = struct.unpack_from(">i", header, 4)[0]
    head = struct.pack(">ii", frame_length, header_len) + header[8:]
    half = memoryview(head + bytes(frame_length // 2 - len(head)))
    socks: list[socket.socket] = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.setblocking(False)
        socks.append(sock)
    sent = dict.fromkeys(socks, 0)
    refused = 0
    selector = selectors.DefaultSelector()
    for sock in socks:
        selector.register(sock, selectors.EVENT_WRITE)
    last_progress = time.monotonic()
    while selector.get_map() and time.monotonic() - last_progress < 3.0:
        for key, _events in selector.select(timeout=0.5):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                n = sock.send(half[sent[sock] :])
            except BlockingIOError:
                continue
            except OSError:  # reset: the broker refused the frame
                refused += 1
                selector.unregister(sock)
                sock.close()
                del sent[sock]
                continue
            sent[sock] += n
            last_progress = time.monotonic()
            if sent[sock] == len(half):
                selector.unregister(sock)
    selector.close()
    open_socks = list(sent)
    completed = sum(1 for n in sent.values() if n == len(half))
    return open_socks, refused, completed


def test_1000_half_sent_16_mib_frames(pair: BrokerProcs) -> None:
    pid = pair.pid("mqbroker")
    client = RawClient(pair.broker_port)
    assert client.send("HostileHalf", 1, b"warm up").code == 0
    before = rss_mib(pid)
    socks, refused, completed = _half_frames(pair.broker_port, 1000, 16 * MIB)
    try:
        peak = _peak_rss(pid, 1.0)
        latencies = []
        for i in range(20):
            reply, ms = client.timed_send("HostileHalf", 1, b"normal %d" % i)
            assert reply.code == 0, reply.remark
            latencies.append(ms)
        fresh = RawClient(pair.broker_port)  # a new connection is accepted and served too
        reply, fresh_ms = fresh.timed_send("HostileHalf", 2, b"from a new connection")
        fresh.close()
        assert reply.code == 0, reply.remark
        peak = max(peak, _peak_rss(pid, 0.5))
        # what the refused connections got: the broker closed them (reset), the rest are held or waiting
        still_open = 0
        for sock in socks:
            try:
                still_open += sock.recv(1, socket.MSG_PEEK) != b""
            except BlockingIOError:
                still_open += 1
            except OSError:
                pass
    finally:
        for sock in socks:
            sock.close()
        client.close()
    after = _settled_rss(pid)
    print(
        f"1000 connections sending half of a 16 MiB frame: {completed} sent their half, {refused} were refused "
        f"while sending, {still_open} still open at the end; broker RSS {before:.0f} MiB before, peak {peak:.0f} "
        f"MiB (+{peak - before:.0f}), {after:.0f} MiB after they closed; 20 normal sends meanwhile: median "
        f"{sorted(latencies)[10]:.2f} ms, max {max(latencies):.2f} ms; a send on a new connection {fresh_ms:.2f} ms"
    )
    assert refused > 0, "no frame was refused past the budget"
    assert refused + still_open == 1000
    assert peak - before < INCOMPLETE_FRAMES_LIMIT_MIB + SLACK_MIB, f"+{peak - before:.0f} MiB"
    log = pair.log("mqbroker")
    assert "does not fit the 268435456 bytes that incomplete frames may hold" in log
    assert log.count("does not fit the") < 50, "one WARNING per refused connection"


def test_budget_is_free_again_after_the_hostile_connections_close(pair: BrokerProcs) -> None:
    """After the hostile connections are gone, a large frame is taken whole (nothing leaked in the budget)."""
    client = RawClient(pair.broker_port)
    try:
        reply = client.send("HostileHalf", 3, bytes(3 * MIB))
        assert reply.code == 0, reply.remark
    finally:
        client.close()
