"""Fixtures for transport tests: run a coroutine on a fresh uvloop loop with a hard deadline."""

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
