"""CONSUMER_SEND_MSG_BACK: retries go through SCHEDULE_TOPIC_XXXX to %RETRY%<group>, then to %DLQ%."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.protocol.message import MessageExt, decode_offset_msg_id
from broker.server.processors.send_back import build_send_back
from tests.server.server_harness import cluster, messages

FAST_LEVELS = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"


async def test_send_back_is_delivered_to_retry_topic_when_due(tmp_path: Path) -> None:
    async with cluster(tmp_path, messageDelayLevel=FAST_LEVELS) as c:
        cli = await c.client()
        sent = await cli.send("Orig", b"payload", props={"TAGS": "t", "UNIQ_KEY": "U1"})
        _h, _p, phy = decode_offset_msg_id(sent.ext_fields["msgId"])
        assert (await cli.heartbeat("cid", "RG", ["Orig"])).code == 0
        r = await cli.request(
            36, {"offset": phy, "group": "RG", "delayLevel": 0, "originMsgId": "U1", "maxReconsumeTimes": 16}
        )
        assert r.code == 0, r.remark
        sched = messages(await cli.pull("SCHEDULE_TOPIC_XXXX", 0, group="x", queue_id=2))
        assert sched[0].properties["REAL_TOPIC"] == "%RETRY%RG" and sched[0].properties["DELAY"] == "3"
        got = []
        for _ in range(60):
            got = messages(await cli.pull("%RETRY%RG", 0, group="RG"))
            if got:
                break
            await asyncio.sleep(0.1)
        assert got, "the retry was not delivered by the schedule service"
        m = got[0]
        assert m.body == b"payload" and m.reconsume_times == 1
        assert m.properties["RETRY_TOPIC"] == "Orig" and m.properties["ORIGIN_MESSAGE_ID"] == "U1"
        assert "DELAY" not in m.properties and "REAL_TOPIC" not in m.properties
        assert c.broker.schedule.offsets[3] == 1


def test_send_back_past_max_goes_to_dlq() -> None:
    original = MessageExt(topic="Orig", body=b"b", properties={"UNIQ_KEY": "U"}, reconsume_times=3)
    msg, dlq = build_send_back(original, "G", 0, 3, 0)
    assert dlq and msg.topic == "%DLQ%G" and msg.reconsume_times == 4 and "DELAY" not in msg.properties
    msg, dlq = build_send_back(original, "G", 0, 16, 0)
    assert not dlq and msg.topic == "%RETRY%G" and msg.properties["DELAY"] == "6"
    _msg, dlq = build_send_back(original, "G", -1, 16, 0)
    assert dlq
