"""The source's blocking broker client: range reads with pulls in flight, and idle connections.

Range reads (`pull_ranges`) keep several pulls in flight across a task's queue ranges and must still
return each range exactly, in offset order and deterministically (Spark replays micro-batches), also
when answers are cut short by the byte cap or skip messages for a tag filter.

NameServers and brokers close idle client connections; a stream reader's driver worker and reused
executor workers keep a QueueClient for hours. Its private loop runs only inside calls, so the close
is noticed on the next request, which must then go through on a fresh connection.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pyarrow.compute as pc  # type: ignore[import-untyped]
import pytest

from broker.client import Message
from broker.spark import client as client_module
from broker.spark.client import PullSpec, QueueClient
from broker.spark.rows import record_batch
from broker.transport.connection import CloseReason
from tests.spark.spark_harness import ThreadedCluster


def test_calls_and_pulls_reconnect_after_the_servers_close_idle_connections(
    cluster: ThreadedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="broker.spark.client")
    topic = "SparkClientIdle"
    cluster.create_topic(topic, 2)
    cluster.send([Message(topic, f"idle-{i}".encode()) for i in range(10)])
    client = QueueClient(cluster.namesrv_addr)
    try:
        mqs = client.queues([topic])
        highs = client.max_offsets(mqs)
        assert sum(highs.values()) == 10

        async def drop_all() -> int:
            """Server side hang-up of this client's connections only (the broker's own connection to
            the NameServer must stay, or its routes would go)."""
            assert cluster.namesrv is not None and cluster.broker is not None and cluster.broker.server is not None
            ours = {c.local for c in client.instance.remoting._connections.values()}
            conns = [
                c for c in (*cluster.namesrv.server.connections, *cluster.broker.server.connections) if c.peer in ours
            ]
            for conn in conns:
                conn.close(CloseReason.LOCAL_CLOSE)
            return len(conns)

        for _ in range(2):  # metadata, then a pull, each right after the servers hung up
            assert cluster.call(drop_all()) > 0
            assert client.queues([topic]) == mqs
            assert cluster.call(drop_all()) > 0
            spec = PullSpec(namesrv=cluster.namesrv_addr, group="idle-check")
            mq = max(mqs, key=lambda q: highs[q])
            bodies = list(client.pull_range(spec, mq, 0, highs[mq]))
            assert bodies and all(isinstance(b, bytes) for b in bodies)
        # The metadata call hit the dead connection and was repeated; a pull may find the hang-up
        # already processed (its request is sent a loop turn later) and just reconnect.
        assert any("retrying after a transport error" in r.getMessage() for r in caplog.records)
    finally:
        client.close()


def _offsets(batches: list[tuple[int, Any]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for index, batch in batches:
        if batch.num_rows:
            out.setdefault(index, []).extend(batch.column("queue_offset").to_pylist())
    return out


def test_pull_ranges_read_each_range_exactly_with_pulls_in_flight(
    cluster: ThreadedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many small pulls in flight over several ranges, answers cut short by the byte cap (so the pulls
    asked ahead start in the wrong place and are asked again), and a tag filter: every range comes
    back exactly, in offset order, the same way twice."""
    topic = "SparkClientRanges"
    cluster.create_topic(topic, 4)
    tags = ("TagA", "TagB")
    cluster.send([Message(topic, f"r-{i}-".encode() + b"x" * (i % 7) * 300, tags=tags[i % 2]) for i in range(400)])
    monkeypatch.setattr(client_module, "PULL_MAX_BYTES", 4000)  # ~4 to 12 messages per answer
    restarts = []
    restart = client_module._RangeState.restart
    monkeypatch.setattr(client_module._RangeState, "restart", lambda s, o: (restarts.append(o), restart(s, o)))
    client = QueueClient(cluster.namesrv_addr)
    try:
        mqs = client.queues([topic])
        highs = client.max_offsets(mqs)
        ranges = [(mqs[0], 3, highs[mqs[0]] - 2), (mqs[1], 0, 0), (mqs[2], 10, 11), (mqs[3], 0, highs[mqs[3]])]
        ranges.append((mqs[1], 5, highs[mqs[1]]))

        def read(sub: str) -> list[tuple[int, Any]]:
            spec = PullSpec(namesrv=cluster.namesrv_addr, group="ranges-check", sub_expression=sub, batch_size=16)
            wanted = set() if sub == "*" else {sub}
            out = []
            for index, body in client.pull_ranges(spec, ranges):
                mq, _start, end = ranges[index]
                out.append((index, record_batch(mq.broker_name, body, end, wanted).select(["queue_offset", "tags"])))
            return out

        everything = read("*")
        assert [(i, b.to_pylist()) for i, b in everything] == [(i, b.to_pylist()) for i, b in read("*")]
        assert len(everything) > 3 * client_module.PULLS_IN_FLIGHT  # many pulls, several in flight at once
        assert len(restarts) > 10  # answers cut short by the byte cap: the pulls asked ahead were asked again
        got = _offsets(everything)
        for index, (mq, start, end) in enumerate(ranges):
            assert got.get(index, []) == list(range(start, end)), (index, mq, start, end)
        # With a filter one pull per range is in flight (the broker says where each scan stopped), so the
        # ranges' bodies interleave; each range's still come in offset order.
        tag_a = [(i, b.filter(pc.equal(b.column("tags"), "TagA"))) for i, b in everything]
        filtered = read("TagA")
        assert _offsets(filtered) == _offsets(tag_a)
        assert [(i, b.to_pylist()) for i, b in filtered] == [(i, b.to_pylist()) for i, b in read("TagA")]
    finally:
        client.close()


def test_pull_ranges_stopped_early_leave_nothing_running(cluster: ThreadedCluster) -> None:
    topic = "SparkClientEarly"
    cluster.create_topic(topic, 1)
    cluster.send([Message(topic, f"e-{i}".encode()) for i in range(300)])
    client = QueueClient(cluster.namesrv_addr)
    try:
        mq = client.queues([topic])[0]
        spec = PullSpec(namesrv=cluster.namesrv_addr, group="early-check", batch_size=8)
        pulls = client.pull_ranges(spec, [(mq, 0, 300)])
        next(pulls)
        pulls.close()
        client.loop.run_until_complete(asyncio.sleep(0))
        assert all(t.done() for t in asyncio.all_tasks(client.loop))
        assert client.max_offsets([mq]) == {mq: 300}  # and the client goes on working
    finally:
        client.close()
