"""Bad input gets a clear error code and remark, the connection stays usable, and nothing is stored."""

from __future__ import annotations

import asyncio
import struct
import time
from pathlib import Path

import pytest

from broker.protocol.batch import BatchMessage, encode_batch
from broker.protocol.command import RemotingCommand
from broker.server.put_rules import check_properties
from tests.server.server_harness import cluster


async def test_unknown_code_and_bad_sends_store_nothing(tmp_path: Path) -> None:
    async with cluster(tmp_path, maxMessageSize=1024) as c:
        cli = await c.client()
        unknown = await cli.request(9999)
        assert unknown.code == 3 and "9999" in unknown.remark
        phy = c.broker.store.max_phy_offset
        cases = {
            "oversized": await cli.send("Good", b"x" * 1025),
            "invalid topic": await cli.send("bad topic!", b"x"),
            "long topic": await cli.send("t" * 128, b"x"),
            "properties": await cli.send("Good", b"x", properties_text="TAGS\x01a\x02garbage\x02"),
            "batch": await cli.send("Good", encode_batch([BatchMessage(b"ok")])[:-3] + b"\x00", code=320),
            "batch length": await cli.send("Good", struct.pack(">i", 9999) + b"\x00" * 30, code=320),
            "batch oversized": await cli.send("Good", encode_batch([BatchMessage(b"y" * 2000)]), code=320),
        }
        for name, resp in cases.items():
            assert resp.code == 13, (name, resp.code, resp.remark)
            assert resp.remark, name
        assert "1025" in cases["oversized"].remark and "illegal characters" in cases["invalid topic"].remark
        assert "batch" in cases["batch"].remark
        assert c.broker.store.max_phy_offset == phy, "a rejected message was stored"
        ok = await cli.send("Good", b"fine")  # the same connection still works
        assert ok.code == 0


async def test_missing_header_field_and_forbidden_topics(tmp_path: Path) -> None:
    async with cluster(tmp_path, autoCreateTopicEnable="false") as c:
        cli = await c.client()
        r = await cli.request(310, {"a": "PG", "b": "T"})
        assert r.code == 1 and "null" in r.remark
        assert (await cli.send("SCHEDULE_TOPIC_XXXX", b"x")).code == 16
        no_topic = await cli.send("NotCreated", b"x")
        assert no_topic.code == 17 and "not exist" in no_topic.remark
        bad_queue = await cli.send("SELF_TEST_TOPIC", b"x", queue_id=5)
        assert bad_queue.code == 29 and "queueId" in bad_queue.remark


async def test_sends_wait_too_long_get_system_busy(tmp_path: Path) -> None:
    """A send the connection held back (flow control) longer than waitTimeMillsInSendQueue gets SYSTEM_BUSY."""

    class Recorder:
        peer = "127.0.0.1:1"
        attributes: dict[str, object] = {}

    async with cluster(tmp_path, waitTimeMillsInSendQueue=100) as c:
        cli = await c.client()
        await cli.send("Busy", b"warm-up")
        fields = {
            "a": "PG",
            "b": "Busy",
            "c": "TBW102",
            "d": "4",
            "e": "0",
            "f": "0",
            "g": str(int(time.time() * 1000)),
            "h": "0",
        }
        late = RemotingCommand(code=310, opaque=7, ext_fields=fields, body=b"late")
        # what RemotingConnection stamps on a request it keeps back while the peer does not read
        late.received_at = asyncio.get_running_loop().time() - 0.25
        resp = c.broker.send.handle(Recorder(), late)
        assert resp is not None and resp.code == 2 and "flow control" in (resp.remark or "")
        assert resp.opaque == 7


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("", True),
        ("A\x01b\x02", True),
        ("A\x01\x02", True),
        ("A\x01b", True),
        ("nosep\x02", False),
        ("\x01v\x02", False),
        ("A\x01" + "v" * 40000 + "\x02", False),
    ],
)
def test_check_properties(text: str, ok: bool) -> None:
    assert (check_properties(text) is None) is ok
