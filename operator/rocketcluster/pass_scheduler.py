"""Passes per object, started by events and the resync tick: a burst of triggers for one object makes one pass
plus at most one more, never a pass per trigger, and passes of different objects run side by side.

A pass that fails in an expected way (the API server or a broker away, a wait) is logged at INFO: the next
trigger or resync tries again. Any other exception is a bug in that object's pass, logged with its traceback,
and it never ends the scheduler that serves every other object. A standby replica (rocketcluster.peering)
runs no pass at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["PassScheduler"]

log = logging.getLogger("rocketcluster.operator")

Key = TypeVar("Key", bound=Hashable)


class PassScheduler(Generic[Key]):
    def __init__(
        self,
        run: Callable[[Key], Awaitable[None]],
        *,
        describe: Callable[[Key], str],
        expected: tuple[type[BaseException], ...],
        active: Callable[[], Awaitable[bool]],
    ) -> None:
        self._run = run
        self._describe = describe
        self._expected = expected
        self._active = active
        self._passes: dict[Key, asyncio.Task[None]] = {}
        self._changed_again: set[Key] = set()

    def schedule(self, key: Key) -> None:
        running = self._passes.get(key)
        if running is not None and not running.done():
            self._changed_again.add(key)
            return
        self._passes[key] = asyncio.create_task(self._pass(key))

    def forget(self, key: Key) -> None:
        """The object is gone: drop its pass record (a pass under way ends on its own)."""
        self._passes.pop(key, None)

    def cancel_all(self) -> None:
        for task in self._passes.values():
            task.cancel()

    async def run_once(self, key: Key) -> None:
        """One pass over `key` now (on the active replica only); a failure is logged, never raised."""
        try:
            if not await self._active():
                return  # a standby: the active replica serves this object
            await self._run(key)
        except self._expected as exc:
            log.info("%s: pass: %s", self._describe(key), exc)
        except Exception:
            log.exception("%s: pass failed", self._describe(key))

    async def _pass(self, key: Key) -> None:
        while True:
            self._changed_again.discard(key)
            await self.run_once(key)
            if key not in self._changed_again:
                return
