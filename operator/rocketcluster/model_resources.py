"""RocketTopic and RocketConsumerGroup as pydantic models: a topic or a subscription group of one RocketCluster,
declared as a Kubernetes resource (GitOps), like Strimzi's KafkaTopic.

`handlers_resources` calls `parse_topic_spec` / `parse_group_spec` on body["spec"] and reports a `SpecError` as
the InvalidSpec condition; `render_resources` and `plan_resources` take the parsed specs. `rocketcluster.crd`
turns these models into the two CRDs' schemas, as it does for RocketCluster. Field names are RocketMQ's own
(readQueueNums, perm, retryMaxTimes, groupRetryPolicy, ...), camelCase on the wire; unknown fields are refused
and nothing is coerced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, ValidationError, field_validator, model_validator

from broker.client.admin.metadata_copy import SYSTEM_TOPICS as BROKER_SYSTEM_TOPICS
from broker.protocol.system_groups import SYSTEM_GROUPS
from rocketcluster.model import (
    Condition,
    SpecError,
    _field_path,  # one spelling of "spec.a.b" and of pydantic's messages for every kind
    _message,
    _Status,
    _Wire,
)
from rocketcluster.names import MAX_CLUSTER_NAME_LENGTH

__all__ = [
    "ATTRIBUTE_KEY_PATTERN",
    "DEFAULT_QUEUES",
    "MAX_QUEUES",
    "MESSAGE_TYPE_ATTRIBUTE",
    "NAME_PATTERN",
    "PERM_BITS",
    "SYSTEM_GROUPS",
    "SYSTEM_GROUP_PREFIX",
    "SYSTEM_TOPICS",
    "SYSTEM_TOPIC_PREFIX",
    "CustomizedRetryPolicy",
    "ExponentialRetryPolicy",
    "GroupRetryPolicy",
    "ResourceStatus",
    "RocketConsumerGroupSpec",
    "RocketConsumerGroupStatus",
    "RocketTopicSpec",
    "RocketTopicStatus",
    "name_problem",
    "parse_group_spec",
    "parse_topic_spec",
]

# RocketMQ's TopicValidator: a topic (and a group) name is these characters, at most 127 (a group 255).
NAME_PATTERN = r"^[%|a-zA-Z0-9_-]+$"
MAX_TOPIC_NAME = 127
MAX_GROUP_NAME = 255
MAX_QUEUES = 1024  # the broker refuses more (UPDATE_AND_CREATE_TOPIC: 1..1024)
DEFAULT_QUEUES = 8
MAX_ATTRIBUTES = 32
# RocketMQ 5 keeps a topic's message type as this attribute (TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE).
MESSAGE_TYPE_ATTRIBUTE = "message.type"
# UPDATE_AND_CREATE_TOPIC's perm bits (PermName): R = 4, W = 2.
PERM_BITS = {"RW": 6, "R": 4, "W": 2}

# TopicValidator.SYSTEM_TOPIC_SET and SYSTEM_TOPIC_PREFIX: topics every broker makes and owns (the admin client's
# list of them, and the transaction check's topic, which a broker makes when it first needs it).
SYSTEM_TOPICS = (*sorted(BROKER_SYSTEM_TOPICS), "TRANS_CHECK_MAX_TIME_TOPIC")
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
# MixAll's system groups (the broker makes them at start: broker.protocol.system_groups) and CID_RMQ_SYS_PREFIX.
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"

ClusterRefName = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_CLUSTER_NAME_LENGTH, pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
]
# Attribute keys and values travel as `+key=value,...` in one header: no ',', '=', '+' or '-' at the start.
ATTRIBUTE_KEY_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9._]{0,63}$"
AttributeValue = Annotated[str, StringConstraints(max_length=256, pattern=r"^[^,=\x00-\x1f\x7f]*$")]
DeletionPolicy = Literal["Retain", "Delete"]


def name_problem(kind: Literal["topic", "group"], name: str) -> str | None:
    """Why RocketMQ would refuse `name` as a topic or group name, else None (the model's and the handler's check
    of the name a resource defaults to, metadata.name)."""
    limit = MAX_TOPIC_NAME if kind == "topic" else MAX_GROUP_NAME
    if not name or len(name) > limit:
        return f"a {kind} name has 1 to {limit} characters (got {len(name)})"
    if not re.match(NAME_PATTERN, name):
        return f"{name!r} is not a {kind} name: only letters, digits, '%', '|', '_' and '-' are allowed"
    if kind == "topic" and (name in SYSTEM_TOPICS or name.startswith(SYSTEM_TOPIC_PREFIX)):
        return f"{name!r} is a system topic, which the brokers make and own"
    if kind == "group" and (name in SYSTEM_GROUPS or name.startswith(SYSTEM_GROUP_PREFIX)):
        return f"{name!r} is a system group, which the brokers make and own"
    return None


class RocketTopicSpec(_Wire):
    """A topic on every broker group of a RocketCluster (UPDATE_AND_CREATE_TOPIC on each group's master)."""

    cluster_ref: ClusterRefName
    """The RocketCluster (its metadata.name) in this namespace whose broker groups hold the topic."""
    topic_name: str | None = Field(default=None, min_length=1, max_length=MAX_TOPIC_NAME, pattern=NAME_PATTERN)
    """The RocketMQ topic name. Default: metadata.name. Letters, digits, '%', '|', '_' and '-', at most 127
    characters; not a system topic (TBW102, SCHEDULE_TOPIC_XXXX, rmq_sys_*, ...). Immutable."""
    queues: int | None = Field(default=None, ge=1, le=MAX_QUEUES)
    """Read and write queues per broker group, both at once. Do not combine with readQueueNums/writeQueueNums."""
    read_queue_nums: int | None = Field(default=None, ge=1, le=MAX_QUEUES)
    """Read queues per broker group (default 8)."""
    write_queue_nums: int | None = Field(default=None, ge=1, le=MAX_QUEUES)
    """Write queues per broker group (default 8)."""
    perm: Literal["RW", "R", "W"] = "RW"
    """RW (read and write), R (read only) or W (write only): RocketMQ's perm 6, 4 or 2."""
    message_type: Literal["NORMAL", "FIFO", "DELAY", "TRANSACTION"] = "NORMAL"
    """RocketMQ 5's topic message type, kept as the attribute message.type."""
    order: bool = False
    """An ordered topic (RocketMQ's order flag). Only with messageType NORMAL or FIFO."""
    attributes: dict[str, AttributeValue] = Field(default_factory=dict, max_length=MAX_ATTRIBUTES)
    """Other topic attributes (RocketMQ 5's `+key=value`), e.g. queue.type. message.type is set by messageType."""
    deletion_policy: DeletionPolicy = "Retain"
    """What deleting this resource does to the topic. Retain (the default) leaves the topic and its messages on
    the brokers: deleting a Kubernetes object, a namespace, or a GitOps repository's file by mistake must not
    lose messages. Delete removes the topic from every broker group and the NameServers (DELETE_TOPIC_IN_BROKER,
    DELETE_TOPIC_IN_NAMESRV); the operator then holds a finalizer on the resource until that is done."""

    @field_validator("attributes")
    @classmethod
    def _attribute_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not re.match(ATTRIBUTE_KEY_PATTERN, key):
                raise ValueError(f"key {key!r} is not an attribute name (letters, digits, '.' and '_', at most 64)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RocketTopicSpec:
        if self.queues is not None and (self.read_queue_nums is not None or self.write_queue_nums is not None):
            raise ValueError("queues sets both readQueueNums and writeQueueNums: give either queues or those two")
        if self.order and self.message_type not in ("NORMAL", "FIFO"):
            raise ValueError(f"order needs messageType NORMAL or FIFO (got {self.message_type})")
        if MESSAGE_TYPE_ATTRIBUTE in self.attributes:
            raise ValueError(f"attributes: {MESSAGE_TYPE_ATTRIBUTE} is set by messageType")
        if self.topic_name is not None and (problem := name_problem("topic", self.topic_name)) is not None:
            raise ValueError(f"topicName: {problem}")
        return self

    def effective_topic_name(self, metadata_name: str) -> str:
        return self.topic_name or metadata_name

    def queue_nums(self) -> tuple[int, int]:
        """(readQueueNums, writeQueueNums)."""
        if self.queues is not None:
            return self.queues, self.queues
        return self.read_queue_nums or DEFAULT_QUEUES, self.write_queue_nums or DEFAULT_QUEUES


class ExponentialRetryPolicy(_Wire):
    """RocketMQ 5's ExponentialRetryPolicy: the n-th retry waits min(initial * multiplier^n, max) ms."""

    initial: int = Field(default=5000, ge=1, le=86_400_000)
    """The first delay, in milliseconds."""
    max: int = Field(default=7_200_000, ge=1, le=86_400_000)
    """The longest delay, in milliseconds."""
    multiplier: int = Field(default=2, ge=1, le=100)
    """Each delay is the one before times this."""

    @model_validator(mode="after")
    def _ordered(self) -> ExponentialRetryPolicy:
        if self.max < self.initial:
            raise ValueError(f"max ({self.max}) is below initial ({self.initial})")
        return self


class CustomizedRetryPolicy(_Wire):
    """RocketMQ 5's CustomizedRetryPolicy: the n-th retry waits next[n] ms (the last one repeats)."""

    next: list[Annotated[int, Field(ge=1, le=86_400_000)]] = Field(min_length=1, max_length=64)
    """Delays in milliseconds, one per retry."""


class GroupRetryPolicy(_Wire):
    """RocketMQ 5's groupRetryPolicy of a subscription group: how long a failed message waits before each retry."""

    type: Literal["CUSTOMIZED", "EXPONENTIAL"] = "CUSTOMIZED"
    """CUSTOMIZED (a list of delays) or EXPONENTIAL."""
    exponential_retry_policy: ExponentialRetryPolicy | None = None
    """With type EXPONENTIAL."""
    customized_retry_policy: CustomizedRetryPolicy | None = None
    """With type CUSTOMIZED; without it RocketMQ's 18 levels (1s ... 2h)."""

    @model_validator(mode="after")
    def _one_kind(self) -> GroupRetryPolicy:
        if self.type == "CUSTOMIZED" and self.exponential_retry_policy is not None:
            raise ValueError("exponentialRetryPolicy goes with type EXPONENTIAL")
        if self.type == "EXPONENTIAL" and self.customized_retry_policy is not None:
            raise ValueError("customizedRetryPolicy goes with type CUSTOMIZED")
        return self

    def to_broker(self) -> dict[str, Any]:
        """The JSON RocketMQ's SubscriptionGroupConfig.groupRetryPolicy holds."""
        out: dict[str, Any] = {"type": self.type}
        if self.type == "EXPONENTIAL":
            policy = self.exponential_retry_policy or ExponentialRetryPolicy()
            out["exponentialRetryPolicy"] = policy.model_dump(by_alias=True)
        elif self.customized_retry_policy is not None:
            out["customizedRetryPolicy"] = {"next": list(self.customized_retry_policy.next)}
        return out


class RocketConsumerGroupSpec(_Wire):
    """A subscription group on every broker group of a RocketCluster (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on each
    group's master)."""

    cluster_ref: ClusterRefName
    """The RocketCluster (its metadata.name) in this namespace whose broker groups hold the group."""
    group_name: str | None = Field(default=None, min_length=1, max_length=MAX_GROUP_NAME, pattern=NAME_PATTERN)
    """The RocketMQ consumer group name. Default: metadata.name. Letters, digits, '%', '|', '_' and '-'; not a
    system group. Immutable."""
    retry_max_times: int = Field(default=16, ge=0, le=1000)
    """How often a message that failed is retried before it goes to the group's dead-letter topic."""
    retry_queue_nums: int = Field(default=1, ge=1, le=64)
    """Queues of the group's retry topic (%RETRY%<group>) per broker group."""
    consume_broadcast_enable: bool = True
    """Whether the group may consume in broadcasting mode."""
    consume_message_orderly: bool = False
    """Whether the group consumes orderly (RocketMQ 5 pop and gRPC consumers read this)."""
    consume_from_min_enable: bool = True
    """Whether a new consumer may start from the queues' minimum offset."""
    group_retry_policy: GroupRetryPolicy | None = None
    """RocketMQ 5's retry delays of the group. Unset: left as the brokers have it."""
    deletion_policy: DeletionPolicy = "Retain"
    """What deleting this resource does to the group. Retain (the default) leaves the group and its committed
    offsets on the brokers, so consumers resume where they were if the resource was deleted by mistake. Delete
    removes the group and its offsets from every broker group (DELETE_SUBSCRIPTIONGROUP with cleanOffset); the
    operator then holds a finalizer on the resource until that is done."""

    @model_validator(mode="after")
    def _not_a_system_group(self) -> RocketConsumerGroupSpec:
        if self.group_name is not None and (problem := name_problem("group", self.group_name)) is not None:
            raise ValueError(f"groupName: {problem}")
        return self

    def effective_group_name(self, metadata_name: str) -> str:
        return self.group_name or metadata_name


# -- status ------------------------------------------------------------------------------------------------------


class ResourceStatus(_Status):
    """What the operator did with a topic or group (served under the status subresource)."""

    observed_generation: int | None = None
    """The metadata.generation this status describes."""
    conditions: list[Condition] = Field(default_factory=list)
    """Ready (True: the brokers hold what the spec says, or what was adopted), and InvalidSpec."""
    cluster_name: str | None = None
    """The brokerClusterName the topic or group lives in."""
    broker_names: list[str] = Field(default_factory=list)
    """The broker groups (brokerNames) that hold it."""
    adopted: bool | None = None
    """True when the topic or group existed on the brokers before this resource: it is then left as it was
    until the spec changes (a generation above adoptedGeneration)."""
    adopted_generation: int | None = None
    """The generation at adoption."""


class RocketTopicStatus(ResourceStatus):
    topic_name: str | None = None
    """The RocketMQ topic name (spec.topicName or metadata.name)."""


class RocketConsumerGroupStatus(ResourceStatus):
    group_name: str | None = None
    """The RocketMQ group name (spec.groupName or metadata.name)."""


# -- parsing -----------------------------------------------------------------------------------------------------


def _parse(model: type[_Wire], raw: Any) -> Any:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise SpecError([("spec", f"must be an object (got {type(raw).__name__})")])
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        problems = [
            (_field_path(error["loc"]), _message(error).replace("the RocketCluster schema", "the schema"))
            for error in exc.errors(include_url=False)
        ]
        raise SpecError(problems) from None


def parse_topic_spec(raw: Any) -> RocketTopicSpec:
    """The spec of a RocketTopic (body["spec"]); raises SpecError naming every bad field."""
    spec: RocketTopicSpec = _parse(RocketTopicSpec, raw)
    return spec


def parse_group_spec(raw: Any) -> RocketConsumerGroupSpec:
    """The spec of a RocketConsumerGroup (body["spec"]); raises SpecError naming every bad field."""
    spec: RocketConsumerGroupSpec = _parse(RocketConsumerGroupSpec, raw)
    return spec
