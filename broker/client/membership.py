"""A consumer's membership in its group (Java's RebalanceImpl with the client-side parts around it).

PushConsumer and PullConsumer each own one `GroupMembership` and hand it three callbacks: which queues
they run, how to start one and how to drop one. The membership owns what the two have in common: the
ClientInstance and the heartbeat's consumerData, the subscriptions, the offset store (the broker's for
clustering, a local file for broadcasting), the rebalance loop (every rebalanceInterval and on
NOTIFY_CONSUMER_IDS_CHANGED or a new route) with the queue decisions of rebalance.py, the periodic offset
persist, the answers to GET_CONSUMER_RUNNING_INFO / GET_CONSUMER_STATUS_FROM_CLIENT, and joining and
leaving the group (`open()`, `join()`, `stop()`, `leave()`). What a queue does once started, pulling
into a ProcessQueue for a listener or into a buffer for poll(), stays with the consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping

from broker.client.allocate import AllocateStrategy
from broker.client.api import ConsumerData
from broker.client.config import ClientConfig, ConsumerConfig
from broker.client.consumer_rt_tps import ConsumerStats
from broker.client.consumer_running_info import (
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    ProcessQueueInfo,
    RunningInfo,
    consumer_properties,
    topic_offsets,
)
from broker.client.instance import ClientInstance
from broker.client.message import MessageQueue
from broker.client.offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore
from broker.client.rebalance import assign, diff, retry_topic, start_offset
from broker.client.route import TopicRouteData, subscribe_queues
from broker.client.subscription import MessageSelector, SubscriptionData, parse_subscription
from broker.transport.loop import cancel_and_wait

__all__ = ["CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "GroupMembership"]

log = logging.getLogger(__name__)

# The heartbeat's consumeType: a push consumer is fed, a pull consumer's application asks.
CONSUME_PASSIVELY = "CONSUME_PASSIVELY"
CONSUME_ACTIVELY = "CONSUME_ACTIVELY"

# (queue, new offset): the consumer moves a queue it runs (RESET_CONSUMER_CLIENT_OFFSET).
Repositioner = Callable[[MessageQueue, int], Awaitable[None]]
# committed offsets -> ProcessQueueInfo of each queue the consumer runs (running_info.process_queue_info).
QueueInfos = Callable[[Mapping[MessageQueue, int]], dict[MessageQueue, ProcessQueueInfo]]


class GroupMembership:
    def __init__(
        self,
        config: ConsumerConfig,
        client_config: ClientConfig,
        allocate: AllocateStrategy,
        *,
        consume_type: str,
        owned: Callable[[], Iterable[MessageQueue]],
        start_queue: Callable[[MessageQueue], Awaitable[None]],
        drop_queue: Callable[[MessageQueue], Awaitable[None]],
        reposition: Repositioner,
        queue_infos: QueueInfos,
        properties: Callable[[], Mapping[str, str]] = dict,
        sync_commit: bool = False,
    ) -> None:
        """`owned()` lists the queues the consumer runs; `start_queue(mq)` starts one (it asks
        `start_offset(mq)` where); `drop_queue(mq)` stops one (it calls `release(mq)` once nothing of it runs).
        `queue_infos(committed offsets)` and `properties()` are the consumer's parts of its running info.
        `sync_commit` waits for the broker's answer to each offset commit (the pull consumer's commit()
        promises it); otherwise commits are one-way, as Java's persist timer sends them."""
        self.config = config
        self.client_config = client_config
        self.allocate = allocate
        self.consume_type = consume_type
        self.sync_commit = sync_commit
        self._owned = owned
        self._start_queue = start_queue
        self._drop_queue = drop_queue
        self._reposition = reposition
        self._queue_infos = queue_infos
        self._properties = properties
        self.stats = ConsumerStats()
        self.subs: dict[str, SubscriptionData] = {}
        #: Manually assigned queues (PullConsumer.assign): no rebalance, no heartbeat, no consumer list.
        self.assigned: set[MessageQueue] | None = None
        self.offset_store: OffsetStore | None = None
        self.started = False
        self.start_timestamp = 0  # epoch ms of join(), reported as PROP_CONSUMER_START_TIMESTAMP
        self.instance = ClientInstance(
            client_config,
            topics=lambda: list(self.subs),
            heartbeat=self.heartbeat_data,
            on_notify=self._notified,
            on_route_change=self._route_changed,
            on_reset_offset=self._reset_offsets,
            running_info=self.running_info,
            consumer_status=self.consumer_status,
        )
        self._wanted: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._loops: list[asyncio.Task[None]] = []

    @property
    def group(self) -> str:
        return self.config.group

    # ------------------------------------------------------------------ subscriptions

    def subscribe(self, topic: str, expression: str | MessageSelector | None, expression_type: str = "TAG") -> None:
        self.subs[topic] = parse_subscription(topic, expression, expression_type)
        self.request_rebalance()

    def unsubscribe(self, topic: str) -> None:
        self.subs.pop(topic, None)
        self.request_rebalance()

    def request_rebalance(self) -> None:
        """Rebalance soon (no-op before join())."""
        if self.started and self._wanted is not None:
            self._wanted.set()

    # ------------------------------------------------------------------ lifecycle

    async def open(self, *, subscribe_retry: bool = False) -> None:
        """Create and load the offset store and start the instance; `subscribe_retry` adds the group's
        %RETRY% topic (a clustering push consumer consumes what it sent back)."""
        self._wanted = asyncio.Event()
        self._lock = asyncio.Lock()
        if self.config.clustering:
            if subscribe_retry:
                self.subs.setdefault(retry_topic(self.group), parse_subscription(retry_topic(self.group), "*"))
            self.offset_store = RemoteBrokerOffsetStore(self._fetch_offset, self.commit_offset)
        else:
            self.offset_store = LocalFileOffsetStore(self.config.offset_store_dir, self.instance.client_id, self.group)
        await self.offset_store.load()
        await self.instance.start()

    async def join(self, *, persist_offsets: bool = True, warn_missing_route: bool = True) -> None:
        """Look up routes (`warn_missing_route`: log the topics that have none yet), check SQL92 subscriptions
        with the brokers, heartbeat, take the first queues, then keep rebalancing (and, with `persist_offsets`,
        commit every persistConsumerOffsetInterval)."""
        self.start_timestamp = int(time.time() * 1000)
        for topic in list(self.subs):
            route = await self.instance.update_route(topic)
            if route is None and warn_missing_route and topic != retry_topic(self.group):
                # (a group's retry topic is made by the broker at the first message sent back: normal)
                log.warning(
                    "%s: topic %s has no route yet; consuming starts when it has one (looked up every %.0f s)",
                    self.group,
                    topic,
                    self.client_config.poll_missing_route_interval,
                )
        await self.instance.check_client_config(self.group, self.subs.values())
        self.started = True
        await self.instance.send_heartbeat()
        await self.rebalance()
        self._loops = [asyncio.create_task(self._rebalance_loop(), name=f"rebalance-{self.group}")]
        if persist_offsets:
            self._loops.append(asyncio.create_task(self._persist_loop(), name=f"persist-{self.group}"))

    async def stop(self) -> None:
        """Stop rebalancing and the persist timer (the consumer then stops its queues and persists)."""
        self.started = False
        await cancel_and_wait(*self._loops)
        self._loops = []

    async def leave(self) -> None:
        """Unregister from the brokers (a group member) and close the instance."""
        if self.assigned is None:
            await self.instance.unregister(consumer_group=self.group)
        await self.instance.close()

    # ------------------------------------------------------------------ offsets

    async def _fetch_offset(self, mq: MessageQueue) -> int:
        addr = await self.instance.find_reader(mq.broker_name, mq.topic)
        return await self.instance.api.query_consumer_offset(addr, self.group, mq)

    async def commit_offset(self, mq: MessageQueue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET to the queue's master (one-way unless `sync_commit`)."""
        addr = await self.instance.find_master(mq.broker_name, mq.topic)
        if self.sync_commit:
            await self.instance.api.update_consumer_offset(addr, self.group, mq, offset)
        else:
            await self.instance.api.update_consumer_offset_oneway(addr, self.group, mq, offset)

    async def persist(self) -> None:
        """Commit the offsets of every queue the consumer runs (unchanged ones are not re-sent)."""
        assert self.offset_store is not None
        await self.offset_store.persist_all(list(self._owned()))

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.client_config.persist_consumer_offset_interval)
            try:
                await self.persist()
            except Exception as exc:  # a full disk (broadcasting) must not end the timer
                log.warning("%s: persisting offsets failed: %s", self.group, exc)

    async def start_offset(self, mq: MessageQueue) -> int | None:
        """Where a newly owned queue starts (committed offset, else consumeFromWhere), recorded in the store at
        once so the position survives a restart even before the first message; None (logged) when it
        cannot be computed now: the next rebalance tries again."""
        assert self.offset_store is not None
        self.offset_store.remove(mq)
        try:
            offset = await start_offset(
                self.instance, self.offset_store, mq, self.config.consume_from_where, self.config.consume_timestamp
            )
        except Exception as exc:
            log.warning("%s: cannot compute the start offset of %s: %s", self.group, mq, exc)
            return None
        self.offset_store.update(mq, offset)
        return offset

    async def release(self, mq: MessageQueue) -> None:
        """A queue left this consumer: commit its offset and forget it."""
        assert self.offset_store is not None
        await self.offset_store.persist(mq)
        self.offset_store.remove(mq)

    # ------------------------------------------------------------------ rebalance

    async def _rebalance_loop(self) -> None:
        assert self._wanted is not None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wanted.wait(), self.config.rebalance_interval)
            self._wanted.clear()
            try:
                await self.rebalance()
            except Exception as exc:
                log.warning("%s: rebalance failed: %s", self.group, exc)

    async def rebalance(self) -> None:
        """Recompute the owned queues of every subscribed topic, then drop and start queues to match. A topic
        whose route or consumer list is unavailable keeps the queues it has."""
        assert self._lock is not None
        async with self._lock:
            owned = set(self._owned())
            wanted = set(self.assigned) if self.assigned is not None else await self._wanted_queues(owned)
            drop, add = diff(owned, wanted)
            for mq in sorted(drop):
                await self._drop_queue(mq)
            for mq in sorted(add):
                await self._start_queue(mq)

    async def _wanted_queues(self, owned: set[MessageQueue]) -> set[MessageQueue]:
        wanted: set[MessageQueue] = set()
        for topic in list(self.subs):
            kept = {mq for mq in owned if mq.topic == topic}
            route = await self.instance.get_route(topic)
            if route is None:
                wanted |= kept
                continue
            cids = [self.instance.client_id]
            if self.config.clustering:
                try:
                    addr = await self.instance.any_broker_of(topic)
                    cids = await self.instance.api.get_consumer_list(addr, self.group)
                except Exception as exc:
                    log.info("%s: consumer list for %s unavailable: %s", self.group, topic, exc)
                    wanted |= kept
                    continue
            mqs = subscribe_queues(topic, route)
            wanted |= assign(self.config.message_model, self.instance.client_id, mqs, cids, self.allocate)
        return wanted

    async def _reset_offsets(self, topic: str, group: str, table: dict[MessageQueue, int]) -> None:
        """A broker moved our offsets (mqadmin resetOffsetByTime): the consumer repositions the queues it runs."""
        if group != self.group or not self.started or self._lock is None:
            return
        async with self._lock:
            owned = set(self._owned())
            for mq, offset in sorted(table.items()):
                if mq in owned:
                    await self._reposition(mq, offset)
                    log.info("%s: %s reset to offset %d", self.group, mq, offset)

    # ------------------------------------------------------------------ heartbeat / notify / admin questions

    def heartbeat_data(self) -> tuple[list[str], list[ConsumerData]]:
        if self.assigned is not None:
            return [], []  # manual assignment: the group is not coordinated through the broker
        data: ConsumerData = {
            "consumeFromWhere": self.config.consume_from_where.name,
            "consumeType": self.consume_type,
            "groupName": self.group,
            "messageModel": self.config.message_model.name,
            "subscriptionDataSet": [s.to_json() for s in self.subs.values()],
            "unitMode": False,
        }
        return [], [data]

    def _notified(self, group: str) -> None:
        if group == self.group:
            self.request_rebalance()

    async def _route_changed(self, topic: str, route: TopicRouteData) -> None:
        # A subscribed topic created after start is consumed from the route poll that sees it: heartbeat
        # its brokers first (they may not know this consumer yet, and the consumer list decides the queues
        # it gets), then rebalance, rather than wait for the next heartbeat and periodic rebalance.
        if topic in self.subs and self.assigned is None and self.started:
            await self.instance.send_heartbeat()
            self.request_rebalance()

    def running_info(self, group: str) -> RunningInfo | None:
        """ConsumerRunningInfo (307): settings, consume type, start time and the consumer's own properties,
        subscriptions, the consumer's mqTable for the committed offsets, and consume statistics by topic."""
        if group != self.group or not self.started or self.offset_store is None:
            return None
        props = consumer_properties(self.config, self.client_config)
        props[PROP_CONSUME_TYPE] = self.consume_type
        props[PROP_CONSUMER_START_TIMESTAMP] = str(self.start_timestamp)
        props.update(self._properties())
        return RunningInfo(
            props,
            [s.to_json() for s in self.subs.values()],
            self._queue_infos(self.offset_store.table),
            {topic: self.stats.status(topic) for topic in self.subs},
        )

    def consumer_status(self, topic: str, group: str) -> dict[MessageQueue, int] | None:
        """The offsets this consumer holds for `topic`'s queues (Java's cloneOffsetTable(topic))."""
        if group != self.group or self.offset_store is None:
            return None
        return topic_offsets(self.offset_store.table, self.subs, group, topic)
