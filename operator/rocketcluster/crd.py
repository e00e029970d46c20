"""The RocketCluster CustomResourceDefinition, generated from `rocketcluster.model`.

`python -m rocketcluster.crd` prints it as YAML; `--write` writes crds/rocketclusters.rocketcluster.io.yaml
(`make crds`). tests/operator/test_crd.py proves the checked-in file equals this output.

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
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rocketcluster import names
from rocketcluster.broker_keys import BROKER_KEYS, OWNED_KEYS
from rocketcluster.model import RocketClusterSpec, RocketClusterStatus

__all__ = ["CRD_FILE", "CRD_NAME", "crd_manifest", "crd_yaml", "main", "structural_schema"]

CRD_NAME = f"{names.PLURAL}.{names.GROUP}"
CRD_FILE = Path("crds") / f"{CRD_NAME}.yaml"

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
            out[key] = value
        else:
            raise SchemaConversionError(f"{'.'.join(at) or '<root>'}: no structural form for keyword {key!r}")
    if "type" not in out and not out.get("x-kubernetes-int-or-string"):
        raise SchemaConversionError(f"{'.'.join(at) or '<root>'}: no type")
    if keep_defaults and out.get("type") == "object" and "properties" in out:
        for name, child in out["properties"].items():
            # A nested settings object the user leaves out still gets its fields' defaults.
            if name not in out.get("required", ()) and child.get("type") == "object" and "properties" in child:
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
    for path, rules in _validations().items():
        _at(root, path)["x-kubernetes-validations"] = rules
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
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {"openAPIV3Schema": _root_schema()},
                }
            ],
        },
    }


def crd_yaml() -> str:
    """The CRD as YAML text: deterministic (keys in declaration order), so the checked-in file can be compared."""
    import yaml  # type: ignore[import-untyped]  # the `operator` extra (no stubs); only generation needs it

    header = "# Generated by `python -m rocketcluster.crd --write` (make crds) from operator/rocketcluster/model.py.\n"
    header += "# Do not edit: tests/operator/test_crd.py fails when this file and the model disagree.\n"
    return header + str(yaml.safe_dump(crd_manifest(), sort_keys=False, width=120, allow_unicode=True))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocketcluster.crd", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--write",
        nargs="?",
        const=str(CRD_FILE),
        metavar="PATH",
        help=f"write the CRD to PATH (default {CRD_FILE}) instead of printing it",
    )
    args = parser.parse_args(argv)
    text = crd_yaml()
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
