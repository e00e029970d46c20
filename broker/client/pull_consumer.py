"""The asyncio pull-style consumer (like Java's DefaultLitePullConsumer): the application polls.

Applications either `assign(queues)` (manual, no group coordination) or `subscribe(topic, expr)`
(queues shared with the group by rebalance), then `await start()`, loop on `await poll(timeout)`
and `await commit()` (or leave `auto_commit` on: consumed offsets are committed every 5 s and at
shutdown). `seek()`, `seek_to_begin()`, `seek_to_end()` move a queue. Background QueuePuller tasks
long-poll each queue into a buffer so a poll rarely waits for the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from broker.client.allocate import AllocateStrategy, allocate_averagely
from broker.client.config import ClientConfig, ConsumerConfig, client_config_with
from broker.client.consumer_stats import ConsumerStats
from broker.client.errors import IllegalStateError
from broker.client.instance import ClientInstance
from broker.client.message import MessageExt, MessageModel, MessageQueue
from broker.client.offset_store import LocalFileOffsetStore, OffsetStore, ReadOffsetType, RemoteBrokerOffsetStore
from broker.client.puller import PullSettings, QueuePuller
from broker.client.rebalance import assign, diff, start_offset
from broker.client.route import TopicRouteData, subscribe_queues
from broker.client.running_info import (
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    RunningInfo,
    consumer_properties,
    process_queue_info,
    topic_offsets,
)
from broker.client.subscription import MessageSelector, SubscriptionData, parse_subscription

__all__ = ["PullConsumer"]

log = logging.getLogger(__name__)

FLOW_CONTROL_DELAY = 0.05


@dataclass(slots=True)
class _Slot:
    mq: MessageQueue
    puller: QueuePuller
    task: asyncio.Task[None] | None = None
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
        self.client_config = cc = client_config_with(client_config, namesrv_addr)
        self.auto_commit = auto_commit
        self.allocate = allocate
        self.instance = ClientInstance(
            cc,
            topics=self._topics,
            heartbeat=self._heartbeat_data,
            on_notify=self._notified,
            on_route_change=self._route_changed,
            on_reset_offset=self._reset_offsets,
            running_info=self.running_info,
            consumer_status=self.consumer_status,
        )
        self.stats = ConsumerStats()
        self._start_timestamp = 0  # epoch ms of start(), reported as PROP_CONSUMER_START_TIMESTAMP
        self._subs: dict[str, SubscriptionData] = {}
        self._assigned: set[MessageQueue] | None = None
        self._slots: dict[MessageQueue, _Slot] = {}
        self._buffer: asyncio.Queue[tuple[MessageQueue, int, list[MessageExt]]] | None = None
        self._settings = PullSettings(
            group=group,
            batch_size=self.config.pull_batch_size,
            suspend=self.config.broker_suspend_max_time,
            timeout=self.config.consumer_timeout_when_suspend,
            interval=self.config.pull_interval,
            post_subscription=True,  # assigned queues have no heartbeat subscription to fall back on
        )
        self.offset_store: OffsetStore | None = None
        self._loops: list[asyncio.Task[None]] = []
        self._rebalance_wanted: asyncio.Event | None = None
        self._started = False

    @property
    def group(self) -> str:
        return self.config.group

    # ------------------------------------------------------------------ configuration

    def subscribe(
        self, topic: str, expression: str | MessageSelector | None = "*", *, expression_type: str = "TAG"
    ) -> None:
        if self._assigned is not None:
            raise IllegalStateError("subscribe() and assign() cannot be mixed")
        self._subs[topic] = parse_subscription(topic, expression, expression_type)
        if self._rebalance_wanted is not None:
            self._rebalance_wanted.set()

    def assign(self, queues: Iterable[MessageQueue], expression: str | None = "*") -> None:
        """Consume exactly these queues (no rebalance). Callable again to change the set."""
        if self._subs and self._assigned is None:
            raise IllegalStateError("subscribe() and assign() cannot be mixed")
        self._assigned = set(queues)
        for mq in self._assigned:
            self._subs.setdefault(mq.topic, parse_subscription(mq.topic, expression))
        if self._rebalance_wanted is not None:
            self._rebalance_wanted.set()

    def assignment(self) -> set[MessageQueue]:
        return set(self._slots)

    def _topics(self) -> list[str]:
        return list(self._subs)

    def _heartbeat_data(self) -> tuple[list[str], list[dict[str, Any]]]:
        if self._assigned is not None:
            return [], []  # manual assignment: the group is not coordinated through the broker
        data = {
            "consumeFromWhere": self.config.consume_from_where.name,
            "consumeType": "CONSUME_ACTIVELY",
            "groupName": self.group,
            "messageModel": self.config.message_model.name,
            "subscriptionDataSet": [s.to_json() for s in self._subs.values()],
            "unitMode": False,
        }
        return [], [data]

    def running_info(self, group: str) -> RunningInfo | None:
        """ConsumerRunningInfo's parts as DefaultLitePullConsumerImpl reports them: settings, subscriptions and
        each assigned queue's committed position and buffered message count (no consume statistics: the
        application consumes, not this client)."""
        if group != self.group or not self._started or self.offset_store is None:
            return None
        props = consumer_properties(self.config, self.client_config)
        props[PROP_CONSUME_TYPE] = "CONSUME_ACTIVELY"
        props[PROP_CONSUMER_START_TIMESTAMP] = str(self._start_timestamp)
        table = self.offset_store.table
        return RunningInfo(
            props,
            [s.to_json() for s in self._subs.values()],
            {mq: process_queue_info(None, table.get(mq, -1), slot.cached) for mq, slot in self._slots.items()},
            {topic: self.stats.status(topic) for topic in self._subs},
        )

    def consumer_status(self, topic: str, group: str) -> dict[MessageQueue, int] | None:
        """The offsets this consumer holds for `topic`'s queues."""
        if group != self.group or self.offset_store is None:
            return None
        return topic_offsets(self.offset_store.table, self._subs, group, topic)

    def _notified(self, group: str) -> None:
        if group == self.group and self._rebalance_wanted is not None:
            self._rebalance_wanted.set()

    async def _route_changed(self, topic: str, route: TopicRouteData) -> None:
        # A subscribed topic created after start is consumed from the route poll that sees it: heartbeat
        # its brokers first (they may not know this consumer yet, and the consumer list decides the queues
        # it gets), then rebalance, rather than wait for the next heartbeat and periodic rebalance.
        if topic in self._subs and self._assigned is None and self._rebalance_wanted is not None:
            await self.instance.send_heartbeat()
            self._rebalance_wanted.set()

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> PullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def start(self) -> None:
        if self._started:
            return
        if not self._subs:
            raise IllegalStateError("call subscribe() or assign() before start()")
        self._buffer = asyncio.Queue()
        self._rebalance_wanted = asyncio.Event()
        self._start_timestamp = int(time.time() * 1000)
        if self.config.message_model is MessageModel.CLUSTERING:
            self.offset_store = RemoteBrokerOffsetStore(self._fetch_offset, self._commit_offset)
        else:
            self.offset_store = LocalFileOffsetStore(self.config.offset_store_dir, self.instance.client_id, self.group)
        await self.offset_store.load()
        await self.instance.start()
        for topic in self._subs:
            await self.instance.update_route(topic)
        await self.instance.check_client_config(self.group, self._subs.values())
        self._started = True
        await self.instance.send_heartbeat()
        await self.rebalance()
        self._loops = [asyncio.create_task(self._rebalance_loop())]
        if self.auto_commit:
            self._loops.append(asyncio.create_task(self._commit_loop()))

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        for task in self._loops:
            task.cancel()
        await _quietly(self._loops)
        for slot in list(self._slots.values()):
            await self._stop_slot(slot)
        if self.auto_commit:
            await self.commit()
        if self._assigned is None:
            await self.instance.unregister(consumer_group=self.group)
        await self.instance.close()

    close = shutdown

    # ------------------------------------------------------------------ offsets

    async def _fetch_offset(self, mq: MessageQueue) -> int:
        addr = await self.instance.find_reader(mq.broker_name, mq.topic)
        return await self.instance.api.query_consumer_offset(addr, self.group, mq)

    async def _commit_offset(self, mq: MessageQueue, offset: int) -> None:
        addr = await self.instance.find_master(mq.broker_name, mq.topic)
        # Synchronous here: commit() promises the broker has the offset when it returns.
        await self.instance.api.update_consumer_offset(addr, self.group, mq, offset)

    async def commit(self) -> None:
        """Commit the offsets of everything poll() has returned so far."""
        assert self.offset_store is not None
        await self.offset_store.persist_all(list(self._slots))

    async def committed(self, mq: MessageQueue) -> int:
        """The group's committed offset on the broker (or file), -1 if none."""
        assert self.offset_store is not None
        stored = await self.offset_store._read_stored(mq)
        return stored

    async def _commit_loop(self) -> None:
        while True:
            await asyncio.sleep(self.client_config.persist_consumer_offset_interval)
            try:
                await self.commit()
            except Exception as exc:
                log.warning("%s: auto-commit failed: %s", self.group, exc)

    # ------------------------------------------------------------------ assignment

    async def _rebalance_loop(self) -> None:
        assert self._rebalance_wanted is not None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rebalance_wanted.wait(), self.config.rebalance_interval)
            self._rebalance_wanted.clear()
            try:
                await self.rebalance()
            except Exception as exc:
                log.warning("%s: rebalance failed: %s", self.group, exc)

    async def rebalance(self) -> None:
        if self._assigned is not None:
            wanted = set(self._assigned)
        else:
            wanted = set()
            for topic in list(self._subs):
                route = await self.instance.get_route(topic)
                if route is None:
                    continue
                mqs = subscribe_queues(topic, route)
                cids = [self.instance.client_id]
                if self.config.message_model is MessageModel.CLUSTERING:
                    try:
                        addr = await self.instance.any_broker_of(topic)
                        cids = await self.instance.api.get_consumer_list(addr, self.group)
                    except Exception as exc:
                        log.info("%s: consumer list for %s unavailable: %s", self.group, topic, exc)
                        wanted |= {mq for mq in self._slots if mq.topic == topic}
                        continue
                wanted |= assign(self.config.message_model, self.instance.client_id, mqs, cids, self.allocate)
        drop, add = diff(self._slots, wanted)
        assert self.offset_store is not None
        for mq in drop:
            slot = self._slots[mq]
            await self._stop_slot(slot)
            await self.offset_store.persist(mq)
            self.offset_store.remove(mq)
        for mq in sorted(add):
            try:
                offset = await start_offset(
                    self.instance, self.offset_store, mq, self.config.consume_from_where, self.config.consume_timestamp
                )
            except Exception as exc:
                log.warning("%s: cannot compute the start offset of %s: %s", self.group, mq, exc)
                continue
            self._start_slot(mq, offset)

    def _start_slot(self, mq: MessageQueue, offset: int, generation: int = 0) -> None:
        assert self.offset_store is not None
        self.offset_store.update(mq, offset)
        slot = _Slot(mq, None, generation=generation)  # type: ignore[arg-type]
        slot.puller = QueuePuller(
            self.instance,
            self._settings,
            mq,
            offset,
            lambda: self._subs.get(mq.topic),
            lambda msgs: self._deliver(slot, msgs),
            ready=lambda: self._ready(slot),
            on_pull=lambda rt, found: self.stats.pulled(mq.topic, rt, found),
        )
        self._slots[mq] = slot
        slot.task = asyncio.create_task(slot.puller.run(), name=f"lite-pull-{mq}")

    async def _stop_slot(self, slot: _Slot) -> None:
        slot.puller.stop()
        if slot.task is not None:
            slot.task.cancel()
            await _quietly([slot.task])
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

    async def _reset_offsets(self, topic: str, group: str, table: dict[MessageQueue, int]) -> None:
        """A broker moved our offsets (mqadmin resetOffsetByTime): seek the queues we own there."""
        if group != self.group or not self._started:
            return
        for mq, offset in sorted(table.items()):
            if mq in self._slots:
                await self.seek(mq, offset)
                log.info("%s: %s reset to offset %d", self.group, mq, offset)

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


async def _quietly(tasks: list[asyncio.Task[Any]]) -> None:
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
