"""Raw POP requests over a test connection (tests/server/server_harness.TestClient): the headers a RocketMQ client
sends, so each test reads as its scenario."""

from __future__ import annotations

import time
from typing import Any

from broker.protocol.command import RemotingCommand
from broker.protocol.message import MessageExt
from tests.server.server_harness import TestClient, messages

POP, ACK, PEEK, CHANGE, NOTIFICATION, POLLING_INFO, BATCH_ACK = 200050, 200051, 200052, 200053, 200054, 200055, 200151


def now_ms() -> int:
    return int(time.time() * 1000)


async def pop(
    cli: TestClient,
    topic: str,
    group: str = "PG1",
    *,
    queue_id: int = -1,
    nums: int = 32,
    invisible_ms: int = 60_000,
    poll_ms: int = 0,
    order: bool = False,
    attempt_id: str | None = None,
    exp: str = "*",
    timeout: float = 5.0,
    **extra: Any,
) -> RemotingCommand:
    ext: dict[str, Any] = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": queue_id,
        "maxMsgNums": nums,
        "invisibleTime": invisible_ms,
        "pollTime": poll_ms,
        "bornTime": now_ms(),
        "initMode": 0,
        "expType": "TAG",
        "exp": exp,
        "order": "true" if order else "false",
    }
    if attempt_id is not None:
        ext["attemptId"] = attempt_id
    ext.update(extra)
    return await cli.request(POP, ext, timeout=timeout + poll_ms / 1000)


async def pop_all(cli: TestClient, topic: str, group: str = "PG1", **kw: Any) -> list[MessageExt]:
    r = await pop(cli, topic, group, **kw)
    return messages(r) if r.code == 0 else []


def handle(m: MessageExt, resp: RemotingCommand | None = None, broker_name: str = "") -> str:
    """The message's extraInfo: the POP_CK property (retried messages) or built from the reply's headers as
    the Java client does."""
    if "POP_CK" in m.properties:
        return m.properties["POP_CK"]
    assert resp is not None
    ext = resp.ext_fields
    start = {}
    for entry in ext["startOffsetInfo"].split(";"):
        flag, qid, so = entry.split(" ")
        start[(flag, qid)] = so
    so = start[("0", str(m.queue_id))]
    return (
        f"{so} {ext['popTime']} {ext['invisibleTime']} {ext['reviveQid']} 0 {broker_name} {m.queue_id} {m.queue_offset}"
    )


async def ack(cli: TestClient, extra_info: str, group: str = "PG1", **override: Any) -> RemotingCommand:
    f = extra_info.split(" ") + ["0"] * 8  # a malformed handle still makes a request (the broker refuses it)
    topic = override.pop("topic")
    ext = {"consumerGroup": group, "topic": topic, "queueId": f[6], "offset": f[7], "extraInfo": extra_info}
    ext.update(override)
    return await cli.request(ACK, ext)


async def change(
    cli: TestClient, extra_info: str, invisible_ms: int, group: str = "PG1", **override: Any
) -> RemotingCommand:
    f = extra_info.split(" ")
    topic = override.pop("topic")
    ext = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": f[6],
        "offset": f[7],
        "extraInfo": extra_info,
        "invisibleTime": invisible_ms,
    }
    ext.update(override)
    return await cli.request(CHANGE, ext)
