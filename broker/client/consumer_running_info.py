"""What a consumer answers when a broker relays an admin's question about it (Java's ClientRemotingProcessor):
GET_CONSUMER_RUNNING_INFO (307) and GET_CONSUMER_STATUS_FROM_CLIENT (221).

`running_info_body` writes RocketMQ's ConsumerRunningInfo (remoting/protocol/body/ConsumerRunningInfo.java)
in fastjson's dialect, since the Java mqadmin decodes it with fastjson: `properties` (strings only: the
tools parse PROP_CONSUMER_START_TIMESTAMP with Long.parseLong and PROP_CONSUME_TYPE with valueOf),
`subscriptionSet` sorted as Java's TreeSet (topic@subString), `mqTable` with MessageQueue objects as keys
and one ProcessQueueInfo each, and `statusTable` (topic -> ConsumeStatus). The push and pull consumers
gather the values; this module only shapes them.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from broker.client.config import ClientConfig, ConsumerConfig
from broker.client.message import MessageQueue
from broker.client.process_queue import ProcessQueue
from broker.client.subscription import SubscriptionJson
from broker.protocol.bodies import MessageQueue as WireQueue
from broker.protocol.bodies import fastjson_dumps

__all__ = [
    "CLIENT_VERSION_DESC",
    "PROP_CLIENT_VERSION",
    "PROP_CONSUMER_START_TIMESTAMP",
    "PROP_CONSUME_ORDERLY",
    "PROP_CONSUME_TYPE",
    "PROP_NAMESERVER_ADDR",
    "PROP_THREADPOOL_CORE_SIZE",
    "ProcessQueueInfo",
    "RunningInfo",
    "consumer_properties",
    "consumer_status_body",
    "process_queue_info",
    "running_info_body",
    "thread_stacks",
    "topic_offsets",
]

PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"
# MQVersion.getVersionDesc of the version our heartbeats and requests carry (CURRENT_VERSION, 479)
CLIENT_VERSION_DESC = "V5_3_3"


class ProcessQueueInfo(TypedDict):
    """Java's ProcessQueueInfo as JSON (timestamps in epoch milliseconds; `droped` is Java's spelling)."""

    cachedMsgCount: int
    cachedMsgMaxOffset: int
    cachedMsgMinOffset: int
    cachedMsgSizeInMiB: int
    commitOffset: int
    droped: bool
    lastConsumeTimestamp: int
    lastLockTimestamp: int
    lastPullTimestamp: int
    locked: bool
    transactionMsgCount: int
    transactionMsgMaxOffset: int
    transactionMsgMinOffset: int
    tryUnlockTimes: int


@dataclass(slots=True)
class RunningInfo:
    """What a consumer reports of itself; the ClientInstance adds the NameServer list and client version."""

    properties: dict[str, str]
    subscriptions: list[SubscriptionJson]
    mq_table: dict[MessageQueue, ProcessQueueInfo]
    status_table: dict[str, dict[str, float | int]] = field(default_factory=dict)


def _ms(seconds: float) -> str:
    return str(int(seconds * 1000))


def consumer_properties(config: ConsumerConfig, client: ClientConfig) -> dict[str, str]:
    """The consumer's settings under the Java field names MixAll.object2Properties reports them by (times in
    milliseconds, as Java keeps them); settings this SDK does not have are left out, not invented."""
    props = {
        "consumerGroup": config.group,
        "messageModel": config.message_model.name,
        "consumeFromWhere": config.consume_from_where.name,
        "consumeThreadMin": str(config.consume_thread_min),
        "consumeThreadMax": str(config.consume_thread_max),
        "consumeConcurrentlyMaxSpan": str(config.consume_concurrently_max_span),
        "pullThresholdForQueue": str(config.pull_threshold_for_queue),
        "pullThresholdSizeForQueue": str(config.pull_threshold_size_for_queue),
        "pullInterval": _ms(config.pull_interval),
        "consumeMessageBatchMaxSize": str(config.consume_message_batch_max_size),
        "pullBatchSize": str(config.pull_batch_size),
        "maxReconsumeTimes": str(config.max_reconsume_times),
        "suspendCurrentQueueTimeMillis": _ms(config.suspend_current_queue_time),
        "brokerSuspendMaxTimeMillis": _ms(config.broker_suspend_max_time),
        "consumerTimeoutMillisWhenSuspend": _ms(config.consumer_timeout_when_suspend),
        "postSubscriptionWhenPull": "true" if config.post_subscription_when_pull else "false",
        "unitMode": "false",
        "namesrvAddr": ";".join(client.namesrv_list),
        "clientIP": client.client_ip,
        "instanceName": client.instance_name,
        "pollNameServerInterval": _ms(client.poll_name_server_interval),
        "heartbeatBrokerInterval": _ms(client.heartbeat_broker_interval),
        "persistConsumerOffsetInterval": _ms(client.persist_consumer_offset_interval),
        "mqClientApiTimeout": _ms(client.request_timeout),
    }
    return props


def thread_stacks() -> str:
    """The process's thread stacks, as Java puts its jstack into the answer when jstackEnable is set."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        parts.append(f'"{names.get(ident, ident)}"\n' + "".join(traceback.format_stack(frame)))
    return "\n".join(parts)


def _wall_ms(monotonic_ts: float, now_mono: float, now_ms: int) -> int:
    """A ProcessQueue timestamp (monotonic seconds) as the epoch milliseconds Java reports."""
    return now_ms - int((now_mono - monotonic_ts) * 1000)


def process_queue_info(pq: ProcessQueue | None, commit_offset: int, cached: int = 0) -> ProcessQueueInfo:
    """ProcessQueueInfo (ProcessQueue.fillProcessQueueInfo) of one queue. A PullConsumer has no ProcessQueue:
    it passes None and its buffered message count as `cached`."""
    info: ProcessQueueInfo = {
        "cachedMsgCount": cached,
        "cachedMsgMaxOffset": 0,
        "cachedMsgMinOffset": 0,
        "cachedMsgSizeInMiB": 0,
        "commitOffset": commit_offset,
        "droped": False,
        "lastConsumeTimestamp": 0,
        "lastLockTimestamp": 0,
        "lastPullTimestamp": 0,
        "locked": False,
        "transactionMsgCount": 0,
        "transactionMsgMaxOffset": 0,
        "transactionMsgMinOffset": 0,
        "tryUnlockTimes": 0,
    }
    if pq is None:
        return info
    now_mono, now_ms = time.monotonic(), int(time.time() * 1000)
    cached_range = pq.cached_range()
    window = pq.consuming_range()
    info.update(
        {
            # msg_count also counts an orderly consumer's window; Java counts msgTreeMap alone
            "cachedMsgCount": pq.msg_count - window[2],
            "cachedMsgMaxOffset": cached_range[1],
            "cachedMsgMinOffset": cached_range[0],
            "cachedMsgSizeInMiB": pq.msg_size // (1024 * 1024),
            "droped": pq.dropped,
            "lastConsumeTimestamp": _wall_ms(pq.last_consume_timestamp, now_mono, now_ms),
            "lastLockTimestamp": _wall_ms(pq.last_lock_timestamp, now_mono, now_ms),
            "lastPullTimestamp": _wall_ms(pq.last_pull_timestamp, now_mono, now_ms),
            "locked": pq.locked,
            "transactionMsgCount": window[2],
            "transactionMsgMaxOffset": window[1],
            "transactionMsgMinOffset": window[0],
        }
    )
    return info


def _subscription_order(sub: Mapping[str, Any]) -> str:
    # SubscriptionData.compareTo: (topic + "@" + subString) compared as strings
    return f"{sub.get('topic')}@{sub.get('subString')}"


def running_info_body(
    properties: Mapping[str, str],
    subscriptions: Iterable[Mapping[str, Any]],
    mq_table: Mapping[MessageQueue, Mapping[str, Any]],
    status_table: Mapping[str, Mapping[str, Any]],
    jstack: str | None = None,
) -> bytes:
    """ConsumerRunningInfo as fastjson writes it (keys in fastjson's alphabetical order)."""
    body: dict[str, Any] = {
        "mqPopTable": {},
        "mqTable": {WireQueue(mq.topic, mq.broker_name, mq.queue_id): info for mq, info in sorted(mq_table.items())},
        "properties": {k: str(v) for k, v in sorted(properties.items())},
        "statusTable": dict(sorted(status_table.items())),
        "subscriptionSet": sorted(subscriptions, key=_subscription_order),
        "userConsumerInfo": {},
    }
    if jstack is not None:
        body["jstack"] = jstack
    return fastjson_dumps(dict(sorted(body.items())))


def topic_offsets(
    offsets: Mapping[MessageQueue, int], subscribed: Collection[str], group: str, topic: str
) -> dict[MessageQueue, int]:
    """A consumer's offsets of `topic`'s queues (Java's cloneOffsetTable(topic)), for 221; LookupError, in
    Java's words, when the consumer does not subscribe `topic`."""
    if topic not in subscribed:
        raise LookupError(f"The Consumer Group <{group}> does not subscribe topic <{topic}> in this consumer")
    return {mq: off for mq, off in offsets.items() if mq.topic == topic}


def consumer_status_body(offsets: Mapping[MessageQueue, int]) -> bytes:
    """GetConsumerStatusBody of one client (221): its offsets of the asked topic's queues."""
    table = {WireQueue(mq.topic, mq.broker_name, mq.queue_id): off for mq, off in sorted(offsets.items())}
    return fastjson_dumps({"consumerTable": {}, "messageQueueTable": table})
