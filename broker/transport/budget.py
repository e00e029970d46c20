"""FrameBudget: the memory that frames still arriving may hold, across every connection of one server.

Every connection of a `RemotingServer` shares one. A connection whose incomplete frame is large (at least
`LARGE_FRAME` bytes) reserves the frame's whole announced size when its length word arrives, so a frame
that got its reservation can always complete and the memory of frames under way never exceeds `limit`,
however slowly their senders write. When the reservation does not fit, the connection keeps what it has
already read (that counts too), stops reading and waits in line; it resumes once earlier frames complete
or their connections close. When not even what it has read fits, the frame is refused (the connection
closes). Small frames take nothing: each connection holds less than `LARGE_FRAME` of them, so that small
requests keep being served while large frames wait.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

__all__ = ["DEFAULT_INCOMPLETE_FRAMES_LIMIT", "LARGE_FRAME", "FrameBudget", "Reservation"]

DEFAULT_INCOMPLETE_FRAMES_LIMIT = 256 * 1024 * 1024
LARGE_FRAME = 64 * 1024


class Reservation:
    """Bytes one connection holds for its incomplete frame; `waiting` until the rest is granted."""

    __slots__ = ("_budget", "_granted", "held", "size", "waiting")

    def __init__(self, budget: FrameBudget, held: int, size: int, granted: Callable[[], None] | None) -> None:
        self._budget = budget
        self.held = held
        self.size = size
        self.waiting = granted is not None
        self._granted = granted

    def grant(self) -> None:
        self.held = self.size
        self.waiting = False
        callback, self._granted = self._granted, None
        if callback is not None:
            callback()

    def release(self) -> None:
        """Give the bytes back (the frame completed or its connection closed); wakes who waits next."""
        self._budget._release(self)


class FrameBudget:
    """Shared byte budget of incomplete large frames; see the module docstring."""

    def __init__(self, limit: int = DEFAULT_INCOMPLETE_FRAMES_LIMIT) -> None:
        self.limit = limit
        self.used = 0
        self._waiting: deque[Reservation] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def reserve(self, size: int, held: int, granted: Callable[[], None]) -> Reservation | None:
        """Reserve `size` bytes for a frame of which `held` are already read.

        Returns a granted reservation, or one that waits (`granted` is called once the rest is reserved;
        the caller stops reading meanwhile), or None when even `held` does not fit: refuse the frame.
        Nobody jumps the line: while others wait, a new frame waits behind them. A frame larger than the
        whole budget could never be granted, so it is refused at once.
        """
        if size > self.limit:
            return None
        if not self._waiting and self.used + size <= self.limit:
            self.used += size
            return Reservation(self, size, size, None)
        if self.used + held > self.limit:
            return None
        self.used += held
        reservation = Reservation(self, held, size, granted)
        self._waiting.append(reservation)
        return reservation

    def _release(self, reservation: Reservation) -> None:
        self.used -= reservation.held
        reservation.held = 0
        if reservation.waiting:
            reservation.waiting = False
            self._waiting.remove(reservation)
        self._grant_waiting()

    def _grant_waiting(self) -> None:
        waiting = self._waiting
        while waiting and self.used + waiting[0].size - waiting[0].held <= self.limit:
            reservation = waiting.popleft()
            self.used += reservation.size - reservation.held
            reservation.grant()
