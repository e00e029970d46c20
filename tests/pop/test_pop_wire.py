"""POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME over real TCP against a real broker."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.pop.pop_client import ack, change, handle, pop, pop_all
from tests.server.server_harness import cluster, messages


async def test_pop_then_ack_hands_each_message_out_once(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.create_topic("PT", queues=2)
        cli = await c.client()
        sent = {f"m{i}".encode() for i in range(6)}
        for i, body in enumerate(sorted(sent)):
            assert (await cli.send("PT", body, queue_id=i % 2)).code == 0
        r = await pop(cli, "PT", invisible_ms=20_000)
        assert r.code == 0, r.remark
        assert r.remark == "FOUND"
        got = messages(r)
        assert {m.body for m in got} == sent
        assert int(r.ext_fields["reviveQid"]) in range(8)
        name = c.running_broker.config.broker_name
        # nothing left to hand out: the pop offset moved past what was popped
        again = await pop(cli, "PT")
        assert again.code == 210 and again.remark == "NO_MESSAGE_IN_QUEUE"
        for m in got:
            a = await ack(cli, handle(m, r, name), topic="PT")
            assert a.code == 0, a.remark


async def test_unacked_message_comes_back_through_the_retry_topic(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.create_topic("PT", queues=1)
        cli = await c.client()
        assert (await cli.send("PT", b"again", props={"UNIQ_KEY": "U-again"})).code == 0
        assert (await cli.send("PT", b"acked")).code == 0
        r = await pop(cli, "PT", invisible_ms=1500)
        got = messages(r)
        assert [m.body for m in got] == [b"again", b"acked"]
        name = c.running_broker.config.broker_name
        assert (await ack(cli, handle(got[1], r, name), topic="PT")).code == 0
        back = []
        for _ in range(100):
            back = await pop_all(cli, "PT", invisible_ms=30_000)
            if back:
                break
            await asyncio.sleep(0.1)
        assert [m.body for m in back] == [b"again"]
        m = back[0]
        assert m.topic == "PT" and m.reconsume_times == 1
        assert m.properties["UNIQ_KEY"] == "U-again" and "1ST_POP_TIME" in m.properties
        ck = m.properties["POP_CK"].split(" ")
        assert ck[4] == "1" and len(ck) == 8
        a = await ack(cli, m.properties["POP_CK"], topic="%RETRY%PG1_PT")
        assert a.code == 0, a.remark


async def test_change_invisible_time_delays_the_return(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.create_topic("PT", queues=1)
        cli = await c.client()
        assert (await cli.send("PT", b"x")).code == 0
        r = await pop(cli, "PT", invisible_ms=60_000)
        m = messages(r)[0]
        name = c.running_broker.config.broker_name
        ch = await change(cli, handle(m, r, name), 1000, topic="PT")
        assert ch.code == 0, ch.remark
        assert ch.ext_fields["invisibleTime"] == "1000"
        back = []
        for _ in range(100):
            back = await pop_all(cli, "PT")
            if back:
                break
            await asyncio.sleep(0.1)
        assert [b.body for b in back] == [b"x"]


async def test_pop_filters_by_tag_and_sql92(tmp_path: Path) -> None:
    async with cluster(tmp_path, enablePropertyFilter="true") as c:
        await c.create_topic("FT", queues=1)
        cli = await c.client()
        for i, tag in enumerate(["a", "b", "a", "c"]):
            assert (await cli.send("FT", f"{tag}{i}".encode(), props={"TAGS": tag, "n": str(i)})).code == 0
        tagged = await pop(cli, "FT", "TagG", exp="a || c")
        assert [m.body for m in messages(tagged)] == [b"a0", b"a2", b"c3"]
        sql = await pop(cli, "FT", "SqlG", expType="SQL92", exp="n >= 2")
        assert [m.body for m in messages(sql)] == [b"a2", b"c3"]
        bad = await pop(cli, "FT", "SqlG", expType="SQL92", exp="n >=")
        assert bad.code == 23  # SUBSCRIPTION_PARSE_FAILED
