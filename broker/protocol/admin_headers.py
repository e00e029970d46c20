"""Request headers of the admin codes that mqadmin's inspection and maintenance commands send.

The broker's admin processors (broker/server/processors/admin_*.py) parse them with
`from_ext_fields`; the wire names are RocketMQ's (`remoting/protocol/header/*RequestHeader.java`).
They live apart from broker.protocol.headers, which holds the headers of the message path, because
only the admin side reads these; the codec is the same (`header`, `req`, `opt`).
"""

from __future__ import annotations

from broker.protocol.headers import Header, header, opt, req

__all__ = [
    "CloneGroupOffsetRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "GetConsumeStatsInBrokerHeader",
    "GetProducerConnectionListRequestHeader",
    "GetTopicConfigRequestHeader",
    "QueryConsumeTimeSpanRequestHeader",
    "ViewBrokerStatsDataRequestHeader",
]


@header
class GetProducerConnectionListRequestHeader(Header):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str = req("producerGroup")


@header
class DeleteSubscriptionGroupRequestHeader(Header):
    """DELETE_SUBSCRIPTIONGROUP (207); cleanOffset also drops the group's committed offsets."""

    group_name: str = req("groupName")
    clean_offset: bool = opt("cleanOffset", "bool", False)


@header
class QueryConsumeTimeSpanRequestHeader(Header):
    """QUERY_CONSUME_TIME_SPAN (303)."""

    topic: str = req("topic")
    group: str = req("group")


@header
class CloneGroupOffsetRequestHeader(Header):
    """CLONE_GROUP_OFFSET (314); no topic means every topic the source group has offsets on."""

    src_group: str = req("srcGroup")
    dest_group: str = req("destGroup")
    topic: str | None = opt("topic")
    offline: bool = opt("offline", "bool", False)


@header
class ViewBrokerStatsDataRequestHeader(Header):
    """VIEW_BROKER_STATS_DATA (315): statsName such as TOPIC_PUT_NUMS, statsKey a topic or `topic@group`."""

    stats_name: str = req("statsName")
    stats_key: str = req("statsKey")


@header
class GetConsumeStatsInBrokerHeader(Header):
    """GET_BROKER_CONSUME_STATS (317)."""

    is_order: bool = req("isOrder", "bool")


@header
class GetTopicConfigRequestHeader(Header):
    """GET_TOPIC_CONFIG (351); `lo` asks for the static-topic queue mapping too (we have none)."""

    topic: str = req("topic")
    lo: bool | None = opt("lo", "bool")
