"""The asyncio push consumer (DefaultMQPushConsumer): subscribe, register a listener, start.

Applications call `subscribe(topic, "tagA || tagB")`, `register_listener(fn)` (or
`register_listener(fn, orderly=True)`), `await start()` and later `await shutdown()`; the blocking
facade wraps it for threads. Inside: rebalance (rebalance.py) decides the owned queues, one
QueuePuller task per queue long-polls the broker, a ProcessQueue per queue holds what was pulled
but not consumed (flow control), the listener runs via ListenerRunner, offsets go to the broker
(clustering) or a local file (broadcasting) every 5 s and at shutdown, failed messages go back
with CONSUMER_SEND_MSG_BACK (falling back to a direct send to %RETRY%<group>).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

from broker.client.allocate import AllocateStrategy, allocate_averagely
from broker.client.config import ClientConfig, ConsumerConfig, client_config_with
from broker.client.consume import Listener, ListenerRunner, restore_retry_topic
from broker.client.consumer_stats import ConsumerStats
from broker.client.errors import IllegalStateError
from broker.client.instance import ClientInstance
from broker.client.message import ConsumeStatus, Message, MessageExt, MessageModel, MessageQueue
from broker.client.offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore
from broker.client.process_queue import (
    REBALANCE_LOCK_INTERVAL,
    FlowControlLimits,
    ProcessQueue,
    flow_control_reason,
)
from broker.client.producer import Producer
from broker.client.puller import PullSettings, QueuePuller
from broker.client.rebalance import assign, diff, retry_topic, start_offset
from broker.client.route import TopicRouteData, subscribe_queues
from broker.client.running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_THREADPOOL_CORE_SIZE,
    RunningInfo,
    consumer_properties,
    process_queue_info,
    topic_offsets,
)
from broker.client.subscription import MessageSelector, SubscriptionData, parse_subscription
from broker.protocol.properties import Prop

__all__ = ["PushConsumer"]

log = logging.getLogger(__name__)

# Java's PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL and the delay before re-consuming messages whose
# send-back failed.
FLOW_CONTROL_DELAY = 0.05
RECONSUME_LOCALLY_DELAY = 5.0
LOCK_RETRY_DELAY = 0.5


@dataclass(slots=True)
class _Queue:
    mq: MessageQueue
    pq: ProcessQueue
    puller: QueuePuller
    task: asyncio.Task[None] | None = None
    orderly_task: asyncio.Task[None] | None = None


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
        self.client_config = cc = client_config_with(client_config, namesrv_addr)
        self.allocate = allocate
        self.instance = ClientInstance(
            cc,
            topics=lambda: list(self._subs),
            heartbeat=self._heartbeat_data,
            on_notify=self._notified,
            on_route_change=self._route_changed,
            on_reset_offset=self._reset_offsets,
            running_info=self.running_info,
            consumer_status=self.consumer_status,
        )
        self._subs: dict[str, SubscriptionData] = {}
        self._queues: dict[MessageQueue, _Queue] = {}
        self.stats = ConsumerStats()
        self._start_timestamp = 0  # epoch ms of start(), reported as PROP_CONSUMER_START_TIMESTAMP
        self._listener: Listener | None = None
        self._orderly = False
        self._runner: ListenerRunner | None = None
        self.offset_store: OffsetStore | None = None
        self._inner_producer: Producer | None = None
        self._limits = FlowControlLimits(
            self.config.pull_threshold_for_queue,
            self.config.pull_threshold_size_for_queue,
            self.config.consume_concurrently_max_span,
        )
        self._settings = PullSettings(
            group=group,
            batch_size=self.config.pull_batch_size,
            suspend=self.config.broker_suspend_max_time,
            timeout=self.config.consumer_timeout_when_suspend,
            interval=self.config.pull_interval,
            post_subscription=self.config.post_subscription_when_pull,
        )
        self._rebalance_wanted = asyncio.Event() if _has_loop() else None
        self._rebalance_lock: asyncio.Lock | None = None
        self._loops: list[asyncio.Task[None]] = []
        self._consuming: set[asyncio.Task[Any]] = set()
        self._started = False

    # ------------------------------------------------------------------ public API

    @property
    def group(self) -> str:
        return self.config.group

    @property
    def clustering(self) -> bool:
        return self.config.message_model is MessageModel.CLUSTERING

    def subscribe(
        self, topic: str, expression: str | MessageSelector | None = "*", *, expression_type: str = "TAG"
    ) -> None:
        """Subscribe to a topic: `"*"` for everything, `"tagA || tagB"`, or a SQL92 selector
        (`MessageSelector.by_sql("a > 5")` or `expression_type="SQL92"`). Allowed before start();
        an invalid SQL92 expression raises FilterSyntaxError here, and start() raises when a broker
        refuses it (enablePropertyFilter off)."""
        self._subs[topic] = parse_subscription(topic, expression, expression_type)
        if self._started and self._rebalance_wanted is not None:
            self._rebalance_wanted.set()

    def unsubscribe(self, topic: str) -> None:
        self._subs.pop(topic, None)
        if self._started and self._rebalance_wanted is not None:
            self._rebalance_wanted.set()

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
        if not self._subs:
            raise IllegalStateError("no subscription: call subscribe() first")
        self._rebalance_wanted = asyncio.Event()
        self._rebalance_lock = asyncio.Lock()
        self._start_timestamp = int(time.time() * 1000)
        self._runner = ListenerRunner(self._listener, self.config.consume_thread_max)
        if self.clustering:
            self._subs.setdefault(retry_topic(self.group), parse_subscription(retry_topic(self.group), "*"))
            self.offset_store = RemoteBrokerOffsetStore(self._fetch_offset, self._commit_offset)
        else:
            self.offset_store = LocalFileOffsetStore(self.config.offset_store_dir, self.instance.client_id, self.group)
        await self.offset_store.load()
        await self.instance.start()
        self._inner_producer = Producer("CLIENT_INNER_PRODUCER", instance=self.instance)
        await self._inner_producer.start()
        for topic in list(self._subs):
            if await self.instance.update_route(topic) is None and topic != retry_topic(self.group):
                # (a group's retry topic is made by the broker at the first message sent back: normal)
                log.warning(
                    "%s: topic %s has no route yet; consuming starts when it has one (looked up every %.0f s)",
                    self.group,
                    topic,
                    self.client_config.poll_missing_route_interval,
                )
        await self.instance.check_client_config(self.group, self._subs.values())
        self._started = True
        await self.instance.send_heartbeat()
        await self.rebalance()
        self._loops = [
            asyncio.create_task(self._rebalance_loop(), name=f"rebalance-{self.group}"),
            asyncio.create_task(self._persist_loop(), name=f"persist-{self.group}"),
        ]
        if self._orderly and self.clustering:
            self._loops.append(asyncio.create_task(self._lock_loop(), name=f"lock-{self.group}"))

    async def shutdown(self, drain_timeout: float = 10.0) -> None:
        """Stop pulling, let running listeners finish (up to `drain_timeout`), commit, unregister."""
        if not self._started:
            return
        self._started = False
        for task in self._loops:
            task.cancel()
        for q in self._queues.values():
            q.puller.stop()
            if q.task is not None:
                q.task.cancel()
        await _quietly([t for t in self._loops] + [q.task for q in self._queues.values() if q.task])
        if self._consuming:
            await asyncio.wait(list(self._consuming), timeout=drain_timeout)
        for task in list(self._consuming):
            task.cancel()
        await _quietly(list(self._consuming))
        assert self.offset_store is not None
        await self.offset_store.persist_all(list(self._queues))
        if self._orderly and self.clustering:
            await self._unlock(list(self._queues))
        for q in self._queues.values():
            q.pq.dropped = True
        self._queues.clear()
        await self.instance.unregister(consumer_group=self.group)
        if self._inner_producer is not None:
            await self._inner_producer.shutdown()
        await self.instance.close()
        if self._runner is not None:
            self._runner.close()

    close = shutdown

    # ------------------------------------------------------------------ heartbeat / notify

    def _heartbeat_data(self) -> tuple[list[str], list[dict[str, Any]]]:
        data = {
            "consumeFromWhere": self.config.consume_from_where.name,
            "consumeType": "CONSUME_PASSIVELY",
            "groupName": self.group,
            "messageModel": self.config.message_model.name,
            "subscriptionDataSet": [s.to_json() for s in self._subs.values()],
            "unitMode": False,
        }
        return [], [data]

    def _notified(self, group: str) -> None:
        if group == self.group and self._rebalance_wanted is not None:
            self._rebalance_wanted.set()

    # ------------------------------------------------------------------ what admins ask (307, 221)

    def running_info(self, group: str) -> RunningInfo | None:
        """ConsumerRunningInfo's parts, as DefaultMQPushConsumerImpl.consumerRunningInfo gathers them."""
        if group != self.group or not self._started or self.offset_store is None:
            return None
        props = consumer_properties(self.config, self.client_config)
        props[PROP_CONSUME_TYPE] = "CONSUME_PASSIVELY"
        props[PROP_CONSUME_ORDERLY] = "true" if self._orderly else "false"
        props[PROP_THREADPOOL_CORE_SIZE] = str(self.config.consume_thread_max)
        props[PROP_CONSUMER_START_TIMESTAMP] = str(self._start_timestamp)
        table = self.offset_store.table
        return RunningInfo(
            props,
            [s.to_json() for s in self._subs.values()],
            {mq: process_queue_info(q.pq, table.get(mq, -1)) for mq, q in self._queues.items()},
            {topic: self.stats.status(topic) for topic in self._subs},
        )

    def consumer_status(self, topic: str, group: str) -> dict[MessageQueue, int] | None:
        """The offsets this consumer holds for `topic`'s queues (Java's cloneOffsetTable(topic))."""
        if group != self.group or self.offset_store is None:
            return None
        return topic_offsets(self.offset_store.table, self._subs, group, topic)

    async def _route_changed(self, topic: str, route: TopicRouteData) -> None:
        # A subscribed topic created after start is consumed from the route poll that sees it: heartbeat
        # its brokers first (they may not know this consumer yet, and the consumer list decides the queues
        # it gets), then rebalance, rather than wait for the next heartbeat and periodic rebalance.
        if topic in self._subs and self._rebalance_wanted is not None:
            await self.instance.send_heartbeat()
            self._rebalance_wanted.set()

    # ------------------------------------------------------------------ offsets

    async def _fetch_offset(self, mq: MessageQueue) -> int:
        addr = await self.instance.find_reader(mq.broker_name, mq.topic)
        return await self.instance.api.query_consumer_offset(addr, self.group, mq)

    async def _commit_offset(self, mq: MessageQueue, offset: int) -> None:
        addr = await self.instance.find_master(mq.broker_name, mq.topic)
        await self.instance.api.update_consumer_offset_oneway(addr, self.group, mq, offset)

    async def _persist_loop(self) -> None:
        assert self.offset_store is not None
        while True:
            await asyncio.sleep(self.client_config.persist_consumer_offset_interval)
            await self.offset_store.persist_all(list(self._queues))

    # ------------------------------------------------------------------ rebalance

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
        """Recompute the owned queues of every subscribed topic and start/stop pullers."""
        assert self._rebalance_lock is not None
        async with self._rebalance_lock:
            for topic in list(self._subs):
                route = await self.instance.get_route(topic)
                if route is None:
                    continue
                mqs = subscribe_queues(topic, route)
                cids = [self.instance.client_id]
                if self.clustering:
                    try:
                        addr = await self.instance.any_broker_of(topic)
                        cids = await self.instance.api.get_consumer_list(addr, self.group)
                    except Exception as exc:
                        log.info("%s: consumer list for %s unavailable: %s", self.group, topic, exc)
                        continue
                wanted = assign(self.config.message_model, self.instance.client_id, mqs, cids, self.allocate)
                drop, add = diff((mq for mq in self._queues if mq.topic == topic), wanted)
                for mq in sorted(drop):
                    await self._drop_queue(mq)
                for mq in sorted(add):
                    await self._start_queue(mq)
            for mq in [mq for mq in self._queues if mq.topic not in self._subs]:
                await self._drop_queue(mq)

    async def _start_queue(self, mq: MessageQueue) -> None:
        assert self.offset_store is not None
        locked = False
        if self._orderly and self.clustering:
            locked = mq in await self._lock([mq])
            if not locked:
                log.info("%s: %s is still locked by another consumer; retrying at the next rebalance", self.group, mq)
                return
        self.offset_store.remove(mq)
        try:
            offset = await start_offset(
                self.instance, self.offset_store, mq, self.config.consume_from_where, self.config.consume_timestamp
            )
        except Exception as exc:
            log.warning("%s: cannot compute the start offset of %s: %s", self.group, mq, exc)
            return
        # Record it now so the position survives a restart even before the first message.
        self.offset_store.update(mq, offset)
        pq = ProcessQueue()
        pq.locked = locked
        puller = QueuePuller(
            self.instance,
            self._settings,
            mq,
            offset,
            lambda: self._subs.get(mq.topic),
            lambda msgs: self._deliver(mq, msgs),
            commit_offset=lambda: self._commit_offset_for_pull(mq),
            on_offset=lambda off: self._empty_round(mq, off),
            ready=lambda: self._ready(mq),
            on_pull=lambda rt, found: self._pulled(pq, mq.topic, rt, found),
        )
        q = _Queue(mq, pq, puller)
        self._queues[mq] = q
        q.task = asyncio.create_task(puller.run(), name=f"pull-{mq}")
        log.info("%s: %s starts at offset %d", self.group, mq, offset)

    async def _drop_queue(self, mq: MessageQueue) -> None:
        assert self.offset_store is not None
        q = self._queues.pop(mq, None)
        if q is None:
            return
        q.pq.dropped = True
        q.puller.stop()
        if q.task is not None:
            q.task.cancel()
            await _quietly([q.task])
        await self.offset_store.persist(mq)
        self.offset_store.remove(mq)
        if self._orderly and self.clustering:
            await self._unlock([mq])
        log.info("%s: %s is no longer ours", self.group, mq)

    def _commit_offset_for_pull(self, mq: MessageQueue) -> int:
        if not self.clustering or self.offset_store is None:
            return -1
        return self.offset_store.table.get(mq, -1)

    async def _reset_offsets(self, topic: str, group: str, table: dict[MessageQueue, int]) -> None:
        """A broker moved our offsets (mqadmin resetOffsetByTime): restart those queues there.
        Cached and in-flight messages of the old position are dropped, not committed."""
        if group != self.group or not self._started or self._rebalance_lock is None or self.offset_store is None:
            return
        async with self._rebalance_lock:
            for mq, offset in sorted(table.items()):
                q = self._queues.pop(mq, None)
                if q is None:
                    continue
                q.pq.dropped = True
                q.puller.stop()
                if q.task is not None:
                    q.task.cancel()
                    await _quietly([q.task])
                self.offset_store.remove(mq)
                await self._commit_offset(mq, offset)
                log.info("%s: %s reset to offset %d", self.group, mq, offset)
                await self._start_queue(mq)

    # ------------------------------------------------------------------ orderly locks

    async def _lock(self, mqs: list[MessageQueue]) -> set[MessageQueue]:
        by_broker: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq in mqs:
            by_broker[mq.broker_name].append(mq)
        granted: set[MessageQueue] = set()
        for broker, group_mqs in by_broker.items():
            try:
                addr = await self.instance.find_master(broker, group_mqs[0].topic)
                granted |= await self.instance.api.lock_batch_mq(addr, self.group, self.instance.client_id, group_mqs)
            except Exception as exc:
                log.info("%s: locking queues on %s failed: %s", self.group, broker, exc)
        now = time.monotonic()
        for mq in mqs:
            q = self._queues.get(mq)
            if q is not None:
                q.pq.locked = mq in granted
                if mq in granted:
                    q.pq.last_lock_timestamp = now
        return granted

    async def _unlock(self, mqs: list[MessageQueue]) -> None:
        by_broker: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq in mqs:
            by_broker[mq.broker_name].append(mq)
        for broker, group_mqs in by_broker.items():
            addr = self.instance.master_addr(broker)
            if addr is None:
                continue
            try:
                await self.instance.api.unlock_batch_mq(addr, self.group, self.instance.client_id, group_mqs)
            except Exception as exc:
                log.info("%s: unlocking queues on %s failed: %s", self.group, broker, exc)

    async def _lock_loop(self) -> None:
        while True:
            await asyncio.sleep(REBALANCE_LOCK_INTERVAL)
            await self._lock(list(self._queues))

    # ------------------------------------------------------------------ pulling and consuming

    async def _ready(self, mq: MessageQueue) -> bool:
        """Gate before each pull: flow control, and the queue lock for orderly consumption."""
        q = self._queues.get(mq)
        if q is None or q.pq.dropped:
            if q is not None:
                q.puller.stop()
            return False
        reason = flow_control_reason(q.pq, self._limits, self._orderly)
        if reason is not None:
            log.debug("%s: flow control on %s: %s", self.group, mq, reason)
            await asyncio.sleep(FLOW_CONTROL_DELAY)
            return False
        if self._orderly and self.clustering and not q.pq.locked:
            await asyncio.sleep(LOCK_RETRY_DELAY)
            return False
        return True

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
        dispatch = q.pq.put_messages(msgs)
        if self._orderly:
            if dispatch or q.orderly_task is None or q.orderly_task.done():
                q.orderly_task = self._track(self._consume_orderly(q))
            return
        size = max(1, self.config.consume_message_batch_max_size)
        for i in range(0, len(msgs), size):
            self._track(self._consume_concurrently(q, msgs[i : i + size]))

    def _track(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._consuming.add(task)
        task.add_done_callback(self._consuming.discard)
        return task

    async def _consume_concurrently(self, q: _Queue, msgs: list[MessageExt]) -> None:
        assert self._runner is not None and self.offset_store is not None
        restore_retry_topic(msgs, retry_topic(self.group))
        started = time.monotonic()
        status = await self._runner(msgs)
        self._count_consumed(q.mq.topic, started, status, len(msgs))
        if q.pq.dropped:
            return  # the queue moved to another consumer; it will consume from the committed offset
        done = msgs
        if status is not ConsumeStatus.CONSUME_SUCCESS:
            if self.clustering:
                failed = [m for m in msgs if not await self._send_back(m, q.mq)]
                if failed:
                    done = [m for m in msgs if m not in failed]
                    self._track(self._reconsume_later(q, failed))
            else:
                log.warning(
                    "%s: broadcasting listener failed on %d message(s); they are dropped", self.group, len(msgs)
                )
        offset = q.pq.remove_messages(done)
        if offset >= 0 and not q.pq.dropped:
            self.offset_store.update(q.mq, offset, increase_only=True)

    def _count_consumed(self, topic: str, started: float, status: ConsumeStatus, n: int) -> None:
        # By the queue's topic (a retry queue counts as %RETRY%<group>), as Java's ConsumerStatsManager keys it
        ok = status is ConsumeStatus.CONSUME_SUCCESS
        self.stats.consumed(topic, time.monotonic() - started, n if ok else 0, 0 if ok else n)

    async def _reconsume_later(self, q: _Queue, msgs: list[MessageExt]) -> None:
        await asyncio.sleep(RECONSUME_LOCALLY_DELAY)
        if not q.pq.dropped:
            await self._consume_concurrently(q, msgs)

    async def _send_back(self, msg: MessageExt, mq: MessageQueue) -> bool:
        """CONSUMER_SEND_MSG_BACK to the message's broker; else re-send it to %RETRY%<group>."""
        max_times = self.config.max_reconsume_times
        try:
            addr = await self.instance.find_master(mq.broker_name, mq.topic)
            await self.instance.api.consumer_send_msg_back(
                addr, msg, self.group, self.config.delay_level_when_next_consume, max_times
            )
            return True
        except Exception as exc:
            log.info("%s: send-back of %s failed (%s); re-sending to the retry topic", self.group, msg.msg_id, exc)
        props = dict(msg.properties)
        props.setdefault(Prop.RETRY_TOPIC, msg.topic)
        props.setdefault(Prop.ORIGIN_MESSAGE_ID, msg.msg_id)
        props[Prop.RECONSUME_TIME] = str(msg.reconsume_times + 1)
        props[Prop.MAX_RECONSUME_TIMES] = str(max_times)
        props[Prop.DELAY] = str(self.config.delay_level_when_next_consume or 3 + msg.reconsume_times)
        retry = Message(retry_topic(self.group), msg.body, properties=props, flag=msg.flag)
        try:
            assert self._inner_producer is not None
            await self._inner_producer.send_to_retry_topic(retry, msg.reconsume_times + 1, max_times)
            return True
        except Exception as exc:
            log.warning("%s: re-sending %s to the retry topic failed: %s", self.group, msg.msg_id, exc)
            return False

    async def _consume_orderly(self, q: _Queue) -> None:
        assert self._runner is not None and self.offset_store is not None
        pq = q.pq
        batch = max(1, self.config.consume_message_batch_max_size)
        while not pq.dropped:
            need_lock = self.clustering and (not pq.locked or pq.is_lock_expired())
            if need_lock and q.mq not in await self._lock([q.mq]):
                await asyncio.sleep(LOCK_RETRY_DELAY)
                continue
            msgs = pq.take_messages(batch)
            if not msgs:
                return
            restore_retry_topic(msgs, retry_topic(self.group))
            started = time.monotonic()
            status = await self._runner(msgs)
            self._count_consumed(q.mq.topic, started, status, len(msgs))
            if pq.dropped:
                return
            if status is ConsumeStatus.CONSUME_SUCCESS:
                offset = pq.commit()
                if offset >= 0:
                    self.offset_store.update(q.mq, offset)
            elif self.clustering and await self._give_up_orderly(q, msgs):
                # Retried maxReconsumeTimes in place: the batch went to the DLQ; move past it.
                offset = pq.commit()
                if offset >= 0:
                    self.offset_store.update(q.mq, offset)
            else:
                # Orderly: retry the same batch in place; later messages of the queue wait.
                for m in msgs:
                    m.reconsume_times += 1
                pq.rollback()
                await asyncio.sleep(self.config.suspend_current_queue_time)

    async def _give_up_orderly(self, q: _Queue, msgs: list[MessageExt]) -> bool:
        """Java's checkReconsumeTimes: once a batch has been retried maxReconsumeTimes times, send it
        to %RETRY%<group>; the broker sees a group holding queue locks and stores it in %DLQ%<group>.
        False (keep retrying in place) until then, or when that send fails."""
        max_times = self.config.max_reconsume_times
        if max_times < 0 or any(m.reconsume_times < max_times for m in msgs):
            return False
        assert self._inner_producer is not None
        for m in msgs:
            props = dict(m.properties)
            props.setdefault(Prop.RETRY_TOPIC, m.topic)
            props.setdefault(Prop.ORIGIN_MESSAGE_ID, m.msg_id)
            props[Prop.RECONSUME_TIME] = str(m.reconsume_times)
            props[Prop.MAX_RECONSUME_TIMES] = str(max_times)
            props.pop(Prop.DELAY, None)
            retry = Message(retry_topic(self.group), m.body, properties=props, flag=m.flag)
            try:
                await self._inner_producer.send_to_retry_topic(retry, m.reconsume_times, max_times)
            except Exception as exc:
                log.warning("%s: moving %s to the DLQ failed (%s); retrying it in place", self.group, m.msg_id, exc)
                return False
            log.warning("%s: %s failed %d times in %s; sent to the DLQ", self.group, m.msg_id, m.reconsume_times, q.mq)
        return True


def _has_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _quietly(tasks: list[asyncio.Task[Any]]) -> None:
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
