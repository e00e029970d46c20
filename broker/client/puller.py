"""The long-polling pull loop of one queue, shared by the push and the lite pull consumer.

A consumer creates one `QueuePuller` per assigned queue and runs `run()` as a task. Each round
asks the queue's broker for up to pullBatchSize messages from `next_offset` (PULL_MESSAGE with
SUSPEND so the broker parks it up to 15 s when there is nothing new), re-checks the exact tag or
the SQL92 selector,
and hands found messages to the owner's `deliver()` coroutine, which may wait (flow control).
Errors back off 3 s, as Java does. The request itself is `broker.client.pull_request.pull_request`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from broker.client.config import ConsumerConfig
from broker.client.instance import ClientInstance
from broker.client.message import MessageExt, MessageQueue, PullResult, PullStatus
from broker.client.pull_request import pull_request
from broker.client.subscription import SubscriptionData
from broker.transport.loop import cancel_and_wait

__all__ = ["PULL_DELAY_ON_ERROR", "PullSettings", "QueuePuller"]

log = logging.getLogger(__name__)

PULL_DELAY_ON_ERROR = 3.0
# A pull that fails, or a suggested broker id we have no address for, refreshes the route at most this
# often: a master that died is gone from the NameServer at once, and one that returned is back.
ROUTE_RECHECK_INTERVAL = 1.0


@dataclass(frozen=True, slots=True)
class PullSettings:
    group: str
    batch_size: int = 32
    suspend: float = 15.0
    timeout: float = 30.0
    interval: float = 0.0
    post_subscription: bool = True

    @classmethod
    def of(cls, config: ConsumerConfig, post_subscription: bool) -> PullSettings:
        """A consumer's settings (pullBatchSize, brokerSuspendMaxTime, consumerTimeoutWhenSuspend, pullInterval)."""
        return cls(
            group=config.group,
            batch_size=config.pull_batch_size,
            suspend=config.broker_suspend_max_time,
            timeout=config.consumer_timeout_when_suspend,
            interval=config.pull_interval,
            post_subscription=post_subscription,
        )


class QueuePuller:
    """Pull loop of one queue. `deliver(msgs)` gets filtered messages; `on_offset(next, empty)` is
    told where the queue moved when a round delivered nothing (to commit past filtered messages)."""

    def __init__(
        self,
        instance: ClientInstance,
        settings: PullSettings,
        mq: MessageQueue,
        offset: int,
        subscription: Callable[[], SubscriptionData | None],
        deliver: Callable[[list[MessageExt]], Awaitable[None]],
        *,
        commit_offset: Callable[[], int] = lambda: -1,
        on_offset: Callable[[int], None] | None = None,
        ready: Callable[[], Awaitable[bool]] | None = None,
        on_pull: Callable[[float, int], None] | None = None,
    ) -> None:
        self.instance = instance
        self.settings = settings
        self.mq = mq
        self.next_offset = offset
        self.stopped = False
        self._subscription = subscription
        self._deliver = deliver
        self._commit_offset = commit_offset
        self._on_offset = on_offset
        self._ready = ready
        self._on_pull = on_pull  # (seconds the pull took, messages it delivered): the consumer's statistics
        self._broker_id = 0
        self._route_checked = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self, name: str) -> None:
        """Run the pull loop as a task (the owner's `close()` ends it)."""
        self._task = asyncio.create_task(self.run(), name=name)

    def stop(self) -> None:
        self.stopped = True

    async def close(self) -> None:
        """Stop pulling and wait for the task to end; a delivery it was in the middle of is cancelled."""
        self.stopped = True
        if self._task is not None:
            await cancel_and_wait(self._task)

    async def pull_once(self, suspend: bool = True) -> PullResult:
        sub = self._subscription()
        if sub is None:
            raise LookupError(f"no subscription for {self.mq.topic}")
        addr = self.instance.broker_addr(self.mq.broker_name, self._broker_id)
        if addr is None:
            await self.instance.update_route(self.mq.topic)
            addr = self.instance.broker_addr(self.mq.broker_name, self._broker_id)
            if addr is None:
                raise LookupError(f"no address for broker {self.mq.broker_name}")
        settings = self.settings
        request = pull_request(
            settings.group,
            self.mq,
            self.next_offset,
            settings.batch_size,
            sub,
            commit_offset=self._commit_offset(),
            suspend_ms=int(settings.suspend * 1000) if suspend else None,
            post_subscription=settings.post_subscription,
        )
        timeout = settings.timeout if suspend else self.instance.config.request_timeout * 3
        result = await self.instance.api.pull(addr, request, timeout)
        self._broker_id = result.suggest_which_broker_id
        if self._broker_id not in self.instance.broker_addrs.get(self.mq.broker_name, {}):
            await self._recheck_route()  # e.g. a slave sends us back to a master we dropped from the route
        if result.status is PullStatus.FOUND:
            result.messages = [m for m in result.messages if sub.matches_message(m)]
        return result

    async def _recheck_route(self) -> None:
        now = asyncio.get_running_loop().time()
        if now - self._route_checked < ROUTE_RECHECK_INTERVAL:
            return
        self._route_checked = now
        try:
            await self.instance.update_route(self.mq.topic)
        except Exception as exc:  # the NameServer may be down too: pulling goes on with the cached route
            log.debug("route refresh for %s failed: %s", self.mq.topic, exc)

    async def run(self) -> None:
        while not self.stopped:
            if self._ready is not None and not await self._ready():
                continue
            if self.stopped:
                return
            started = time.monotonic()
            try:
                result = await self.pull_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.stopped:
                    return
                log.info("pull of %s at %d failed: %s", self.mq, self.next_offset, exc)
                await self._recheck_route()  # the broker may be gone: pull from the rest of its group
                await asyncio.sleep(PULL_DELAY_ON_ERROR)
                continue
            if self.stopped:
                return
            if self._on_pull is not None:
                self._on_pull(time.monotonic() - started, len(result.messages))
            if result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning(
                    "offset %d of %s is illegal; moving to %d", self.next_offset, self.mq, result.next_begin_offset
                )
            self.next_offset = result.next_begin_offset
            if result.messages:
                await self._deliver(result.messages)
            elif self._on_offset is not None:
                self._on_offset(result.next_begin_offset)
            if self.settings.interval > 0:
                await asyncio.sleep(self.settings.interval)
