"""CLEAN_EXPIRED_CONSUMEQUEUE (306) and CLEAN_UNUSED_TOPIC (316) with RocketMQ's meaning, over a real connection
to a real broker whose CommitLog files are 64 KiB, so that retention can delete the ones older topics live in:
each removes exactly the queues it should (files, directory and queue offsets), and nothing else (topic
configs, consumer offsets, system topics, queues with live messages)."""

from __future__ import annotations

from pathlib import Path

from broker.protocol.codes import RequestCode as RC
from broker.protocol.codes import ResponseCode as R
from broker.protocol.properties import Prop
from tests.local_cluster import local_cluster, wait_for
from tests.server.server_harness import Cluster

BIG = b"x" * 20_000  # three fill a 64 KiB CommitLog file
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


async def test_clean_expired_then_unused(tmp_path: Path) -> None:
    async with local_cluster(tmp_path, cls=Cluster, commit_log_file_size=64 << 10, fileReservedTime=0) as c:
        b = c.running_broker
        store = b.store
        cli = await c.client()
        # In the first files: Old (queues 0, 1), Lone, and a message parked for two hours (delay level 18)
        for qid in (0, 1):
            assert (await cli.send("Old", BIG, queue_id=qid)).code == R.SUCCESS
        assert (await cli.send("Lone", BIG)).code == R.SUCCESS
        assert (await cli.send("New", BIG, props={Prop.DELAY: "18"})).code == R.SUCCESS
        await cli.request(
            RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "Old", "queueId": 0, "commitOffset": 1}
        )
        # New: queue 1 only in the old files, queue 0 also in the last file
        assert (await cli.send("New", BIG, queue_id=1)).code == R.SUCCESS
        for _ in range(6):
            assert (await cli.send("New", BIG, queue_id=0)).code == R.SUCCESS
        await wait_for(lambda: store.get_max_offset_in_queue("New", 0) == 6, 10, "dispatch of New")
        queues_before = store.topics_and_queues()
        assert {"Old", "Lone", "New", SCHEDULE_TOPIC} <= set(queues_before), queues_before

        # nothing has left the CommitLog yet: 306 removes nothing
        r = await cli.request(RC.CLEAN_EXPIRED_CONSUMEQUEUE)
        assert (r.code, r.remark) == (R.SUCCESS, None) and store.topics_and_queues() == queues_before

        assert store.clean_service is not None
        store.clean_service.manual_delete = True
        assert await store.clean_service.run_once() > 0
        assert store.min_phy_offset > 0

        r = await cli.request(RC.CLEAN_EXPIRED_CONSUMEQUEUE)
        assert r.code == R.SUCCESS, r.remark
        after = store.topics_and_queues()
        assert "Old" not in after and "Lone" not in after, after
        assert after["New"] == [0], after  # queue 1's only message is gone; queue 0 still has messages
        assert SCHEDULE_TOPIC in after  # system topics stay
        cq_root = Path(store.config.store_path_root_dir) / "consumequeue"
        assert not (cq_root / "Old").exists() and not (cq_root / "New" / "1").exists()
        assert (cq_root / "New" / "0").is_dir()
        # topic configs and consumer offsets are not the store's to clean
        assert b.topics.get("Old") is not None and b.offsets.query("G", "Old", 0) == 1
        # as in RocketMQ, a removed queue starts again at offset 0
        sent = await cli.send("Old", b"again", queue_id=0)
        assert sent.code == R.SUCCESS and sent.ext_fields["queueOffset"] == "0"

        # 316: a topic whose config went away keeps its queues until cleanUnusedTopic
        b.topics.delete("New")
        r = await cli.request(RC.CLEAN_UNUSED_TOPIC, {"unexpected": "field"})
        assert (r.code, r.remark) == (R.SUCCESS, "removed topics: New"), r.remark
        after = store.topics_and_queues()
        assert "New" not in after and not (cq_root / "New").exists()
        assert "Old" in after and SCHEDULE_TOPIC in after
        r = await cli.request(RC.CLEAN_UNUSED_TOPIC)
        assert (r.code, r.remark) == (R.SUCCESS, None)  # nothing left to clean
        # the connection is still good for ordinary work
        assert (await cli.send("Old", b"more", queue_id=0)).ext_fields["queueOffset"] == "1"
