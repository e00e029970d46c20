"""Hostile clients against a real broker subprocess: slow frames, floods of bad connections, a NameServer restart.

- A frame trickling one byte at a time keeps the idle timer from firing; serverFrameTimeoutMillis (1 s
  here) closes it, and the broker's log says why.
- 300 connections sending garbage are each closed, with one WARNING (and later a count), not 300.
- After the NameServer restarts, the broker registers again at once: a new client gets a route long
  before the next periodic registration (registerNameServerPeriod is 30 s here).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from broker.protocol.codes import RequestCode
from broker.protocol.command import RemotingCommand, encode
from tests.hostile_cluster import BrokerProcs, RawClient, running_pair

FRAME_TIMEOUT_S = 1.0
REGISTER_PERIOD_S = 30.0


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcs]:
    with running_pair(
        tmp_path_factory.mktemp("hostile-slow"),
        serverFrameTimeoutMillis=str(int(FRAME_TIMEOUT_S * 1000)),
        registerNameServerPeriod=str(int(REGISTER_PERIOD_S * 1000)),
    ) as procs:
        yield procs


def _closed_by_peer(sock: socket.socket, wait: float) -> bool:
    sock.settimeout(wait)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_a_trickling_frame_is_closed_after_the_frame_timeout(pair: BrokerProcs) -> None:
    frame = encode(RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields={"a": "x" * 200}, body=b"y" * 500))
    sock = socket.create_connection(("127.0.0.1", pair.broker_port), timeout=5)
    started = time.monotonic()
    sent = 0
    try:
        while sent < len(frame) - 1 and time.monotonic() - started < 20:
            try:
                sock.send(frame[sent : sent + 1])
            except OSError:
                break  # reset by the broker
            sent += 1
            if _closed_by_peer(sock, 0.25):
                break
        closed = _closed_by_peer(sock, 0.5)
    finally:
        sock.close()
    elapsed = time.monotonic() - started
    print(f"a frame trickling 1 byte per 0.25 s was closed after {elapsed:.2f} s, {sent} bytes in (frame timeout 1 s)")
    assert closed and sent < len(frame) - 1, f"still open after {elapsed:.1f} s and {sent} bytes"
    assert "its frame is not complete" in pair.log("mqbroker")
    client = RawClient(pair.broker_port)  # the broker serves others as before
    try:
        assert client.send("HostileSlow", 0, b"after the trickle").code == 0
    finally:
        client.close()


def test_a_flood_of_garbage_connections_logs_one_line_and_a_count(pair: BrokerProcs) -> None:
    garbage = b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n"
    for _ in range(300):
        with socket.create_connection(("127.0.0.1", pair.broker_port), timeout=5) as sock:
            sock.sendall(garbage)
            assert _closed_by_peer(sock, 5), "the broker kept a connection that sent garbage"
    time.sleep(10.5)  # the limiter's window (10 s) ends: the count is written
    log = pair.log("mqbroker")
    lines = [line for line in log.splitlines() if "closing connection from" in line and "FrameTooLarge" in line]
    counts = [line for line in log.splitlines() if "similar lines suppressed" in line and "FrameTooLarge" in line]
    print(f"300 garbage connections: {len(lines)} WARNING line(s); count line: {counts}")
    assert len(lines) == 1, lines[:5]
    assert len(counts) == 1 and "... 299 similar lines suppressed in 10 s [protocol:FrameTooLarge]" in counts[0]


def _route(namesrv_port: int, topic: str) -> int:
    client = RawClient(namesrv_port, timeout=2)
    try:
        return client.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}).code
    finally:
        client.close()


def test_the_broker_registers_again_at_once_after_a_namesrv_restart(pair: BrokerProcs) -> None:
    topic = "HostileRoute"
    client = RawClient(pair.broker_port)
    try:
        assert client.send(topic, 0, b"creates the topic").code == 0
    finally:
        client.close()
    deadline = time.monotonic() + 10
    while _route(pair.namesrv_port, topic) != 0:  # the topic's registration (triggered at creation)
        assert time.monotonic() < deadline, "the new topic never reached the NameServer"
        time.sleep(0.1)
    killed = time.monotonic()
    pair.kill9("mqnamesrv")
    pair.spawn("mqnamesrv", pair.root / "namesrv.properties")
    restarted = time.monotonic()
    while True:
        code = _route(pair.namesrv_port, topic)
        waited = time.monotonic() - restarted
        if code == 0:
            break
        assert waited < 10, f"no route {waited:.1f} s after the NameServer restarted (code {code})"
        time.sleep(0.05)
    print(
        f"a new client got the route {waited:.2f} s after the restarted NameServer said boot success, "
        f"{time.monotonic() - killed:.2f} s after the old one was killed (registration period {REGISTER_PERIOD_S} s)"
    )
    assert "registered again to name server" in pair.log("mqbroker")


def test_a_broker_started_before_its_namesrv_registers_as_soon_as_it_answers(pair: BrokerProcs) -> None:
    """The first registration finds no NameServer listening (a broker that starts first, as a pod or a compose
    service may): the broker retries within seconds instead of at the next period (30 s here)."""
    pair.kill9("mqnamesrv")
    pair.kill9("mqbroker")
    pair.spawn("mqbroker", pair.root / "broker.conf")  # its store holds HostileRoute from the test before
    assert "not registered with any name server yet" in pair.log("mqbroker")
    pair.spawn("mqnamesrv", pair.root / "namesrv.properties")
    started = time.monotonic()
    while (code := _route(pair.namesrv_port, "HostileRoute")) != 0:
        waited = time.monotonic() - started
        assert waited < 10, f"no route {waited:.1f} s after the NameServer started (code {code})"
        time.sleep(0.05)
    print(f"\nroute {time.monotonic() - started:.2f} s after the NameServer said boot success (period 30 s)")
    assert "registered again to name server" in pair.log("mqbroker")
