"""What a pod template may add to the operator's pods: env, volumes, volumeMounts, initContainers, sidecars.

Each is a list of Kubernetes objects passed through as written (the API server validates them on the
StatefulSet), keyed by the field the API server keys them by (`name`, or `mountPath` for a mount). The key is
checked twice, as every RocketCluster field is: by the CRD (its pattern, `x-kubernetes-list-type: map` for
duplicates, and a CEL rule for the names the operator's own pods use) and by the model (the same checks, for a
resource stored before a CRD upgrade). What the operator's pods already use is refused, because a second volume
`data` or a second env `POD_INDEX` would either be refused by the API server on the StatefulSet (after the
cluster was accepted) or silently replace what the broker depends on.

`render` adds the extras after the operator's own entries (`extend_container`, `extra_containers`), and gives
each extra container the restricted security context under its own, so a sidecar written without one still
runs in a namespace that enforces the `restricted` Pod Security Standard.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Final

from pydantic import AfterValidator, WithJsonSchema

from rocketcluster import names

__all__ = [
    "MAX_EXTRAS",
    "MAX_OBJECT_DEPTH",
    "MAX_OBJECT_NODES",
    "RESERVED_CONTAINERS",
    "RESERVED_ENV",
    "RESERVED_MOUNT_PATHS",
    "RESERVED_VOLUMES",
    "Containers",
    "EnvVars",
    "VolumeMounts",
    "Volumes",
    "bounded_object",
    "extra_containers",
    "reserved_mount_path",
]

MAX_EXTRAS: Final = 32
# Bounds of a pass-through Kubernetes object (extras, affinity, tolerations): far above any real one.
MAX_OBJECT_DEPTH: Final = 16
MAX_OBJECT_NODES: Final = 2000

# What the operator's pods use. tests/operator/test_pod_extras.py renders every pod and checks each of its
# names is listed here, so a new operator volume or env cannot be missed.
RESERVED_VOLUMES: Final = ("config", names.DATA_VOLUME, "home", "tmp")
RESERVED_CONTAINERS: Final = (names.BROKER_CONTAINER, names.NAMESERVER_CONTAINER)
RESERVED_ENV: Final = ("BROKER_IP1", "POD_INDEX", "POD_NAME")
RESERVED_MOUNT_PATHS: Final = (names.BROKER_CONFIG_DIR, names.DATA_MOUNT_PATH, "/home/rocketmq", "/tmp")

# Kubernetes' own name rules: a DNS-1123 label for volumes and containers, a C identifier (with '-' and '.')
# for environment variables, an absolute path for a mount.
_DNS_LABEL: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_ENV_NAME: Final = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
_MOUNT_PATH: Final = r"^/[^\x00]*$"
_BACKSTEP: Final = r"(^|/)[.][.](/|$)"


def reserved_mount_path(path: str) -> str | None:
    """The operator's mount path that `path` is or lies under (None: free). A mount inside the read-only config
    directory could not be made; one inside the data, home or tmp volume would hide what the broker writes."""
    for reserved in RESERVED_MOUNT_PATHS:
        if path == reserved or path.startswith(reserved.rstrip("/") + "/"):
            return reserved
    return None


def _cel_list(words: Sequence[str]) -> str:
    return "[" + ", ".join(f"'{word}'" for word in sorted(words)) + "]"


def bounded_object(value: Any) -> Any:
    """Refuse pass-through objects nested or sized beyond any real Kubernetes object (render copies them)."""
    nodes = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if depth > MAX_OBJECT_DEPTH:
            raise ValueError(f"nested deeper than {MAX_OBJECT_DEPTH} levels")
        if nodes > MAX_OBJECT_NODES:
            raise ValueError(f"more than {MAX_OBJECT_NODES} values")
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise ValueError("object keys must be strings")
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        elif item is not None and not isinstance(item, str | int | float | bool):
            raise ValueError(f"unexpected value of type {type(item).__name__}")
    return value


def _checker(
    what: str, key: str, pattern: str, max_length: int, reserved: Callable[[str], str | None], required: Sequence[str]
) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    compiled = re.compile(pattern)

    def check(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(items) > MAX_EXTRAS:
            raise ValueError(f"at most {MAX_EXTRAS} entries (got {len(items)})")
        seen: set[str] = set()
        for index, item in enumerate(items):
            for field in required:
                if not isinstance(item.get(field), str) or not item[field]:
                    raise ValueError(f"[{index}]: a {what} needs a string {field}")
            value = item[key]
            if len(value) > max_length or not compiled.match(value):
                raise ValueError(f"[{index}]: {key} {value[:80]!r} is not a valid {what} {key}")
            if re.search(_BACKSTEP, value) and key == "mountPath":
                raise ValueError(f"[{index}]: mountPath {value[:80]!r} must not contain '..'")
            clash = reserved(value)
            if clash is not None and key == "mountPath":
                raise ValueError(f"[{index}]: mountPath {value!r} is at or under the operator's mount {clash}")
            if clash is not None:
                raise ValueError(f"[{index}]: {key} {value!r} is the operator's own {what} ({clash})")
            if value in seen:
                raise ValueError(f"[{index}]: {key} {value!r} is given twice")
            seen.add(value)
            bounded_object(item)
        return items

    return check


def _in(words: Sequence[str], why: str) -> Callable[[str], str | None]:
    return lambda value: why if value in words else None


def _schema(
    what: str, key: str, pattern: str, max_length: int, rules: list[dict[str, str]], required: Sequence[str]
) -> dict[str, Any]:
    """The list's CRD schema: items kept as written (preserve-unknown-fields) but for their typed key fields."""
    return {
        "type": "array",
        "maxItems": MAX_EXTRAS,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": [key],
        "x-kubernetes-validations": rules,
        "items": {
            "type": "object",
            "description": f"A Kubernetes {what}, passed through as written.",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {field: {"type": "string", "minLength": 1, "maxLength": max_length} for field in required}
            | {key: {"type": "string", "maxLength": max_length, "pattern": pattern}},
            "required": list(required),
        },
    }


def _reserved_rule(key: str, words: Sequence[str], what: str) -> dict[str, str]:
    # A static message: a messageExpression that names the offending entry costs far over the CEL budget when
    # the entries are pass-through objects of unknown size.
    return {
        "rule": f"self.all(x, !(x.{key} in {_cel_list(words)}))",
        "message": f"the {what} {key}s {', '.join(sorted(words))} are the operator's own: choose another",
        "reason": "FieldValueForbidden",
    }


def _mount_path_rules() -> list[dict[str, str]]:
    under = " || ".join(f"x.mountPath == '{p}' || x.mountPath.startsWith('{p}/')" for p in RESERVED_MOUNT_PATHS)
    return [
        {
            "rule": f"self.all(x, !({under}))",
            "message": f"a mountPath may not be at or under the operator's mounts ({', '.join(RESERVED_MOUNT_PATHS)})",
            "reason": "FieldValueForbidden",
        },
        {
            "rule": f"self.all(x, !x.mountPath.matches('{_BACKSTEP}'))",
            "message": "a mountPath must not contain '..'",
            "reason": "FieldValueInvalid",
        },
    ]


def _named_list(
    what: str,
    key: str,
    pattern: str,
    max_length: int,
    reserved: Callable[[str], str | None],
    rules: list[dict[str, str]],
    required: Sequence[str] = (),
) -> Any:
    keys = (key, *[f for f in required if f != key])
    return Annotated[
        list[dict[str, Any]],
        AfterValidator(_checker(what, key, pattern, max_length, reserved, keys)),
        WithJsonSchema(_schema(what, key, pattern, max_length, rules, keys)),
    ]


EnvVars = _named_list(
    "env variable",
    "name",
    _ENV_NAME,
    253,
    _in(RESERVED_ENV, "the broker reads it"),
    [_reserved_rule("name", RESERVED_ENV, "env variable")],
)
"""Container env entries (name plus value or valueFrom)."""
Volumes = _named_list(
    "volume",
    "name",
    _DNS_LABEL,
    63,
    _in(RESERVED_VOLUMES, "config, data, home and tmp are the operator's"),
    [_reserved_rule("name", RESERVED_VOLUMES, "volume")],
)
"""Pod volumes (name plus one volume source)."""
VolumeMounts = _named_list(
    "volume mount", "mountPath", _MOUNT_PATH, 1024, reserved_mount_path, _mount_path_rules(), required=("name",)
)
"""Mounts into the main container (name of a volume, mountPath)."""
Containers = _named_list(
    "container",
    "name",
    _DNS_LABEL,
    63,
    _in(RESERVED_CONTAINERS, "the operator's main containers"),
    [_reserved_rule("name", RESERVED_CONTAINERS, "container")],
    required=("image",),
)
"""Extra containers (name, image, ...)."""


# -- render ------------------------------------------------------------------------------------------------------


def extra_containers(items: Sequence[Mapping[str, Any]] | None, security_context: Mapping[str, Any]) -> list[Any]:
    """Copies of `items`, each with `security_context` (the main container's) under its own securityContext."""
    out = []
    for item in items or ():
        container = copy.deepcopy(dict(item))
        own = container.get("securityContext") or {}
        if isinstance(own, dict):  # anything else is left for the API server to refuse, naming the field
            container["securityContext"] = {**copy.deepcopy(dict(security_context)), **own}
        out.append(container)
    return out
