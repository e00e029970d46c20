"""The handlers' pass after a lost node's grace: a plan that waits with reason NODE_LOST gets one more pass of
its cluster when the wait runs out (no event would start one), one pending per cluster, a newer pass replacing
it; other waits get none (their own events or the handler's retry end them)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from rocketcluster import handlers
from rocketcluster.plan import Wait

KEY = ("ns", "rc")


@pytest.fixture
def scheduled(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(handlers.passes, "schedule", calls.append)
    yield calls
    handlers._pass_again_for(KEY, None)


async def test_a_lost_nodes_wait_gets_one_pass_when_it_runs_out(scheduled: list[tuple[str, str]]) -> None:
    handlers._pass_again_for(KEY, Wait("NODE_LOST", "grace", 3600))
    first = handlers._timers[KEY]
    handlers._pass_again_for(KEY, Wait("NODE_LOST", "grace", 0))  # a newer pass: the earlier timer goes
    assert first.cancelled() and not handlers._timers[KEY].cancelled()
    await asyncio.sleep(0.01)  # a timer of 0 s runs at the loop's next turn
    assert scheduled == [KEY]


@pytest.mark.parametrize("wait", [None, Wait("ROLLING_UPDATE", "a slave catches up", 0)])
async def test_other_waits_get_no_timer_and_cancel_a_pending_one(
    scheduled: list[tuple[str, str]], wait: Wait | None
) -> None:
    handlers._pass_again_for(KEY, Wait("NODE_LOST", "grace", 3600))
    pending = handlers._timers[KEY]
    handlers._pass_again_for(KEY, wait)
    assert pending.cancelled() and KEY not in handlers._timers
    await asyncio.sleep(0.01)
    assert scheduled == []
