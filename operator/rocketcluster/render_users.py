"""A RocketUser as what the brokers and applications get (pure): RocketMQ's UserInfo and AclInfo bodies, the
credentials Secret, and the steps that bring one broker from what it holds to what the spec says.

The password is the Secret's `secretKey`: the operator makes it (random) when the Secret is missing, and a user
who edits it rotates the password (the next pass updates every broker). It never appears in a status, an Event
or a log line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from rocketcluster import names
from rocketcluster.model_users import RocketUserSpec

__all__ = [
    "ACCESS_KEY",
    "SECRET_KEY",
    "UserSteps",
    "acl_body",
    "acl_entries",
    "plan_user",
    "render_user_secret",
    "user_secret_name",
]

ACCESS_KEY: Final = "accessKey"
SECRET_KEY: Final = "secretKey"
_SUBJECT_PREFIX: Final = "User:"


def user_secret_name(resource_name: str) -> str:
    """The Secret applications mount: <RocketUser's metadata.name>-credentials."""
    return f"{resource_name}-credentials"


def render_user_secret(user: Mapping[str, Any], username: str, secret_key: str) -> dict[str, Any]:
    """The credentials Secret, owned by the RocketUser (deleted with it)."""
    meta = user["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": user_secret_name(str(meta["name"])),
            "namespace": meta["namespace"],
            "labels": {
                names.LABEL_MANAGED_BY: names.MANAGED_BY,
                names.LABEL_CLUSTER: str((user.get("spec") or {}).get("clusterRef", "")),
            },
            "ownerReferences": [
                {
                    "apiVersion": names.API_VERSION,
                    "kind": names.USER_KIND,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "type": "Opaque",
        "stringData": {ACCESS_KEY: username, SECRET_KEY: secret_key},
    }


def acl_entries(spec: RocketUserSpec) -> list[dict[str, Any]]:
    """The spec's rules as RocketMQ's PolicyEntryInfo, in the spec's order."""
    out = []
    for rule in spec.acls:
        entry: dict[str, Any] = {"resource": rule.resource.rocketmq(), "actions": list(rule.actions)}
        if rule.source_ips:
            entry["sourceIps"] = list(rule.source_ips)
        entry["decision"] = rule.decision
        out.append(entry)
    return out


def acl_body(username: str, spec: RocketUserSpec) -> dict[str, Any]:
    """RocketMQ's AclInfo for the user: one Custom policy holding every rule."""
    return {"subject": _SUBJECT_PREFIX + username, "policies": [{"policyType": "Custom", "entries": acl_entries(spec)}]}


def _entry_set(entries: Any) -> set[tuple[str, frozenset[str], str, frozenset[str]]]:
    out = set()
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping):
            continue
        actions = entry.get("actions") or []
        actions = [actions] if isinstance(actions, str) else actions
        out.add(
            (
                str(entry.get("resource")),
                frozenset(str(a).lower() for a in actions),
                str(entry.get("decision", "Allow")).lower(),
                frozenset(str(ip) for ip in entry.get("sourceIps") or []),
            )
        )
    return out


def _held_entries(acl: Mapping[str, Any] | None) -> Any:
    """The Custom policy's entries of an AclInfo the broker answered (None: no ACL)."""
    if not acl:
        return []
    entries: list[Any] = []
    for policy in acl.get("policies") or []:
        if isinstance(policy, Mapping) and str(policy.get("policyType", "Custom")).lower() == "custom":
            entries += policy.get("entries") or []
    return entries


@dataclass(frozen=True, slots=True)
class UserSteps:
    """What one broker needs: create or update the user, and create, replace or delete its ACL."""

    user: str | None = None  # "create" | "update"
    acl: str | None = None  # "create" | "replace" | "delete"

    @property
    def nothing(self) -> bool:
        return self.user is None and self.acl is None

    def describe(self) -> str:
        parts = [f"{self.user}d the user" if self.user else "", f"{self.acl}d its ACL" if self.acl else ""]
        return " and ".join(p for p in parts if p) or "in sync"


def plan_user(
    held_user: Mapping[str, Any] | None,
    held_acl: Mapping[str, Any] | None,
    spec: RocketUserSpec,
    password: str,
) -> UserSteps:
    """The steps for one broker, from its UserInfo (None: no such user) and AclInfo (None: no ACL)."""
    user_step = None
    want_type = spec.user_type.lower()
    if held_user is None:
        user_step = "create"
    elif (
        held_user.get("password") != password
        or str(held_user.get("userType", "Normal")).lower() != want_type
        or str(held_user.get("userStatus", "enable")).lower() != "enable"
    ):
        user_step = "update"
    want = _entry_set(acl_entries(spec))
    held = _entry_set(_held_entries(held_acl))
    acl_step = None
    if want != held:
        if not want:
            acl_step = "delete"
        elif held_acl is None or not held:
            acl_step = "create"
        else:
            acl_step = "replace"
    return UserSteps(user_step, acl_step)
