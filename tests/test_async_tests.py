"""The conftest hook runs `async def` tests on the broker's own loop: the body really runs, on uvloop."""

from __future__ import annotations

import asyncio

import uvloop


async def test_an_async_test_body_runs_on_uvloop(tmp_path: object) -> None:
    assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
    await asyncio.sleep(0)
    assert tmp_path is not None  # fixtures reach the coroutine as arguments


async def test_each_async_test_gets_a_fresh_loop() -> None:
    loop = asyncio.get_running_loop()
    assert not getattr(loop, "_rocketcluster_seen", False), "a loop was reused across tests"
    loop._rocketcluster_seen = True  # type: ignore[attr-defined]


async def test_each_async_test_gets_a_fresh_loop_again() -> None:
    await test_each_async_test_gets_a_fresh_loop()
