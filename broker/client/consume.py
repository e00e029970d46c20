"""Running the application's listener, and the copy of a failed message sent to %RETRY%<group>. The
push consumer's consume services (consume_service.py, concurrent or orderly) call both.

Listeners are `callable(list[MessageExt]) -> ConsumeStatus`, plain or `async def`. Plain ones run
in a thread pool of consumeThreadMax threads so they may block; coroutines run as tasks, at most
consumeThreadMax at once. An exception or a non-ConsumeStatus return counts as RECONSUME_LATER, as
in Java (a listener that forgets to return does not silently lose messages).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeAlias

from broker.client.message import ConsumeStatus, Message, MessageExt
from broker.protocol.properties import Prop

__all__ = ["Listener", "ListenerRunner", "normalise_status", "restore_retry_topic", "retry_message"]

log = logging.getLogger(__name__)

# What a listener should return; anything else it returns at run time counts as RECONSUME_LATER.
Listener: TypeAlias = Callable[[list[MessageExt]], ConsumeStatus | Awaitable[ConsumeStatus]]


def normalise_status(value: object) -> ConsumeStatus:
    if isinstance(value, ConsumeStatus):
        return value
    log.warning("listener returned %r instead of a ConsumeStatus; treating it as RECONSUME_LATER", value)
    return ConsumeStatus.RECONSUME_LATER


def restore_retry_topic(msgs: Sequence[MessageExt], retry_topic: str) -> None:
    """Messages pulled from %RETRY%<group> show the topic they were first sent to."""
    for msg in msgs:
        if msg.topic == retry_topic:
            original = msg.properties.get(Prop.RETRY_TOPIC)
            if original:
                msg.topic = original


def retry_message(
    msg: MessageExt, retry_topic: str, max_reconsume_times: int, reconsume_times: int, delay_level: int | None
) -> Message:
    """The copy of a failed message a consumer sends to its group's %RETRY% topic itself (Java's
    sendMessageBack fallback and the orderly checkReconsumeTimes): it remembers the topic and id it was
    first stored under, carries the retry counters, and comes back after `delay_level` (None: no delay,
    for an orderly batch that has used up its retries, which the broker stores in the DLQ)."""
    props = dict(msg.properties)
    props.setdefault(Prop.RETRY_TOPIC, msg.topic)
    props.setdefault(Prop.ORIGIN_MESSAGE_ID, msg.msg_id)
    props[Prop.RECONSUME_TIME] = str(reconsume_times)
    props[Prop.MAX_RECONSUME_TIMES] = str(max_reconsume_times)
    if delay_level is None:
        props.pop(Prop.DELAY, None)
    else:
        props[Prop.DELAY] = str(delay_level)
    return Message(retry_topic, msg.body, properties=props, flag=msg.flag)


class ListenerRunner:
    """Calls the listener with bounded concurrency, in threads (sync) or tasks (async)."""

    def __init__(self, listener: Listener, max_concurrency: int) -> None:
        self.listener = listener
        call = getattr(listener, "__call__", None)  # noqa: B004 - an async __call__ counts as async
        self.is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(call)
        self._slots = asyncio.Semaphore(max_concurrency)
        self._pool = None if self.is_async else ThreadPoolExecutor(max_concurrency, thread_name_prefix="consume")

    async def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        async with self._slots:
            try:
                if self.is_async:
                    value: object = self.listener(msgs)
                else:
                    loop = asyncio.get_running_loop()
                    value = await loop.run_in_executor(self._pool, self.listener, msgs)
                if inspect.isawaitable(value):
                    value = await value
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("listener failed on %d message(s); they will be consumed again", len(msgs))
                return ConsumeStatus.RECONSUME_LATER
        return normalise_status(value)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
