"""The asyncio producer (DefaultMQProducer): sync, async, one-way, ordered and batch sends.

Applications create `Producer(group, namesrv_addr=...)`, `await start()`, send, `await shutdown()`
(or use `async with`). The blocking facade (blocking.py) wraps it for threads. A send resolves the
topic's route (falling back to TBW102's when the topic does not exist yet, so the broker creates it),
picks a queue with latency-based fault avoidance, sends SEND_MESSAGE_V2 to that broker's master and
retries within sendMsgTimeout: a broker's retriable answer (SYSTEM_BUSY...) up to retryTimesWhenSendFailed
times on another broker; a broker that does not answer, or that left the NameServer, until the timeout,
backing off when no other broker is available (send_failure.py), and then BrokerUnreachable names it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from broker.client.api import ConsumerData
from broker.client.batch import check_batch, encode_batch_body, split_batches
from broker.client.config import ClientConfig, ProducerConfig, client_config_with
from broker.client.errors import (
    ClientError,
    IllegalStateError,
    MessageTooLarge,
    NameServerUnreachable,
    NoRouteError,
    RocketError,
    is_retriable,
)
from broker.client.fault import FaultStrategy
from broker.client.instance import ClientInstance
from broker.client.message import Message, MessageExt, MessageQueue, SendResult, SendStatus
from broker.client.request import RequestSendFailed, RequestTimeoutError, new_correlation_id, request_table
from broker.client.route import TopicPublishInfo, TopicRouteData, parse_cluster_info
from broker.client.selector import MessageQueueSelector
from broker.client.send_failure import Backoff, unreachable, vanished
from broker.protocol.headers import SendMessageRequestHeader
from broker.protocol.message import SysFlag
from broker.protocol.properties import Prop, encode_properties
from broker.protocol.reply import CORRELATION_ID, REPLY_TO_CLIENT, TTL
from broker.protocol.uniq_key import UniqKeyGenerator
from broker.transport.errors import RemotingError, RequestTimeout

__all__ = ["Producer", "SendCallback", "validate_message"]

log = logging.getLogger(__name__)

SendCallback = Callable[[SendResult | None, BaseException | None], None]

_TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
_TOPIC_MAX = 127


def validate_message(msg: Message, max_size: int) -> None:
    """Client-side checks of Java's Validators.checkMessage, with clearer messages."""
    if not msg.topic:
        raise ClientError("the message has no topic")
    if len(msg.topic) > _TOPIC_MAX:
        raise ClientError(f"topic {msg.topic[:20]!r}... is longer than {_TOPIC_MAX} characters")
    if not _TOPIC_RE.match(msg.topic):
        raise ClientError(f"topic {msg.topic!r} may contain only letters, digits, '%', '|', '_' and '-'")
    if not msg.body:
        raise ClientError("the message body is empty")
    if len(msg.body) > max_size:
        raise MessageTooLarge(f"message body of {len(msg.body)} bytes exceeds maxMessageSize {max_size}")


class Producer:
    def __init__(
        self,
        group: str = "DEFAULT_PRODUCER",
        namesrv_addr: str | None = None,
        *,
        config: ProducerConfig | None = None,
        client_config: ClientConfig | None = None,
        instance: ClientInstance | None = None,
        **options: Any,
    ) -> None:
        """`options` are ProducerConfig field names (e.g. `retry_times_when_send_failed=0`)."""
        self.config = replace(config or ProducerConfig(), group=group, **options)
        if instance is not None and client_config is None and namesrv_addr is None:
            cc = instance.config  # sharing a consumer's instance: its NameServers are ours
        else:
            cc = client_config_with(client_config, namesrv_addr)
        self.client_config = cc
        self._own_instance = instance is None
        self.instance = instance or ClientInstance(
            cc, topics=self._topics, heartbeat=self._heartbeat_data, on_route_change=self._route_changed
        )
        self.fault = FaultStrategy(self.config.send_latency_fault_enable)
        self._publish: dict[str, TopicPublishInfo] = {}
        self._uniq = UniqKeyGenerator(cc.client_ip)
        self._started = False
        self._pending: set[asyncio.Task[Any]] = set()
        self._heartbeat_sent = False

    @property
    def group(self) -> str:
        return self.config.group

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def start(self) -> None:
        if self._started:
            return
        if self._own_instance:
            await self.instance.start()
        self._started = True

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=self.config.send_msg_timeout)
        if self._own_instance:
            await self.instance.unregister(producer_group=self.group)
            await self.instance.close()

    close = shutdown

    def _topics(self) -> list[str]:
        return list(self._publish)

    def _heartbeat_data(self) -> tuple[list[str], list[ConsumerData]]:
        return [self.group], []

    def _route_changed(self, topic: str, route: TopicRouteData) -> None:
        if topic in self._publish:
            info = TopicPublishInfo.from_route(topic, route)
            if info.ok:
                self._publish[topic] = info

    def _check_started(self) -> None:
        if not self._started:
            raise IllegalStateError("the producer is not started (call start() first)")

    # ------------------------------------------------------------------ routes

    async def publish_info(self, topic: str) -> TopicPublishInfo:
        info = self._publish.get(topic)
        if info is not None and info.ok:
            return info
        route = await self.instance.update_route(topic)
        if route is not None:
            info = TopicPublishInfo.from_route(topic, route)
        if info is None or not info.ok:
            # Unknown topic: send via the default topic's brokers, which create it on first use.
            default = await self.instance.update_route(self.config.create_topic_key)
            if default is not None:
                info = TopicPublishInfo.from_route(topic, default)
                # Auto-created topics get min(defaultTopicQueueNums, TBW102's queues) queues.
                info.queues = [q for q in info.queues if q.queue_id < self.config.default_topic_queue_nums]
        if info is None or not info.ok:
            raise NoRouteError(
                f"topic {topic} does not exist: the NameServer has no route for it, and no"
                f" {self.config.create_topic_key} route to create it from (autoCreateTopicEnable is off);"
                f" create it with mqadmin updateTopic -t {topic}"
            )
        self._publish[topic] = info
        await self._first_heartbeat()
        return info

    async def _first_heartbeat(self) -> None:
        # A producer group shows up on brokers (for transaction checks and mqadmin) only via heartbeats.
        if self._own_instance and not self._heartbeat_sent:
            self._heartbeat_sent = True
            await self.instance.send_heartbeat()

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        self._check_started()
        return list((await self.publish_info(topic)).queues)

    # ------------------------------------------------------------------ encoding

    def _prepare(self, msg: Message) -> tuple[int, bytes, str]:
        """(sysFlag, body to send, UNIQ_KEY) for a single message; sets UNIQ_KEY if missing."""
        validate_message(msg, self.config.max_message_size)
        uniq = msg.properties.get(Prop.UNIQ_KEY)
        if not uniq:
            uniq = self._uniq.next()
            msg.properties[Prop.UNIQ_KEY] = uniq
        body, sys_flag = msg.body, 0
        if len(body) > self.config.compress_msg_body_over_howmuch:
            packed = zlib.compress(body, self.config.compress_level)
            if len(packed) < len(body):
                body, sys_flag = packed, SysFlag.COMPRESSED | SysFlag.COMPRESSION_ZLIB
        return sys_flag, body, uniq

    def _header(
        self,
        topic: str,
        mq: MessageQueue,
        sys_flag: int,
        flag: int,
        properties: dict[str, str],
        *,
        batch: bool = False,
        reconsume_times: int | None = None,
        max_reconsume_times: int | None = None,
    ) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            producer_group=self.group,
            topic=topic,
            default_topic=self.config.create_topic_key,
            default_topic_queue_nums=self.config.default_topic_queue_nums,
            queue_id=mq.queue_id,
            sys_flag=sys_flag,
            born_timestamp=time.time_ns() // 1_000_000,
            flag=flag,
            properties=encode_properties(properties),
            reconsume_times=reconsume_times if reconsume_times is not None else 0,
            unit_mode=False,
            max_reconsume_times=max_reconsume_times,
            batch=batch,
            broker_name=mq.broker_name,
        )

    # ------------------------------------------------------------------ sending

    async def send(
        self,
        msg: Message,
        *,
        timeout: float | None = None,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> SendResult:
        """Send and wait for the broker. `queue` pins the queue; `selector(queues, msg, arg)`
        chooses one (ordered messages: `selector=select_by_hash, arg=sharding_key`). Pinned and
        selected sends are not retried on another queue, which would break the ordering."""
        self._check_started()
        sys_flag, body, uniq = self._prepare(msg)
        budget = self.config.send_msg_timeout if timeout is None else timeout
        if queue is not None or selector is not None:
            info = await self.publish_info(msg.topic)
            if queue is None:
                assert selector is not None
                queue = selector(info.queues, msg, arg)
            return await self._send_to(queue, msg.topic, sys_flag, msg.flag, msg.properties, body, [uniq], budget)
        return await self._send_with_retries(
            msg.topic,
            lambda mq: self._header(msg.topic, mq, sys_flag, msg.flag, msg.properties),
            body,
            [uniq],
            budget,
            1 + self.config.retry_times_when_send_failed,
        )

    def send_async(
        self, msg: Message, callback: SendCallback | None = None, *, timeout: float | None = None
    ) -> asyncio.Task[SendResult]:
        """Start a send and return its task; `callback(result, exc)` runs when it completes."""
        self._check_started()

        async def run() -> SendResult:
            sys_flag, body, uniq = self._prepare(msg)
            return await self._send_with_retries(
                msg.topic,
                lambda mq: self._header(msg.topic, mq, sys_flag, msg.flag, msg.properties),
                body,
                [uniq],
                self.config.send_msg_timeout if timeout is None else timeout,
                1 + self.config.retry_times_when_send_async_failed,
            )

        task = asyncio.get_running_loop().create_task(run())
        self._pending.add(task)

        def done(t: asyncio.Task[SendResult]) -> None:
            self._pending.discard(t)
            exc = None if t.cancelled() else t.exception()
            if callback is not None:
                try:
                    callback(None if exc or t.cancelled() else t.result(), exc)
                except Exception:
                    log.exception("send callback failed")
            elif exc is not None:
                log.debug("async send of %s failed: %s", msg.topic, exc)

        task.add_done_callback(done)
        return task

    async def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None) -> None:
        """Fire and forget: no response is awaited and nothing is retried."""
        self._check_started()
        sys_flag, body, _uniq = self._prepare(msg)
        info = await self.publish_info(msg.topic)
        mq = queue or self.fault.select(info)
        addr = await self.instance.find_master(mq.broker_name, msg.topic)
        await self.instance.api.send_oneway(addr, self._header(msg.topic, mq, sys_flag, msg.flag, msg.properties), body)

    async def send_batch(self, msgs: Sequence[Message], *, timeout: float | None = None) -> list[SendResult]:
        """Send messages of one topic as SEND_BATCH_MESSAGE requests of at most maxMessageSize bytes each."""
        self._check_started()
        topic = check_batch(msgs)
        for msg in msgs:
            validate_message(msg, self.config.max_message_size)
            msg.properties.setdefault(Prop.UNIQ_KEY, self._uniq.next())
        results = []
        for part in split_batches(msgs, self.config.max_message_size):
            body = encode_batch_body(part)
            uniqs = [m.properties[Prop.UNIQ_KEY] for m in part]
            props = {Prop.WAIT: part[0].properties[Prop.WAIT]} if Prop.WAIT in part[0].properties else {}
            results.append(
                await self._send_with_retries(
                    topic,
                    partial(self._header, topic, sys_flag=0, flag=0, properties=props, batch=True),
                    body,
                    uniqs,
                    self.config.send_msg_timeout if timeout is None else timeout,
                    1 + self.config.retry_times_when_send_failed,
                )
            )
        return results

    # ------------------------------------------------------------------ request/reply (request.py)

    async def request(self, msg: Message, timeout: float = 3.0) -> MessageExt:
        """Send `msg` as a request and wait up to `timeout` seconds for its reply (Java's request()).

        A responder answers with `create_reply_message(request, body)`; the broker pushes that reply to
        this client. RequestSendFailed when the request cannot be sent, RequestTimeoutError when it was
        sent but no reply came in time."""
        self._check_started()
        started = time.monotonic()
        correlation = new_correlation_id()
        msg.properties[CORRELATION_ID] = correlation
        msg.properties[REPLY_TO_CLIENT] = self.instance.client_id
        msg.properties[TTL] = str(int(timeout * 1000))
        table = request_table(self.instance)
        known = msg.topic in self.instance.routes
        future = table.expect(correlation)
        try:
            try:
                if not known:
                    # The reply comes back over our connection to the broker: it must know us first.
                    await self.publish_info(msg.topic)
                    await self.instance.send_heartbeat()
                await self.send(msg, timeout=max(timeout - (time.monotonic() - started), 0.001))
            except (RocketError, RemotingError) as exc:
                raise RequestSendFailed(f"send request message to <{msg.topic}> fail: {exc}") from exc
            remaining = timeout - (time.monotonic() - started)
            try:
                return await asyncio.wait_for(future, max(remaining, 0.0))
            except TimeoutError:
                raise RequestTimeoutError(
                    f"send request message to <{msg.topic}> OK, but wait reply message timeout, "
                    f"{int(timeout * 1000)} ms."
                ) from None
        finally:
            table.forget(correlation)

    async def send_to_retry_topic(self, msg: Message, reconsume_times: int, max_reconsume_times: int) -> SendResult:
        """Used by push consumers when CONSUMER_SEND_MSG_BACK fails: the header carries the retry counters."""
        self._check_started()
        sys_flag, body, uniq = self._prepare(msg)
        return await self._send_with_retries(
            msg.topic,
            lambda mq: self._header(
                msg.topic,
                mq,
                sys_flag,
                msg.flag,
                msg.properties,
                reconsume_times=reconsume_times,
                max_reconsume_times=max_reconsume_times,
            ),
            body,
            [uniq],
            self.config.send_msg_timeout,
            1 + self.config.retry_times_when_send_failed,
        )

    async def _send_to(
        self,
        mq: MessageQueue,
        topic: str,
        sys_flag: int,
        flag: int,
        properties: dict[str, str],
        body: bytes,
        uniqs: list[str],
        timeout: float,
    ) -> SendResult:
        addr = await self.instance.find_master(mq.broker_name, topic)
        start = time.monotonic()
        try:
            result = await self.instance.api.send(
                addr, mq, self._header(topic, mq, sys_flag, flag, properties), body, uniqs, timeout
            )
        except (RocketError, RemotingError) as exc:
            self.fault.update(mq.broker_name, (time.monotonic() - start) * 1000, isolation=True)
            raise exc
        self.fault.update(mq.broker_name, (time.monotonic() - start) * 1000, isolation=False)
        return result

    async def _vanished_brokers(self, topic: str) -> dict[str, str] | None:
        """After a failed route lookup: the brokers (name -> address) that served `topic` and are no longer
        registered, {} when no broker at all is registered, or None when brokers are up and the topic is
        simply missing (deleted, or never created)."""
        try:
            cluster = parse_cluster_info(await self.instance.namesrv_call(self.instance.api.get_cluster_info))
        except (RocketError, RemotingError):
            return None
        old = self.instance.routes.get(topic)
        if old is None:
            return {} if not cluster.brokers else None
        served = {bd.broker_name: bd.broker_addrs.get(0, "") for bd in old.broker_datas}
        gone = {name: addr for name, addr in served.items() if name not in cluster.brokers}
        return gone if gone and len(gone) == len(served) else None

    async def _send_with_retries(
        self,
        topic: str,
        make_header: Callable[[MessageQueue], SendMessageRequestHeader],
        body: bytes,
        uniqs: list[str],
        budget: float,
        attempts: int,
    ) -> SendResult:
        started = time.monotonic()
        deadline = started + budget
        backoff = Backoff(self.config.retry_backoff_initial, self.config.retry_backoff_max)
        last_broker: str | None = None
        last_error: BaseException | None = None
        result: SendResult | None = None
        silent: dict[str, str] = {}  # brokers whose last attempt got no answer: name -> address
        gone: dict[str, str] | None = None  # set while the topic's brokers are missing from the NameServer
        answered_failures = tries = 0
        while (remaining := deadline - time.monotonic()) > 0:
            tries += 1
            try:
                info = await self.publish_info(topic)
            except NoRouteError as exc:
                last_error = exc
                gone = None if isinstance(exc, NameServerUnreachable) else await self._vanished_brokers(topic)
                if attempts <= 1 or (gone is None and not isinstance(exc, NameServerUnreachable)):
                    raise  # the topic does not exist: waiting will not create it
                log.info("no route for %s yet (attempt %d): %s", topic, tries, exc)
                await asyncio.sleep(backoff.delay(deadline - time.monotonic()))
                continue
            gone = None
            mq = self.fault.select(info, last_broker)
            last_broker = mq.broker_name
            addr: str | None = None
            start = time.monotonic()
            try:
                addr = await self.instance.find_master(mq.broker_name, topic)
                result = await self.instance.api.send(addr, mq, make_header(mq), body, uniqs, remaining)
            except (RocketError, RemotingError) as exc:
                self.fault.update(mq.broker_name, (time.monotonic() - start) * 1000, isolation=True)
                last_error = exc
                no_answer = isinstance(exc, RemotingError)
                if no_answer:
                    silent[mq.broker_name] = addr or ""
                if not is_retriable(exc) or attempts <= 1:
                    if no_answer:
                        raise unreachable(topic, silent, exc, tries, time.monotonic() - started) from exc
                    raise
                if not no_answer:
                    answered_failures += 1
                    if answered_failures >= attempts:
                        break
                log.info("send to %s failed (attempt %d): %s", mq, tries, exc)
                if no_answer or getattr(exc, "refresh_route", False):
                    self._publish.pop(topic, None)
                if not self.fault.has_alternative(info, mq.broker_name):
                    await asyncio.sleep(backoff.delay(deadline - time.monotonic()))
                continue
            silent.pop(mq.broker_name, None)
            self.fault.update(mq.broker_name, (time.monotonic() - start) * 1000, isolation=False)
            if result.status is not SendStatus.SEND_OK and self.config.retry_another_broker_when_not_store_ok:
                answered_failures += 1
                if answered_failures < attempts:
                    continue
            return result
        if result is not None:
            return result  # stored, though not SEND_OK, and no better attempt succeeded
        elapsed = time.monotonic() - started
        if gone is not None:
            raise vanished(topic, gone, self.instance.namesrvs, tries, elapsed) from last_error
        if isinstance(last_error, RemotingError) and silent:
            raise unreachable(topic, silent, last_error, tries, elapsed) from last_error
        if last_error is not None:
            raise last_error
        raise RequestTimeout(f"send to {topic} timed out after {budget:.1f}s before any attempt completed")
