"""Long polling: pulls that found nothing wait here until a message arrives or they time out.

The pull processor parks a request with `suspend()` and returns no response; the store's arrival
listener calls `notify()` after each dispatched record, which re-runs matching requests at once; a
timer per request re-runs it at its deadline, and a sweep every 5 s catches anything a notification
missed. A re-run never suspends again and its reply keeps the request's original opaque.

The pulls woken by one notification (or one sweep) share a memo: those asking the same thing get one read
and one body between them (broker/server/processors/pull.py). A pull whose connection has more than its
write high-water mark unread is re-run only once its peer reads (`RemotingConnection.when_writable`), from
the data as it is then: a peer that does not read makes the broker produce nothing for it. Woken pulls
are answered a few MiB of replies per loop turn: handing one 1 MiB message to 600 pullers costs the kernel
~1 s of copying, and other clients' requests are served between the turns instead of after all of it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from broker.transport.connection import RemotingConnection

__all__ = ["HeldPull", "PullHoldService"]

log = logging.getLogger(__name__)

SWEEP_INTERVAL = 5.0
# Reply bytes written for woken pulls before the loop is let to serve other requests.
WAKE_BYTES_PER_TURN = 2 * 1024 * 1024

# Reads shared by the pulls of one wake-up; opaque here (the pull processor's ReadMemo).
WakeMemo = dict[Hashable, Any]
# (conn, cmd, memo) -> response or None: the pull processor run with suspension disabled.
Rerun = Callable[["RemotingConnection", RemotingCommand, "WakeMemo | None"], "RemotingCommand | None"]


@dataclass(slots=True, eq=False)
class HeldPull:
    conn: RemotingConnection
    cmd: RemotingCommand
    topic: str
    queue_id: int
    offset: int
    deadline: float
    code_set: frozenset[int] = field(default_factory=frozenset)
    timer: asyncio.TimerHandle | None = None


class PullHoldService:
    def __init__(self, rerun: Rerun, max_offset: Callable[[str, int], int]) -> None:
        self._rerun = rerun
        self._max_offset = max_offset
        self._table: dict[tuple[str, int], list[HeldPull]] = {}
        self._loop = asyncio.get_running_loop()
        self._sweeper: asyncio.Task[None] | None = None
        # Woken pulls not answered yet (see WAKE_BYTES_PER_TURN), each with the memo of its wake-up.
        self._to_wake: deque[tuple[HeldPull, WakeMemo | None]] = deque()
        self._wake_scheduled = False

    def start(self) -> None:
        self._sweeper = self._loop.create_task(self._sweep_forever())

    async def close(self) -> None:
        """Answer every held pull now (shutdown): clients get their PULL_NOT_FOUND instead of a timeout."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        table, self._table = self._table, {}
        while self._to_wake:
            self._wake(*self._to_wake.popleft())
        for held in (h for lst in table.values() for h in lst):
            self._wake(held)

    @property
    def held_count(self) -> int:
        return sum(len(v) for v in self._table.values())

    def suspend(self, held: HeldPull) -> None:
        self._table.setdefault((held.topic, held.queue_id), []).append(held)
        held.timer = self._loop.call_at(held.deadline, self._expire, held)

    def notify(self, topic: str, queue_id: int, max_offset: int, tags_code: int = 0, _props: object = None) -> None:
        """Store arrival listener: wake pulls on this queue waiting below `max_offset` whose tags match."""
        waiting = self._table.get((topic, queue_id))
        if not waiting:
            return
        keep: list[HeldPull] = []
        wake: list[HeldPull] = []
        for held in waiting:
            if max_offset > held.offset and (not held.code_set or tags_code in held.code_set):
                wake.append(held)
            else:
                keep.append(held)
        if not wake:
            return
        if keep:
            self._table[(topic, queue_id)] = keep
        else:
            del self._table[(topic, queue_id)]
        self._wake_all(wake, {})

    def _expire(self, held: HeldPull) -> None:
        held.timer = None
        if self._remove(held):
            self._wake(held)

    def _remove(self, held: HeldPull) -> bool:
        key = (held.topic, held.queue_id)
        lst = self._table.get(key)
        if not lst or held not in lst:
            return False
        lst.remove(held)
        if not lst:
            del self._table[key]
        return True

    def _wake_all(self, pulls: Iterable[HeldPull], memo: WakeMemo) -> None:
        self._to_wake.extend((held, memo) for held in pulls)
        if not self._wake_scheduled:
            self._wake_some()

    def _wake_some(self) -> None:
        """Answer woken pulls in order until a turn's worth of reply bytes is written; the rest next turn."""
        self._wake_scheduled = False
        queue = self._to_wake
        written = 0
        while queue:
            if written >= WAKE_BYTES_PER_TURN:
                self._wake_scheduled = True
                self._loop.call_soon(self._wake_some)
                return
            written += self._wake(*queue.popleft())

    def _wake(self, held: HeldPull, memo: WakeMemo | None = None) -> int:
        """Re-run a held pull and send its reply; returns the reply body's size."""
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
        if held.conn.is_closing:
            return 0
        if held.conn.write_backlogged:
            held.conn.when_writable(functools.partial(self._wake, held))
            return 0
        try:
            response = self._rerun(held.conn, held.cmd, memo)
        except Exception as exc:
            code = getattr(exc, "response_code", None)
            if not isinstance(code, int):
                log.exception("re-running a held pull from %s failed", held.conn.peer)
                code = 1
            response = held.cmd.response(code, str(exc))
        if response is None:
            return 0
        held.conn.send_response(response)
        return len(response.body)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_INTERVAL)
            try:
                self.sweep()
            except Exception:
                log.exception("long-polling sweep failed")

    def sweep(self) -> None:
        """Wake every held pull whose queue has grown (a missed or filtered-out notification)."""
        grown: list[HeldPull] = []
        for (topic, queue_id), lst in list(self._table.items()):
            max_offset = self._max_offset(topic, queue_id)
            for held in list(lst):
                if max_offset > held.offset and not held.code_set and self._remove(held):
                    grown.append(held)
        if grown:
            self._wake_all(grown, {})
