"""Read-only admin views of a broker, one function per request, with RocketMQ's body shapes parsed here.

mqadmin's topicStatus, consumerProgress, consumerConnection, producerConnection, consumerStatus,
brokerConsumeStats and statsAll call these with a ClientAPI and a broker address: GET_TOPIC_STATS_INFO (202),
GET_CONSUME_STATS (208), GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204),
GET_BROKER_CONSUME_STATS (317), GET_CONSUMER_RUNNING_INFO (307), VIEW_BROKER_STATS_DATA (315) and
QUERY_TOPIC_CONSUME_BY_WHO (300). Bodies may be fastjson's dialect (object keys for MessageQueue maps), so they
go through fastjson_loads; a field this SDK does not know is ignored, a missing one takes Java's default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.client.admin.requests import _call, _parsed
from broker.client.api import ClientAPI
from broker.client.message import MessageQueue
from broker.protocol.bodies import MessageQueue as WireQueue
from broker.protocol.codes import RequestCode

__all__ = [
    "QUERY_TOPIC_CONSUME_BY_WHO",
    "BrokerStatsItem",
    "ConnectionInfo",
    "ConsumerConnection",
    "GroupQueueStats",
    "QueueConsumeStats",
    "QueueStats",
    "consume_stats",
    "consumer_connection",
    "consumer_running_info",
    "producer_connection",
    "topic_consumed_by",
    "topic_stats",
    "view_broker_stats",
]

# RocketMQ's RequestCode.QUERY_TOPIC_CONSUME_BY_WHO; broker.protocol.codes does not list it (nothing else sends it)
QUERY_TOPIC_CONSUME_BY_WHO = 300


def _queue(key: Any) -> MessageQueue:
    """A MessageQueue map key as fastjson_loads gives it (a wire MessageQueue) or a plain object."""
    if isinstance(key, WireQueue):
        return MessageQueue(key.topic, key.broker_name, key.queue_id)
    if isinstance(key, Mapping):
        return MessageQueue.from_json(key)
    raise ValueError(f"a queue key must be a MessageQueue object, got {key!r}")


def _table(data: Mapping[str, Any], name: str) -> dict[MessageQueue, Mapping[str, Any]]:
    table = data.get(name) or {}
    if not isinstance(table, Mapping):
        raise ValueError(f"{name} must be an object")
    return {_queue(k): v for k, v in table.items() if isinstance(v, Mapping)}


# ---------------------------------------------------------------------------------------- topic stats (202)


@dataclass(frozen=True, slots=True)
class QueueStats:
    min_offset: int
    max_offset: int
    last_update_timestamp: int  # store time of the newest message; 0 for an empty queue


def parse_topic_stats(data: Mapping[str, Any]) -> dict[MessageQueue, QueueStats]:
    """TopicStatsTable: {"offsetTable": {mq: {minOffset, maxOffset, lastUpdateTimestamp}}}."""
    return {
        mq: QueueStats(int(v.get("minOffset", 0)), int(v.get("maxOffset", 0)), int(v.get("lastUpdateTimestamp", 0)))
        for mq, v in _table(data, "offsetTable").items()
    }


async def topic_stats(api: ClientAPI, addr: str, topic: str) -> dict[MessageQueue, QueueStats]:
    resp = await _call(api, addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
    return _parsed(resp, addr, parse_topic_stats)


# ---------------------------------------------------------------------------------------- consume stats (208)


@dataclass(frozen=True, slots=True)
class QueueConsumeStats:
    broker_offset: int
    consumer_offset: int
    pull_offset: int
    last_timestamp: int  # store time of the message at the consumer offset; 0 when unknown

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset

    @property
    def inflight(self) -> int:
        return self.pull_offset - self.consumer_offset


@dataclass(frozen=True, slots=True)
class GroupQueueStats:
    """ConsumeStats of one group on one broker: per queue offsets, and the group's consume TPS there."""

    queues: dict[MessageQueue, QueueConsumeStats]
    consume_tps: float


def parse_consume_stats(data: Mapping[str, Any]) -> GroupQueueStats:
    queues = {
        mq: QueueConsumeStats(
            int(v.get("brokerOffset", 0)),
            int(v.get("consumerOffset", 0)),
            int(v.get("pullOffset", 0)),
            int(v.get("lastTimestamp", 0)),
        )
        for mq, v in _table(data, "offsetTable").items()
    }
    return GroupQueueStats(queues, float(data.get("consumeTps") or 0.0))


async def consume_stats(api: ClientAPI, addr: str, group: str, topic: str | None = None) -> GroupQueueStats:
    """GET_CONSUME_STATS: every queue of every topic `group` subscribes (or of `topic` only) on this broker."""
    ext = {"consumerGroup": group}
    if topic:
        ext["topic"] = topic
    resp = await _call(api, addr, RequestCode.GET_CONSUME_STATS, ext)
    return _parsed(resp, addr, parse_consume_stats)


async def broker_consume_stats(api: ClientAPI, addr: str, is_order: bool = False) -> dict[str, Any]:
    """GET_BROKER_CONSUME_STATS: ConsumeStatsList ({"consumeStatsList": [{group: [ConsumeStats]}], ...}) as
    parsed JSON; the caller walks it (brokerConsumeStats prints every queue)."""
    resp = await _call(api, addr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true" if is_order else "false"})
    return _parsed(resp, addr, dict)


# ---------------------------------------------------------------------------------------- connections (203, 204)


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    client_id: str
    client_addr: str
    language: str
    version: int


def _connections(data: Mapping[str, Any]) -> list[ConnectionInfo]:
    rows = [
        ConnectionInfo(
            str(c.get("clientId", "")),
            str(c.get("clientAddr", "")),
            str(c.get("language", "")),
            int(c.get("version", 0)),
        )
        for c in data.get("connectionSet") or []
        if isinstance(c, Mapping)
    ]
    return sorted(rows, key=lambda c: c.client_id)


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    connections: list[ConnectionInfo]
    subscriptions: dict[str, str]  # topic -> subscription expression
    consume_type: str
    message_model: str
    consume_from_where: str
    raw_subscriptions: dict[str, Mapping[str, Any]] = field(default_factory=dict)


def parse_consumer_connection(data: Mapping[str, Any]) -> ConsumerConnection:
    table = data.get("subscriptionTable") or {}
    subs = {str(t): s for t, s in table.items() if isinstance(s, Mapping)} if isinstance(table, Mapping) else {}
    return ConsumerConnection(
        _connections(data),
        {t: str(s.get("subString", "*")) for t, s in sorted(subs.items())},
        str(data.get("consumeType") or ""),
        str(data.get("messageModel") or ""),
        str(data.get("consumeFromWhere") or ""),
        subs,
    )


async def consumer_connection(api: ClientAPI, addr: str, group: str) -> ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST: the group's online clients on this broker; CONSUMER_NOT_ONLINE when none."""
    resp = await _call(api, addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
    return _parsed(resp, addr, parse_consumer_connection)


async def producer_connection(api: ClientAPI, addr: str, group: str) -> list[ConnectionInfo]:
    """GET_PRODUCER_CONNECTION_LIST: the producer group's clients with a live connection to this broker."""
    resp = await _call(api, addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group})
    return _parsed(resp, addr, _connections)


async def consumer_running_info(
    api: ClientAPI, addr: str, group: str, client_id: str, jstack: bool = False
) -> dict[str, Any]:
    """GET_CONSUMER_RUNNING_INFO through the broker, which asks the client: ConsumerRunningInfo as parsed JSON
    ({"properties": {...}, "subscriptionSet": [...], "mqTable": {mq: ProcessQueueInfo}, "statusTable": {...}})."""
    ext = {"consumerGroup": group, "clientId": client_id, "jstackEnable": "true" if jstack else "false"}
    resp = await _call(api, addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
    return _parsed(resp, addr, dict)


# ---------------------------------------------------------------------------------------- statistics (315, 300)


@dataclass(frozen=True, slots=True)
class BrokerStatsItem:
    sum: int
    tps: float
    avgpt: float


def _stats_item(obj: Any) -> BrokerStatsItem:
    obj = obj if isinstance(obj, Mapping) else {}
    return BrokerStatsItem(int(obj.get("sum", 0)), float(obj.get("tps", 0.0)), float(obj.get("avgpt", 0.0)))


async def view_broker_stats(api: ClientAPI, addr: str, stats_name: str, stats_key: str) -> dict[str, BrokerStatsItem]:
    """VIEW_BROKER_STATS_DATA: BrokerStatsData as {"minute"|"hour"|"day": item}."""
    resp = await _call(api, addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": stats_name, "statsKey": stats_key})
    return _parsed(
        resp,
        addr,
        lambda d: {span: _stats_item(d.get(f"stats{span.title()}")) for span in ("minute", "hour", "day")},
    )


async def topic_consumed_by(api: ClientAPI, addr: str, topic: str) -> list[str]:
    """QUERY_TOPIC_CONSUME_BY_WHO: the groups with a subscription or offsets on `topic` (GroupList)."""
    resp = await _call(api, addr, QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
    return _parsed(resp, addr, lambda d: sorted(str(g) for g in d.get("groupList") or []))
