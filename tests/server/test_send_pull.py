"""Send -> store -> pull round trips over real TCP, offsets, and the offset queries."""

from __future__ import annotations

import time
from pathlib import Path

from broker.protocol.batch import BatchMessage, encode_batch
from broker.protocol.message import decode_offset_msg_id
from broker.protocol.properties import encode_properties
from tests.server.server_harness import cluster, messages

PULL_FIELDS = {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}


async def test_send_v1_v2_then_pull_back_as_stored(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        cli = await c.client()
        r1 = await cli.send("TopicA", b"one", code=10, props={"TAGS": "a", "KEYS": "k1", "UNIQ_KEY": "ABC"})
        r2 = await cli.send("TopicA", b"two", code=310, props={"TAGS": "b", "user": "v"})
        assert (r1.code, r2.code) == (0, 0), (r1.remark, r2.remark)
        assert r1.ext_fields["queueId"] == "0" and r1.ext_fields["queueOffset"] == "0"
        assert r2.ext_fields["queueOffset"] == "1"
        host, port, _off = decode_offset_msg_id(r1.ext_fields["msgId"])
        assert (host, port) == ("127.0.0.1", c.broker.port)  # storeHost = brokerIP1:listenPort
        resp = await cli.pull("TopicA", 0)
        assert resp.code == 0 and resp.ext_fields.keys() >= PULL_FIELDS
        assert resp.ext_fields["nextBeginOffset"] == "2"
        got = messages(resp)
        assert [m.body for m in got] == [b"one", b"two"]
        assert got[0].properties["UNIQ_KEY"] == "ABC" and got[0].keys == ["k1"]
        # ali-ons sends no UNIQ_KEY: the broker creates one, and the send reply carries it
        assert got[1].properties["UNIQ_KEY"] == r2.ext_fields["transactionId"]
        assert got[1].properties["user"] == "v" and got[1].properties["CLUSTER"] == "TestCluster"
        assert got[0].offset_msg_id == r1.ext_fields["msgId"]


async def test_batch_send_gives_consecutive_offsets_and_comma_joined_ids(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        cli = await c.client()
        body = encode_batch(
            BatchMessage(f"m{i}".encode(), encode_properties({"TAGS": "t", "KEYS": f"k{i}"})) for i in range(5)
        )
        r = await cli.send("BatchT", body, code=320)
        assert r.code == 0, r.remark
        assert r.ext_fields["queueOffset"] == "0" and len(r.ext_fields["msgId"].split(",")) == 5
        got = messages(await cli.pull("BatchT", 0))
        assert [m.body for m in got] == [f"m{i}".encode() for i in range(5)]
        assert [m.queue_offset for m in got] == list(range(5))
        assert all(m.properties.get("UNIQ_KEY") for m in got)


async def test_pull_not_found_carries_all_offset_fields_and_tag_filter(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        cli = await c.client()
        empty = await cli.pull("Nothing", 0)
        assert empty.code == 17  # unknown topic
        await cli.send("TagT", b"x", props={"TAGS": "a"})
        await cli.send("TagT", b"y", props={"TAGS": "b"})
        r = await cli.pull("TagT", 2)
        assert r.code == 19 and r.ext_fields.keys() >= PULL_FIELDS and r.ext_fields["maxOffset"] == "2"
        filtered = await cli.pull("TagT", 0, sub="b")
        assert [m.body for m in messages(filtered)] == [b"y"]
        moved = await cli.pull("TagT", 50)
        assert moved.code == 21 and moved.ext_fields.keys() >= PULL_FIELDS


async def test_consumer_offsets_query_update_and_queue_offsets(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        cli = await c.client()
        q = {"consumerGroup": "G1", "topic": "OffT", "queueId": 0}
        # nothing stored, young queue: 0 (the Java rule), or 22 when the client says setZeroIfNotFound=false
        assert (await cli.request(14, q)).ext_fields["offset"] == "0"
        assert (await cli.request(14, {**q, "setZeroIfNotFound": "false"})).code == 22
        before = int(time.time() * 1000)
        for i in range(3):
            await cli.send("OffT", f"{i}".encode())
        assert (await cli.request(15, {**q, "commitOffset": 2})).code == 0
        assert (await cli.request(14, q)).ext_fields["offset"] == "2"
        qo = {"topic": "OffT", "queueId": 0}
        assert (await cli.request(30, qo)).ext_fields["offset"] == "3"
        assert (await cli.request(31, qo)).ext_fields["offset"] == "0"
        assert (await cli.request(29, {**qo, "timestamp": before - 1000})).ext_fields["offset"] == "0"
        earliest = int((await cli.request(32, qo)).ext_fields["timestamp"])
        assert before - 5000 <= earliest <= int(time.time() * 1000)
        # the pull's COMMIT_OFFSET flag commits too
        await cli.pull("OffT", 3, group="G1", commit_offset=3)
        assert (await cli.request(14, q)).ext_fields["offset"] == "3"


async def test_offsets_and_messages_survive_a_broker_restart(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        cli = await c.client()
        for i in range(10):
            assert (await cli.send("Durable", f"m{i}".encode())).code == 0
        await cli.request(15, {"consumerGroup": "G", "topic": "Durable", "queueId": 0, "commitOffset": 6})
        cli.conn.close()
        await c.restart_broker()
        cli = await c.client()
        r = await cli.request(14, {"consumerGroup": "G", "topic": "Durable", "queueId": 0})
        assert r.ext_fields["offset"] == "6"
        rest = messages(await cli.pull("Durable", 6, group="G"))
        assert [m.body for m in rest] == [b"m6", b"m7", b"m8", b"m9"]
        assert (await cli.send("Durable", b"after")).ext_fields["queueOffset"] == "10"
