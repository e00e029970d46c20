"""Live: producer -> broker -> pull consumer round trip over real TCP (small, fast)."""

from __future__ import annotations

from pathlib import Path

from broker.client import Message, Producer, PullConsumer, SendStatus
from broker.transport.loop import run
from tests.client.client_harness import live_cluster


def test_send_and_poll_round_trip(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_cluster(tmp_path) as cluster:
            await cluster.create_topic("Smoke", queues=2)
            async with Producer("PG", cluster.namesrv_addr) as producer:
                sent = [await producer.send(Message("Smoke", f"m{i}", tags="a", keys=f"k{i}")) for i in range(6)]
            assert all(r.status is SendStatus.SEND_OK for r in sent)
            consumer = PullConsumer("CG-smoke", cluster.namesrv_addr, consume_from_where=4)
            consumer.subscribe("Smoke", "*")
            async with consumer:
                got = []
                for _ in range(20):
                    got += await consumer.poll(1.0)
                    if len(got) >= 6:
                        break
            assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(6))
            assert {m.msg_id for m in got} == {r.msg_id for r in sent}

    run(main())
