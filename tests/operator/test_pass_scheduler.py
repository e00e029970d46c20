"""PassScheduler: bursts coalesce into one pass plus one more, a standby runs nothing, failures never end it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from rocketcluster.pass_scheduler import PassScheduler


class _Runs:
    def __init__(self, fail_with: BaseException | None = None) -> None:
        self.keys: list[str] = []
        self.release = asyncio.Event()
        self.fail_with = fail_with

    async def __call__(self, key: str) -> None:
        self.keys.append(key)
        await self.release.wait()
        if self.fail_with is not None:
            raise self.fail_with


async def _active() -> bool:
    return True


async def _standby() -> bool:
    return False


def _scheduler(runs: _Runs, active=_active) -> PassScheduler[str]:  # type: ignore[no-untyped-def]
    return PassScheduler(runs, describe=str, expected=(ConnectionError,), active=active)


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_a_burst_of_triggers_makes_one_pass_and_one_more() -> None:
    async def main() -> None:
        runs = _Runs()
        passes = _scheduler(runs)
        for _ in range(3):  # before the pass starts: it reads the object afresh, so it covers these
            passes.schedule("ns/a")
        passes.schedule("ns/b")
        await _settle()
        assert sorted(runs.keys) == ["ns/a", "ns/b"]  # one pass each under way, side by side
        for _ in range(5):
            passes.schedule("ns/a")
        runs.release.set()
        await _settle()
        assert sorted(runs.keys) == ["ns/a", "ns/a", "ns/b"]  # the burst during a's pass made one more

    asyncio.run(main())


def test_a_standby_runs_no_pass() -> None:
    async def main() -> None:
        runs = _Runs()
        runs.release.set()
        passes = _scheduler(runs, active=_standby)
        passes.schedule("ns/a")
        await _settle()
        assert runs.keys == []

    asyncio.run(main())


@pytest.mark.parametrize(
    ("failure", "level", "traceback"),
    [(ConnectionError("API server away"), logging.INFO, False), (KeyError("bug"), logging.ERROR, True)],
)
def test_a_failed_pass_is_logged_and_the_next_trigger_runs_again(
    failure: BaseException, level: int, traceback: bool, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        runs = _Runs(fail_with=failure)
        runs.release.set()
        passes = _scheduler(runs)
        with caplog.at_level(logging.INFO, logger="rocketcluster.operator"):
            passes.schedule("ns/a")
            await _settle()
            passes.schedule("ns/a")
            await _settle()
        assert runs.keys == ["ns/a", "ns/a"]
        records = [r for r in caplog.records if r.name == "rocketcluster.operator"]
        assert [r.levelno for r in records] == [level, level]
        assert all((r.exc_info is not None) == traceback for r in records)
        assert "ns/a: pass" in records[0].getMessage()

    asyncio.run(main())


def test_cancel_all_stops_the_passes_under_way() -> None:
    async def main() -> None:
        runs = _Runs()
        passes = _scheduler(runs)
        passes.schedule("ns/a")
        await _settle()
        passes.cancel_all()
        await _settle()
        passes.forget("ns/a")
        runs.release.set()
        passes.schedule("ns/a")  # forgotten: a new pass, not "one more" of the cancelled one
        await _settle()
        assert runs.keys == ["ns/a", "ns/a"]

    asyncio.run(main())
