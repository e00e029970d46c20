"""The reput pass's run path (ReputService._dispatch_runs): a slave writes the ConsumeQueue units of the
records it replicated a queue's run at a time, reading only what a unit needs. It must write the very
bytes the per-record path (parse_record, then ConsumeQueueStore.dispatch) writes.

Real stores on real files. A master's CommitLog, written by its put path with the records the run path
leaves to the per-record one between its batches, is replicated into two slaves in pieces that cut records
in two, followed by records only a Java master writes. One slave dispatches as every slave does; the
other has one more per-record dispatcher, which turns the run path off (as an in-process index does).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from broker.protocol.message import MessageExt, SysFlag, encode_record
from broker.store import MessageStore, MessageToStore, PutStatus
from broker.store.dispatch_request import SCHEDULE_TOPIC, DispatchRequest
from tests.store.store_helpers import dispatched, small_config

TOPIC, OTHER = "RunTopic", "OtherTopic"
Heard = dict[tuple[str, int], tuple[int, set[int]]]  # (topic, queue) -> (last offset told, tags codes)
LONG_TOPIC = "L" * 200  # a 2-byte topic length: the v2 record layout


def msg(i: int, topic: str = TOPIC, queue_id: int = 0, tags: str | None = "TagA", **kw: object) -> MessageToStore:
    props = {"UNIQ_KEY": f"UNIQ{i:08d}", "WAIT": "true"}
    if tags is not None:
        props["TAGS"] = tags
    fields: dict[str, Any] = {"born_timestamp": 1_700_000_000_000 + i, "born_host": ("127.0.0.1", 40000), **kw}
    return MessageToStore(topic=topic, queue_id=queue_id, body=b"run-%d-" % i * 30, properties=props, **fields)


async def fill_master(master: MessageStore) -> None:
    """Batches (runs) in turn over queues and topics, with the records a run cannot take between them."""
    i = 0
    for round_ in range(12):
        for queue_id in range(3):
            tags = [None, "TagA", "TagB", ""][(round_ + queue_id) % 4]  # "" : an empty TAGS value
            batch = [msg(i + j, queue_id=queue_id, tags=tags if j % 5 else "TagC") for j in range(16)]
            assert (await master.put(batch)).status is PutStatus.PUT_OK
            i += 16
        assert (await master.put(msg(i, topic=OTHER, queue_id=round_ % 2))).status is PutStatus.PUT_OK
        odd = [
            msg(i + 1, sys_flag=SysFlag.TRANSACTION_PREPARED_TYPE),  # no unit
            msg(i + 2, sys_flag=SysFlag.TRANSACTION_ROLLBACK_TYPE),  # no unit
            msg(i + 3, sys_flag=SysFlag.TRANSACTION_COMMIT_TYPE),
            msg(i + 4, born_host=("::1", 40000)),  # IPv6 born host: another layout
        ]
        for m in odd:
            assert (await master.put(m)).status is PutStatus.PUT_OK
        scheduled = msg(i + 5, topic=SCHEDULE_TOPIC, queue_id=2)
        scheduled.properties["DELAY"] = "3"  # the tags code is the delivery time
        assert (await master.put(scheduled)).status is PutStatus.PUT_OK
        i += 6


def hand_written(offset: int, records: list[MessageExt]) -> bytes:
    """Records this broker never writes (a 2-byte topic length, from a Java master), laid out from `offset`."""
    out = b""
    for m in records:
        m.commit_log_offset = offset + len(out)
        out += encode_record(m)
    return out


async def replicate(master: MessageStore, slaves: list[MessageStore], piece: int) -> None:
    offset = 0
    while offset < master.max_phy_offset:
        data = master.get_commit_log_data(offset, piece)
        assert data is not None
        for slave in slaves:
            assert await slave.append_to_commit_log(offset, data)
        offset += len(data)
        data.release()
        await asyncio.sleep(0)  # a pass may run between pieces, as between HA transfers


class PerRecord:
    """One more per-record dispatcher (it keeps what it sees): with it, the pass takes every record alone."""

    def __init__(self) -> None:
        self.seen: list[DispatchRequest] = []

    def dispatch(self, request: DispatchRequest) -> None:
        self.seen.append(request)


def queue_files(root: Path) -> dict[str, bytes]:
    base = root / "consumequeue"
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def test_run_path_writes_the_units_the_per_record_path_writes(tmp_path: Path) -> None:
    async def main() -> None:
        master = MessageStore(small_config(tmp_path / "m", message_index_enable=False))
        await master.start()
        await fill_master(master)
        slaves, arrivals = [], []
        for name in ("runs", "reference"):
            slave = MessageStore(small_config(tmp_path / name, broker_role="SLAVE", message_index_enable=False))
            await slave.start()
            heard: Heard = {}

            def listen(topic: str, queue_id: int, after: int, code: int, _props: object, heard: Heard = heard) -> None:
                last, codes = heard.get((topic, queue_id), (0, set()))
                heard[(topic, queue_id)] = (max(last, after), codes | {code})

            slave.add_arrival_listener(listen)
            slaves.append(slave)
            arrivals.append(heard)
        runs, reference = slaves
        per_record_dispatcher = PerRecord()
        reference.reput.add_dispatcher(per_record_dispatcher)
        seen = per_record_dispatcher.seen
        per_record = 0
        units = runs.consume_queue_store
        real_dispatch = units.dispatch

        def counting(request: DispatchRequest) -> None:
            nonlocal per_record
            per_record += 1
            real_dispatch(request)

        units.dispatch = counting  # type: ignore[method-assign]

        await replicate(master, slaves, piece=7_001)  # a piece ends inside a record more often than not
        for slave in slaves:
            await dispatched(slave)
        assert [s.reput.reput_from_offset for s in slaves] == [master.max_phy_offset] * 2
        next_offset = master.get_max_offset_in_queue(TOPIC, 1)
        tail = hand_written(master.max_phy_offset, [
            MessageExt(topic=LONG_TOPIC, body=b"long", properties={"TAGS": "TagL"}, store_timestamp=1),
            *(MessageExt(topic=TOPIC, queue_id=1, body=b"after", queue_offset=next_offset + k, store_timestamp=2)
              for k in (0, 1, 2, 5, 6)),  # a gap in the queue offsets: blank units fill it
        ])  # fmt: skip
        for slave in slaves:
            assert await slave.append_to_commit_log(master.max_phy_offset, tail)
        end = master.max_phy_offset + len(tail)
        for slave in slaves:
            await dispatched(slave)
        assert [s.reput.reput_from_offset for s in slaves] == [end] * 2

        assert queue_files(tmp_path / "runs") == queue_files(tmp_path / "reference")
        assert runs.reput.last_dispatch_timestamp == reference.reput.last_dispatch_timestamp
        assert arrivals[0] == arrivals[1]
        assert runs.get_max_offset_in_queue(TOPIC, 0) == 12 * (16 + 2)  # a batch, a COMMIT and an IPv6 record a round
        assert runs.get_max_offset_in_queue(LONG_TOPIC, 0) == 1
        assert runs.get_max_offset_in_queue(TOPIC, 1) == next_offset + 7
        # the run path did take the batches: the per-record path saw the odd records and little else
        assert len(seen) == 12 * (3 * 16 + 6) + 6
        assert per_record < len(seen) // 3, per_record
        for slave in slaves:
            await slave.shutdown()
        await master.shutdown()

    asyncio.run(main())


def test_run_path_stops_where_the_per_record_path_stops(tmp_path: Path) -> None:
    """A record whose TAGS are not UTF-8 (never written by a broker: a damaged file) stops both paths at it,
    after the units of every record before it."""

    async def main() -> None:
        master = MessageStore(small_config(tmp_path / "m", message_index_enable=False))
        await master.start()
        assert (await master.put([msg(i) for i in range(10)])).status is PutStatus.PUT_OK
        end = master.max_phy_offset
        records = [MessageExt(topic=TOPIC, body=b"x", properties={"TAGS": "XX"}, queue_offset=10 + k) for k in range(2)]
        tail = hand_written(end, records).replace(b"TAGS\x01XX", b"TAGS\x01\xff\xfe", 1)
        stops = []
        for name in ("runs", "reference"):
            slave = MessageStore(small_config(tmp_path / name, broker_role="SLAVE", message_index_enable=False))
            await slave.start()
            if name == "reference":
                slave.reput.add_dispatcher(PerRecord())
            await replicate(master, [slave], piece=1 << 20)
            assert await slave.append_to_commit_log(end, tail)
            await asyncio.sleep(0.05)
            stops.append((slave.reput.reput_from_offset, slave.get_max_offset_in_queue(TOPIC, 0)))
            await slave.shutdown()
        assert stops[0] == stops[1] == (end, 10)
        await master.shutdown()

    asyncio.run(main())
