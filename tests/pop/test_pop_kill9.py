"""kill -9 of a broker (a real `mqbroker` process) holding popped, unacked messages: after the restart they are
handed out again once their invisible time ends, acked ones are not needed again, and every message a
producer got SEND_OK for is accounted for."""

from __future__ import annotations

import time
from pathlib import Path

from broker.protocol.message import MessageExt, decode_records
from tests.hostile_cluster import RawClient, running_pair

POP, ACK = 200050, 200051
TOPIC = "PopCrash"
GROUP = "PopCrashCG"


def _pop(client: RawClient, invisible_ms: int) -> tuple[list[MessageExt], dict[str, str]]:
    ext = {
        "consumerGroup": GROUP,
        "topic": TOPIC,
        "queueId": "-1",
        "maxMsgNums": "32",
        "invisibleTime": str(invisible_ms),
        "pollTime": "0",
        "bornTime": str(int(time.time() * 1000)),
        "initMode": "0",
        "expType": "TAG",
        "exp": "*",
    }
    r = client.request(POP, ext)
    if r.code != 0:
        return [], r.ext_fields
    return list(decode_records(r.body)), r.ext_fields


def _handle(m: MessageExt, ext: dict[str, str]) -> str:
    starts = {e.split(" ")[1]: e.split(" ")[2] for e in ext["startOffsetInfo"].split(";")}
    return (
        f"{starts[str(m.queue_id)]} {ext['popTime']} {ext['invisibleTime']} {ext['reviveQid']} 0 broker-hostile "
        f"{m.queue_id} {m.queue_offset}"
    )


def test_popped_unacked_messages_survive_kill9(tmp_path: Path) -> None:
    with running_pair(tmp_path, flushConsumerOffsetInterval="100") as procs:
        client = RawClient(procs.broker_port)
        sent = []
        for i in range(12):
            body = f"crash-{i}".encode()
            assert client.send(TOPIC, i % 4, body).code == 0
            sent.append(body)
        popped: list[MessageExt] = []
        for _ in range(20):
            got, ext = _pop(client, 3000)
            for m in got:
                popped.append(m)
                if m.body.endswith((b"0", b"2", b"4", b"6", b"8")):  # ack about half
                    a = client.request(
                        ACK,
                        {
                            "consumerGroup": GROUP,
                            "topic": TOPIC,
                            "queueId": str(m.queue_id),
                            "offset": str(m.queue_offset),
                            "extraInfo": _handle(m, ext),
                        },
                    )
                    assert a.code == 0, a.remark
            if len(popped) == len(sent):
                break
        assert sorted(m.body for m in popped) == sorted(sent)
        acked = {m.body for m in popped if m.body.endswith((b"0", b"2", b"4", b"6", b"8"))}
        unacked = set(sent) - acked
        time.sleep(0.5)  # the offsets file is written every 100 ms here; the revive records are in the CommitLog
        client.close()
        procs.kill9("mqbroker")
        procs.spawn("mqbroker", procs.root / "broker.conf")

        client = RawClient(procs.broker_port)
        back: set[bytes] = set()
        retried: set[bytes] = set()
        deadline = time.monotonic() + 60
        while not unacked <= back and time.monotonic() < deadline:
            got, _ext = _pop(client, 60_000)
            back |= {m.body for m in got}
            retried |= {m.body for m in got if m.reconsume_times == 1 and m.properties["POP_CK"].split(" ")[4] == "1"}
            if not got:
                time.sleep(0.2)
        assert unacked <= back, f"lost after kill -9: {sorted(unacked - back)}"
        # they came back through the pop-retry topic (the revive service), not from a rewound offset
        assert unacked <= retried
        assert acked | back >= set(sent)
        assert client.send(TOPIC, 0, b"after").code == 0
        deadline = time.monotonic() + 30
        later: list[bytes] = []
        while b"after" not in later and time.monotonic() < deadline:
            later += [m.body for m in _pop(client, 60_000)[0]]
        assert b"after" in later
        client.close()


def test_orderly_pop_state_survives_kill9(tmp_path: Path) -> None:
    with running_pair(tmp_path, flushConsumerOffsetInterval="100") as procs:
        client = RawClient(procs.broker_port)
        for i in range(3):
            assert client.send("OrderCrash", 0, f"ord-{i}".encode()).code == 0

        def order_pop(attempt: str, invisible_ms: int = 2000) -> tuple[int, list[bytes]]:
            ext = {
                "consumerGroup": GROUP,
                "topic": "OrderCrash",
                "queueId": "0",
                "maxMsgNums": "2",
                "invisibleTime": str(invisible_ms),
                "pollTime": "0",
                "bornTime": str(int(time.time() * 1000)),
                "initMode": "0",
                "order": "true",
                "attemptId": attempt,
            }
            r = client.request(POP, ext)
            return r.code, [m.body for m in decode_records(r.body)] if r.code == 0 else []

        # invisible long enough to outlast the restart on a loaded machine
        assert order_pop("first", 60_000) == (0, [b"ord-0", b"ord-1"])
        time.sleep(0.3)
        client.close()
        procs.kill9("mqbroker")
        procs.spawn("mqbroker", procs.root / "broker.conf")
        client = RawClient(procs.broker_port)
        # still blocked after the restart, unless the same attempt asks again (this time invisible for 2 s)
        assert order_pop("other")[0] == 210
        assert order_pop("first", 2000) == (0, [b"ord-0", b"ord-1"])
        deadline = time.monotonic() + 30
        code, bodies = 210, []
        while code != 0 and time.monotonic() < deadline:
            code, bodies = order_pop("later")
            time.sleep(0.2)
        assert bodies == [b"ord-0", b"ord-1"]  # never acked: the same messages, in order, again
        client.close()
