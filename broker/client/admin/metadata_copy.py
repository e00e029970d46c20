"""What copying one broker group's metadata to another must create: pure planning, no I/O.

`Admin.copy_metadata` (broker.client.admin) reads both brokers' topic tables, subscription groups and
configs, asks `plan_copy` what to send, and sends it (UPDATE_AND_CREATE_TOPIC, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).
A new group must serve every topic before it takes writes; what it already holds unchanged is not sent
again, so a copy repeated after a failure (or by a reconciling operator) only finishes the work.

Not copied: what a broker makes itself at start (the topics of TopicValidator's system list plus the ones
named after its cluster and broker, the subscription groups of its system list). Retry and DLQ topics
(%RETRY%<group>, %DLQ%<group>) are copied: brokers create them only when a consumer shows up, and
consumers that retry through the new group need them at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.protocol.bodies import TopicConfig
from broker.protocol.pop import revive_topic
from broker.protocol.system_groups import SYSTEM_GROUPS as BROKER_SYSTEM_GROUPS

__all__ = [
    "SYSTEM_GROUPS",
    "SYSTEM_TOPICS",
    "CopyPlan",
    "CopyResult",
    "broker_made_topics",
    "plan_copy",
]

# Topics every broker creates at start whatever its name (RocketMQ's TopicValidator system topics).
SYSTEM_TOPICS = frozenset(
    {
        "TBW102",
        "SELF_TEST_TOPIC",
        "BenchmarkTest",
        "OFFSET_MOVED_EVENT",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
    }
)
# Subscription groups every broker creates at start: never copied
SYSTEM_GROUPS = frozenset(BROKER_SYSTEM_GROUPS)


def broker_made_topics(broker_config: Mapping[str, str]) -> set[str]:
    """The topics a broker creates itself, from its GET_BROKER_CONFIG properties."""
    made = set(SYSTEM_TOPICS)
    cluster = broker_config.get("brokerClusterName", "")
    if cluster:
        made |= {cluster, f"{cluster}_REPLY_TOPIC", revive_topic(cluster)}
    if broker_config.get("brokerName"):
        made.add(broker_config["brokerName"])
    if broker_config.get("msgTraceTopicName"):
        made.add(broker_config["msgTraceTopicName"])
    return made


@dataclass(frozen=True, slots=True)
class CopyPlan:
    topics: list[TopicConfig]  # to create or update on the target, by name
    groups: list[dict[str, Any]]  # SubscriptionGroupConfig objects to send, by groupName
    unchanged_topics: list[str]
    unchanged_groups: list[str]
    skipped_topics: list[str]  # made by the brokers themselves
    skipped_groups: list[str]


@dataclass(slots=True)
class CopyResult:
    """What `Admin.copy_metadata` did; a second run over the same brokers creates nothing."""

    source: str
    target: str
    created_topics: list[str] = field(default_factory=list)
    created_groups: list[str] = field(default_factory=list)
    unchanged_topics: list[str] = field(default_factory=list)
    unchanged_groups: list[str] = field(default_factory=list)
    skipped_topics: list[str] = field(default_factory=list)
    skipped_groups: list[str] = field(default_factory=list)


def _same_group(source: Mapping[str, Any], target: Mapping[str, Any] | None) -> bool:
    # The target may know more fields than the source (another version): only the source's must match.
    return target is not None and all(target.get(key) == value for key, value in source.items())


def plan_copy(
    source_topics: Mapping[str, TopicConfig],
    target_topics: Mapping[str, TopicConfig],
    source_groups: Mapping[str, Mapping[str, Any]],
    target_groups: Mapping[str, Mapping[str, Any]],
    skip_topics: Iterable[str],
) -> CopyPlan:
    """The topics and groups the target lacks or holds differently, in name order."""
    skip = set(skip_topics)
    topics, unchanged_topics, skipped_topics = [], [], []
    for name in sorted(source_topics):
        if name in skip:
            skipped_topics.append(name)
        elif target_topics.get(name) == source_topics[name]:
            unchanged_topics.append(name)
        else:
            topics.append(source_topics[name])
    groups, unchanged_groups, skipped_groups = [], [], []
    for name in sorted(source_groups):
        config = {**source_groups[name], "groupName": name}
        if name in SYSTEM_GROUPS:
            skipped_groups.append(name)
        elif _same_group(config, target_groups.get(name)):
            unchanged_groups.append(name)
        else:
            groups.append(config)
    return CopyPlan(topics, groups, unchanged_topics, unchanged_groups, skipped_topics, skipped_groups)
