"""Lag figures of one broker group, as the operator's drain and roll gates read them: pure, no I/O.

`Admin.consumer_lag` (broker.client.admin) gathers a master's consumer offsets (GET_ALL_CONSUMER_OFFSET) and
the max offset of each queue they name (GET_MAX_OFFSET), then `consumer_lag` sums them here.
`Admin.replication_lag` reads the CommitLog max offsets of a master and its slaves (GET_BROKER_RUNTIME_INFO)
into a `ReplicationLag`.

Consumer lag counts what the broker's offset table knows: every (topic, group) pair with a committed
offset, retry topics (%RETRY%<group>) included under their group. A group that never committed on a
queue is not in the table and adds nothing (the broker cannot tell it from a group that never subscribed).

Messages nobody reads are the other half of a drain: `unread_queues` finds the queues that hold messages
and on which no consumer group has committed an offset (a topic produced to before any consumer exists),
and the delayed messages the schedule service has not delivered yet (SCHEDULE_TOPIC_XXXX queue
`level - 1` against the delay offsets). Deleting a group that holds either would lose messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "SCHEDULE_TOPIC",
    "ConsumerLag",
    "QueueLag",
    "ReplicationLag",
    "SlaveLag",
    "UnreadQueue",
    "consumer_lag",
    "unread_queues",
]

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


@dataclass(frozen=True, slots=True)
class QueueLag:
    topic: str
    group: str
    queue_id: int
    max_offset: int
    consumer_offset: int

    @property
    def lag(self) -> int:
        # an offset past the end (queue truncated, topic recreated) is no lag, not a negative one
        return max(0, self.max_offset - self.consumer_offset)


@dataclass(frozen=True, slots=True)
class UnreadQueue:
    """`count` messages of one queue that no consumer group has read (delayed ones, for SCHEDULE_TOPIC_XXXX)."""

    topic: str
    queue_id: int
    count: int


@dataclass(frozen=True, slots=True)
class ConsumerLag:
    broker_name: str
    addr: str  # the master asked
    queues: tuple[QueueLag, ...]
    unread: tuple[UnreadQueue, ...] = ()

    @property
    def unread_per_topic(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for q in self.unread:
            out[q.topic] = out.get(q.topic, 0) + q.count
        return out

    @property
    def per_group(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for q in self.queues:
            out[q.group] = out.get(q.group, 0) + q.lag
        return out

    @property
    def total(self) -> int:
        return sum(q.lag for q in self.queues)


def consumer_lag(
    broker_name: str,
    addr: str,
    offsets: Mapping[tuple[str, str], Mapping[int, int]],
    max_offsets: Mapping[tuple[str, int], int],
    unread: tuple[UnreadQueue, ...] = (),
) -> ConsumerLag:
    """Lag per queue from the offset table ({(topic, group): {queue: offset}}) and each queue's max offset.

    A queue missing from `max_offsets` (its topic was deleted) counts as empty.
    """
    queues = [
        QueueLag(topic, group, queue_id, max_offsets.get((topic, queue_id), 0), offset)
        for (topic, group), table in sorted(offsets.items())
        for queue_id, offset in sorted(table.items())
    ]
    return ConsumerLag(broker_name, addr, tuple(queues), unread)


def unread_queues(
    ranges: Mapping[tuple[str, int], tuple[int, int]],
    offsets: Mapping[tuple[str, str], Mapping[int, int]],
    delay_offsets: Mapping[int, int],
) -> tuple[UnreadQueue, ...]:
    """The queues of `ranges` ({(topic, queue): (min offset, max offset)}) holding messages nobody reads.

    A queue on which some consumer group committed an offset is that group's lag, not counted here. A
    SCHEDULE_TOPIC_XXXX queue counts what lies past its delay level's offset (level = queue id + 1).
    """
    read = {(topic, queue_id) for (topic, _group), table in offsets.items() for queue_id in table}
    found = []
    for (topic, queue_id), (low, high) in sorted(ranges.items()):
        if topic == SCHEDULE_TOPIC:
            start = max(low, delay_offsets.get(queue_id + 1, low))
        elif (topic, queue_id) in read:
            continue
        else:
            start = low
        if high > start:
            found.append(UnreadQueue(topic, queue_id, high - start))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class SlaveLag:
    broker_id: int
    addr: str
    max_offset: int | None  # None: the slave did not answer
    lag_bytes: int | None
    diverged: str | None = None  # why the slave stopped replicating, when its data and its master's diverged
    # whether the master serves this slave's host a replication connection now (None: the master did not say).
    # A slave still attached to a master that is gone, its session not timed out yet, is not.
    attached: bool | None = None


@dataclass(frozen=True, slots=True)
class ReplicationLag:
    """How far each slave's CommitLog is behind its master's, in bytes."""

    broker_name: str
    master_addr: str
    master_max_offset: int
    slaves: tuple[SlaveLag, ...]

    @property
    def max_lag_bytes(self) -> int | None:
        """The worst slave's lag; None when there is no slave or one did not answer (unknown is not zero)."""
        lags = [s.lag_bytes for s in self.slaves]
        if not lags or any(lag is None for lag in lags):
            return None
        return max(lag for lag in lags if lag is not None)
