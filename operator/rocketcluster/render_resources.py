"""RocketTopic and RocketConsumerGroup specs -> the config each broker group's master should hold. Pure.

`plan_resources` compares these with what each master holds (GET_ALL_TOPIC_CONFIG,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG) and `handlers_resources` sends them (UPDATE_AND_CREATE_TOPIC's header,
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP's body). The broker replaces a topic's or group's config as a whole, so
what the spec does not manage (a topic's filter type, a group's consumeEnable or brokerId) is carried over from
the config the master already has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rocketcluster.model_resources import (
    MESSAGE_TYPE_ATTRIBUTE,
    PERM_BITS,
    RocketConsumerGroupSpec,
    RocketTopicSpec,
)

__all__ = [
    "GROUP_FIELDS",
    "TOPIC_FIELDS",
    "differences",
    "render_group",
    "render_topic",
    "topic_header_fields",
]

# What a RocketTopic manages of a TopicConfig (topics.json's names), in the order differences are told.
TOPIC_FIELDS = ("readQueueNums", "writeQueueNums", "perm", "order", "attributes")
# What a RocketConsumerGroup manages of a SubscriptionGroupConfig; groupRetryPolicy only when the spec sets it.
GROUP_FIELDS = (
    "retryMaxTimes",
    "retryQueueNums",
    "consumeBroadcastEnable",
    "consumeMessageOrderly",
    "consumeFromMinEnable",
    "groupRetryPolicy",
)
# RocketMQ 5 reads a topic without the attribute as NORMAL (TopicAttributes' default).
_DEFAULT_MESSAGE_TYPE = "NORMAL"


def render_topic(spec: RocketTopicSpec, topic_name: str, existing: Mapping[str, Any] | None) -> dict[str, Any]:
    """The TopicConfig (topics.json's shape) for one master, given the one it holds (None: it has none)."""
    read, write = spec.queue_nums()
    old = existing or {}
    return {
        "topicName": topic_name,
        "readQueueNums": read,
        "writeQueueNums": write,
        "perm": PERM_BITS[spec.perm],
        "topicFilterType": str(old.get("topicFilterType") or "SINGLE_TAG"),
        "topicSysFlag": int(old.get("topicSysFlag") or 0),
        "order": spec.order,
        "attributes": dict(sorted({**spec.attributes, MESSAGE_TYPE_ATTRIBUTE: spec.message_type}.items())),
    }


def topic_header_fields(config: Mapping[str, Any]) -> dict[str, str]:
    """UPDATE_AND_CREATE_TOPIC's extFields for a TopicConfig: attributes as RocketMQ 5 sends them
    (`+key=value,...`), so the broker keeps exactly these."""
    ext = {
        "topic": str(config["topicName"]),
        "defaultTopic": "TBW102",
        "readQueueNums": str(config["readQueueNums"]),
        "writeQueueNums": str(config["writeQueueNums"]),
        "perm": str(config["perm"]),
        "topicFilterType": str(config["topicFilterType"]),
        "topicSysFlag": str(config["topicSysFlag"]),
        "order": "true" if config["order"] else "false",
    }
    attributes = config.get("attributes") or {}
    if attributes:
        ext["attributes"] = ",".join(f"+{k}={v}" for k, v in sorted(attributes.items()))
    return ext


def render_group(spec: RocketConsumerGroupSpec, group_name: str, existing: Mapping[str, Any] | None) -> dict[str, Any]:
    """The SubscriptionGroupConfig for one master: the one it holds, with the spec's fields over it."""
    out: dict[str, Any] = dict(existing or {})
    out.update(
        {
            "groupName": group_name,
            "retryMaxTimes": spec.retry_max_times,
            "retryQueueNums": spec.retry_queue_nums,
            "consumeBroadcastEnable": spec.consume_broadcast_enable,
            "consumeMessageOrderly": spec.consume_message_orderly,
            "consumeFromMinEnable": spec.consume_from_min_enable,
        }
    )
    if spec.group_retry_policy is not None:
        out["groupRetryPolicy"] = spec.group_retry_policy.to_broker()
    return out


def _comparable(field: str, config: Mapping[str, Any]) -> Any:
    value = config.get(field)
    if field == "attributes":
        attributes = {str(k): str(v) for k, v in (value or {}).items()}
        attributes.setdefault(MESSAGE_TYPE_ATTRIBUTE, _DEFAULT_MESSAGE_TYPE)
        return attributes
    if field == "groupRetryPolicy" and isinstance(value, Mapping):
        return {k: v for k, v in value.items() if v is not None}  # a Java broker writes the unused kind as null
    return value


def differences(existing: Mapping[str, Any], desired: Mapping[str, Any], fields: Sequence[str]) -> list[str]:
    """`field: has X, spec says Y` for each managed field that differs (a field the desired config leaves out is
    not managed)."""
    out = []
    for field in fields:
        if field not in desired:
            continue
        have, want = _comparable(field, existing), _comparable(field, desired)
        if have != want:
            out.append(f"{field}: has {_show(have)}, spec says {_show(want)}")
    return out


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}={_show(v)}" for k, v in sorted(value.items())) + "}"
    return "none" if value is None else str(value)
