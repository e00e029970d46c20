"""The blocking broker access of the Spark data source: queue metadata, offset lookups, range pulls.

Spark calls data source code from plain (non-async) Python on the driver (planning, the stream
reader's worker) and in executor Python workers (`read()`). `client_for(namesrv)` gives each process
one `QueueClient` per NameServer list, kept for the life of the process so Spark's reused workers
do not reconnect per task. It runs a private event loop with `run_until_complete` in the calling
thread: Spark calls us from one thread per worker, and no background thread means nothing is left
running when a task ends. Pulls go straight to the queue's broker without a consumer: no
subscription registration, no rebalance, no offset commit (Spark's checkpoint owns offsets).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from broker.client.api import PullSysFlag
from broker.client.config import ClientConfig
from broker.client.errors import NoRouteError, TopicNotExist, for_code
from broker.client.instance import ClientInstance
from broker.client.message import MessageQueue
from broker.client.route import subscribe_queues
from broker.client.subscription import parse_subscription
from broker.protocol.codes import LanguageCode, RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import PullMessageRequestHeader
from broker.transport.errors import RemotingError
from broker.transport.loop import new_event_loop

__all__ = ["DataLossError", "PullSpec", "QueueClient", "client_for"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Bytes one pull may return; the broker's default (256 KiB) makes small round trips for a bulk reader.
PULL_MAX_BYTES = 8 * 1024 * 1024
# A range below the queue's max offset that answers "no message" is retried this long before failing:
# the broker has reported those offsets, so an empty answer means a dispatch or failover hiccup.
MISSING_RETRY_SECONDS = 10.0


class DataLossError(RuntimeError):
    """Offsets the query must read were removed by retention (failOnDataLoss=true)."""


@dataclass(frozen=True, slots=True)
class PullSpec:
    """What a range read needs besides the range: pickled into every Spark partition."""

    namesrv: str
    group: str
    sub_expression: str = "*"
    fail_on_data_loss: bool = True
    batch_size: int = 1024
    timeout: float = 30.0


def _loss_message(mq: MessageQueue, start: int, low: int) -> str:
    return (
        f"data loss on {mq}: offsets {start}..{low - 1} ({low - start} messages) were removed by retention "
        f"before they were read (the queue now starts at {low}). Set failOnDataLoss=false to skip them."
    )


class QueueClient:
    def __init__(self, namesrv: str, timeout: float = 5.0) -> None:
        self.namesrv = namesrv
        self.loop = new_event_loop()
        config = ClientConfig(namesrv_addr=namesrv, instance_name=f"spark-{os.getpid()}", request_timeout=timeout)
        self.instance: ClientInstance = self.loop.run_until_complete(self._build(config))

    @staticmethod
    async def _build(config: ClientConfig) -> ClientInstance:
        # Built on its loop so the remoting client binds to it.
        return ClientInstance(config)

    def run(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run `make()` on the private loop; once more after a transport error. The loop only runs
        inside our calls, so a connection the peer closed while we were idle (NameServers and
        brokers drop idle clients) is noticed only when the next request fails on it; the retry
        then connects afresh. Every call made through here is an idempotent read or offset store."""
        try:
            return self.loop.run_until_complete(make())
        except (RemotingError, NoRouteError) as exc:
            log.info("retrying after a transport error: %s", exc)
            return self.loop.run_until_complete(make())

    def close(self) -> None:
        if not self.loop.is_closed():
            self.loop.run_until_complete(self.instance.close())
            self.loop.close()

    # ------------------------------------------------------------------ metadata (driver)

    def queues(self, topics: Sequence[str]) -> list[MessageQueue]:
        """Readable queues of the topics, fetched fresh from the NameServer (new queues show up)."""

        async def fetch() -> list[MessageQueue]:
            out: list[MessageQueue] = []
            for topic in topics:
                try:
                    route = await self.instance.fetch_route(topic)
                except TopicNotExist:
                    raise TopicNotExist(f"topic {topic} does not exist on NameServer {self.namesrv}") from None
                await self.instance.update_route(topic)
                out += subscribe_queues(topic, route)
            return sorted(out)

        return self.run(fetch)

    async def _addr(self, mq: MessageQueue) -> str:
        addr = self.instance.broker_addr(mq.broker_name)
        if addr is None:
            await self.instance.update_route(mq.topic)
            addr = self.instance.broker_addr(mq.broker_name)
        if addr is None:
            raise LookupError(f"no address known for broker {mq.broker_name} (queue {mq})")
        return addr

    def _each(self, mqs: Sequence[MessageQueue], call: Any) -> dict[MessageQueue, int]:
        async def one(mq: MessageQueue) -> int:
            return int(await call(await self._addr(mq), mq))

        async def every() -> list[int]:
            return list(await asyncio.gather(*(one(mq) for mq in mqs)))

        return dict(zip(mqs, self.run(every), strict=True))

    def max_offsets(self, mqs: Sequence[MessageQueue]) -> dict[MessageQueue, int]:
        return self._each(mqs, self.instance.api.get_max_offset)

    def min_offsets(self, mqs: Sequence[MessageQueue]) -> dict[MessageQueue, int]:
        return self._each(mqs, self.instance.api.get_min_offset)

    def offsets_for_time(self, mqs: Sequence[MessageQueue], timestamp_ms: int) -> dict[MessageQueue, int]:
        """Per queue, the offset of the first message stored at or after `timestamp_ms`."""
        return self._each(mqs, lambda addr, mq: self.instance.api.search_offset(addr, mq, timestamp_ms))

    def commit_group(self, group: str, offsets: dict[MessageQueue, int]) -> None:
        """Store offsets for `group` on each queue's master (informational progress, see docs)."""

        async def commit() -> None:
            for mq, offset in sorted(offsets.items()):
                addr = await self.instance.find_master(mq.broker_name, mq.topic)
                await self.instance.api.update_consumer_offset(addr, group, mq, offset)

        self.run(commit)

    # ------------------------------------------------------------------ range reads (executors)

    def _pull_request(self, spec: PullSpec, mq: MessageQueue, offset: int, count: int) -> RemotingCommand:
        sub = parse_subscription(mq.topic, spec.sub_expression)
        header = PullMessageRequestHeader(
            consumer_group=spec.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=count,
            sys_flag=PullSysFlag.SUBSCRIPTION,  # no COMMIT_OFFSET, no SUSPEND: the range exists
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription=sub.sub_string,
            sub_version=sub.sub_version,
            expression_type=sub.expression_type,
            max_msg_bytes=PULL_MAX_BYTES,
            broker_name=mq.broker_name,
        )
        return RemotingCommand(
            code=RequestCode.PULL_MESSAGE, ext_fields=header.to_ext_fields(), language=LanguageCode.PYTHON
        )

    def _start_pull(
        self, spec: PullSpec, mq: MessageQueue, offset: int, end: int
    ) -> asyncio.Task[tuple[str, RemotingCommand]]:
        count = min(spec.batch_size, end - offset)

        async def pull() -> tuple[str, RemotingCommand]:
            addr = await self._addr(mq)
            return addr, await self.instance.api.invoke(addr, self._pull_request(spec, mq, offset, count), spec.timeout)

        task = self.loop.create_task(pull())
        # Let the task write its request now, so the broker works while we decode the previous answer.
        self.loop.run_until_complete(asyncio.sleep(0))
        return task

    def pull_range(self, spec: PullSpec, mq: MessageQueue, start: int, end: int) -> Iterator[bytes]:
        """Pull-response bodies (stored records back to back) covering queue offsets [start, end),
        in order; the last may hold records past `end` and the broker's tag filter is by hash, so
        the caller cuts and re-checks (rows.record_batch). Deterministic for a given range (what
        Spark's replay of a micro-batch relies on), except that with failOnDataLoss=false offsets
        retention removed in the meantime are skipped."""
        offset = start
        missing_since: float | None = None
        pending = self._start_pull(spec, mq, offset, end) if offset < end else None
        while pending is not None:
            try:
                addr, resp = self.loop.run_until_complete(pending)
            except RemotingError as exc:
                # A pull is a read: repeat it once on a fresh connection (see run()).
                log.info("pull of %s at %d failed (%s); retrying once", mq, offset, exc)
                addr, resp = self.loop.run_until_complete(self._start_pull(spec, mq, offset, end))
            pending = None
            ext = resp.ext_fields
            low = int(ext.get("minOffset", 0))
            next_offset = int(ext.get("nextBeginOffset", offset))
            if offset < low:
                if spec.fail_on_data_loss:
                    raise DataLossError(_loss_message(mq, offset, low))
                log.warning("skipping lost offsets %d..%d of %s (failOnDataLoss=false)", offset, low - 1, mq)
                offset = low
            elif resp.code == ResponseCode.SUCCESS:
                missing_since = None
                if next_offset < end:
                    # Ask for the next chunk before the caller decodes this one.
                    pending = self._start_pull(spec, mq, next_offset, end)
                yield resp.body
                offset = next_offset
                continue
            elif resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY:
                offset = max(next_offset, offset)  # all filtered out by tag, or removed
            elif resp.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED):
                # The broker reported these offsets earlier; give dispatch/failover a moment.
                now = time.monotonic()
                missing_since = missing_since or now
                if now - missing_since > MISSING_RETRY_SECONDS:
                    raise RuntimeError(
                        f"{mq} has no message at offset {offset} (broker {addr} says min {low}, max "
                        f"{ext.get('maxOffset')}); the range {start}..{end} was planned past the queue's end"
                    )
                time.sleep(0.1)
            else:
                raise for_code(resp.code, resp.remark, addr)
            if offset < end:
                pending = self._start_pull(spec, mq, offset, end)


_clients: dict[tuple[int, str], QueueClient] = {}


def client_for(namesrv: str) -> QueueClient:
    """This process's client for a NameServer list (a forked child builds its own)."""
    key = (os.getpid(), namesrv)
    client = _clients.get(key)
    if client is None or client.loop.is_closed():
        client = _clients[key] = QueueClient(namesrv)
    return client
