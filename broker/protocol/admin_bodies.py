"""Response bodies of mqadmin's inspection codes, shaped as RocketMQ's fastjson writes them.

The broker's admin processors build these and send `to_json()`; the Java tools decode them with
fastjson, so map keys that are MessageQueues are written as JSON objects (broker.protocol.fastjson)
and enums as their names. Field names follow `remoting/protocol/body/*.java` and
`remoting/protocol/admin/*.java`. ConsumeStats and OffsetWrapper live in broker.protocol.bodies
(our admin client reads them too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.protocol.bodies import ConsumeStats, MessageQueue, fastjson_dumps
from broker.protocol.codes import LanguageCode

__all__ = [
    "BrokerStatsData",
    "BrokerStatsItem",
    "ConsumeStatsList",
    "ConsumerConnection",
    "GetConsumerStatusBody",
    "GroupList",
    "ProducerConnection",
    "QueueTimeSpan",
    "TopicOffset",
    "TopicStatsTable",
    "connection",
    "language_name",
]


def language_name(code: int) -> str:
    """LanguageCode ordinal -> the enum name Java expects (an unknown one reads as OTHER)."""
    try:
        return LanguageCode(code).name
    except ValueError:
        return LanguageCode.OTHER.name


def connection(client_id: str, client_addr: str, language: int, version: int) -> dict[str, Any]:
    """One entry of a connectionSet (Connection.java)."""
    return {"clientAddr": client_addr, "clientId": client_id, "language": language_name(language), "version": version}


@dataclass(frozen=True, slots=True)
class TopicOffset:
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0

    def to_obj(self) -> dict[str, Any]:
        return {
            "lastUpdateTimestamp": self.last_update_timestamp,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }


@dataclass(frozen=True, slots=True)
class TopicStatsTable:
    """GET_TOPIC_STATS_INFO (202): per queue min/max offset and the time of the last message."""

    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)
    topic_put_tps: float = 0.0

    def to_json(self) -> bytes:
        return fastjson_dumps(
            {"offsetTable": dict(sorted(self.offset_table.items())), "topicPutTps": self.topic_put_tps}
        )


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST (203): who is in a consumer group and what it subscribed to."""

    connections: list[dict[str, Any]]
    subscriptions: dict[str, dict[str, Any]]
    consume_type: str
    message_model: str
    consume_from_where: str

    def to_json(self) -> bytes:
        return fastjson_dumps(
            {
                "connectionSet": self.connections,
                "consumeFromWhere": self.consume_from_where,
                "consumeType": self.consume_type,
                "messageModel": self.message_model,
                "subscriptionTable": self.subscriptions,
            }
        )


@dataclass(frozen=True, slots=True)
class ProducerConnection:
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    connections: list[dict[str, Any]]

    def to_json(self) -> bytes:
        return fastjson_dumps({"connectionSet": self.connections})


@dataclass(frozen=True, slots=True)
class ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS (317): per group, one ConsumeStats per topic, and the broker's totals."""

    broker_addr: str
    groups: list[tuple[str, list[ConsumeStats]]]
    total_diff: int
    total_inflight_diff: int = 0

    def to_json(self) -> bytes:
        # Java's list holds one single-entry map per group: [{"group":[{consumeStats}, ...]}, ...]
        stats = [
            {group: [{"consumeTps": s.consume_tps, "offsetTable": dict(sorted(s.offset_table.items()))} for s in items]}
            for group, items in self.groups
        ]
        return fastjson_dumps(
            {
                "brokerAddr": self.broker_addr,
                "consumeStatsList": stats,
                "totalDiff": self.total_diff,
                "totalInflightDiff": self.total_inflight_diff,
            }
        )


@dataclass(frozen=True, slots=True)
class GroupList:
    """QUERY_TOPIC_CONSUME_BY_WHO (300): the groups that consume a topic."""

    groups: frozenset[str]

    def to_json(self) -> bytes:
        return fastjson_dumps({"groupList": sorted(self.groups)})


@dataclass(frozen=True, slots=True)
class QueueTimeSpan:
    """One queue of QUERY_CONSUME_TIME_SPAN (303): oldest, newest and consumed-up-to store times."""

    mq: MessageQueue
    min_timestamp: int
    max_timestamp: int
    consume_timestamp: int
    delay_time: int

    def to_obj(self) -> dict[str, Any]:
        return {
            "consumeTimeStamp": self.consume_timestamp,
            "delayTime": self.delay_time,
            "maxTimeStamp": self.max_timestamp,
            "messageQueue": self.mq.to_obj(),
            "minTimeStamp": self.min_timestamp,
        }


@dataclass(frozen=True, slots=True)
class BrokerStatsItem:
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_obj(self) -> dict[str, Any]:
        return {"avgpt": self.avgpt, "sum": self.sum, "tps": self.tps}


@dataclass(frozen=True, slots=True)
class BrokerStatsData:
    """VIEW_BROKER_STATS_DATA (315): one statistic over the last minute, hour and day."""

    minute: BrokerStatsItem
    hour: BrokerStatsItem
    day: BrokerStatsItem

    def to_json(self) -> bytes:
        return fastjson_dumps({"statsDay": self.day, "statsHour": self.hour, "statsMinute": self.minute})


@dataclass(frozen=True, slots=True)
class GetConsumerStatusBody:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) answer, and each client's answer to 221.

    `message_queue_table` is one client's offsets; `consumer_table` maps client ids to theirs.
    """

    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return fastjson_dumps(
            {
                "consumerTable": {cid: dict(sorted(t.items())) for cid, t in sorted(self.consumer_table.items())},
                "messageQueueTable": dict(sorted(self.message_queue_table.items())),
            }
        )
