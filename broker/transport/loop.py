"""Event loop selection: uvloop when importable, the stdlib loop otherwise.

Called by the CLI entry points, benchmarks and tests (`run(main())`), in the way uvicorn's
`loops/auto.py` picks its loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["loop_factory", "new_event_loop", "run"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """The factory creating our loops; uvloop is a declared dependency but keep a fallback for tooling."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a hard dependency in pyproject
        log.warning("uvloop is not installed; using the slower asyncio event loop")
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def new_event_loop() -> asyncio.AbstractEventLoop:
    return loop_factory()()


def run(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """`asyncio.run` on a uvloop loop."""
    with asyncio.Runner(loop_factory=loop_factory(), debug=debug) as runner:
        return runner.run(main)
