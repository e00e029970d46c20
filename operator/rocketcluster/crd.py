"""The CustomResourceDefinitions, generated from the models: RocketCluster (`rocketcluster.model`), RocketTopic
and RocketConsumerGroup (`rocketcluster.model_resources`).

`python -m rocketcluster.crd` prints them as YAML; `--write` writes one file per CRD into crds/
(`make crds`). tests/operator/test_crd.py proves the checked-in files equal this output.

pydantic's JSON schema becomes a Kubernetes *structural* schema: references inlined, `X | None` turned into X
(the API server prunes a null it was not told to keep, so no field is `nullable`), titles dropped, each nested
spec object defaulted to `{}` so its fields' defaults apply when the user leaves it out, and pass-through
Kubernetes objects marked `x-kubernetes-preserve-unknown-fields`. On top come what JSON schema cannot say:
the CEL rules (`x-kubernetes-validations`: immutable fields, SYNC needs a slave, owned and unknown broker.conf
keys), the status and scale subresources, and the printer columns. A keyword the conversion does not know
stops it, rather than reaching the API server as something it may read differently.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rocketcluster import names
from rocketcluster.broker_keys import BROKER_KEYS, OWNED_KEYS
from rocketcluster.model import NODE_PORT_MAX, NODE_PORTS_PER_GROUP, RocketClusterSpec, RocketClusterStatus
from rocketcluster.model_resources import (
    ATTRIBUTE_KEY_PATTERN,
    MAX_GROUP_NAME,
    MAX_TOPIC_NAME,
    NAME_PATTERN,
    SYSTEM_GROUP_PREFIX,
    SYSTEM_GROUPS,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
    RocketConsumerGroupSpec,
    RocketConsumerGroupStatus,
    RocketTopicSpec,
    RocketTopicStatus,
)
from rocketcluster.model_users import MAX_USERNAME, USERNAME_PATTERN, RocketUserSpec, RocketUserStatus

__all__ = [
    "CRD_DIR",
    "CRD_FILE",
    "CRD_NAME",
    "crd_manifest",
    "crd_yaml",
    "group_crd_manifest",
    "main",
    "manifests",
    "structural_schema",
    "topic_crd_manifest",
]

CRD_DIR = Path("crds")
CRD_NAME = f"{names.PLURAL}.{names.GROUP}"
CRD_FILE = CRD_DIR / f"{CRD_NAME}.yaml"

JsonSchema = dict[str, Any]
SchemaPath = tuple[str, ...]

# Keywords copied as they are; anything else in pydantic's output needs a rule below or is an error.
_PLAIN_KEYWORDS = frozenset(
    {
        "type",
        "description",
        "default",
        "enum",
        "format",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "required",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
        # lists of pass-through objects keyed by name, with their CEL rules (rocketcluster.pod_extras)
        "x-kubernetes-list-map-keys",
        "x-kubernetes-list-type",
        "x-kubernetes-validations",
    }
)


class SchemaConversionError(ValueError):
    """pydantic produced something this module cannot express as a structural schema (a model change)."""


def structural_schema(model_schema: JsonSchema, *, keep_defaults: bool) -> JsonSchema:
    """pydantic's JSON schema of one model -> a Kubernetes structural schema (no $ref, no anyOf, typed nodes)."""
    definitions = model_schema.get("$defs", {})
    return _convert(model_schema, definitions, keep_defaults, ())


def _convert(
    node: JsonSchema, definitions: Mapping[str, JsonSchema], keep_defaults: bool, at: SchemaPath
) -> JsonSchema:
    node = _inline(node, definitions, at)
    out: JsonSchema = {}
    for key, value in node.items():
        if key in ("title", "$defs"):
            continue
        if key == "default":
            if keep_defaults and value is not None:
                out["default"] = value
        elif key == "properties":
            out["properties"] = {
                name: _convert(child, definitions, keep_defaults, (*at, name)) for name, child in value.items()
            }
        elif key == "items":
            out["items"] = _convert(value, definitions, keep_defaults, (*at, "[]"))
        elif key == "additionalProperties":
            if value is True or value == {}:
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(value, dict):
                out["additionalProperties"] = _convert(value, definitions, keep_defaults, (*at, "{}"))
            # False: a structural schema prunes unknown fields anyway, and may not combine it with properties
        elif key == "const":
            out["enum"] = [value]
        elif key in _PLAIN_KEYWORDS:
            # a copy: a model used at several paths shares these lists, which YAML would write as anchors
            out[key] = copy.deepcopy(value)
        else:
            raise SchemaConversionError(f"{'.'.join(at) or '<root>'}: no structural form for keyword {key!r}")
    if "type" not in out and not out.get("x-kubernetes-int-or-string"):
        raise SchemaConversionError(f"{'.'.join(at) or '<root>'}: no type")
    if keep_defaults and out.get("type") == "object" and "properties" in out:
        for name, child in out["properties"].items():
            # A nested settings object the user leaves out still gets its fields' defaults; one with required
            # fields of its own (a reference such as issuerRef) is absent until given, as {} would be invalid.
            if (
                name not in out.get("required", ())
                and child.get("type") == "object"
                and "properties" in child
                and not child.get("required")
            ):
                child.setdefault("default", {})
    return _ordered(out)


# Readable order: what a node is first, its children last; the rest alphabetical (stable output).
_FIRST = ("description", "type")
_LAST = ("properties", "additionalProperties", "items", "required")


def _ordered(node: JsonSchema) -> JsonSchema:
    if "description" in node:
        node["description"] = " ".join(str(node["description"]).split())
    middle = sorted(key for key in node if key not in _FIRST and key not in _LAST)
    return {key: node[key] for key in (*_FIRST, *middle, *_LAST) if key in node}


def _inline(node: JsonSchema, definitions: Mapping[str, JsonSchema], at: SchemaPath) -> JsonSchema:
    """Resolve $ref and drop the null member of `X | None`; sibling keywords (description, default) win."""
    while "$ref" in node or "anyOf" in node:
        siblings = {k: v for k, v in node.items() if k not in ("$ref", "anyOf")}
        if "$ref" in node:
            target = definitions[node["$ref"].removeprefix("#/$defs/")]
        else:
            members = [m for m in node["anyOf"] if m != {"type": "null"}]
            if len(members) != 1:
                raise SchemaConversionError(f"{'.'.join(at)}: a union of {len(members)} types has no structural form")
            target = members[0]
        node = {**target, **siblings}
    return node


# -- what JSON schema cannot say ----------------------------------------------------------------------------------


def _cel_list(words: Sequence[str]) -> str:
    return "[" + ", ".join(f"'{word}'" for word in sorted(words)) + "]"


def _validations() -> dict[SchemaPath, list[dict[str, str]]]:
    """CEL rules by the schema path they sit on (() = the whole object). The API server puts the field path
    (the node's, or fieldPath's) before each message, so a message does not repeat it."""
    owned = _cel_list(list(OWNED_KEYS))
    known = _cel_list([key for key in BROKER_KEYS if key not in OWNED_KEYS])
    name_pattern = "^[a-z]([-a-z0-9]*[a-z0-9])?$"
    return {
        (): [
            {
                "rule": f"size(self.metadata.name) <= {names.MAX_CLUSTER_NAME_LENGTH} && "
                f"self.metadata.name.matches('{name_pattern}')",
                "message": f"metadata.name must be a DNS-1035 label (a-z, 0-9, '-', starting with a letter) of at "
                f"most {names.MAX_CLUSTER_NAME_LENGTH} characters: the children's names (<name>-nameserver-0, "
                f"<name>-broker-<g>-<i>) must stay valid Service and pod names",
            },
            {
                # Root-level, because clusterName may not be added later either (unless it equals the name, the
                # default) and a transition rule on the optional field itself would not run when it is added.
                "rule": "!has(oldSelf.spec) || !has(self.spec) || "
                "(has(oldSelf.spec.clusterName) ? "
                "(has(self.spec.clusterName) && self.spec.clusterName == oldSelf.spec.clusterName) : "
                "(!has(self.spec.clusterName) || self.spec.clusterName == self.metadata.name))",
                "message": (
                    "cannot change, and can be added only equal to metadata.name (clients and routes know the "
                    "cluster by it)"
                ),
                "fieldPath": ".spec.clusterName",
                "reason": "FieldValueInvalid",
            },
        ],
        ("spec",): [
            {
                # the controllers' Raft membership is the NameServer list, fixed when the controllers first met
                "rule": "!has(oldSelf.failover) || !has(oldSelf.failover.enabled) || !oldSelf.failover.enabled || "
                "(has(self.nameServer) && has(self.nameServer.replicas) ? self.nameServer.replicas : 2) == "
                "(has(oldSelf.nameServer) && has(oldSelf.nameServer.replicas) ? oldSelf.nameServer.replicas : 2)",
                "message": "cannot change while failover is on (the controllers' Raft group is the NameServers)",
                "fieldPath": ".nameServer.replicas",
                "reason": "FieldValueInvalid",
            },
            {
                "rule": "!has(self.failover) || !has(self.failover.enabled) || !self.failover.enabled || "
                "(has(self.broker) && has(self.broker.replication) && self.broker.replication == 'SYNC')",
                "message": "failover.enabled needs broker.replication SYNC (a new master must hold every "
                "acknowledged message)",
                "fieldPath": ".failover.enabled",
                "reason": "FieldValueInvalid",
            },
        ],
        ("spec", "failover"): [
            {
                "rule": "(has(self.enabled) && self.enabled) == (has(oldSelf.enabled) && oldSelf.enabled)",
                "message": "cannot change (the NameServers' controller volumes and the brokers' ids are made with "
                "the cluster)",
                "fieldPath": ".enabled",
                "reason": "FieldValueInvalid",
            },
            {
                "rule": "!has(self.enabled) || !self.enabled || !has(oldSelf.controllerStorageSize) || "
                "(has(self.controllerStorageSize) && self.controllerStorageSize == oldSelf.controllerStorageSize)",
                "message": "cannot change while failover is on (the NameServers' volumeClaimTemplates are fixed)",
                "fieldPath": ".controllerStorageSize",
                "reason": "FieldValueInvalid",
            },
        ],
        ("spec", "broker"): [
            {
                "rule": "!has(self.replication) || self.replication != 'SYNC' || "
                "!has(self.slavesPerGroup) || self.slavesPerGroup >= 1",
                "message": "SYNC needs slavesPerGroup >= 1 (a SYNC master waits for a slave to have each message)",
                "fieldPath": ".replication",
                "reason": "FieldValueInvalid",
            },
        ],
        ("spec", "broker", "config"): [
            {
                "rule": f"self.all(k, !(k in {owned}))",
                "messageExpression": f"'key \\'' + self.filter(k, k in {owned})[0] + '\\' is owned by the operator'",
                "reason": "FieldValueForbidden",
            },
            {
                "rule": f"self.all(k, k in {owned} || k in {known})",
                "messageExpression": "'key \\'' + "
                f"self.filter(k, !(k in {owned} || k in {known}))[0] + '\\' is not a broker.conf key the broker knows'",
                "reason": "FieldValueInvalid",
            },
        ],
        ("spec", "security"): [
            {
                "rule": "!has(self.authorization) || !has(self.authorization.enabled) || "
                "!self.authorization.enabled || "
                "(has(self.authentication) && has(self.authentication.enabled) && self.authentication.enabled)",
                "message": "authorization needs authentication.enabled (a request's user is its signer)",
                "fieldPath": ".authorization.enabled",
                "reason": "FieldValueInvalid",
            },
        ],
        ("spec", "security", "tls"): [
            {
                "rule": "!(has(self.secretName) && has(self.issuerRef))",
                "message": "give secretName or issuerRef, not both",
                "reason": "FieldValueInvalid",
            },
            {
                "rule": "!has(self.enabled) || !self.enabled || has(self.secretName) || has(self.issuerRef)",
                "message": "TLS enabled needs secretName (a kubernetes.io/tls Secret) or issuerRef (cert-manager)",
                "reason": "FieldValueInvalid",
            },
        ],
        ("spec", "storage"): [
            {
                "rule": "!has(self.type) || !has(oldSelf.type) || self.type == oldSelf.type",
                "message": "cannot change (the data is on the volumes of the old type)",
                "fieldPath": ".type",
                "reason": "FieldValueInvalid",
            },
            {
                "rule": "has(self.storageClassName) == has(oldSelf.storageClassName) && "
                "(!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",
                "message": "cannot change (existing PVCs keep their class)",
                "fieldPath": ".storageClassName",
                "reason": "FieldValueInvalid",
            },
        ],
    }


def _external_validations() -> dict[SchemaPath, list[dict[str, str]]]:
    """CEL rules of spec.externalAccess (the model checks the same: ExternalAccess, RocketClusterSpec)."""
    base = "self.externalAccess.nodePortBase"
    groups = "(has(self.broker) && has(self.broker.groups) ? self.broker.groups : 1)"
    last = f"({base} + {NODE_PORTS_PER_GROUP} * {groups})"
    with_base = "!has(self.externalAccess) || !has(self.externalAccess.nodePortBase) || "
    return {
        ("spec",): [
            {
                "rule": f"{with_base}{last} <= {NODE_PORT_MAX}",
                "message": f"nodePortBase + {NODE_PORTS_PER_GROUP} x broker.groups (the last nodePort the brokers "
                f"use) must be at most {NODE_PORT_MAX}",
                "fieldPath": ".externalAccess.nodePortBase",
                "reason": "FieldValueInvalid",
            },
            {
                "rule": f"{with_base}!has(self.metrics) || !has(self.metrics.enabled) || !self.metrics.enabled || "
                f"!has(self.metrics.port) || self.metrics.port < {base} || self.metrics.port > {last}",
                "message": "the nodePorts (nodePortBase to nodePortBase + 5 x groups) include spec.metrics.port "
                "(a broker would listen on both)",
                "fieldPath": ".externalAccess.nodePortBase",
                "reason": "FieldValueInvalid",
            },
        ],
        ("spec", "externalAccess"): [
            {
                "rule": "self.type != 'NodePort' || has(self.nodePortBase)",
                "message": "type NodePort needs nodePortBase (every broker's port is fixed before it starts)",
                "reason": "FieldValueInvalid",
            },
            {
                "rule": "!has(self.nodePortBase) || self.type == 'NodePort'",
                "message": "nodePortBase is only for type NodePort",
                "fieldPath": ".nodePortBase",
                "reason": "FieldValueForbidden",
            },
            {
                "rule": "!has(self.advertisedHost) || self.type == 'NodePort'",
                "message": "advertisedHost is only for type NodePort (a LoadBalancer's brokers advertise its address)",
                "fieldPath": ".advertisedHost",
                "reason": "FieldValueForbidden",
            },
        ],
    }


# Extensions for server-side apply: conditions are merged by type, not replaced as a whole list.
_EXTENSIONS: dict[SchemaPath, JsonSchema] = {
    ("status", "conditions"): {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
}


def _at(schema: JsonSchema, path: SchemaPath) -> JsonSchema:
    for name in path:
        schema = schema["properties"][name]
    return schema


def _root_schema() -> JsonSchema:
    spec = structural_schema(RocketClusterSpec.model_json_schema(by_alias=True), keep_defaults=True)
    spec["default"] = {}
    status = structural_schema(RocketClusterStatus.model_json_schema(by_alias=True), keep_defaults=False)
    root: JsonSchema = {
        "type": "object",
        "description": "A RocketMQ cluster (NameServers and broker groups) run by the rocketcluster operator.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }
    for path, rules in [*_validations().items(), *_external_validations().items()]:
        _at(root, path).setdefault("x-kubernetes-validations", []).extend(rules)
    for path, extension in _EXTENSIONS.items():
        _at(root, path).update(extension)
    return root


def crd_manifest() -> dict[str, Any]:
    """The CustomResourceDefinition object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": CRD_NAME,
            "labels": {names.LABEL_NAME: "rocketcluster-operator"},
        },
        "spec": {
            "group": names.GROUP,
            "names": {
                "kind": names.KIND,
                "listKind": f"{names.KIND}List",
                "plural": names.PLURAL,
                "singular": names.SINGULAR,
                "shortNames": list(names.SHORT_NAMES),
                "categories": list(names.CATEGORIES),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": names.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.broker.groups",
                            "statusReplicasPath": ".status.readyGroups",
                            "labelSelectorPath": ".status.labelSelector",
                        },
                    },
                    "additionalPrinterColumns": [
                        {"name": "Groups", "type": "integer", "jsonPath": ".spec.broker.groups"},
                        {"name": "Slaves/Group", "type": "integer", "jsonPath": ".spec.broker.slavesPerGroup"},
                        {"name": "Ready", "type": "string", "jsonPath": ".status.ready"},
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                        {"name": "Masters", "type": "string", "jsonPath": ".status.masters"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {"openAPIV3Schema": _root_schema()},
                }
            ],
        },
    }


# -- RocketTopic and RocketConsumerGroup ------------------------------------------------------------------------


def _name_rule(kind: str, field: str, limit: int, system: Sequence[str], prefix: str) -> dict[str, str]:
    """metadata.name is the topic (group) name when spec.<field> is unset: then it must be one."""
    return {
        "rule": f"has(self.spec.{field}) || (size(self.metadata.name) <= {limit} && "
        f"self.metadata.name.matches('{NAME_PATTERN}') && !(self.metadata.name in {_cel_list(system)}) && "
        f"!self.metadata.name.startsWith('{prefix}'))",
        "message": f"metadata.name is the {kind} name when spec.{field} is not set, so it must be one: letters, "
        f"digits, '%', '|', '_' and '-' (no '.'), at most {limit} characters, not a system {kind}; "
        f"or set spec.{field}",
    }


def _immutable(field: str, why: str) -> dict[str, str]:
    """A root rule: spec.<field> cannot change, be added or be removed (at the root, because a transition rule on
    an optional field itself does not run when it is added or removed)."""
    return {
        "rule": f"!has(oldSelf.spec) || (has(self.spec.{field}) == has(oldSelf.spec.{field}) && "
        f"(!has(self.spec.{field}) || self.spec.{field} == oldSelf.spec.{field}))",
        "message": f"cannot change ({why})",
        "fieldPath": f".spec.{field}",
        "reason": "FieldValueInvalid",
    }


def _not_system(field: str, kind: str, system: Sequence[str], prefix: str) -> dict[str, str]:
    return {
        "rule": f"!has(self.{field}) || (!(self.{field} in {_cel_list(system)}) && "
        f"!self.{field}.startsWith('{prefix}'))",
        "message": f"a system {kind} (the brokers make and own it)",
        "fieldPath": f".{field}",
        "reason": "FieldValueForbidden",
    }


def _topic_validations() -> dict[SchemaPath, list[dict[str, str]]]:
    return {
        (): [
            _name_rule("topic", "topicName", MAX_TOPIC_NAME, SYSTEM_TOPICS, SYSTEM_TOPIC_PREFIX),
            _immutable("topicName", "a new name is another topic: create another RocketTopic"),
            _immutable("clusterRef", "the topic lives in that cluster: create a RocketTopic for the other one"),
        ],
        ("spec",): [
            {
                "rule": "!has(self.queues) || (!has(self.readQueueNums) && !has(self.writeQueueNums))",
                "message": "queues sets both readQueueNums and writeQueueNums: give either queues or those two",
                "fieldPath": ".queues",
                "reason": "FieldValueInvalid",
            },
            {
                "rule": "!has(self.order) || !self.order || !has(self.messageType) || "
                "self.messageType in ['NORMAL', 'FIFO']",
                "message": "order needs messageType NORMAL or FIFO",
                "fieldPath": ".order",
                "reason": "FieldValueInvalid",
            },
            _not_system("topicName", "topic", SYSTEM_TOPICS, SYSTEM_TOPIC_PREFIX),
        ],
        ("spec", "attributes"): [
            {
                "rule": "!('message.type' in self)",
                "message": "message.type is set by spec.messageType",
                "reason": "FieldValueForbidden",
            },
            {
                "rule": f"self.all(k, k.matches('{ATTRIBUTE_KEY_PATTERN}'))",
                "messageExpression": f"'key \\'' + self.filter(k, !k.matches('{ATTRIBUTE_KEY_PATTERN}'))[0] + "
                "'\\' is not an attribute name (letters, digits, \\'.\\' and \\'_\\', at most 64)'",
                "reason": "FieldValueInvalid",
            },
        ],
    }


def _group_validations() -> dict[SchemaPath, list[dict[str, str]]]:
    return {
        (): [
            _name_rule("group", "groupName", MAX_GROUP_NAME, SYSTEM_GROUPS, SYSTEM_GROUP_PREFIX),
            _immutable("groupName", "a new name is another group: create another RocketConsumerGroup"),
            _immutable("clusterRef", "the group lives in that cluster: create a RocketConsumerGroup for the other one"),
        ],
        ("spec",): [_not_system("groupName", "group", SYSTEM_GROUPS, SYSTEM_GROUP_PREFIX)],
        ("spec", "groupRetryPolicy"): [
            {
                "rule": "!has(self.exponentialRetryPolicy) || (has(self.type) && self.type == 'EXPONENTIAL')",
                "message": "exponentialRetryPolicy goes with type EXPONENTIAL",
                "fieldPath": ".exponentialRetryPolicy",
                "reason": "FieldValueInvalid",
            },
            {
                "rule": "!has(self.customizedRetryPolicy) || !has(self.type) || self.type == 'CUSTOMIZED'",
                "message": "customizedRetryPolicy goes with type CUSTOMIZED",
                "fieldPath": ".customizedRetryPolicy",
                "reason": "FieldValueInvalid",
            },
        ],
        ("spec", "groupRetryPolicy", "exponentialRetryPolicy"): [
            {
                "rule": "!has(self.max) || !has(self.initial) || self.max >= self.initial",
                "message": "max is below initial",
                "fieldPath": ".max",
                "reason": "FieldValueInvalid",
            },
        ],
    }


def _resource_crd(
    *,
    kind: str,
    plural: str,
    singular: str,
    short_names: Sequence[str],
    description: str,
    spec_model: Any,
    status_model: Any,
    name_column: tuple[str, str],
    validations: dict[SchemaPath, list[dict[str, str]]],
    no_default: Sequence[SchemaPath] = (),
) -> dict[str, Any]:
    spec = structural_schema(spec_model.model_json_schema(by_alias=True), keep_defaults=True)
    for path in no_default:
        # An optional object whose absence means something (groupRetryPolicy unset: left as the brokers have it)
        # must not be filled in as {} by the API server.
        _at(spec, path).pop("default", None)
    status = structural_schema(status_model.model_json_schema(by_alias=True), keep_defaults=False)
    root: JsonSchema = {
        "type": "object",
        "description": description,
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        "required": ["spec"],
    }
    for path, rules in validations.items():
        _at(root, path)["x-kubernetes-validations"] = rules
    for path, extension in _EXTENSIONS.items():
        _at(root, path).update(extension)
    ready = '.status.conditions[?(@.type=="Ready")]'
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{names.GROUP}", "labels": {names.LABEL_NAME: "rocketcluster-operator"}},
        "spec": {
            "group": names.GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
                "shortNames": list(short_names),
                "categories": list(names.CATEGORIES),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": names.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterRef"},
                        {"name": name_column[0], "type": "string", "jsonPath": name_column[1]},
                        {"name": "Ready", "type": "string", "jsonPath": f"{ready}.status"},
                        {"name": "Reason", "type": "string", "jsonPath": f"{ready}.reason"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def topic_crd_manifest() -> dict[str, Any]:
    """The RocketTopic CustomResourceDefinition."""
    return _resource_crd(
        kind=names.TOPIC_KIND,
        plural=names.TOPIC_PLURAL,
        singular=names.TOPIC_SINGULAR,
        short_names=names.TOPIC_SHORT_NAMES,
        description="A topic on every broker group of a RocketCluster, kept as the spec says by the rocketcluster "
        "operator.",
        spec_model=RocketTopicSpec,
        status_model=RocketTopicStatus,
        name_column=("Topic", ".status.topicName"),
        validations=_topic_validations(),
    )


def group_crd_manifest() -> dict[str, Any]:
    """The RocketConsumerGroup CustomResourceDefinition."""
    return _resource_crd(
        kind=names.CONSUMER_GROUP_KIND,
        plural=names.CONSUMER_GROUP_PLURAL,
        singular=names.CONSUMER_GROUP_SINGULAR,
        short_names=names.CONSUMER_GROUP_SHORT_NAMES,
        description="A consumer (subscription) group on every broker group of a RocketCluster, kept as the spec "
        "says by the rocketcluster operator.",
        spec_model=RocketConsumerGroupSpec,
        status_model=RocketConsumerGroupStatus,
        name_column=("Group", ".status.groupName"),
        validations=_group_validations(),
        no_default=[
            ("groupRetryPolicy",),
            ("groupRetryPolicy", "exponentialRetryPolicy"),
            ("groupRetryPolicy", "customizedRetryPolicy"),
        ],
    )


def _user_validations() -> dict[SchemaPath, list[dict[str, str]]]:
    return {
        (): [
            {
                "rule": f"has(self.spec.username) || (size(self.metadata.name) <= {MAX_USERNAME} && "
                f"self.metadata.name.matches('{USERNAME_PATTERN}'))",
                "message": "metadata.name is the user name when spec.username is not set, so it must be one: "
                f"letters, digits, '_' and '-' (no '.'), at most {MAX_USERNAME} characters; or set spec.username",
            },
            _immutable("username", "a new name is another user: create another RocketUser"),
            _immutable("clusterRef", "the user lives in that cluster: create a RocketUser for the other one"),
        ],
        ("spec",): [
            {
                "rule": "!has(self.userType) || self.userType != 'Super' || !has(self.acls) || size(self.acls) == 0",
                "message": "a Super user is allowed everything: give acls only to a Normal user",
                "fieldPath": ".acls",
                "reason": "FieldValueInvalid",
            },
        ],
        ("spec", "acls"): [
            {
                "rule": "self.all(r, !has(r.resource.patternType) || r.resource.patternType != 'Prefixed' || "
                "!has(r.resource.name) || r.resource.name != '*')",
                "message": "a Prefixed pattern needs a name prefix, not '*' (use Literal '*' for every name)",
                "reason": "FieldValueInvalid",
            },
        ],
    }


def user_crd_manifest() -> dict[str, Any]:
    """The RocketUser CustomResourceDefinition."""
    return _resource_crd(
        kind=names.USER_KIND,
        plural=names.USER_PLURAL,
        singular=names.USER_SINGULAR,
        short_names=names.USER_SHORT_NAMES,
        description="A user (ACL 2.0) of a RocketCluster's brokers with its ACL rules, and a Secret with its "
        "credentials, kept as the spec says by the rocketcluster operator.",
        spec_model=RocketUserSpec,
        status_model=RocketUserStatus,
        name_column=("User", ".status.username"),
        validations=_user_validations(),
    )


def peering_crd_manifests() -> list[dict[str, Any]]:
    """kopf's peering resources (kopf.dev/v1 ClusterKopfPeering and KopfPeering), which replicas run with
    `--peering` keep their keep-alives in (rocketcluster.peering). Every replica writes its own entry into the
    status, so the status is kept as written; the objects have no status subresource."""
    out = []
    for kind, plural, scope in (
        ("ClusterKopfPeering", "clusterkopfpeerings", "Cluster"),
        ("KopfPeering", "kopfpeerings", "Namespaced"),
    ):
        schema: JsonSchema = {
            "type": "object",
            "description": f"Where a kopf operator's replicas ({scope.lower()}-wide) say they are alive.",
            "properties": {
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
            "x-kubernetes-preserve-unknown-fields": True,
        }
        out.append(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.kopf.dev", "labels": {names.LABEL_NAME: "rocketcluster-operator"}},
                "spec": {
                    "group": "kopf.dev",
                    "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
                    "scope": scope,
                    "versions": [
                        {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
                    ],
                },
            }
        )
    return out


def manifests() -> dict[str, dict[str, Any]]:
    """Every CRD by the name of its file in crds/."""
    out = {}
    for manifest in (crd_manifest(), topic_crd_manifest(), group_crd_manifest(), user_crd_manifest()):
        out[f"{manifest['metadata']['name']}.yaml"] = manifest
    for manifest in peering_crd_manifests():
        out[f"{manifest['metadata']['name']}.yaml"] = manifest
    return out


def crd_yaml(manifest: dict[str, Any] | None = None) -> str:
    """A CRD (default: RocketCluster's) as YAML text: deterministic (keys in declaration order), so the checked-in
    file can be compared."""
    import yaml  # type: ignore[import-untyped]  # the `operator` extra (no stubs); only generation needs it

    manifest = crd_manifest() if manifest is None else manifest
    kind = manifest["spec"]["names"]["kind"]
    source = {names.KIND: "model.py", names.USER_KIND: "model_users.py"}.get(kind, "model_resources.py")
    if manifest["spec"]["group"] == "kopf.dev":
        source = "crd.py (kopf's peering resources)"
    header = f"# Generated by `python -m rocketcluster.crd --write` (make crds) from operator/rocketcluster/{source}.\n"
    header += "# Do not edit: tests/operator/test_crd.py fails when this file and the model disagree.\n"
    return header + str(yaml.safe_dump(manifest, sort_keys=False, width=120, allow_unicode=True))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocketcluster.crd", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--write",
        nargs="?",
        const=str(CRD_DIR),
        metavar="DIR",
        help=f"write each CRD to DIR/<name>.yaml (default {CRD_DIR}) instead of printing them",
    )
    args = parser.parse_args(argv)
    texts = {file: crd_yaml(manifest) for file, manifest in manifests().items()}
    if args.write:
        for file, text in texts.items():
            (Path(args.write) / file).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write("---\n".join(texts.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
