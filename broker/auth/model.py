"""The ACL 2.0 model of RocketMQ 5.3: users, resources, policy entries, policies and ACLs, and their JSON forms.

The broker's auth store (broker/auth/store.py) keeps these, the authorizer (broker/auth/checker.py) matches
requests against them, and the admin requests 3001-3010 (broker/auth/admin.py) read and write them as
RocketMQ's wire bodies `UserInfo` and `AclInfo`, whose enums are names ("Super", "enable", "Custom", "Pub",
"Allow"; read case-insensitively as Java's getByName does). The file form is the same JSON.

Entry matching and the winner among matching entries follow RocketMQ's `AclAuthorizationHandler`: a
specific resource type before `*`; LITERAL before PREFIXED before ANY; the longer prefix first; on an exact
tie Deny wins, so that an explicit denial is never overridden by an equal allowance.
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

__all__ = [
    "Acl",
    "Action",
    "AuthError",
    "Decision",
    "Policy",
    "PolicyEntry",
    "PolicyType",
    "Resource",
    "ResourcePattern",
    "ResourceType",
    "User",
    "UserStatus",
    "UserType",
    "ip_in",
    "valid_ip_or_cidr",
    "winner",
]

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
USER_PREFIX = "User:"


class AuthError(Exception):
    """A refused authentication or authorization, or an invalid user/ACL: the message is the remark the client
    reads, naming the user, resource and action where RocketMQ's does, never a secret."""


class _Named(enum.Enum):
    """An enum with RocketMQ's code and name, read by either (names case-insensitively)."""

    def __init__(self, code: int, label: str) -> None:
        self.code = code
        self.label = label

    @classmethod
    def parse(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            for member in cls:
                if member.code == value:
                    return member
            return None
        text = str(value).strip().lower()
        for member in cls:
            if member.label.lower() == text or member.name.lower() == text:
                return member
        return None


class UserType(_Named):
    SUPER = (1, "Super")
    NORMAL = (2, "Normal")


class UserStatus(_Named):
    ENABLE = (1, "enable")
    DISABLE = (2, "disable")


class PolicyType(_Named):
    CUSTOM = (1, "Custom")
    DEFAULT = (2, "Default")


class Decision(_Named):
    ALLOW = (1, "Allow")
    DENY = (2, "Deny")


class Action(_Named):
    UNKNOWN = (0, "Unknown")
    ALL = (1, "All")
    ANY = (2, "Any")
    PUB = (3, "Pub")
    SUB = (4, "Sub")
    CREATE = (5, "Create")
    UPDATE = (6, "Update")
    DELETE = (7, "Delete")
    GET = (8, "Get")
    LIST = (9, "List")


class ResourceType(_Named):
    UNKNOWN = (0, "Unknown")
    ANY = (1, "Any")
    CLUSTER = (2, "Cluster")
    NAMESPACE = (3, "Namespace")
    TOPIC = (4, "Topic")
    GROUP = (5, "Group")


class ResourcePattern(enum.IntEnum):
    # The order of preference of the winner: a literal name beats a prefix, a prefix beats any name
    LITERAL = 1
    PREFIXED = 2
    ANY = 3


@dataclass(frozen=True, slots=True)
class User:
    username: str
    password: str = field(repr=False)
    user_type: UserType = UserType.NORMAL
    user_status: UserStatus = UserStatus.ENABLE

    @property
    def is_super(self) -> bool:
        return self.user_type is UserType.SUPER

    @property
    def enabled(self) -> bool:
        return self.user_status is not UserStatus.DISABLE

    def to_json(self, *, with_password: bool = True) -> dict[str, Any]:
        """RocketMQ's UserInfo."""
        data: dict[str, Any] = {"username": self.username}
        if with_password:
            data["password"] = self.password
        data["userType"] = self.user_type.label
        data["userStatus"] = self.user_status.label
        return data

    @classmethod
    def from_json(cls, data: Any, username: str | None = None) -> User:
        """A UserInfo body (the header's `username` wins over the body's, as RocketMQ's processor does)."""
        if not isinstance(data, dict):
            raise AuthError("The body of user is not a JSON object")
        name = username if username else data.get("username")
        if not isinstance(name, str) or not name.strip():
            raise AuthError("username can not be blank")
        password = data.get("password")
        user_type = UserType.parse(data.get("userType")) or UserType.NORMAL
        status = UserStatus.parse(data.get("userStatus")) or UserStatus.ENABLE
        return cls(name, "" if password is None else str(password), user_type, status)


@dataclass(frozen=True, slots=True)
class Resource:
    """`*`, `Topic:name`, `Topic:pre*`, `Topic:*`, and the same for Cluster, Namespace and Group."""

    type: ResourceType
    name: str | None
    pattern: ResourcePattern

    @classmethod
    def parse(cls, key: str | None) -> Resource:
        """Resource.of: raises AuthError for a key RocketMQ cannot read (blank, unknown type)."""
        if key is None or not key.strip():
            raise AuthError("The resource is null.")
        key = key.strip()
        if key == "*":
            return ANY_RESOURCE
        type_name, sep, name = key.partition(":")
        rtype = ResourceType.parse(type_name)
        if not sep or rtype is None or rtype in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise AuthError(f"The resource type of {key} is null or illegal.")
        if name == "*":
            return cls(rtype, None, ResourcePattern.ANY)
        if name.endswith("*"):
            return cls(rtype, name.partition("*")[0], ResourcePattern.PREFIXED)
        if rtype is ResourceType.GROUP:
            name = group_name(name)
        return cls(rtype, name, ResourcePattern.LITERAL)

    @classmethod
    def topic(cls, name: str) -> Resource:
        return cls(ResourceType.TOPIC, name, ResourcePattern.LITERAL)

    @classmethod
    def group(cls, name: str) -> Resource:
        return cls(ResourceType.GROUP, group_name(name), ResourcePattern.LITERAL)

    @classmethod
    def cluster(cls, name: str) -> Resource:
        return cls(ResourceType.CLUSTER, name, ResourcePattern.LITERAL)

    @property
    def key(self) -> str:
        if self.type is ResourceType.ANY:
            return "*"
        if self.pattern is ResourcePattern.ANY:
            return f"{self.type.label}:*"
        if self.pattern is ResourcePattern.PREFIXED:
            return f"{self.type.label}:{self.name}*"
        return f"{self.type.label}:{self.name}"

    def matches(self, other: Resource) -> bool:
        """Whether this (an entry's resource) covers `other` (a request's literal resource)."""
        if self.type is ResourceType.ANY:
            return True
        if self.type is not other.type:
            return False
        if self.pattern is ResourcePattern.ANY:
            return True
        if self.pattern is ResourcePattern.LITERAL:
            return other.name == self.name
        return other.name is not None and other.name.startswith(self.name or "")

    def __str__(self) -> str:
        return self.key


ANY_RESOURCE = Resource(ResourceType.ANY, None, ResourcePattern.ANY)


def group_name(name: str) -> str:
    """NamespaceUtil.withOutRetryAndDLQ: a group given as its retry or DLQ topic is the group itself."""
    if name.startswith(RETRY_PREFIX):
        return name[len(RETRY_PREFIX) :]
    if name.startswith(DLQ_PREFIX):
        return name[len(DLQ_PREFIX) :]
    return name


@lru_cache(maxsize=4096)
def _network(pattern: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(pattern.strip(), strict=False)
    except ValueError:
        return None


def valid_ip_or_cidr(pattern: str) -> bool:
    return bool(pattern.strip()) and _network(pattern) is not None


@lru_cache(maxsize=4096)
def _address(ip: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(ip.strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def ip_in(ip: str, pattern: str) -> bool:
    """IPAddressUtils.isIPInRange: `ip` equals, or lies in the CIDR block of, `pattern`."""
    address, network = _address(ip), _network(pattern)
    if address is None or network is None or address.version != network.version:
        return False
    return address in network


@dataclass(slots=True)
class PolicyEntry:
    resource: Resource
    actions: tuple[Action, ...]
    source_ips: tuple[str, ...] = ()
    decision: Decision = Decision.ALLOW

    def matches(self, resource: Resource, actions: tuple[Action, ...], source_ip: str) -> bool:
        if not self.resource.matches(resource):
            return False
        mine = self.actions
        if not mine:
            return False
        if Action.ANY not in actions and Action.ALL not in mine and not any(a in mine for a in actions):
            return False
        return not self.source_ips or any(ip_in(source_ip, p) for p in self.source_ips)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"resource": self.resource.key, "actions": [a.label for a in self.actions]}
        if self.source_ips:
            data["sourceIps"] = list(self.source_ips)
        data["decision"] = self.decision.label
        return data

    @classmethod
    def from_json(cls, data: Any) -> PolicyEntry:
        """A PolicyEntryInfo, validated as AuthorizationMetadataManagerImpl.validate(PolicyEntry) does."""
        if not isinstance(data, dict):
            raise AuthError("The policy entry is not a JSON object.")
        resource = Resource.parse(data.get("resource"))
        raw_actions = data.get("actions")
        if isinstance(raw_actions, str):
            raw_actions = [a for a in raw_actions.split(",") if a.strip()]
        if not isinstance(raw_actions, list) or not raw_actions:
            raise AuthError("The actions is empty.")
        actions: list[Action] = []
        for raw in raw_actions:
            action = Action.parse(raw)
            if action is None or action is Action.UNKNOWN:
                raise AuthError(f"The action {str(raw)[:64]} is illegal.")
            if action is Action.ANY:
                raise AuthError("The actions can not be Any.")
            if action not in actions:
                actions.append(action)
        raw_ips = data.get("sourceIps") or []
        if isinstance(raw_ips, str):
            raw_ips = [raw_ips]
        if not isinstance(raw_ips, list):
            raise AuthError("The source ips are not a list.")
        for ip in raw_ips:
            if not isinstance(ip, str) or not ip.strip():
                raise AuthError("The source ip is empty.")
            if not valid_ip_or_cidr(ip):
                raise AuthError("The source ip is invalid.")
        decision = Decision.parse(data.get("decision"))
        if decision is None:
            raise AuthError("The decision is null or illegal.")
        return cls(resource, tuple(actions), tuple(ip.strip() for ip in raw_ips), decision)


@dataclass(slots=True)
class Policy:
    policy_type: PolicyType
    entries: list[PolicyEntry]

    def entry(self, resource: Resource) -> PolicyEntry | None:
        for entry in self.entries:
            if entry.resource == resource:
                return entry
        return None

    def update(self, entries: list[PolicyEntry]) -> None:
        """Policy.updateEntry: an entry for the same resource is replaced, others are added."""
        for new in entries:
            old = self.entry(new.resource)
            if old is None:
                self.entries.append(new)
            else:
                old.actions, old.source_ips, old.decision = new.actions, new.source_ips, new.decision

    def to_json(self) -> dict[str, Any]:
        return {"policyType": self.policy_type.label, "entries": [e.to_json() for e in self.entries]}

    @classmethod
    def from_json(cls, data: Any) -> Policy:
        if not isinstance(data, dict):
            raise AuthError("The policy is not a JSON object.")
        raw_type = data.get("policyType")
        policy_type = PolicyType.parse(raw_type) if raw_type not in (None, "") else PolicyType.CUSTOM
        if policy_type is None:
            raise AuthError("The policy type is illegal.")
        entries = data.get("entries")
        if not isinstance(entries, list) or not entries:
            raise AuthError("The policy entries is empty.")
        return cls(policy_type, [PolicyEntry.from_json(e) for e in entries])


def subject_user(subject: str | None) -> str:
    """`User:alice` -> `alice` (the only subject type RocketMQ has)."""
    if not subject or not subject.startswith(USER_PREFIX) or len(subject) == len(USER_PREFIX):
        raise AuthError("The subject type is null.")
    return subject[len(USER_PREFIX) :]


@dataclass(slots=True)
class Acl:
    username: str
    policies: list[Policy]

    @property
    def subject(self) -> str:
        return USER_PREFIX + self.username

    def policy(self, policy_type: PolicyType) -> Policy | None:
        for policy in self.policies:
            if policy.policy_type is policy_type:
                return policy
        return None

    def update(self, policies: list[Policy]) -> None:
        """Acl.updatePolicy."""
        for new in policies:
            old = self.policy(new.policy_type)
            if old is None:
                self.policies.append(new)
            else:
                old.update(new.entries)

    def delete(self, policy_type: PolicyType, resource: Resource) -> None:
        """Acl.deletePolicy: drop the entry for `resource`, and the policy once it is empty."""
        policy = self.policy(policy_type)
        if policy is None:
            return
        entry = policy.entry(resource)
        if entry is not None:
            policy.entries.remove(entry)
        if not policy.entries:
            self.policies.remove(policy)

    def to_json(self) -> dict[str, Any]:
        return {"subject": self.subject, "policies": [p.to_json() for p in self.policies]}

    @classmethod
    def from_json(cls, data: Any, subject: str | None = None) -> Acl:
        """An AclInfo body; the header's subject is used when the body has none."""
        if not isinstance(data, dict):
            raise AuthError("The body of acl is null")
        policies = data.get("policies")
        if not isinstance(policies, list) or not policies:
            raise AuthError("The policies is empty.")
        username = subject_user(data.get("subject") or subject)
        return cls(username, [Policy.from_json(p) for p in policies])

    def decide(self, resource: Resource, actions: tuple[Action, ...], source_ip: str) -> Decision | None:
        """The decision of the winning entry for one request context, or None when no entry matches."""
        custom = self.policy(PolicyType.CUSTOM)
        matched = [e for e in custom.entries if e.matches(resource, actions, source_ip)] if custom else []
        if not matched:
            default = self.policy(PolicyType.DEFAULT)
            matched = [e for e in default.entries if e.matches(resource, actions, source_ip)] if default else []
        if not matched:
            return None
        return winner(matched).decision


def _rank(entry: PolicyEntry) -> tuple[int, int, int, int]:
    resource = entry.resource
    any_type = 1 if resource.type is ResourceType.ANY else 0
    pattern = int(ResourcePattern.ANY if any_type else resource.pattern)
    prefix = -len(resource.name or "") if resource.pattern is ResourcePattern.PREFIXED else 0
    return (any_type, pattern, prefix, 0 if entry.decision is Decision.DENY else 1)


def winner(entries: list[PolicyEntry]) -> PolicyEntry:
    """The entry that decides among matching ones (see the module docstring); the first listed of equals."""
    return min(entries, key=_rank)
