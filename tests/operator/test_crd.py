"""rocketcluster.crd: the checked-in CRD is the generated one, its schema is structural, and it says what the
model says (defaults, bounds, owned keys). tests/operator/test_crd_apiserver.py runs it on a real API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketcluster import crd, names
from rocketcluster.broker_keys import BROKER_KEYS, OWNED_KEYS
from rocketcluster.model import RocketClusterSpec, parse_spec
from rocketcluster.model_resources import SYSTEM_GROUPS, SYSTEM_TOPICS, parse_group_spec, parse_topic_spec

yaml = pytest.importorskip("yaml", reason="PyYAML comes with the `operator` extra")

REPO = Path(__file__).resolve().parents[2]


def _schema() -> dict[str, Any]:
    [version] = crd.crd_manifest()["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"])


def _nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path or "<root>", node
    for name, child in node.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}{{}}")
    if "items" in node:
        yield from _nodes(node["items"], f"{path}[]")


@pytest.mark.parametrize("file", sorted(crd.manifests()))
def test_the_checked_in_crds_are_the_generated_ones(file: str) -> None:
    manifest = crd.manifests()[file]
    checked_in = (REPO / crd.CRD_DIR / file).read_text(encoding="utf-8")
    assert checked_in == crd.crd_yaml(manifest), "run `make crds` and commit crds/"
    assert yaml.safe_load(checked_in) == manifest
    assert (REPO / crd.CRD_FILE).read_text(encoding="utf-8") == crd.crd_yaml() or file != crd.CRD_FILE.name


def test_generation_is_deterministic() -> None:
    assert crd.crd_yaml() == crd.crd_yaml()


def test_the_command_writes_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert crd.main(["--write", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "clusterkopfpeerings.kopf.dev.yaml",
        "kopfpeerings.kopf.dev.yaml",
        "rocketclusters.rocketcluster.io.yaml",
        "rocketconsumergroups.rocketcluster.io.yaml",
        "rockettopics.rocketcluster.io.yaml",
        "rocketusers.rocketcluster.io.yaml",
    ]
    assert (tmp_path / crd.CRD_FILE.name).read_text(encoding="utf-8") == crd.crd_yaml()
    assert crd.main([]) == 0
    printed = [doc for doc in yaml.safe_load_all(capsys.readouterr().out) if doc]
    assert printed == list(crd.manifests().values())


def test_the_schema_is_structural() -> None:
    for path, node in _nodes(_schema()):
        for keyword in ("$ref", "$defs", "anyOf", "oneOf", "allOf", "not", "title", "nullable", "const"):
            assert keyword not in node, f"{path}: {keyword}"
        int_or_string = node.get("x-kubernetes-int-or-string") is True
        assert "type" in node or int_or_string, f"{path}: no type"
        if node.get("type") == "object":
            assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("type") == "array":
            assert "items" in node, path
        if "default" in node:
            assert node["default"] is not None, path


def test_pass_through_objects_keep_unknown_fields_and_nothing_else_does() -> None:
    keeps = {path for path, node in _nodes(_schema()) if node.get("x-kubernetes-preserve-unknown-fields")}
    spec_keeps = {p for p in keeps if p.startswith(".spec")}
    for path in spec_keeps:
        assert path.rsplit(".", 1)[-1].removesuffix("[]") in {
            "affinity",
            "tolerations",
            "securityContext",
            "containerSecurityContext",
            "topologySpreadConstraints",
            "allowFrom",  # NetworkPolicyPeers, passed through
            "metricsFrom",
            # rocketcluster.pod_extras: lists keyed by name (or mountPath), the rest passed through
            "env",
            "volumes",
            "volumeMounts",
            "initContainers",
            "sidecars",
        }, path
    assert ".spec.template.affinity" in spec_keeps
    assert ".spec.broker.template.tolerations[]" in spec_keeps
    assert {p for p in keeps if p.startswith(".status")} == {".status.rollout", ".status.scaling"}


def _apply_defaults(node: dict[str, Any], value: Any) -> Any:
    """What the API server's defaulting does to `value` (a missing field with a default gets it, recursively)."""
    if node.get("type") != "object" or not isinstance(value, dict):
        return value
    out = dict(value)
    for name, child in node.get("properties", {}).items():
        if name not in out and "default" in child:
            out[name] = child["default"]
        if name in out:
            out[name] = _apply_defaults(child, out[name])
    return out


@pytest.mark.parametrize(
    "raw",
    [{}, {"broker": {"groups": 3}}, {"storage": {"type": "ephemeral"}, "rollout": {"maxSlaveLagBytes": 5}}],
)
def test_schema_defaults_are_the_model_defaults(raw: dict[str, Any]) -> None:
    spec_schema = _schema()["properties"]["spec"]
    defaulted = _apply_defaults(spec_schema, raw)
    model = parse_spec(raw).model_dump(by_alias=True, exclude_none=True)

    def drop_empty(value: Any) -> Any:
        # the model writes empty maps and lists the API server leaves out
        if isinstance(value, dict):
            kept = {k: drop_empty(v) for k, v in value.items()}
            return {k: v for k, v in kept.items() if v not in ({}, [])}
        return value

    assert drop_empty(defaulted) == drop_empty(model)
    assert parse_spec(defaulted) == parse_spec(raw)


def test_bounds_match_the_model() -> None:
    spec = _schema()["properties"]["spec"]["properties"]
    broker = spec["broker"]["properties"]
    fields = RocketClusterSpec.model_fields["broker"].annotation.model_fields  # type: ignore[union-attr]
    assert (broker["groups"]["minimum"], broker["groups"]["maximum"]) == (1, 64)
    assert (broker["slavesPerGroup"]["minimum"], broker["slavesPerGroup"]["maximum"]) == (0, 4)
    assert broker["replication"]["enum"] == ["ASYNC", "SYNC"]
    assert broker["config"]["maxProperties"] == 64
    assert broker["config"]["additionalProperties"]["maxLength"] == 1024
    assert set(fields) == {
        "groups",
        "slaves_per_group",
        "replication",
        "flush_disk_type",
        "config",
        "resources",
        "template",
        "grpc",
    }
    assert (broker["grpc"]["properties"]["port"]["minimum"], broker["grpc"]["properties"]["port"]["maximum"]) == (
        1024,
        65535,
    )
    assert spec["storage"]["properties"]["type"]["enum"] == ["ephemeral", "persistentClaim"]


def test_cel_rules_name_exactly_the_owned_and_known_keys() -> None:
    rules = _schema()["properties"]["spec"]["properties"]["broker"]["properties"]["config"]["x-kubernetes-validations"]
    owned_rule, known_rule = (rule["rule"] for rule in rules)
    quoted = {word.strip("'") for word in owned_rule[owned_rule.index("[") + 1 : owned_rule.index("]")].split(", ")}
    assert quoted == set(OWNED_KEYS)
    for key in BROKER_KEYS:
        assert f"'{key}'" in known_rule
    assert "'deleteWhne'" not in known_rule


def test_every_cel_rule_has_a_message_and_is_bounded() -> None:
    count = 0
    for path, node in _nodes(_schema()):
        for rule in node.get("x-kubernetes-validations", []):
            count += 1
            assert rule.get("message") or rule.get("messageExpression"), path
            assert rule.get("reason", "FieldValueInvalid") in ("FieldValueInvalid", "FieldValueForbidden"), path
            if "self.all(" in rule["rule"]:
                # a map or list a rule iterates must be bounded, or the API server's cost estimate refuses it
                assert "maxProperties" in node or "maxItems" in node, path
    assert count >= 7


def test_names_subresources_and_columns() -> None:
    manifest = crd.crd_manifest()
    spec = manifest["spec"]
    assert manifest["metadata"]["name"] == "rocketclusters.rocketcluster.io"
    assert spec["group"] == names.GROUP
    assert spec["scope"] == "Namespaced"
    assert spec["names"] == {
        "kind": "RocketCluster",
        "listKind": "RocketClusterList",
        "plural": "rocketclusters",
        "singular": "rocketcluster",
        "shortNames": ["rmq"],
        "categories": ["rocketmq"],
    }
    [version] = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.broker.groups",
            "statusReplicasPath": ".status.readyGroups",
            "labelSelectorPath": ".status.labelSelector",
        },
    }
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Groups": ".spec.broker.groups",
        "Slaves/Group": ".spec.broker.slavesPerGroup",
        "Ready": ".status.ready",
        "Phase": ".status.phase",
        "Masters": ".status.masters",
        "Age": ".metadata.creationTimestamp",
    }
    status = _schema()["properties"]["status"]["properties"]
    for path in (".status.readyGroups", ".status.labelSelector", ".status.ready", ".status.phase", ".status.masters"):
        assert path.removeprefix(".status.") in status


def test_a_keyword_without_a_structural_form_stops_generation() -> None:
    with pytest.raises(crd.SchemaConversionError, match="oneOf"):
        crd.structural_schema(
            {"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}]}}}, keep_defaults=True
        )
    with pytest.raises(crd.SchemaConversionError, match="union of 2"):
        crd.structural_schema(
            {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}},
            keep_defaults=True,
        )


# -- RocketTopic and RocketConsumerGroup --------------------------------------------------------------------------


def _resource_schema(manifest: dict[str, Any]) -> dict[str, Any]:
    [version] = manifest["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"])


def test_the_user_crd_names_columns_and_rules() -> None:
    manifest = crd.user_crd_manifest()
    spec = manifest["spec"]
    assert manifest["metadata"]["name"] == "rocketusers.rocketcluster.io"
    assert spec["names"]["kind"] == "RocketUser" and spec["names"]["shortNames"] == ["rmqu"]
    [version] = spec["versions"]
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["User"] == ".status.username" and columns["Cluster"] == ".spec.clusterRef"
    schema = _resource_schema(manifest)
    user = schema["properties"]["spec"]["properties"]
    assert user["userType"]["enum"] == ["Super", "Normal"] and user["userType"]["default"] == "Normal"
    rule = user["acls"]["items"]["properties"]
    assert rule["actions"]["items"]["enum"] == ["Pub", "Sub", "Create", "Update", "Delete", "Get", "List", "All"]
    assert "default" not in user["acls"]["items"]["properties"]["resource"]  # required: never defaulted to {}
    messages = [r["message"] for r in schema["x-kubernetes-validations"]]
    assert any("cannot change" in m for m in messages) and any("metadata.name is the user name" in m for m in messages)


@pytest.mark.parametrize(
    ("manifest", "kind", "plural", "short", "name_path"),
    [
        (crd.topic_crd_manifest(), "RocketTopic", "rockettopics", "rmqt", ".status.topicName"),
        (crd.group_crd_manifest(), "RocketConsumerGroup", "rocketconsumergroups", "rmqg", ".status.groupName"),
    ],
    ids=["topic", "group"],
)
def test_resource_crds_names_columns_and_structure(
    manifest: dict[str, Any], kind: str, plural: str, short: str, name_path: str
) -> None:
    spec = manifest["spec"]
    assert manifest["metadata"]["name"] == f"{plural}.rocketcluster.io"
    assert spec["names"]["kind"] == kind and spec["names"]["shortNames"] == [short]
    assert spec["names"]["categories"] == ["rocketmq"] and spec["scope"] == "Namespaced"
    [version] = spec["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Cluster"] == ".spec.clusterRef"
    assert name_path in columns.values()
    assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Age"] == ".metadata.creationTimestamp"
    schema = _resource_schema(manifest)
    assert schema["required"] == ["spec"]
    status = schema["properties"]["status"]["properties"]
    assert {"observedGeneration", "conditions", "adopted", "adoptedGeneration"} <= set(status)
    for path, node in _nodes(schema):
        for keyword in ("$ref", "$defs", "anyOf", "oneOf", "allOf", "not", "title", "nullable", "const"):
            assert keyword not in node, f"{path}: {keyword}"
        assert "type" in node, f"{path}: no type"
        assert not node.get("x-kubernetes-preserve-unknown-fields"), path
        for rule in node.get("x-kubernetes-validations", []):
            assert rule.get("message") or rule.get("messageExpression"), path
            if "self.all(" in rule["rule"]:
                assert "maxProperties" in node or "maxItems" in node, path


def test_topic_schema_defaults_and_bounds_are_the_models() -> None:
    spec = _resource_schema(crd.topic_crd_manifest())["properties"]["spec"]
    fields = spec["properties"]
    assert spec["required"] == ["clusterRef"]
    for name in ("queues", "readQueueNums", "writeQueueNums"):
        assert (fields[name]["minimum"], fields[name]["maximum"]) == (1, 1024)
        assert "default" not in fields[name], "the CEL rule against queues with read/write would see a default"
    assert fields["perm"]["enum"] == ["RW", "R", "W"] and fields["perm"]["default"] == "RW"
    assert fields["messageType"]["enum"] == ["NORMAL", "FIFO", "DELAY", "TRANSACTION"]
    assert fields["deletionPolicy"]["default"] == "Retain"
    assert fields["topicName"]["maxLength"] == 127 and fields["topicName"]["pattern"] == "^[%|a-zA-Z0-9_-]+$"
    defaulted = _apply_defaults(spec, {"clusterRef": "c"})
    assert parse_topic_spec(defaulted) == parse_topic_spec({"clusterRef": "c"})


def test_group_schema_defaults_are_the_models() -> None:
    spec = _resource_schema(crd.group_crd_manifest())["properties"]["spec"]
    fields = spec["properties"]
    assert fields["retryMaxTimes"]["default"] == 16 and fields["deletionPolicy"]["default"] == "Retain"
    policy = fields["groupRetryPolicy"]["properties"]
    assert policy["type"]["enum"] == ["CUSTOMIZED", "EXPONENTIAL"]
    defaulted = _apply_defaults(spec, {"clusterRef": "c"})
    assert parse_group_spec(defaulted) == parse_group_spec({"clusterRef": "c"})


def test_resource_cel_rules_name_every_system_name() -> None:
    topic_rules = str(_resource_schema(crd.topic_crd_manifest()))
    for topic in SYSTEM_TOPICS:
        assert f"'{topic}'" in topic_rules
    assert "rmq_sys_" in topic_rules
    group_rules = str(_resource_schema(crd.group_crd_manifest()))
    for group in SYSTEM_GROUPS:
        assert f"'{group}'" in group_rules
