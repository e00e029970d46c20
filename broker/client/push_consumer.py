"""The asyncio push consumer (DefaultMQPushConsumer): subscribe, register a listener, start.

Applications call `subscribe(topic, "tagA || tagB")`, `register_listener(fn)` (or
`register_listener(fn, orderly=True)`), `await start()` and later `await shutdown()`; the blocking
facade wraps it for threads. Inside: the group membership (membership.py) rebalances, decides the
owned queues and keeps their offsets (the broker's for clustering, a local file for broadcasting,
persisted every 5 s and at shutdown); one QueuePuller task per queue long-polls the broker, a
ProcessQueue per queue holds what was pulled but not consumed (flow control), and the consume
service chosen at start (consume_service.py: concurrent or orderly) runs the listener and handles
its result: commits, sends failed messages back, or retries an orderly batch in place.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from broker.client.allocate import AllocateStrategy, allocate_averagely
from broker.client.config import ClientConfig, ConsumerConfig, client_config_with
from broker.client.consume import Listener, ListenerRunner
from broker.client.consume_service import (
    ConcurrentConsumeService,
    ConsumeContext,
    ConsumeService,
    OrderlyConsumeService,
)
from broker.client.consumer_rt_tps import ConsumerStats
from broker.client.consumer_running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_THREADPOOL_CORE_SIZE,
    ProcessQueueInfo,
    RunningInfo,
    process_queue_info,
)
from broker.client.errors import IllegalStateError
from broker.client.instance import ClientInstance
from broker.client.membership import CONSUME_PASSIVELY, GroupMembership
from broker.client.message import MessageExt, MessageQueue
from broker.client.offset_store import OffsetStore
from broker.client.process_queue import REBALANCE_LOCK_INTERVAL, ProcessQueue
from broker.client.producer import Producer
from broker.client.puller import PullSettings, QueuePuller
from broker.client.subscription import MessageSelector

__all__ = ["PushConsumer"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Queue:
    mq: MessageQueue
    pq: ProcessQueue
    puller: QueuePuller


class PushConsumer:
    def __init__(
        self,
        group: str = "DEFAULT_CONSUMER",
        namesrv_addr: str | None = None,
        *,
        config: ConsumerConfig | None = None,
        client_config: ClientConfig | None = None,
        allocate: AllocateStrategy = allocate_averagely,
        **options: Any,
    ) -> None:
        """`options` are ConsumerConfig field names (e.g. `message_model=MessageModel.BROADCASTING`)."""
        self.config = replace(config or ConsumerConfig(), group=group, **options)
        self.client_config = client_config_with(client_config, namesrv_addr)
        self.allocate = allocate
        self.membership = GroupMembership(
            self.config,
            self.client_config,
            allocate,
            consume_type=CONSUME_PASSIVELY,
            owned=lambda: self._queues,
            start_queue=self._start_queue,
            drop_queue=self._drop_queue,
            reposition=self._reposition,
            queue_infos=self._queue_infos,
            properties=self._properties,
        )
        self.instance: ClientInstance = self.membership.instance
        self.stats: ConsumerStats = self.membership.stats
        self._queues: dict[MessageQueue, _Queue] = {}
        self._listener: Listener | None = None
        self._orderly = False
        self._runner: ListenerRunner | None = None
        self._service: ConsumeService | None = None
        self._inner_producer: Producer | None = None
        self._settings = PullSettings.of(self.config, self.config.post_subscription_when_pull)
        self._started = False

    # ------------------------------------------------------------------ public API

    @property
    def group(self) -> str:
        return self.config.group

    @property
    def clustering(self) -> bool:
        return self.config.clustering

    @property
    def offset_store(self) -> OffsetStore | None:
        return self.membership.offset_store

    def subscribe(
        self, topic: str, expression: str | MessageSelector | None = "*", *, expression_type: str = "TAG"
    ) -> None:
        """Subscribe to a topic: `"*"` for everything, `"tagA || tagB"`, or a SQL92 selector
        (`MessageSelector.by_sql("a > 5")` or `expression_type="SQL92"`). Allowed before start();
        an invalid SQL92 expression raises FilterSyntaxError here, and start() raises when a broker
        refuses it (enablePropertyFilter off)."""
        self.membership.subscribe(topic, expression, expression_type)

    def unsubscribe(self, topic: str) -> None:
        self.membership.unsubscribe(topic)

    def register_listener(self, listener: Listener, *, orderly: bool = False) -> None:
        """`listener(list[MessageExt]) -> ConsumeStatus` (plain or async). `orderly=True` consumes
        each queue one batch at a time, in order, holding the broker's queue lock (clustering)."""
        if self._started:
            raise IllegalStateError("register the listener before start()")
        self._listener = listener
        self._orderly = orderly

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer currently pulls."""
        return set(self._queues)

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def start(self) -> None:
        if self._started:
            return
        if self._listener is None:
            raise IllegalStateError("no listener registered")
        if not self.membership.subs:
            raise IllegalStateError("no subscription: call subscribe() first")
        self._runner = ListenerRunner(self._listener, self.config.consume_thread_max)
        await self.membership.open(subscribe_retry=True)
        self._inner_producer = Producer("CLIENT_INNER_PRODUCER", instance=self.instance)
        await self._inner_producer.start()
        assert self.offset_store is not None
        producer = self._inner_producer
        ctx = ConsumeContext(self.config, self.instance, self._runner, self.offset_store, self.stats, producer)
        if self._orderly:
            self._service = OrderlyConsumeService(ctx, self._process_queues, REBALANCE_LOCK_INTERVAL)
        else:
            self._service = ConcurrentConsumeService(ctx)
        await self.membership.join()
        self._started = True
        self._service.start()

    async def shutdown(self, drain_timeout: float = 10.0) -> None:
        """Stop pulling, let running listeners finish (up to `drain_timeout`), commit, unregister."""
        if not self._started:
            return
        self._started = False
        assert self._service is not None
        await self.membership.stop()
        await asyncio.gather(*(q.puller.close() for q in self._queues.values()))
        await self._service.shutdown(drain_timeout)
        await self.membership.persist()
        await self._service.release(list(self._queues))
        for q in self._queues.values():
            q.pq.dropped = True
        self._queues.clear()
        if self._inner_producer is not None:
            await self._inner_producer.shutdown()
        await self.membership.leave()
        if self._runner is not None:
            self._runner.close()

    close = shutdown

    async def rebalance(self) -> None:
        """Recompute the owned queues of every subscribed topic and start/stop pullers."""
        await self.membership.rebalance()

    # ------------------------------------------------------------------ what admins ask (307, 221)

    def running_info(self, group: str) -> RunningInfo | None:
        """ConsumerRunningInfo's parts, as DefaultMQPushConsumerImpl.consumerRunningInfo gathers them."""
        return self.membership.running_info(group)

    def _properties(self) -> dict[str, str]:
        return {
            PROP_CONSUME_ORDERLY: "true" if self._orderly else "false",
            PROP_THREADPOOL_CORE_SIZE: str(self.config.consume_thread_max),
        }

    def _queue_infos(self, committed: Mapping[MessageQueue, int]) -> dict[MessageQueue, ProcessQueueInfo]:
        return {mq: process_queue_info(q.pq, committed.get(mq, -1)) for mq, q in self._queues.items()}

    def consumer_status(self, topic: str, group: str) -> dict[MessageQueue, int] | None:
        """The offsets this consumer holds for `topic`'s queues (Java's cloneOffsetTable(topic))."""
        return self.membership.consumer_status(topic, group)

    # ------------------------------------------------------------------ queues (called by the membership)

    async def _start_queue(self, mq: MessageQueue) -> None:
        assert self._service is not None
        pq = ProcessQueue()
        if not await self._service.admit(mq, pq):
            return
        offset = await self.membership.start_offset(mq)
        if offset is None:
            return
        puller = QueuePuller(
            self.instance,
            self._settings,
            mq,
            offset,
            lambda: self.membership.subs.get(mq.topic),
            lambda msgs: self._deliver(mq, msgs),
            commit_offset=lambda: self._commit_offset_for_pull(mq),
            on_offset=lambda off: self._empty_round(mq, off),
            ready=lambda: self._ready(mq),
            on_pull=lambda rt, found: self._pulled(pq, mq.topic, rt, found),
        )
        self._queues[mq] = _Queue(mq, pq, puller)
        puller.start(f"pull-{mq}")
        log.info("%s: %s starts at offset %d", self.group, mq, offset)

    async def _stop_queue(self, mq: MessageQueue) -> bool:
        q = self._queues.pop(mq, None)
        if q is None:
            return False
        q.pq.dropped = True
        await q.puller.close()
        return True

    async def _drop_queue(self, mq: MessageQueue) -> None:
        assert self._service is not None
        if not await self._stop_queue(mq):
            return
        await self.membership.release(mq)
        await self._service.release([mq])
        log.info("%s: %s is no longer ours", self.group, mq)

    async def _reposition(self, mq: MessageQueue, offset: int) -> None:
        """A broker moved our offset (mqadmin resetOffsetByTime): restart the queue there. Cached and
        in-flight messages of the old position are dropped, not committed."""
        assert self.offset_store is not None
        if not await self._stop_queue(mq):
            return
        self.offset_store.remove(mq)
        await self.membership.commit_offset(mq, offset)
        await self._start_queue(mq)

    def _process_queues(self) -> dict[MessageQueue, ProcessQueue]:
        return {mq: q.pq for mq, q in self._queues.items()}

    def _commit_offset_for_pull(self, mq: MessageQueue) -> int:
        if not self.clustering or self.offset_store is None:
            return -1
        return self.offset_store.table.get(mq, -1)

    # ------------------------------------------------------------------ pulling

    async def _ready(self, mq: MessageQueue) -> bool:
        """Gate before each pull: the queue is still ours, and the consume service lets it pull."""
        q = self._queues.get(mq)
        if q is None or q.pq.dropped:
            if q is not None:
                q.puller.stop()
            return False
        assert self._service is not None
        return await self._service.ready(mq, q.pq)

    def _pulled(self, pq: ProcessQueue, topic: str, rt: float, found: int) -> None:
        pq.pulled()
        self.stats.pulled(topic, rt, found)

    def _empty_round(self, mq: MessageQueue, next_offset: int) -> None:
        # Nothing cached: commit past filtered-out messages so the group's lag does not stick there.
        q = self._queues.get(mq)
        if q is not None and q.pq.msg_count == 0 and self.offset_store is not None:
            self.offset_store.update(mq, next_offset, increase_only=True)

    async def _deliver(self, mq: MessageQueue, msgs: list[MessageExt]) -> None:
        q = self._queues.get(mq)
        if q is None or q.pq.dropped:
            return
        assert self._service is not None
        self._service.submit(mq, q.pq, msgs)
