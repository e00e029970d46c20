"""Fixtures for NameServer tests: run a coroutine on a fresh uvloop loop with a hard deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from broker.transport.loop import run


@pytest.fixture
def arun() -> Callable[..., Any]:
    def runner(coro: Coroutine[Any, Any, Any], timeout: float = 15.0) -> Any:
        async def bounded() -> Any:
            return await asyncio.wait_for(coro, timeout)

        return run(bounded())

    return runner


@pytest.fixture
def namesrv_config(tmp_path):
    from broker.namesrv.config import NamesrvConfig

    return NamesrvConfig(
        listen_port=0,
        bind_address="127.0.0.1",
        kv_config_path=str(tmp_path / "kvConfig.json"),
        scan_not_active_broker_interval=50,
    )
