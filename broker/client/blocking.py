"""Blocking facade over the asyncio clients, for code without an event loop (scripts, threads, Spark).

Each facade object owns a `LoopThread`: a uvloop running in a daemon thread, where the real async
client lives. Methods submit coroutines to it and wait for the result, so they may be called from
any thread. Push-consumer listeners given here are plain functions and run in the consumer's
worker threads (consumeThreadMax of them), never on the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import logging
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, Self, TypeVar

from broker.client.admin import Admin
from broker.client.consume import Listener
from broker.client.message import Message, MessageExt, MessageQueue, SendResult
from broker.client.producer import Producer, SendCallback
from broker.client.pull_consumer import PullConsumer
from broker.client.push_consumer import PushConsumer
from broker.client.subscription import MessageSelector
from broker.transport.loop import new_event_loop

__all__ = ["BlockingAdmin", "BlockingProducer", "BlockingPullConsumer", "BlockingPushConsumer", "LoopThread"]

log = logging.getLogger(__name__)

# Seconds a blocking shutdown waits for the client's own (drain 10 s, then commits and unregisters, each bounded
# by the request timeout) before it gives up on it.
SHUTDOWN_TIMEOUT = 60.0

T = TypeVar("T")


class LoopThread:
    """An event loop in a background thread; `run(coro)` executes a coroutine there and waits."""

    def __init__(self, name: str = "rocket-client") -> None:
        self.loop = new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if threading.current_thread() is self._thread:
            raise RuntimeError("blocking call from the client's own loop thread (e.g. an async listener)")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def describe_tasks(self) -> str:
        """The loop's pending tasks and where each one waits, for a log line."""

        async def describe() -> str:
            out = io.StringIO()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.print_stack(limit=8, file=out)
            return out.getvalue()

        try:
            return self.run(describe(), timeout=5)
        except Exception as exc:  # a blocked loop cannot describe itself
            return f"(the loop does not answer: {exc!r})"

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


async def _build(factory: Callable[[], T]) -> T:
    # Clients are constructed on their loop so anything loop-bound they create binds to it.
    return factory()


def _construct(lt: LoopThread, factory: Callable[[], T]) -> T:
    """Build a client on `lt`; a client that cannot be built (no NameServer address...) stops the thread."""
    try:
        return lt.run(_build(factory))
    except BaseException:
        lt.stop()
        raise


class _BlockingClient:
    """The lifecycle the blocking facades share: one loop thread running one async client."""

    _lt: LoopThread
    _client: Producer | PushConsumer | PullConsumer

    def start(self) -> None:
        self._lt.run(self._client.start())

    def shutdown(self) -> None:
        """Shut the client down, waiting at most SHUTDOWN_TIMEOUT: a shutdown stuck on an unreachable broker
        must not hold its caller forever. What it still waited for then is logged, and the loop stops."""
        future = self._lt.submit(self._client.shutdown())
        try:
            future.result(SHUTDOWN_TIMEOUT)
        except concurrent.futures.TimeoutError:
            log.warning(
                "%s did not shut down within %.0f s; stopping its loop. Still waiting:\n%s",
                type(self._client).__name__,
                SHUTDOWN_TIMEOUT,
                self._lt.describe_tasks(),
            )
            future.cancel()
        finally:
            self._lt.stop()

    close = shutdown

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class BlockingProducer(_BlockingClient):
    def __init__(self, group: str = "DEFAULT_PRODUCER", namesrv_addr: str | None = None, **options: Any) -> None:
        self._lt = LoopThread(f"producer-{group}")
        self.producer: Producer = _construct(self._lt, lambda: Producer(group, namesrv_addr, **options))
        self._client = self.producer

    def send(self, msg: Message, **kwargs: Any) -> SendResult:
        return self._lt.run(self.producer.send(msg, **kwargs))

    def send_async(self, msg: Message, callback: SendCallback | None = None) -> concurrent.futures.Future[SendResult]:
        """Returns at once; the callback runs on the client's loop thread, so keep it short."""

        async def start() -> SendResult:
            return await self.producer.send_async(msg, callback)

        return self._lt.submit(start())

    def send_oneway(self, msg: Message, **kwargs: Any) -> None:
        self._lt.run(self.producer.send_oneway(msg, **kwargs))

    def send_batch(self, msgs: Sequence[Message], **kwargs: Any) -> list[SendResult]:
        return self._lt.run(self.producer.send_batch(msgs, **kwargs))

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        return self._lt.run(self.producer.fetch_publish_queues(topic))


class BlockingPushConsumer(_BlockingClient):
    def __init__(self, group: str = "DEFAULT_CONSUMER", namesrv_addr: str | None = None, **options: Any) -> None:
        self._lt = LoopThread(f"push-{group}")
        self.consumer: PushConsumer = _construct(self._lt, lambda: PushConsumer(group, namesrv_addr, **options))
        self._client = self.consumer

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        self._lt.run(_build(lambda: self.consumer.subscribe(topic, expression)))

    def register_listener(self, listener: Listener, *, orderly: bool = False) -> None:
        self.consumer.register_listener(listener, orderly=orderly)

    def assignment(self) -> set[MessageQueue]:
        return self._lt.run(_build(self.consumer.assignment))


class BlockingPullConsumer(_BlockingClient):
    def __init__(self, group: str = "DEFAULT_CONSUMER", namesrv_addr: str | None = None, **options: Any) -> None:
        self._lt = LoopThread(f"pull-{group}")
        self.consumer: PullConsumer = _construct(self._lt, lambda: PullConsumer(group, namesrv_addr, **options))
        self._client = self.consumer

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        self._lt.run(_build(lambda: self.consumer.subscribe(topic, expression)))

    def assign(self, queues: Iterable[MessageQueue], expression: str | None = "*") -> None:
        qs = list(queues)
        self._lt.run(_build(lambda: self.consumer.assign(qs, expression)))

    def poll(self, timeout: float = 5.0) -> list[MessageExt]:
        return self._lt.run(self.consumer.poll(timeout))

    def commit(self) -> None:
        self._lt.run(self.consumer.commit())

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._lt.run(self.consumer.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._lt.run(self.consumer.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._lt.run(self.consumer.seek_to_end(mq))

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return self._lt.run(self.consumer.fetch_queues(topic))

    def committed(self, mq: MessageQueue) -> int:
        return self._lt.run(self.consumer.committed(mq))


class BlockingAdmin:
    """Every coroutine method of Admin, called synchronously: `BlockingAdmin(addr).topic_list()`."""

    def __init__(self, namesrv_addr: str | None = None) -> None:
        self._lt = LoopThread("admin")
        self.admin: Admin = _construct(self._lt, lambda: Admin(namesrv_addr))

    def __getattr__(self, name: str) -> Callable[..., Any]:
        attr = getattr(self.admin, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr  # type: ignore[no-any-return]

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._lt.run(attr(*args, **kwargs))

        return call

    def shutdown(self) -> None:
        try:
            self._lt.run(self.admin.shutdown())
        finally:
            self._lt.stop()

    close = shutdown

    def __enter__(self) -> BlockingAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
