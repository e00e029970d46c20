"""The source's blocking broker client survives servers dropping its idle connections.

NameServers and brokers close idle client connections; a stream reader's driver worker and reused
executor workers keep a QueueClient for hours. Its private loop runs only inside calls, so the close
is noticed on the next request, which must then go through on a fresh connection.
"""

from __future__ import annotations

import logging

import pytest
from spark_harness import ThreadedCluster

from broker.client import Message
from broker.spark.client import PullSpec, QueueClient
from broker.transport.connection import CloseReason


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
