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
import collections
import itertools
import logging
import os
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from broker.client.config import ClientConfig
from broker.client.errors import NoRouteError, TopicNotExist, for_code
from broker.client.instance import ClientInstance
from broker.client.message import MessageQueue
from broker.client.pull_request import pull_request
from broker.client.route import subscribe_queues
from broker.client.subscription import SUB_ALL, parse_subscription
from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.spark.options import NO_TLS, SparkTls
from broker.transport.errors import RemotingError
from broker.transport.loop import new_event_loop

__all__ = ["DataLossError", "PullSpec", "QueueClient", "client_for"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Bytes one pull may return; the broker's default (256 KiB) makes small round trips for a bulk reader.
PULL_MAX_BYTES = 4 * 1024 * 1024
# Pulls a range read keeps in flight (so at most PULLS_IN_FLIGHT * PULL_MAX_BYTES of answers wait for the
# caller): brokers answer the next chunks while the caller decodes one, and the small ranges of a
# micro-batch's queues are asked for together.
PULLS_IN_FLIGHT = 8
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
    tls: SparkTls = NO_TLS


def _loss_message(mq: MessageQueue, start: int, low: int) -> str:
    return (
        f"data loss on {mq}: offsets {start}..{low - 1} ({low - start} messages) were removed by retention "
        f"before they were read (the queue now starts at {low}). Set failOnDataLoss=false to skip them."
    )


class QueueClient:
    def __init__(self, namesrv: str, timeout: float = 5.0, tls: SparkTls = NO_TLS) -> None:
        self.namesrv = namesrv
        self.loop = new_event_loop()
        config = ClientConfig(
            namesrv_addr=namesrv,
            instance_name=f"spark-{os.getpid()}",
            request_timeout=timeout,
            **tls.client_settings(),
        )
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
                # One NameServer request per topic: the fresh route also refreshes the broker addresses.
                route = await self.instance.update_route(topic)
                if route is None:
                    raise TopicNotExist(f"topic {topic} does not exist on NameServer {self.namesrv}")
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

    def _each(self, mqs: Sequence[MessageQueue], *calls: Any) -> list[dict[MessageQueue, int]]:
        """Per call, its answer for every queue: all the requests in flight at once."""

        async def one(mq: MessageQueue, call: Any) -> int:
            return int(await call(await self._addr(mq), mq))

        async def every() -> list[int]:
            return list(await asyncio.gather(*(one(mq, call) for call in calls for mq in mqs)))

        values = self.run(every)
        n = len(mqs)
        return [dict(zip(mqs, values[i * n : (i + 1) * n], strict=True)) for i in range(len(calls))]

    def max_offsets(self, mqs: Sequence[MessageQueue]) -> dict[MessageQueue, int]:
        return self._each(mqs, self.instance.api.get_max_offset)[0]

    def min_offsets(self, mqs: Sequence[MessageQueue]) -> dict[MessageQueue, int]:
        return self._each(mqs, self.instance.api.get_min_offset)[0]

    def bounds(self, mqs: Sequence[MessageQueue]) -> tuple[dict[MessageQueue, int], dict[MessageQueue, int]]:
        """(min offsets, max offsets) of the queues, asked for together."""
        lows, highs = self._each(mqs, self.instance.api.get_min_offset, self.instance.api.get_max_offset)
        return lows, highs

    def offsets_for_time(self, mqs: Sequence[MessageQueue], timestamp_ms: int) -> dict[MessageQueue, int]:
        """Per queue, the offset of the first message stored at or after `timestamp_ms`."""
        return self._each(mqs, lambda addr, mq: self.instance.api.search_offset(addr, mq, timestamp_ms))[0]

    def commit_group(self, group: str, offsets: dict[MessageQueue, int]) -> None:
        """Store offsets for `group` on each queue's master (informational progress, see docs)."""

        async def commit() -> None:
            for mq, offset in sorted(offsets.items()):
                addr = await self.instance.find_master(mq.broker_name, mq.topic)
                await self.instance.api.update_consumer_offset(addr, group, mq, offset)

        self.run(commit)

    # ------------------------------------------------------------------ range reads (executors)

    def _start_pull(
        self, spec: PullSpec, mq: MessageQueue, offset: int, count: int
    ) -> asyncio.Task[tuple[str, RemotingCommand]]:
        # no COMMIT_OFFSET, no SUSPEND: the range exists; larger answers than a consumer's
        sub = parse_subscription(mq.topic, spec.sub_expression)
        request = pull_request(spec.group, mq, offset, count, sub, max_bytes=PULL_MAX_BYTES)

        async def pull() -> tuple[str, RemotingCommand]:
            addr = await self._addr(mq)
            return addr, await self.instance.api.invoke(addr, request, spec.timeout)

        return self.loop.create_task(pull())

    def pull_range(self, spec: PullSpec, mq: MessageQueue, start: int, end: int) -> Iterator[bytes]:
        """Pull-response bodies covering queue offsets [start, end) of one queue (see pull_ranges)."""
        for _index, body in self.pull_ranges(spec, [(mq, start, end)]):
            yield body

    def pull_ranges(
        self, spec: PullSpec, ranges: Sequence[tuple[MessageQueue, int, int]]
    ) -> Iterator[tuple[int, bytes]]:
        """(index in `ranges`, pull-response body) covering each range's queue offsets [start, end): the
        stored records back to back. A range's bodies come in offset order; the last may hold records
        past its end and the broker's tag filter is by hash, so the caller cuts and re-checks
        (rows.record_batch). Up to PULLS_IN_FLIGHT pulls are in flight, in range order: the next chunks
        of a range are asked for before the caller decodes this one, and a range of a few messages
        does not wait for the one before it. Deterministic for given ranges (what Spark's replay of a
        micro-batch relies on): which bodies come, and in which order, depends only on what the
        brokers answer, not on timing; except that with failOnDataLoss=false offsets retention removed
        in the meantime are skipped."""
        # Without a tag filter a pull of n messages from `offset` answers exactly [offset, offset + n)
        # (unless a body reaches PULL_MAX_BYTES), so the next pulls of a range start where the ones in
        # flight will end. With a filter the broker scans past unmatched messages and says where it
        # stopped: one pull per range at a time then.
        ahead = parse_subscription("", spec.sub_expression).sub_string == SUB_ALL
        states = [_RangeState(i, mq, start, end) for i, (mq, start, end) in enumerate(ranges)]
        inflight: collections.deque[_InFlight] = collections.deque()

        def fill() -> None:
            issued = False
            first = 0
            while len(inflight) < PULLS_IN_FLIGHT:
                while first < len(states) and states[first].done:
                    first += 1
                s = next(
                    (s for s in itertools.islice(states, first, None) if s.ask < s.end and (ahead or not s.asked)),
                    None,
                )
                if s is None:
                    break
                count = min(spec.batch_size, s.end - s.ask)
                inflight.append(_InFlight(s, s.generation, s.ask, count, self._start_pull(spec, s.mq, s.ask, count)))
                s.ask += count
                s.asked += 1
                issued = True
            if issued:
                # Let the new tasks write their requests now, so brokers work while the caller decodes.
                self.loop.run_until_complete(asyncio.sleep(0))

        try:
            fill()
            while inflight:
                f = inflight.popleft()
                s = f.range
                s.asked -= 1
                if f.generation != s.generation:  # asked before an answer moved the range elsewhere
                    _drop(f.task)
                    continue
                try:
                    addr, resp = self.loop.run_until_complete(f.task)
                except RemotingError as exc:
                    # A pull is a read: repeat it once on a fresh connection (see run()).
                    if s.failed_at == f.offset:
                        raise
                    log.info("pull of %s at %d failed (%s); retrying once", s.mq, f.offset, exc)
                    s.failed_at = f.offset
                    s.restart(s.position)
                    fill()
                    continue
                body = _take_answer(spec, f, addr, resp)
                fill()
                if body is not None:
                    yield s.index, body
        finally:  # the caller stopped early (or a pull failed): nothing is left running on the loop
            for f in inflight:
                _drop(f.task)


class _RangeState:
    """One range of a pull_ranges() call: what was received, and what was asked for."""

    __slots__ = ("ask", "asked", "end", "failed_at", "generation", "index", "missing_since", "mq", "position", "start")

    def __init__(self, index: int, mq: MessageQueue, start: int, end: int) -> None:
        self.index, self.mq, self.start, self.end = index, mq, start, end
        self.position = start  # the next offset the caller gets
        self.ask = start  # where the next pull asks from
        self.asked = 0  # pulls in flight
        self.generation = 0  # pulls of an older generation are answered but not used
        self.missing_since: float | None = None
        self.failed_at: int | None = None

    @property
    def done(self) -> bool:
        return self.position >= self.end

    def restart(self, offset: int) -> None:
        """Go on from `offset`: the pulls in flight asked for something else."""
        self.position = self.ask = offset
        self.generation += 1


class _InFlight(NamedTuple):
    range: _RangeState
    generation: int
    offset: int
    asked: int  # messages asked for (a field named `count` would shadow tuple.count)
    task: asyncio.Task[tuple[str, RemotingCommand]]


def _take_answer(spec: PullSpec, f: _InFlight, addr: str, resp: RemotingCommand) -> bytes | None:
    """What the answer `resp` (from `addr`) to the pull `f` means for its range: the body to hand on, or
    None when the range moved instead (lost offsets skipped, every message filtered out, offsets not
    there yet); raises what ends the read (data loss, a range past the queue's end, a refusal)."""
    s = f.range
    ext = resp.ext_fields
    low = int(ext.get("minOffset", 0))
    next_offset = int(ext.get("nextBeginOffset", f.offset))
    if f.offset < low:
        if spec.fail_on_data_loss:
            raise DataLossError(_loss_message(s.mq, f.offset, low))
        log.warning("skipping lost offsets %d..%d of %s (failOnDataLoss=false)", f.offset, low - 1, s.mq)
        s.restart(low)
    elif resp.code == ResponseCode.SUCCESS:
        s.missing_since = None
        if next_offset != f.offset + f.asked:  # the chunks asked after this one start elsewhere
            s.restart(next_offset)
        else:
            s.position = next_offset
        return resp.body
    elif resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY:
        s.restart(max(next_offset, f.offset))  # all filtered out by tag, or removed
    elif resp.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED):
        # The broker reported these offsets earlier; give dispatch/failover a moment.
        now = time.monotonic()
        s.missing_since = s.missing_since or now
        if now - s.missing_since > MISSING_RETRY_SECONDS:
            raise RuntimeError(
                f"{s.mq} has no message at offset {f.offset} (broker {addr} says min {low}, max "
                f"{ext.get('maxOffset')}); the range {s.start}..{s.end} was planned past the queue's end"
            )
        time.sleep(0.1)
        s.restart(f.offset)
    else:
        raise for_code(resp.code, resp.remark, addr)
    return None


def _drop(task: asyncio.Task[Any]) -> None:
    """An unneeded pull: its answer, or its error, is not waited for nor reported."""
    if task.done():
        if not task.cancelled():
            task.exception()
    else:
        task.cancel()


_clients: dict[tuple[int, str, SparkTls], QueueClient] = {}


def client_for(namesrv: str, tls: SparkTls = NO_TLS) -> QueueClient:
    """This process's client for a NameServer list and TLS settings (a forked child builds its own)."""
    key = (os.getpid(), namesrv, tls)
    client = _clients.get(key)
    if client is None or client.loop.is_closed():
        client = _clients[key] = QueueClient(namesrv, tls=tls)
    return client
