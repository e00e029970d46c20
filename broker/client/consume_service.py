"""The push consumer's consume services: concurrently or orderly (Java's ConsumeMessageConcurrentlyService
and ConsumeMessageOrderlyService), behind one interface.

PushConsumer picks one at start() from `register_listener(..., orderly=)` and then calls, without asking
which it has: `admit()` before it starts pulling a queue, `ready()` before each pull, `submit()` with
each pulled batch, `release()` when queues leave it, `shutdown()` to drain. Each service runs the
listener (ListenerRunner), processes its result, and moves the queue's offset in the offset store:

- concurrent: batches of consumeMessageBatchMaxSize run in parallel; a failed message goes back to the
  broker with CONSUMER_SEND_MSG_BACK (delay level, maxReconsumeTimes, then the DLQ), else to
  %RETRY%<group> directly, else it is consumed again here after 5 s; the offset committed is the
  smallest one still in flight (ProcessQueue);
- orderly: one batch at a time per queue, holding the queue's lock on the broker (LOCK_BATCH_MQ, renewed
  every 20 s, UNLOCK_BATCH_MQ on release) when clustering; a failed batch is retried in place after
  suspendCurrentQueueTimeMillis while the queue's later messages wait, and after maxReconsumeTimes it is
  sent to %RETRY%<group>, which the broker stores in %DLQ%<group>.

The copy sent to %RETRY%<group> is built by consume.retry_message and sent by `_send_to_retry_topic`, the
one place for both services.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from broker.client.config import ConsumerConfig
from broker.client.consume import ListenerRunner, restore_retry_topic, retry_message
from broker.client.consumer_rt_tps import ConsumerStats
from broker.client.instance import ClientInstance
from broker.client.message import ConsumeStatus, MessageExt, MessageQueue
from broker.client.offset_store import OffsetStore
from broker.client.process_queue import REBALANCE_LOCK_INTERVAL, FlowControlLimits, ProcessQueue, flow_control_reason
from broker.client.producer import Producer
from broker.client.rebalance import retry_topic
from broker.transport.loop import cancel_and_wait

__all__ = [
    "FLOW_CONTROL_DELAY",
    "LOCK_RETRY_DELAY",
    "RECONSUME_LOCALLY_DELAY",
    "ConcurrentConsumeService",
    "ConsumeContext",
    "ConsumeService",
    "OrderlyConsumeService",
]

log = logging.getLogger(__name__)

# Java's PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL, the delay before re-consuming messages whose send-back
# failed, and the wait before asking again for a queue lock the broker refused.
FLOW_CONTROL_DELAY = 0.05
RECONSUME_LOCALLY_DELAY = 5.0
LOCK_RETRY_DELAY = 0.5


@dataclass(frozen=True, slots=True)
class ConsumeContext:
    """What a consume service works with, all owned by the push consumer."""

    config: ConsumerConfig
    instance: ClientInstance
    runner: ListenerRunner
    offsets: OffsetStore
    stats: ConsumerStats
    producer: Producer  # CLIENT_INNER_PRODUCER, on the consumer's instance


class ConsumeService:
    orderly: ClassVar[bool]

    def __init__(self, ctx: ConsumeContext) -> None:
        self.ctx = ctx
        self._group = ctx.config.group
        self._clustering = ctx.config.clustering
        self._retry_topic = retry_topic(ctx.config.group)
        self._batch = max(1, ctx.config.consume_message_batch_max_size)
        self._limits = FlowControlLimits(
            ctx.config.pull_threshold_for_queue,
            ctx.config.pull_threshold_size_for_queue,
            ctx.config.consume_concurrently_max_span,
        )
        self._consuming: set[asyncio.Task[None]] = set()
        self._loops: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start background work (the orderly service's lock renewal)."""

    async def admit(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """May this consumer start pulling `mq` (newly assigned, its ProcessQueue `pq`)?"""
        return True

    async def ready(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Gate before each pull of `mq`: False (after a short wait) while flow control holds it back."""
        reason = flow_control_reason(pq, self._limits, self.orderly)
        if reason is not None:
            log.debug("%s: flow control on %s: %s", self._group, mq, reason)
            await asyncio.sleep(FLOW_CONTROL_DELAY)
            return False
        return True

    def submit(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """A pull of `mq` found `msgs`: hold them in `pq` and have them consumed."""
        raise NotImplementedError

    async def process_result(
        self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], status: ConsumeStatus
    ) -> None:
        """The listener answered `status` for `msgs`: commit, retry or send back."""
        raise NotImplementedError

    async def release(self, mqs: list[MessageQueue]) -> None:
        """These queues left the consumer (rebalance, shutdown)."""

    async def shutdown(self, drain_timeout: float) -> None:
        """Stop background work, let running listeners finish (up to `drain_timeout`), cancel the rest."""
        await cancel_and_wait(*self._loops)
        self._loops = []
        if self._consuming:
            await asyncio.wait(list(self._consuming), timeout=drain_timeout)
        await cancel_and_wait(*self._consuming)

    # ------------------------------------------------------------------ shared steps

    def _track(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self._consuming.add(task)
        task.add_done_callback(self._consuming.discard)
        return task

    async def _run_listener(self, mq: MessageQueue, msgs: list[MessageExt]) -> ConsumeStatus:
        restore_retry_topic(msgs, self._retry_topic)
        started = time.monotonic()
        status = await self.ctx.runner(msgs)
        # By the queue's topic (a retry queue counts as %RETRY%<group>), as Java's ConsumerStatsManager keys it
        ok = status is ConsumeStatus.CONSUME_SUCCESS
        n = len(msgs)
        self.ctx.stats.consumed(mq.topic, time.monotonic() - started, n if ok else 0, 0 if ok else n)
        return status

    async def _send_to_retry_topic(self, msg: MessageExt, reconsume_times: int, delay_level: int | None) -> None:
        """Send a failed message's copy (consume.retry_message) to %RETRY%<group> with the inner producer."""
        max_times = self.ctx.config.max_reconsume_times
        retry = retry_message(msg, self._retry_topic, max_times, reconsume_times, delay_level)
        await self.ctx.producer.send_to_retry_topic(retry, reconsume_times, max_times)


class ConcurrentConsumeService(ConsumeService):
    orderly = False

    def submit(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        pq.put_messages(msgs)
        for i in range(0, len(msgs), self._batch):
            self._track(self._consume(mq, pq, msgs[i : i + self._batch]))

    async def _consume(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        status = await self._run_listener(mq, msgs)
        if pq.dropped:
            return  # the queue moved to another consumer; it will consume from the committed offset
        await self.process_result(mq, pq, msgs, status)

    async def process_result(
        self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], status: ConsumeStatus
    ) -> None:
        done = msgs
        if status is not ConsumeStatus.CONSUME_SUCCESS:
            if self._clustering:
                failed = [m for m in msgs if not await self._send_back(m, mq)]
                if failed:
                    done = [m for m in msgs if m not in failed]
                    self._track(self._reconsume_later(mq, pq, failed))
            else:
                log.warning(
                    "%s: broadcasting listener failed on %d message(s); they are dropped", self._group, len(msgs)
                )
        offset = pq.remove_messages(done)
        if offset >= 0 and not pq.dropped:
            self.ctx.offsets.update(mq, offset, increase_only=True)

    async def _reconsume_later(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        await asyncio.sleep(RECONSUME_LOCALLY_DELAY)
        if not pq.dropped:
            await self._consume(mq, pq, msgs)

    async def _send_back(self, msg: MessageExt, mq: MessageQueue) -> bool:
        """CONSUMER_SEND_MSG_BACK to the message's broker; else re-send it to %RETRY%<group>."""
        config = self.ctx.config
        try:
            addr = await self.ctx.instance.find_master(mq.broker_name, mq.topic)
            await self.ctx.instance.api.consumer_send_msg_back(
                addr, msg, self._group, config.delay_level_when_next_consume, config.max_reconsume_times
            )
            return True
        except Exception as exc:
            log.info("%s: send-back of %s failed (%s); re-sending to the retry topic", self._group, msg.msg_id, exc)
        try:
            delay = config.delay_level_when_next_consume or 3 + msg.reconsume_times
            await self._send_to_retry_topic(msg, msg.reconsume_times + 1, delay)
            return True
        except Exception as exc:
            log.warning("%s: re-sending %s to the retry topic failed: %s", self._group, msg.msg_id, exc)
            return False


class OrderlyConsumeService(ConsumeService):
    orderly = True

    def __init__(
        self,
        ctx: ConsumeContext,
        queues: Callable[[], Mapping[MessageQueue, ProcessQueue]],
        lock_interval: float = REBALANCE_LOCK_INTERVAL,
    ) -> None:
        """`queues()` are the consumer's queues, whose broker locks start() renews every `lock_interval`."""
        super().__init__(ctx)
        self._queues = queues
        self._lock_interval = lock_interval
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}

    def start(self) -> None:
        if self._clustering:
            self._loops.append(asyncio.create_task(self._lock_loop(), name=f"lock-{self._group}"))

    async def admit(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        if not self._clustering:
            return True
        if mq in await self._lock({mq: pq}):
            return True
        log.info("%s: %s is still locked by another consumer; retrying at the next rebalance", self._group, mq)
        return False

    async def ready(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        if not await super().ready(mq, pq):
            return False
        if self._clustering and not pq.locked:
            await asyncio.sleep(LOCK_RETRY_DELAY)
            return False
        return True

    def submit(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        dispatch = pq.put_messages(msgs)
        task = self._tasks.get(mq)
        if dispatch or task is None or task.done():
            self._tasks[mq] = self._track(self._consume(mq, pq))

    async def _consume(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        while not pq.dropped:
            need_lock = self._clustering and (not pq.locked or pq.is_lock_expired())
            if need_lock and mq not in await self._lock({mq: pq}):
                await asyncio.sleep(LOCK_RETRY_DELAY)
                continue
            msgs = pq.take_messages(self._batch)
            if not msgs:
                return
            status = await self._run_listener(mq, msgs)
            if pq.dropped:
                return
            await self.process_result(mq, pq, msgs, status)

    async def process_result(
        self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], status: ConsumeStatus
    ) -> None:
        # Retried maxReconsumeTimes in place: the batch went to the DLQ; move past it as if consumed.
        if status is ConsumeStatus.CONSUME_SUCCESS or (self._clustering and await self._give_up(mq, msgs)):
            offset = pq.commit()
            if offset >= 0:
                self.ctx.offsets.update(mq, offset)
            return
        # Orderly: retry the same batch in place; later messages of the queue wait.
        for m in msgs:
            m.reconsume_times += 1
        pq.rollback()
        await asyncio.sleep(self.ctx.config.suspend_current_queue_time)

    async def _give_up(self, mq: MessageQueue, msgs: list[MessageExt]) -> bool:
        """Java's checkReconsumeTimes: once a batch has been retried maxReconsumeTimes times, send it
        to %RETRY%<group>; the broker sees a group holding queue locks and stores it in %DLQ%<group>.
        False (keep retrying in place) until then, or when that send fails."""
        max_times = self.ctx.config.max_reconsume_times
        if max_times < 0 or any(m.reconsume_times < max_times for m in msgs):
            return False
        for m in msgs:
            try:
                await self._send_to_retry_topic(m, m.reconsume_times, None)
            except Exception as exc:
                log.warning("%s: moving %s to the DLQ failed (%s); retrying it in place", self._group, m.msg_id, exc)
                return False
            group, times = self._group, m.reconsume_times
            log.warning("%s: %s failed %d times in %s; sent to the DLQ", group, m.msg_id, times, mq)
        return True

    async def release(self, mqs: list[MessageQueue]) -> None:
        for mq in mqs:
            self._tasks.pop(mq, None)
        if self._clustering:
            await self._unlock(mqs)

    # ------------------------------------------------------------------ broker locks

    async def _lock(self, queues: Mapping[MessageQueue, ProcessQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ on each queue's master; marks each ProcessQueue locked or not, and when."""
        granted: set[MessageQueue] = set()
        for broker, mqs in _by_broker(queues).items():
            try:
                addr = await self.ctx.instance.find_master(broker, mqs[0].topic)
                granted |= await self.ctx.instance.api.lock_batch_mq(
                    addr, self._group, self.ctx.instance.client_id, mqs
                )
            except Exception as exc:
                log.info("%s: locking queues on %s failed: %s", self._group, broker, exc)
        now = time.monotonic()
        for mq, pq in queues.items():
            pq.locked = mq in granted
            if pq.locked:
                pq.last_lock_timestamp = now
        return granted

    async def _unlock(self, mqs: list[MessageQueue]) -> None:
        for broker, mqs_of_broker in _by_broker(mqs).items():
            addr = self.ctx.instance.master_addr(broker)
            if addr is None:
                continue
            try:
                await self.ctx.instance.api.unlock_batch_mq(
                    addr, self._group, self.ctx.instance.client_id, mqs_of_broker
                )
            except Exception as exc:
                log.info("%s: unlocking queues on %s failed: %s", self._group, broker, exc)

    async def _lock_loop(self) -> None:
        while True:
            await asyncio.sleep(self._lock_interval)
            await self._lock(self._queues())


def _by_broker(mqs: Iterable[MessageQueue]) -> dict[str, list[MessageQueue]]:
    """The queues (a mapping's keys) grouped by broker name."""
    grouped: dict[str, list[MessageQueue]] = defaultdict(list)
    for mq in mqs:
        grouped[mq.broker_name].append(mq)
    return grouped
