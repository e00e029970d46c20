"""PEEK_MESSAGE, NOTIFICATION, POLLING_INFO, BATCH_ACK_MESSAGE and refused POP requests over real TCP, each
with RocketMQ's response code."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

from tests.pop.pop_client import ACK, BATCH_ACK, CHANGE, NOTIFICATION, PEEK, POLLING_INFO, POP, ack, handle, now_ms, pop
from tests.server.server_harness import cluster, messages


async def test_peek_reads_without_handing_out(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.create_topic("PK", queues=1)
        cli = await c.client()
        empty = await cli.request(PEEK, {"consumerGroup": "PG1", "topic": "PK", "queueId": 0, "maxMsgNums": 8})
        assert empty.code == 19  # PULL_NOT_FOUND
        assert (await cli.send("PK", b"a")).code == 0
        for _ in range(2):
            r = await cli.request(PEEK, {"consumerGroup": "PG1", "topic": "PK", "queueId": 0, "maxMsgNums": 8})
            assert r.code == 0 and [m.body for m in messages(r)] == [b"a"]
        assert [m.body for m in messages(await pop(cli, "PK"))] == [b"a"]


async def test_notification_waits_for_a_message_and_polling_info_counts_parked_pops(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.create_topic("NT", queues=1)
        cli = await c.client()
        base = {"consumerGroup": "PG1", "topic": "NT", "queueId": 0}
        r = await cli.request(NOTIFICATION, {**base, "pollTime": 0, "bornTime": now_ms()})
        assert r.code == 0 and r.ext_fields["hasMsg"] == "false"
        parked = asyncio.ensure_future(pop(cli, "NT", queue_id=0, poll_ms=10_000))
        # another group asks: the pop of PG1 may take the message first
        other = {**base, "consumerGroup": "PG2"}
        waiting = asyncio.ensure_future(
            cli.request(NOTIFICATION, {**other, "pollTime": 10_000, "bornTime": now_ms()}, timeout=15)
        )
        nums: tuple[str, str] = ("0", "0")
        for _ in range(50):
            one = await cli.request(POLLING_INFO, base)
            two = await cli.request(POLLING_INFO, other)
            assert one.code == 0 and two.code == 0
            nums = (one.ext_fields["pollingNum"], two.ext_fields["pollingNum"])
            if nums == ("1", "1"):
                break
            await asyncio.sleep(0.05)
        assert nums == ("1", "1")
        assert (await cli.send("NT", b"wake")).code == 0
        assert (await waiting).ext_fields["hasMsg"] == "true"
        got = await parked
        assert got.code == 0 and [m.body for m in messages(got)] == [b"wake"]


async def test_batch_ack_acks_by_bitset(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.create_topic("BA", queues=1)
        cli = await c.client()
        for i in range(3):
            assert (await cli.send("BA", f"b{i}".encode())).code == 0
        r = await pop(cli, "BA", invisible_ms=1500)
        assert len(messages(r)) == 3
        so = int(r.ext_fields["startOffsetInfo"].split(" ")[2])
        entry = {
            "c": "PG1",
            "t": "BA",
            "r": 0,
            "so": so,
            "q": 0,
            "rq": int(r.ext_fields["reviveQid"]),
            "pt": int(r.ext_fields["popTime"]),
            "it": 1500,
            "b": base64.b64encode(bytes([0b101])).decode(),  # offsets so and so+2
        }
        name = c.running_broker.config.broker_name
        resp = await cli.request(BATCH_ACK, body=json.dumps({"brokerName": name, "acks": [entry]}).encode())
        assert resp.code == 0, resp.remark
        back: list[bytes] = []
        for _ in range(100):
            back = [m.body for m in messages(await pop(cli, "BA"))]
            if back:
                break
            await asyncio.sleep(0.1)
        assert back == [b"b1"]
        empty = await cli.request(BATCH_ACK, body=json.dumps({"brokerName": name, "acks": []}).encode())
        assert empty.code == 208  # NO_MESSAGE
        bad = await cli.request(BATCH_ACK, body=b"{not json")
        assert bad.code == 29
        bad_bits = await cli.request(BATCH_ACK, body=json.dumps({"acks": [{**entry, "b": "%%%"}]}).encode())
        assert bad_bits.code == 29


async def test_refused_requests_get_rocketmq_codes(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.create_topic("BAD", queues=2)
        cli = await c.client()
        assert (await cli.send("BAD", b"x", queue_id=0)).code == 0
        assert (await pop(cli, "BAD", nums=33)).code == 29  # INVALID_PARAMETER
        assert (await pop(cli, "NOPE")).code == 17  # TOPIC_NOT_EXIST
        assert (await pop(cli, "BAD", queue_id=2)).code == 29
        late = await pop(cli, "BAD", bornTime=now_ms() - 60_000)
        assert late.code == 210  # POLLING_TIMEOUT
        missing = await cli.request(POP, {"consumerGroup": "PG1", "topic": "BAD"})
        assert missing.code == 1 and "queueId" in (missing.remark or "")
        not_a_number = await pop(cli, "BAD", maxMsgNums="lots")
        assert not_a_number.code == 1
        r = await pop(cli, "BAD", invisible_ms=60_000)
        m = messages(r)[0]
        name = c.running_broker.config.broker_name
        good = handle(m, r, name)
        assert (await ack(cli, "1 2 3", topic="BAD")).code == 29
        assert (await ack(cli, "a b c d e f 0 0", topic="BAD")).code == 29
        assert (await ack(cli, good, topic="NOPE")).code == 17
        assert (await ack(cli, good, topic="BAD", queueId=5)).code == 13  # MESSAGE_ILLEGAL
        assert (await ack(cli, good, topic="BAD", offset=99)).code == 208  # NO_MESSAGE
        assert (await cli.request(ACK, {"consumerGroup": "PG1", "topic": "BAD"})).code == 1
        ext = {"consumerGroup": "PG1", "topic": "BAD", "queueId": 0, "extraInfo": good, "invisibleTime": 100}
        assert (await cli.request(CHANGE, {**ext, "offset": 1})).code == 208  # offset == maxOffset
        assert (await cli.request(CHANGE, {**ext, "offset": 0})).code == 0
        peek = {"consumerGroup": "PG1", "topic": "BAD", "queueId": 0, "maxMsgNums": 33}
        assert (await cli.request(PEEK, peek)).code == 29


async def test_parked_pops_past_pop_polling_size_get_polling_full(tmp_path: Path) -> None:
    async with cluster(tmp_path, popPollingSize=2) as c:
        await c.create_topic("PF", queues=1)
        cli = await c.client()
        parked = [asyncio.ensure_future(pop(cli, "PF", f"G{i}", poll_ms=10_000)) for i in range(2)]
        base = {"consumerGroup": "G0", "topic": "PF", "queueId": -1}
        for _ in range(50):
            if (
                sum(
                    [
                        int(
                            (await cli.request(POLLING_INFO, {**base, "consumerGroup": f"G{i}"})).ext_fields[
                                "pollingNum"
                            ]
                        )
                        for i in range(2)
                    ]
                )
                == 2
            ):
                break
            await asyncio.sleep(0.05)
        full = await pop(cli, "PF", "G9", poll_ms=10_000)
        assert full.code == 209 and full.remark == "POLLING_FULL"
        assert (await cli.send("PF", b"x")).code == 0
        got = [await p for p in parked]
        assert sorted(r.code for r in got) == [0, 0]  # each group gets the message


async def test_a_parked_pop_is_answered_when_the_broker_stops(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.create_topic("SD", queues=1)
        cli = await c.client()
        parked = asyncio.ensure_future(pop(cli, "SD", poll_ms=20_000))
        base = {"consumerGroup": "PG1", "topic": "SD", "queueId": -1}
        for _ in range(50):
            if (await cli.request(POLLING_INFO, base)).ext_fields["pollingNum"] == "1":
                break
            await asyncio.sleep(0.05)
        await c.running_broker.shutdown()
        r = await parked
        assert r.code == 210 and r.remark == "NO_MESSAGE_IN_QUEUE"
