"""Unacked pops come back through the pop-retry topic, and past the group's retryMaxTimes land in %DLQ%<group>;
orderly pops block a queue until its batch is acked or invisible no more. Real TCP, a real broker."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from broker.protocol.message import MessageExt, decode_record
from tests.pop.pop_client import ack, handle, pop, pop_all
from tests.server.server_harness import TestClient, cluster, messages

GET_MAX_OFFSET = 30
UPDATE_GROUP = 200


async def _pop_until(cli: TestClient, topic: str, group: str, **kw: object) -> list[MessageExt]:
    for _ in range(150):
        got = await pop_all(cli, topic, group, **kw)  # type: ignore[arg-type]
        if got:
            return got
        await asyncio.sleep(0.1)
    raise AssertionError(f"nothing came back on {topic} for {group}")


async def test_past_retry_max_times_a_message_goes_to_the_dlq(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.create_topic("DT", queues=1)
        cli = await c.client()
        body = json.dumps({"groupName": "DG", "retryMaxTimes": 1}).encode()
        assert (await cli.request(UPDATE_GROUP, body=body)).code == 0
        assert (await cli.send("DT", b"poison", props={"UNIQ_KEY": "U-poison"})).code == 0
        first = await pop_all(cli, "DT", "DG", invisible_ms=1000)
        assert [m.reconsume_times for m in first] == [0]
        second = await _pop_until(cli, "DT", "DG", invisible_ms=1000)  # never acked: revived once
        assert [m.reconsume_times for m in second] == [1]
        assert second[0].properties["POP_CK"].split(" ")[4] == "1"
        dlq_max = 0
        for _ in range(150):
            r = await cli.request(GET_MAX_OFFSET, {"topic": "%DLQ%DG", "queueId": 0})
            dlq_max = int(r.ext_fields.get("offset", "0")) if r.code == 0 else 0
            if dlq_max:
                break
            await asyncio.sleep(0.1)
        assert dlq_max == 1
        dead = c.running_broker.store.get_message("x", "%DLQ%DG", 0, 0, 1)
        try:
            m = decode_record(dead.buffers[0])
        finally:
            dead.release()
        assert m.body == b"poison" and m.properties["UNIQ_KEY"] == "U-poison" and m.reconsume_times == 2
        assert m.properties["DLQ_ORIGIN_TOPIC"] == "DT"
        # and nothing more is handed out
        assert (await pop(cli, "DT", "DG")).code == 210


async def test_orderly_pop_blocks_the_queue_until_the_batch_is_acked(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.create_topic("OT", queues=1)
        cli = await c.client()
        for i in range(4):
            assert (await cli.send("OT", f"o{i}".encode())).code == 0
        r = await pop(cli, "OT", "OG", nums=2, order=True, attempt_id="A1", invisible_ms=60_000)
        batch = messages(r)
        assert [m.body for m in batch] == [b"o0", b"o1"]
        assert r.ext_fields["reviveQid"] == "999" and "orderCountInfo" in r.ext_fields
        # blocked for any other attempt; the same attempt gets the same messages again
        assert (await pop(cli, "OT", "OG", nums=2, order=True, attempt_id="A2")).code == 210
        again = await pop(cli, "OT", "OG", nums=2, order=True, attempt_id="A1")
        assert [m.body for m in messages(again)] == [b"o0", b"o1"]
        # a replay is the same delivery: not counted again
        assert [e.split(" ")[2] for e in again.ext_fields["orderCountInfo"].split(";")][:2] == ["0", "0"]
        name = c.running_broker.config.broker_name
        assert (await ack(cli, handle(batch[0], again, name), "OG", topic="OT")).code == 0
        assert (await pop(cli, "OT", "OG", nums=2, order=True, attempt_id="A3")).code == 210
        assert (await ack(cli, handle(batch[1], again, name), "OG", topic="OT")).code == 0
        nxt = await pop(cli, "OT", "OG", nums=2, order=True, attempt_id="A4", invisible_ms=1000)
        assert [m.body for m in messages(nxt)] == [b"o2", b"o3"]
        # never acked: once invisible no more, the same messages come again, counted
        for _ in range(100):
            back = await pop(cli, "OT", "OG", nums=2, order=True, attempt_id="A5")
            if back.code == 0:
                break
            await asyncio.sleep(0.1)
        assert [m.body for m in messages(back)] == [b"o2", b"o3"]
        counts = [e.split(" ")[2] for e in back.ext_fields["orderCountInfo"].split(";") if " qo" in f" {e}"]
        assert counts[:2] == ["1", "1"]
        # the order state is kept in config/consumerOrderInfo.json
        saved = json.loads(
            (Path(c.running_broker.config.store_path_root_dir) / "config/consumerOrderInfo.json").read_text()
        )
        assert "OT@OG" in saved["table"]


async def test_an_offset_reset_unblocks_an_orderly_queue(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.create_topic("OR", queues=1)
        cli = await c.client()
        for i in range(4):
            assert (await cli.send("OR", f"r{i}".encode())).code == 0
        first = await pop(cli, "OR", "ORG", nums=2, order=True, attempt_id="A1")
        assert [m.body for m in messages(first)] == [b"r0", b"r1"]
        assert (await pop(cli, "OR", "ORG", nums=2, order=True, attempt_id="A2")).code == 210
        update = {"consumerGroup": "ORG", "topic": "OR", "queueId": 0, "commitOffset": 3}
        assert (await cli.request(15, update)).code == 0  # UPDATE_CONSUMER_OFFSET, as resetOffset moves it
        after = await pop(cli, "OR", "ORG", nums=2, order=True, attempt_id="A3")
        assert [m.body for m in messages(after)] == [b"r3"]
