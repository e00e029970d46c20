"""Liveness: which brokers this controller hears from, and what their last heartbeat said.

Not replicated (as in RocketMQ's DLedger mode): every broker sends BROKER_HEARTBEAT to every controller, so
each controller has its own view, and the leader passes its view into the Raft log with each decision that
depends on it (broker.controller.state.Candidate). A broker is alive while its last heartbeat is younger
than the timeout it announced; it is dead at once when the connection its heartbeats came on closes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from broker.controller.state import Candidate

__all__ = ["BrokerLive", "Liveness"]


@dataclass
class BrokerLive:
    """One broker's last heartbeat."""

    cluster_name: str
    broker_name: str
    broker_id: int
    address: str
    last_update: float
    timeout_ms: int
    epoch: int = -1
    max_offset: int = -1
    confirm_offset: int = -1
    election_priority: int = 2**31 - 1
    channel: object | None = None

    def expired(self, now: float) -> bool:
        return now - self.last_update > self.timeout_ms / 1000

    @property
    def candidate(self) -> Candidate:
        return Candidate(self.broker_id, self.epoch, self.max_offset, self.election_priority)


class Liveness:
    """Brokers by (brokerName, brokerId). `clock` is injectable so tests move time by hand."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._brokers: dict[tuple[str, int], BrokerLive] = {}

    def heartbeat(self, beat: BrokerLive) -> None:
        """Record a heartbeat; the epoch and offsets it reports only move forward."""
        key = (beat.broker_name, beat.broker_id)
        old = self._brokers.get(key)
        beat.last_update = self._clock()
        if old is not None:
            beat.epoch = max(beat.epoch, old.epoch)
            if beat.epoch == old.epoch:
                beat.max_offset = max(beat.max_offset, old.max_offset)
                beat.confirm_offset = max(beat.confirm_offset, old.confirm_offset)
        self._brokers[key] = beat

    def get(self, broker_name: str, broker_id: int) -> BrokerLive | None:
        found = self._brokers.get((broker_name, broker_id))
        return found if found is not None and not found.expired(self._clock()) else None

    def alive(self, broker_name: str) -> dict[int, BrokerLive]:
        now = self._clock()
        return {i: b for (n, i), b in self._brokers.items() if n == broker_name and not b.expired(now)}

    def alive_ids(self, broker_name: str) -> set[int]:
        return set(self.alive(broker_name))

    def candidates(self, broker_name: str) -> list[Candidate]:
        return [b.candidate for _, b in sorted(self.alive(broker_name).items())]

    def expire(self) -> list[BrokerLive]:
        """Forget the brokers whose heartbeat timed out; returns them."""
        now = self._clock()
        gone = [key for key, b in self._brokers.items() if b.expired(now)]
        return [self._brokers.pop(key) for key in gone]

    def drop_channel(self, channel: object) -> list[BrokerLive]:
        """Forget the brokers whose heartbeats came on `channel`, which just closed; returns them."""
        gone = [key for key, b in self._brokers.items() if b.channel is channel]
        return [self._brokers.pop(key) for key in gone]

    def forget(self, broker_name: str, broker_ids: set[int] | None = None) -> None:
        for key in [k for k in self._brokers if k[0] == broker_name and (broker_ids is None or k[1] in broker_ids)]:
            del self._brokers[key]
