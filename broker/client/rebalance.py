"""Rebalance decisions for consumers: which queues this client owns and where each one starts.

The group membership of the push and lite pull consumers (membership.py) calls `assign()` every
rebalanceInterval (20 s) and when a broker sends NOTIFY_CONSUMER_IDS_CHANGED, then `diff()` against
what the consumer runs, and for each new queue `start_offset()` (QUERY_CONSUMER_OFFSET result ->
consumeFromWhere). The decisions are pure
functions (`assign`, `diff`, `start_action`); `start_offset` does the I/O they ask for.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Iterable, Sequence

from broker.client.allocate import AllocateStrategy, allocate_averagely
from broker.client.instance import ClientInstance
from broker.client.message import ConsumeFromWhere, MessageModel, MessageQueue
from broker.client.offset_store import OffsetStore, ReadOffsetType

__all__ = ["RETRY_PREFIX", "StartAction", "assign", "diff", "retry_topic", "start_action", "start_offset"]

log = logging.getLogger(__name__)

RETRY_PREFIX = "%RETRY%"


def retry_topic(group: str) -> str:
    return f"{RETRY_PREFIX}{group}"


def assign(
    model: MessageModel,
    client_id: str,
    mqs: Sequence[MessageQueue],
    cids: Sequence[str],
    strategy: AllocateStrategy = allocate_averagely,
) -> set[MessageQueue]:
    """Broadcasting owns every queue; clustering takes its share of the sorted queues and ids."""
    if model is MessageModel.BROADCASTING:
        return set(mqs)
    if not cids:
        return set()
    return set(strategy(client_id, sorted(mqs), sorted(set(cids))))


def diff(current: Iterable[MessageQueue], wanted: set[MessageQueue]) -> tuple[set[MessageQueue], set[MessageQueue]]:
    """(queues to drop, queues to start)."""
    have = set(current)
    return have - wanted, wanted - have


class StartAction(enum.Enum):
    STORED = "use the committed offset"
    ZERO = "start at 0"
    MAX = "start at the max offset"
    TIMESTAMP = "search by timestamp"


def start_action(stored: int, where: ConsumeFromWhere, is_retry_topic: bool) -> StartAction:
    """Where a queue starts, given the committed offset (-1 when the broker has none)."""
    if stored >= 0:
        return StartAction.STORED
    if is_retry_topic:
        # Retry topics hold only messages for this group: consume them all (Java does the same
        # for LAST; for TIMESTAMP it takes the max, which would skip pending retries).
        return StartAction.ZERO
    if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
        return StartAction.ZERO
    if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
        return StartAction.TIMESTAMP
    return StartAction.MAX


async def start_offset(
    instance: ClientInstance,
    store: OffsetStore,
    mq: MessageQueue,
    where: ConsumeFromWhere,
    timestamp_ms: int | None,
) -> int:
    """The first offset to pull for a newly assigned queue."""
    stored = await store.read(mq, ReadOffsetType.READ_FROM_STORE)
    action = start_action(stored, where, mq.topic.startswith(RETRY_PREFIX))
    if action is StartAction.STORED:
        return stored
    if action is StartAction.ZERO:
        return 0
    addr = await instance.find_reader(mq.broker_name, mq.topic)
    if action is StartAction.MAX:
        return await instance.api.get_max_offset(addr, mq)
    ts = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000) - 30 * 60 * 1000
    return await instance.api.search_offset(addr, mq, ts)
