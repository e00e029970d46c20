"""The asyncio pull-style consumer (like Java's DefaultLitePullConsumer): the application polls.

Applications either `assign(queues)` (manual, no group coordination) or `subscribe(topic, expr)`
(queues shared with the group by rebalance), then `await start()`, loop on `await poll(timeout)`
and `await commit()` (or leave `auto_commit` on: consumed offsets are committed every 5 s and at
shutdown). `seek()`, `seek_to_begin()`, `seek_to_end()` move a queue. Background QueuePuller tasks
long-poll each queue into a buffer so a poll rarely waits for the network. The group membership
(membership.py, shared with the push consumer) rebalances subscribed queues and keeps the offsets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from broker.client.allocate import AllocateStrategy, allocate_averagely
from broker.client.config import ClientConfig, ConsumerConfig, client_config_with
from broker.client.consumer_rt_tps import ConsumerStats
from broker.client.consumer_running_info import ProcessQueueInfo, RunningInfo, process_queue_info
from broker.client.errors import IllegalStateError
from broker.client.instance import ClientInstance
from broker.client.membership import CONSUME_ACTIVELY, GroupMembership
from broker.client.message import MessageExt, MessageQueue
from broker.client.offset_store import OffsetStore, ReadOffsetType
from broker.client.puller import PullSettings, QueuePuller
from broker.client.route import subscribe_queues
from broker.client.subscription import MessageSelector, parse_subscription

__all__ = ["PullConsumer"]

log = logging.getLogger(__name__)

FLOW_CONTROL_DELAY = 0.05


@dataclass(slots=True)
class _Slot:
    mq: MessageQueue
    puller: QueuePuller
    generation: int = 0
    cached: int = 0


class PullConsumer:
    def __init__(
        self,
        group: str = "DEFAULT_CONSUMER",
        namesrv_addr: str | None = None,
        *,
        config: ConsumerConfig | None = None,
        client_config: ClientConfig | None = None,
        auto_commit: bool = True,
        allocate: AllocateStrategy = allocate_averagely,
        **options: Any,
    ) -> None:
        self.config = replace(config or ConsumerConfig(), group=group, **options)
        self.client_config = client_config_with(client_config, namesrv_addr)
        self.auto_commit = auto_commit
        self.allocate = allocate
        self.membership = GroupMembership(
            self.config,
            self.client_config,
            allocate,
            consume_type=CONSUME_ACTIVELY,
            owned=lambda: self._slots,
            start_queue=self._start_queue,
            drop_queue=self._drop_queue,
            reposition=self.seek,
            queue_infos=self._queue_infos,
            sync_commit=True,  # commit() promises the broker has the offset when it returns
        )
        self.instance: ClientInstance = self.membership.instance
        self.stats: ConsumerStats = self.membership.stats
        self._slots: dict[MessageQueue, _Slot] = {}
        self._buffer: asyncio.Queue[tuple[MessageQueue, int, list[MessageExt]]] | None = None
        # assigned queues have no heartbeat subscription to fall back on: always post it
        self._settings = PullSettings.of(self.config, post_subscription=True)
        self._started = False

    @property
    def group(self) -> str:
        return self.config.group

    @property
    def offset_store(self) -> OffsetStore | None:
        return self.membership.offset_store

    # ------------------------------------------------------------------ configuration

    def subscribe(
        self, topic: str, expression: str | MessageSelector | None = "*", *, expression_type: str = "TAG"
    ) -> None:
        if self.membership.assigned is not None:
            raise IllegalStateError("subscribe() and assign() cannot be mixed")
        self.membership.subscribe(topic, expression, expression_type)

    def assign(self, queues: Iterable[MessageQueue], expression: str | None = "*") -> None:
        """Consume exactly these queues (no rebalance). Callable again to change the set."""
        m = self.membership
        if m.subs and m.assigned is None:
            raise IllegalStateError("subscribe() and assign() cannot be mixed")
        m.assigned = set(queues)
        for mq in m.assigned:
            m.subs.setdefault(mq.topic, parse_subscription(mq.topic, expression))
        m.request_rebalance()

    def assignment(self) -> set[MessageQueue]:
        return set(self._slots)

    def running_info(self, group: str) -> RunningInfo | None:
        """ConsumerRunningInfo's parts as DefaultLitePullConsumerImpl reports them: settings, subscriptions and
        each assigned queue's committed position and buffered message count (no consume statistics: the
        application consumes, not this client)."""
        return self.membership.running_info(group)

    def _queue_infos(self, committed: Mapping[MessageQueue, int]) -> dict[MessageQueue, ProcessQueueInfo]:
        return {mq: process_queue_info(None, committed.get(mq, -1), slot.cached) for mq, slot in self._slots.items()}

    def consumer_status(self, topic: str, group: str) -> dict[MessageQueue, int] | None:
        """The offsets this consumer holds for `topic`'s queues."""
        return self.membership.consumer_status(topic, group)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> PullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def start(self) -> None:
        if self._started:
            return
        if not self.membership.subs:
            raise IllegalStateError("call subscribe() or assign() before start()")
        self._buffer = asyncio.Queue()
        await self.membership.open()
        await self.membership.join(persist_offsets=self.auto_commit, warn_missing_route=False)
        self._started = True

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        await self.membership.stop()
        for slot in list(self._slots.values()):
            await self._stop_slot(slot)
        if self.auto_commit:
            await self.commit()
        await self.membership.leave()

    close = shutdown

    async def rebalance(self) -> None:
        await self.membership.rebalance()

    # ------------------------------------------------------------------ offsets

    async def commit(self) -> None:
        """Commit the offsets of everything poll() has returned so far."""
        await self.membership.persist()

    async def committed(self, mq: MessageQueue) -> int:
        """The group's committed offset on the broker (or file), -1 if none."""
        assert self.offset_store is not None
        stored = await self.offset_store._read_stored(mq)
        return stored

    # ------------------------------------------------------------------ assignment (called by the membership)

    async def _start_queue(self, mq: MessageQueue) -> None:
        offset = await self.membership.start_offset(mq)
        if offset is not None:
            self._start_slot(mq, offset)

    async def _drop_queue(self, mq: MessageQueue) -> None:
        await self._stop_slot(self._slots[mq])
        await self.membership.release(mq)

    def _start_slot(self, mq: MessageQueue, offset: int, generation: int = 0) -> None:
        assert self.offset_store is not None
        self.offset_store.update(mq, offset)
        slot = _Slot(mq, None, generation=generation)  # type: ignore[arg-type]
        slot.puller = QueuePuller(
            self.instance,
            self._settings,
            mq,
            offset,
            lambda: self.membership.subs.get(mq.topic),
            lambda msgs: self._deliver(slot, msgs),
            ready=lambda: self._ready(slot),
            on_pull=lambda rt, found: self.stats.pulled(mq.topic, rt, found),
        )
        self._slots[mq] = slot
        slot.puller.start(f"lite-pull-{mq}")

    async def _stop_slot(self, slot: _Slot) -> None:
        await slot.puller.close()
        self._slots.pop(slot.mq, None)

    async def _ready(self, slot: _Slot) -> bool:
        if slot.cached > self.config.pull_threshold_for_queue:
            await asyncio.sleep(FLOW_CONTROL_DELAY)
            return False
        return True

    async def _deliver(self, slot: _Slot, msgs: list[MessageExt]) -> None:
        assert self._buffer is not None
        if self._slots.get(slot.mq) is not slot:
            return
        slot.cached += len(msgs)
        self._buffer.put_nowait((slot.mq, slot.generation, msgs))

    # ------------------------------------------------------------------ polling and seeking

    async def poll(self, timeout: float = 5.0) -> list[MessageExt]:
        """The next batch of messages (one queue, in order), or [] after `timeout` seconds."""
        if not self._started or self._buffer is None or self.offset_store is None:
            raise IllegalStateError("the consumer is not started")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            try:
                if remaining <= 0:
                    mq, generation, msgs = self._buffer.get_nowait()
                else:
                    mq, generation, msgs = await asyncio.wait_for(self._buffer.get(), remaining)
            except (TimeoutError, asyncio.QueueEmpty):
                return []
            slot = self._slots.get(mq)
            if slot is None or slot.generation != generation:
                continue  # pulled before a seek or before the queue was reassigned
            slot.cached -= len(msgs)
            self.offset_store.update(mq, msgs[-1].queue_offset + 1)
            return msgs

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue `mq` at `offset`; buffered messages of that queue are discarded."""
        slot = self._slots.get(mq)
        if slot is None:
            raise IllegalStateError(f"{mq} is not assigned to this consumer")
        await self._stop_slot(slot)
        self._start_slot(mq, offset, slot.generation + 1)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        addr = await self.instance.find_reader(mq.broker_name, mq.topic)
        await self.seek(mq, await self.instance.api.get_min_offset(addr, mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        addr = await self.instance.find_reader(mq.broker_name, mq.topic)
        await self.seek(mq, await self.instance.api.get_max_offset(addr, mq))

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """Readable queues of a topic (to build an assign() list)."""
        route = await self.instance.update_route(topic)
        return subscribe_queues(topic, route) if route else []

    async def position(self, mq: MessageQueue) -> int:
        """The next offset poll() will return for `mq` (the consumed position)."""
        assert self.offset_store is not None
        return await self.offset_store.read(mq, ReadOffsetType.READ_FROM_MEMORY)
