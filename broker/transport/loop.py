"""Event loop selection (uvloop when importable, the stdlib loop otherwise) and task shutdown.

`run(main())` is called by the CLI entry points, benchmarks and tests, in the way uvicorn's
`loops/auto.py` picks its loop; `cancel_and_wait` ends the background tasks of services on close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["cancel_and_wait", "loop_factory", "new_event_loop", "run"]

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


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel background tasks (None: never started) and wait until they have ended. Their own errors are
    not raised here: a service's loop logs its failures, and a close must go on regardless."""
    live = [task for task in tasks if task is not None]
    for task in live:
        task.cancel()
    if live:
        await asyncio.gather(*live, return_exceptions=True)
