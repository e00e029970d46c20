"""Writing DataFrames to topics: the batch writer and the streaming sink (`format("rocketmq")`).

`RocketMQDataSource.writer()` / `.streamWriter()` build these on the driver; `write()` runs in
executor Python workers and receives Arrow record batches. Each worker process keeps one started
Producer per (NameServer, producer group) on a background event loop (`producer_for`), so Spark's
reused workers do not reconnect per task. A task returns only after the broker acknowledged every
message; a failed send fails the task and Spark retries it, so delivery is at-least-once (a retried
task sends its rows again). Nothing is transactional: `commit` and `abort` only log.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

from broker.client.blocking import LoopThread
from broker.client.config import ClientConfig
from broker.client.message import Message
from broker.client.producer import Producer
from broker.spark.options import OptionError, SinkOptions, SparkTls

__all__ = [
    "RocketMQBatchWriter",
    "RocketMQStreamWriter",
    "SentMessages",
    "check_sink_schema",
    "messages_from_batch",
    "producer_for",
]

log = logging.getLogger(__name__)


@dataclass
class SentMessages(WriterCommitMessage):
    count: int


def check_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Fail on the driver, before any task starts, when the DataFrame cannot be written."""
    fields = {f.name: f.dataType for f in schema.fields}
    allowed = {
        "body": (BinaryType, StringType),
        "topic": (StringType,),
        "tags": (StringType,),
        "keys": (StringType, ArrayType),
        "properties": (MapType,),
    }
    if "body" not in fields:
        raise OptionError("the DataFrame written to rocketmq needs a body column (binary or string)")
    if opts.topic is None and "topic" not in fields:
        raise OptionError("set the topic option or give the DataFrame a topic column")
    for name, types in allowed.items():
        if name in fields and not isinstance(fields[name], types):
            expected = " or ".join(t.typeName() for t in types)
            raise OptionError(f"column {name} has type {fields[name].simpleString()}; expected {expected}")


def messages_from_batch(batch: pa.RecordBatch, topic: str | None) -> list[Message]:
    """Messages for the rows of one Arrow batch. Columns other than body, topic, tags, keys and
    properties are ignored; the topic option wins over the topic column."""
    cols = {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}
    n = batch.num_rows
    bodies: list[Any] = cols["body"]
    topics: list[Any] = [topic] * n if topic is not None else cols["topic"]
    tags: list[Any] = cols.get("tags") or [None] * n
    keys: list[Any] = cols.get("keys") or [None] * n
    props: list[Any] = cols.get("properties") or [None] * n
    out = []
    for i in range(n):
        if bodies[i] is None or topics[i] is None:
            raise ValueError(f"row {i} of a batch has a null {'body' if bodies[i] is None else 'topic'}")
        k = keys[i]
        out.append(
            Message(
                topics[i],
                bodies[i],
                tags=tags[i],
                keys=k.split(" ") if isinstance(k, str) else k,
                properties=dict(props[i]) if props[i] else None,
            )
        )
    return out


class _ProducerHandle:
    def __init__(self, opts: SinkOptions) -> None:
        self.loop_thread = LoopThread(f"spark-rocketmq-producer-{os.getpid()}")
        config = ClientConfig(
            namesrv_addr=opts.namesrv, instance_name=f"spark-writer-{os.getpid()}", **opts.tls.client_settings()
        )

        async def build() -> Producer:
            producer = Producer(opts.producer_group, client_config=config, send_msg_timeout=opts.send_timeout)
            await producer.start()
            return producer

        self.producer = self.loop_thread.run(build())

    def send_all(self, msgs: Sequence[Message], window: int) -> int:
        return self.loop_thread.run(_send_pipelined(self.producer, msgs, window))

    def close(self) -> None:
        try:
            self.loop_thread.run(self.producer.shutdown(), timeout=15)
        finally:
            self.loop_thread.stop()


async def _send_pipelined(producer: Producer, msgs: Sequence[Message], window: int) -> int:
    """Send with up to `window` requests in flight; raise the first failure after all settle."""
    slots = asyncio.Semaphore(window)
    tasks = []
    for msg in msgs:
        await slots.acquire()
        task = asyncio.ensure_future(producer.send(msg))
        task.add_done_callback(lambda _t: slots.release())
        tasks.append(task)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return len(results)


_producers: dict[tuple[int, str, str, SparkTls], _ProducerHandle] = {}
_lock = threading.Lock()


def producer_for(opts: SinkOptions) -> _ProducerHandle:
    """This worker process's producer for the sink's NameServer and group (built on first use)."""
    key = (os.getpid(), opts.namesrv, opts.producer_group, opts.tls)
    with _lock:
        handle = _producers.get(key)
        if handle is None:
            handle = _producers[key] = _ProducerHandle(opts)
        return handle


@atexit.register
def _close_producers() -> None:
    for key, handle in list(_producers.items()):
        if key[0] == os.getpid():
            try:
                handle.close()
            except Exception as exc:  # exiting anyway; every task already waited for its acks
                log.debug("closing producer %s failed: %s", key, exc)
    _producers.clear()


def _write(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> SentMessages:
    handle = producer_for(opts)
    sent = 0
    for batch in batches:
        if batch.num_rows:
            sent += handle.send_all(messages_from_batch(batch, opts.topic), opts.max_in_flight)
    return SentMessages(sent)


def _total(messages: Sequence[WriterCommitMessage | None]) -> int:
    return sum(m.count for m in messages if isinstance(m, SentMessages))


class RocketMQBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _write(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("wrote %d messages to rocketmq", _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Sent messages cannot be taken back; the failed job is reported by Spark.
        log.warning("write aborted after %d acknowledged messages (they stay in the topic)", _total(messages))


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _write(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("batch %d: wrote %d messages to rocketmq", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("batch %d aborted after %d acknowledged messages (they stay)", batchId, _total(messages))
