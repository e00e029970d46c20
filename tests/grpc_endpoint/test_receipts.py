"""The kept receipt handles of auto-renew (broker.grpc.receipts): bounds, the newest handle swapped in for the
client's ack, renewals and releases, over a recording stand-in for the broker's POP service (the bookkeeping is
what is tested here; test_sdk_auto_renew.py runs the same code against a real broker and the official SDK)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

import pytest

from broker.grpc.receipts import ReceiptHandles
from broker.grpc.renew_policy import RenewSettings
from broker.protocol.pop import ExtraInfo, parse_extra_info


@dataclass
class _Changed:
    extra_info: str


class _RecordingPop:
    """Answers CHANGE_MESSAGE_INVISIBLETIME as the POP service does: a new handle popped now for `invisible_ms`."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, str, int]] = []  # (topic, old extra info, invisible ms)
        self.fail = False

    async def change_invisible(
        self, *, group: str, topic: str, queue_id: int, offset: int, extra_info: str, invisible_ms: int
    ) -> Any:
        await asyncio.sleep(0)
        if self.fail:
            raise RuntimeError("store is not writable")
        self.changes.append((topic, extra_info, invisible_ms))
        old = parse_extra_info(extra_info)
        now = time.time_ns() // 1_000_000
        new = ExtraInfo(offset, now, invisible_ms, old.revive_qid, old.flag, old.broker_name, queue_id, offset)
        return _Changed(str(new))


def _handle(pop_time: int, invisible_ms: int, offset: int = 7, flag: int = 0) -> str:
    return f"{ExtraInfo(offset, pop_time, invisible_ms, 0, flag, 'broker-a', 1, offset)!s} 4096"


def _now() -> int:
    return time.time_ns() // 1_000_000


def _handles(pop: _RecordingPop, gone: set[str] | None = None, **bounds: int) -> ReceiptHandles:
    gone_ids = gone if gone is not None else set()
    return ReceiptHandles(pop, RenewSettings(ahead_ms=2_000), 1_000, lambda cid: cid in gone_ids, **bounds)


def test_due_handle_is_renewed_and_the_ack_uses_the_newest() -> None:
    async def run() -> None:
        pop = _RecordingPop()
        handles = _handles(pop)
        given = _handle(_now(), 1_500)  # within renewAhead already
        assert handles.keep("c1", "G", "T", "M1", given, 0)
        await handles.scan()
        [(topic, old, invisible)] = pop.changes
        assert (topic, old, invisible) == ("T", given.rsplit(" ", 1)[0], 60_000)
        newest = await handles.take("c1", "G", "M1", given)
        assert newest != given and newest.endswith(" 4096")
        assert parse_extra_info(newest.rsplit(" ", 1)[0]).invisible_time == 60_000
        assert handles.total == 0 and not handles.by_client
        # forgotten: the next take hands the client's own handle back
        assert await handles.take("c1", "G", "M1", given) == given

    asyncio.run(run())


def test_handle_not_due_is_left_alone_and_other_handles_pass_through() -> None:
    async def run() -> None:
        pop = _RecordingPop()
        handles = _handles(pop)
        given = _handle(_now(), 60_000)
        handles.keep("c1", "G", "T", "M1", given, 0)
        await handles.scan()
        assert pop.changes == []
        # another client, group, message or handle is not this entry
        assert await handles.take("c2", "G", "M1", given) == given
        assert await handles.take("c1", "G2", "M1", given) == given
        assert await handles.take("c1", "G", "M1", "something else") == "something else"
        assert handles.total == 1

    asyncio.run(run())


def test_retry_topic_handle_renews_on_the_retry_topic() -> None:
    async def run() -> None:
        pop = _RecordingPop()
        handles = _handles(pop)
        handles.keep("c1", "G", "T", "M1", _handle(_now(), 1_000, flag=1), 1)
        await handles.scan()
        assert [c[0] for c in pop.changes] == ["%RETRY%G_T"]

    asyncio.run(run())


def test_gone_client_is_released_with_the_clear_time() -> None:
    async def run() -> None:
        pop = _RecordingPop()
        gone: set[str] = set()
        handles = _handles(pop, gone)
        for i in range(3):
            handles.keep("c1", "G", "T", f"M{i}", _handle(_now(), 60_000, offset=i), 0)
        handles.keep("c2", "G", "T", "X", _handle(_now(), 60_000), 0)
        gone.add("c1")
        await handles.scan()
        assert sorted(c[2] for c in pop.changes) == [1_000] * 3
        assert list(handles.by_client) == ["c2"] and handles.total == 1
        assert await handles.release("c2") == 1
        assert await handles.release("c2") == 0
        assert handles.total == 0

    asyncio.run(run())


def test_failed_renewals_are_retried_then_given_up(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        pop = _RecordingPop()
        pop.fail = True
        handles = _handles(pop)
        handles.keep("c1", "G", "T", "M1", _handle(_now(), 1_500), 0)
        for _ in range(3):
            await handles.scan()
        assert handles.total == 1  # three failures counted
        await handles.scan()
        assert handles.total == 0  # the fourth look gives it up

    with caplog.at_level(logging.WARNING, logger="broker.grpc.receipts"):
        asyncio.run(run())


def test_bounds_per_client_and_in_total(caplog: pytest.LogCaptureFixture) -> None:
    handles = _handles(_RecordingPop(), max_per_client=2, max_total=3)
    with caplog.at_level(logging.WARNING, logger="broker.grpc.receipts"):
        assert handles.keep("c1", "G", "T", "M1", _handle(_now(), 60_000), 0)
        assert handles.keep("c1", "G", "T", "M2", _handle(_now(), 60_000), 0)
        assert not handles.keep("c1", "G", "T", "M3", _handle(_now(), 60_000), 0)
        assert "receipt handles of client c1 (its bound)" in caplog.text
        assert handles.keep("c2", "G", "T", "M1", _handle(_now(), 60_000), 0)
        assert not handles.keep("c3", "G", "T", "M1", _handle(_now(), 60_000), 0)
        assert "receipt handles in all (its bound)" in caplog.text
    # the same message delivered again to the same client replaces its entry
    assert handles.keep("c2", "G", "T", "M1", _handle(_now(), 60_000, offset=9), 0)
    assert handles.total == 3


def test_ack_waits_for_a_renewal_in_flight() -> None:
    async def run() -> None:
        pop = _RecordingPop()
        handles = _handles(pop)
        given = _handle(_now(), 1_500)
        handles.keep("c1", "G", "T", "M1", given, 0)
        scan = asyncio.create_task(handles.scan())
        await asyncio.sleep(0)  # the renewal is now awaiting the POP service
        newest = await handles.take("c1", "G", "M1", given)
        await scan
        assert len(pop.changes) == 1
        assert newest != given  # the renewed handle, not the stale one

    asyncio.run(run())


def test_held_past_the_max_time_goes_back_with_the_retry_delay() -> None:
    async def run() -> None:
        pop = _RecordingPop()
        handles = ReceiptHandles(pop, RenewSettings(ahead_ms=2_000, max_time_ms=5_000), 1_000, lambda cid: False)
        given = _handle(_now(), 1_500)
        handles.keep("c1", "G", "T", "M1", given, 2)
        await handles.scan()  # not yet held that long: renewed
        assert [c[2] for c in pop.changes] == [60_000] and handles.total == 1
        entry = handles.by_client["c1"][("G", "M1")]
        entry.current = _handle(_now(), 6_000)  # due again 5 s after the first delivery
        await handles.scan(now_ms=entry.received_at_ms + 5_000)
        assert [c[2] for c in pop.changes] == [60_000, 10_000]  # the third attempt's retry delay
        assert handles.total == 0

    asyncio.run(run())
