"""RocketUser as pydantic models: an ACL 2.0 user of one RocketCluster and its ACL rules, declared as a Kubernetes
resource, like Strimzi's KafkaUser.

`handlers_users` calls `parse_user_spec` on body["spec"] and reports a `SpecError` as the InvalidSpec condition;
`render_users` turns the parsed spec into RocketMQ's UserInfo and AclInfo bodies and the credentials Secret.
`rocketcluster.crd` makes the CRD's schema from these models. Names are RocketMQ's (userType Super/Normal,
resource types Cluster/Topic/Group, actions Pub/Sub/..., decision Allow/Deny, sourceIps); camelCase on the wire,
unknown fields refused, nothing coerced.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from rocketcluster.model import Condition, SpecError, _Status, _Wire
from rocketcluster.model_resources import ClusterRefName, _parse

__all__ = [
    "ACTIONS",
    "MAX_ACL_RULES",
    "USERNAME_PATTERN",
    "AclResource",
    "AclRule",
    "RocketUserSpec",
    "RocketUserStatus",
    "SpecError",
    "parse_user_spec",
]

# A user name: letters, digits, '_' and '-' (no ':', which separates "User:<name>" in an ACL's subject)
USERNAME_PATTERN = r"^[A-Za-z0-9_-]+$"
MAX_USERNAME = 64
# RocketMQ's resource names (TopicValidator's characters), or '*' for every name of the type
RESOURCE_NAME_PATTERN = r"^([%|a-zA-Z0-9_-]+|\*)$"
MAX_ACL_RULES = 64
MAX_SOURCE_IPS = 16
ACTIONS = ("Pub", "Sub", "Create", "Update", "Delete", "Get", "List", "All")
Action = Literal["Pub", "Sub", "Create", "Update", "Delete", "Get", "List", "All"]


class AclResource(_Wire):
    """What a rule is about: a topic, a group or the cluster, by literal name or name prefix."""

    type: Literal["Cluster", "Topic", "Group"]
    """Cluster (admin requests), Topic or Group."""
    name: str = Field(default="*", min_length=1, max_length=255, pattern=RESOURCE_NAME_PATTERN)
    """The name, or '*' for every one of the type. For Cluster: the cluster's name (brokerClusterName) or '*'."""
    pattern_type: Literal["Literal", "Prefixed"] = "Literal"
    """Literal: exactly `name`; Prefixed: every name that starts with it."""

    @model_validator(mode="after")
    def _prefix_of_a_name(self) -> AclResource:
        if self.pattern_type == "Prefixed" and self.name == "*":
            raise ValueError("a Prefixed pattern needs a name prefix, not '*' (use Literal '*' for every name)")
        return self

    def rocketmq(self) -> str:
        """RocketMQ's resource string: Topic:orders, Topic:orders* (prefix), Topic:* (any)."""
        suffix = "*" if self.pattern_type == "Prefixed" else ""
        return f"{self.type}:{self.name}{suffix}"


class AclRule(_Wire):
    """One ACL entry: the actions on a resource that are allowed (or denied), optionally from some addresses."""

    resource: AclResource
    """The topic, group or cluster."""
    actions: list[Action] = Field(
        min_length=1, max_length=len(ACTIONS), json_schema_extra={"x-kubernetes-list-type": "set"}
    )
    """Pub, Sub, Create, Update, Delete, Get, List or All."""
    decision: Literal["Allow", "Deny"] = "Allow"
    """Allow or Deny. Where a Deny and an Allow match the same request, the more specific resource wins, and on
    a tie Deny."""
    source_ips: list[str] = Field(default_factory=list, max_length=MAX_SOURCE_IPS)
    """Addresses (10.0.0.5) or networks (10.0.0.0/8) the rule is limited to; empty: any."""

    @field_validator("actions")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("each action at most once")
        return value

    @field_validator("source_ips")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        for item in value:
            if len(item) > 64:
                raise ValueError(f"{item[:64]!r}... is not an IP address or network")
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(f"{item!r} is not an IP address or network (10.0.0.5, 10.0.0.0/8)") from None
        return value


class RocketUserSpec(_Wire):
    """A user of a RocketCluster's brokers (ACL 2.0), with its ACL rules and a Secret holding its credentials."""

    cluster_ref: ClusterRefName
    """The RocketCluster (its metadata.name) in this namespace whose brokers know the user."""
    username: str | None = Field(default=None, min_length=1, max_length=MAX_USERNAME, pattern=USERNAME_PATTERN)
    """The user name (the accessKey clients sign with). Default: metadata.name. Immutable."""
    user_type: Literal["Super", "Normal"] = "Normal"
    """Normal: allowed only what its ACL rules allow. Super: everything, no rules (use for administrators)."""
    acls: list[AclRule] = Field(default_factory=list, max_length=MAX_ACL_RULES)
    """The user's ACL rules (with spec.security.authorization on, a Normal user may do only what these allow)."""

    @model_validator(mode="after")
    def _consistent(self) -> RocketUserSpec:
        if self.user_type == "Super" and self.acls:
            raise ValueError("a Super user is allowed everything: give acls only to a Normal user")
        seen: dict[str, int] = {}
        for i, rule in enumerate(self.acls):
            key = rule.resource.rocketmq()
            if key in seen:
                # RocketMQ keeps one entry per resource: a second would silently replace the first
                raise ValueError(
                    f"acls[{i}] and acls[{seen[key]}] are both about {key}: give one rule per resource "
                    "(one rule may list several actions)"
                )
            seen[key] = i
        return self


class RocketUserStatus(_Status):
    """What the operator did with the user (served under the status subresource)."""

    observed_generation: int | None = None
    """The metadata.generation this status describes."""
    conditions: list[Condition] = Field(default_factory=list)
    """Ready (True: every broker group has the user and its rules), and InvalidSpec."""
    username: str | None = None
    """The user name (spec.username or metadata.name)."""
    cluster_name: str | None = None
    """The brokerClusterName the user lives in."""
    broker_names: list[str] = Field(default_factory=list)
    """The broker groups (brokerNames) whose masters hold the user."""
    secret: str | None = None
    """The Secret with the credentials (accessKey, secretKey) for applications to mount."""


def parse_user_spec(raw: Any) -> RocketUserSpec:
    """The spec of a RocketUser (body["spec"]); raises SpecError naming every bad field."""
    spec: RocketUserSpec = _parse(RocketUserSpec, raw)
    return spec
