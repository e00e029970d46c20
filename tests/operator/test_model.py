"""rocketcluster.model: defaults, the broker.conf key table against the broker's own models, and bad specs."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import AliasChoices

from broker.server.config import BrokerConfig
from broker.store.config import StoreConfig
from rocketcluster.broker_keys import BROKER_KEYS, OWNED_KEYS, check_value
from rocketcluster.model import (
    DEFAULT_IMAGE,
    MAX_CONFIG_KEYS,
    PodTemplate,
    RocketClusterSpec,
    SpecError,
    parse_spec,
    parse_status,
)

# -- defaults ---------------------------------------------------------------------------------------------------


def test_an_empty_spec_gets_every_default() -> None:
    spec = parse_spec({})
    assert spec.image == DEFAULT_IMAGE
    assert spec.image_pull_policy == "IfNotPresent"
    assert spec.cluster_name is None
    assert spec.effective_cluster_name("demo") == "demo"
    assert spec.name_server.replicas == 2
    assert (spec.broker.groups, spec.broker.slaves_per_group) == (1, 1)
    assert (spec.broker.replication, spec.broker.flush_disk_type) == ("ASYNC", "ASYNC_FLUSH")
    assert spec.broker.config == {}
    assert (spec.storage.type, spec.storage.size, spec.storage.storage_class_name) == ("persistentClaim", "10Gi", None)
    assert (spec.retention.when_deleted, spec.retention.when_scaled) == ("Retain", "Retain")
    assert (spec.placement.anti_affinity, spec.placement.topology_key) == ("preferred", "kubernetes.io/hostname")
    assert (spec.rollout.pod_ready_timeout_seconds, spec.rollout.max_slave_lag_bytes) == (600, 0)
    assert spec.rollout.require_in_sync_slave is True
    assert (spec.scale_down.drain, spec.scale_down.drain_timeout_seconds) == (True, 3600)


def test_none_is_an_empty_spec() -> None:
    assert parse_spec(None) == parse_spec({})


def test_camel_case_on_the_wire_and_in_the_dump() -> None:
    raw = {
        "clusterName": "prod_A",
        "nameServer": {"replicas": 3},
        "broker": {"groups": 4, "slavesPerGroup": 2, "replication": "SYNC", "flushDiskType": "SYNC_FLUSH"},
        "storage": {"type": "ephemeral", "size": "2Gi", "storageClassName": "fast"},
        "scaleDown": {"drainTimeoutSeconds": 60},
    }
    spec = parse_spec(raw)
    assert spec.effective_cluster_name("ignored") == "prod_A"
    assert (spec.broker.groups, spec.broker.slaves_per_group, spec.broker.replication) == (4, 2, "SYNC")
    dumped = spec.model_dump(by_alias=True, exclude_none=True)
    assert dumped["broker"]["slavesPerGroup"] == 2
    assert dumped["storage"]["storageClassName"] == "fast"
    assert parse_spec(dumped) == spec


def test_a_spec_is_immutable_once_parsed() -> None:
    spec = parse_spec({})
    with pytest.raises(ValueError):
        spec.broker.groups = 3


def test_resources_take_ints_and_quantity_strings() -> None:
    spec = parse_spec({"broker": {"resources": {"requests": {"cpu": 1, "memory": "512Mi"}, "limits": {"cpu": "1.5"}}}})
    assert spec.broker.resources.to_kube() == {"requests": {"cpu": 1, "memory": "512Mi"}, "limits": {"cpu": "1.5"}}


# -- the cluster-wide template under a component's ------------------------------------------------------------------


def test_a_component_template_merges_over_the_cluster_template() -> None:
    cluster = PodTemplate.model_validate(
        {
            "labels": {"team": "a", "tier": "x"},
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "securityContext": {"runAsUser": 5, "fsGroup": 5},
            "priorityClassName": "low",
        }
    )
    component = PodTemplate.model_validate(
        {
            "labels": {"tier": "y"},
            "securityContext": {"fsGroup": 7},
            "priorityClassName": "high",
        }
    )
    merged = cluster.merged_under(component)
    assert merged.labels == {"team": "a", "tier": "y"}
    assert merged.node_selector == {"disk": "ssd"}
    assert merged.tolerations == [{"key": "k", "operator": "Exists"}]  # not set on the component: kept
    assert merged.security_context == {"runAsUser": 5, "fsGroup": 7}
    assert merged.priority_class_name == "high"


# -- the key table is the broker's ------------------------------------------------------------------------------


def _kind(annotation: Any) -> Any:
    """A broker model field's annotation as a broker_keys kind."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return tuple(args)
    if type(None) in args:
        return _kind(next(a for a in args if a is not type(None)))
    return {bool: "bool", int: "int", float: "float", str: "str", Path: "str"}[annotation]


def _broker_key_kinds() -> dict[str, list[Any]]:
    kinds: dict[str, list[Any]] = {}
    for name, field in BrokerConfig.model_fields.items():
        kinds.setdefault(field.alias or name, []).append(_kind(field.annotation))
    for field in StoreConfig.model_fields.values():
        keys = [field.serialization_alias]
        if isinstance(field.validation_alias, AliasChoices):
            keys += [c for c in field.validation_alias.choices if isinstance(c, str)]
        for key in {k for k in keys if k}:
            kinds.setdefault(key, []).append(_kind(field.annotation))
    return kinds


def test_the_key_table_lists_exactly_the_keys_the_broker_reads() -> None:
    assert sorted(BROKER_KEYS) == sorted(_broker_key_kinds())


def test_each_key_has_the_kind_every_model_reading_it_accepts() -> None:
    for key, kinds in _broker_key_kinds().items():
        distinct = set(kinds)
        # fileReservedTime is an int to the broker and a float to the store: only an int suits both
        expected = "int" if distinct == {"int", "float"} else kinds[0]
        assert distinct <= {expected, "float"} if expected == "int" else distinct == {expected}, key
        assert BROKER_KEYS[key] == expected, key


def test_owned_keys_are_broker_keys() -> None:
    assert set(OWNED_KEYS) <= set(BROKER_KEYS)
    for key in ("brokerClusterName", "brokerName", "brokerId", "brokerRole", "namesrvAddr", "listenPort"):
        assert key in OWNED_KEYS
    assert {k for k in BROKER_KEYS if k.startswith("storePath")} <= set(OWNED_KEYS)


@pytest.mark.parametrize(
    ("kind", "value", "ok"),
    [
        ("bool", "true", True),
        ("bool", "FALSE", True),
        ("bool", "ture", False),
        ("bool", "1", False),
        ("int", "42", True),
        ("int", "-1", True),
        ("int", "4.5", False),
        ("int", "", False),
        ("int", "1e3", False),
        ("float", "0.85", True),
        ("float", "1e-3", True),
        ("float", "nan", False),
        ("float", "inf", False),
        ("float", "x", False),
        ("str", "anything at all", True),
        (("ASYNC_FLUSH", "SYNC_FLUSH"), "SYNC_FLUSH", True),
        (("ASYNC_FLUSH", "SYNC_FLUSH"), "sync_flush", False),
    ],
)
def test_check_value(kind: Any, value: str, ok: bool) -> None:
    assert (check_value(kind, value) is None) is ok


# -- bad input ----------------------------------------------------------------------------------------------------


def _nest(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(depth):
        node = {"a": node}
    return node


_BAD_SPECS: list[tuple[str, Any, str, str]] = [
    # (case, spec, field path in the message, words in the message)
    ("zero groups", {"broker": {"groups": 0}}, "spec.broker.groups", "greater than or equal to 1"),
    ("negative groups", {"broker": {"groups": -3}}, "spec.broker.groups", "greater than or equal to 1"),
    ("huge groups", {"broker": {"groups": 10**12}}, "spec.broker.groups", "less than or equal to 64"),
    ("groups as a string", {"broker": {"groups": "3"}}, "spec.broker.groups", "valid integer"),
    ("groups as a float", {"broker": {"groups": 2.5}}, "spec.broker.groups", "valid integer"),
    ("groups as a bool", {"broker": {"groups": True}}, "spec.broker.groups", "valid integer"),
    ("too many slaves", {"broker": {"slavesPerGroup": 5}}, "spec.broker.slavesPerGroup", "less than or equal to 4"),
    ("negative slaves", {"broker": {"slavesPerGroup": -1}}, "spec.broker.slavesPerGroup", "greater than or equal"),
    (
        "SYNC without a slave",
        {"broker": {"replication": "SYNC", "slavesPerGroup": 0}},
        "spec.broker.replication",
        "SYNC needs slavesPerGroup >= 1",
    ),
    ("wrong replication", {"broker": {"replication": "sync"}}, "spec.broker.replication", "'ASYNC' or 'SYNC'"),
    ("wrong flush type", {"broker": {"flushDiskType": "FSYNC"}}, "spec.broker.flushDiskType", "'ASYNC_FLUSH'"),
    ("owned key brokerId", {"broker": {"config": {"brokerId": "3"}}}, "spec.broker.config", "'brokerId' is owned"),
    (
        "owned key namesrvAddr",
        {"broker": {"config": {"namesrvAddr": "1.2.3.4:9876"}}},
        "spec.broker.config",
        "'namesrvAddr' is owned",
    ),
    ("owned key storePathIndex", {"broker": {"config": {"storePathIndex": "/x"}}}, "spec.broker.config", "owned"),
    ("owned key flushDiskType", {"broker": {"config": {"flushDiskType": "SYNC_FLUSH"}}}, "spec.broker.config", "owned"),
    ("owned key brokerIP1", {"broker": {"config": {"brokerIP1": "10.0.0.1"}}}, "spec.broker.config", "owned"),
    (
        "metrics key set by hand",
        {"broker": {"config": {"metricsExporterType": "PROM"}}},
        "spec.broker.config",
        "owned by the operator (spec.metrics.enabled)",
    ),
    ("metrics port on the broker's", {"metrics": {"port": 10911}}, "spec.metrics.port", "taken by"),
    ("metrics port privileged", {"metrics": {"port": 80}}, "spec.metrics.port", "greater than or equal to 1024"),
    ("metrics port not a number", {"metrics": {"port": "http"}}, "spec.metrics.port", "integer"),
    ("metrics unknown field", {"metrics": {"path": "/m"}}, "spec.metrics.path", "unknown field"),
    ("misspelt key", {"broker": {"config": {"deleteWhne": "04"}}}, "spec.broker.config", "'deleteWhne' is not"),
    (
        "newline in a value",
        {"broker": {"config": {"deleteWhen": "04\nbrokerId=9"}}},
        "spec.broker.config",
        "one line",
    ),
    (
        "carriage return in a value",
        {"broker": {"config": {"msgTraceTopicName": "a\rb"}}},
        "spec.broker.config",
        "one line",
    ),
    ("NUL in a value", {"broker": {"config": {"msgTraceTopicName": "a\x00b"}}}, "spec.broker.config", "one line"),
    (
        "bool key with a typo",
        {"broker": {"config": {"slaveReadEnable": "ture"}}},
        "spec.broker.config",
        "true or false",
    ),
    ("int key with text", {"broker": {"config": {"maxMessageSize": "4M"}}}, "spec.broker.config", "an integer"),
    (
        "config value not a string",
        {"broker": {"config": {"maxMessageSize": 4}}},
        "spec.broker.config.maxMessageSize",
        "valid string",
    ),
    ("config as a list", {"broker": {"config": ["deleteWhen=04"]}}, "spec.broker.config", "valid dictionary"),
    (
        "oversized config value",
        {"broker": {"config": {"msgTraceTopicName": "x" * 5000}}},
        "spec.broker.config.msgTraceTopicName",
        "at most 1024",
    ),
    (
        "too many config keys",
        {"broker": {"config": {f"k{i}": "v" for i in range(MAX_CONFIG_KEYS + 1)}}},
        "spec.broker.config",
        "",
    ),
    ("unknown top-level field", {"brokers": {"groups": 2}}, "spec.brokers", "unknown field"),
    ("unknown nested field", {"broker": {"group": 2}}, "spec.broker.group", "unknown field"),
    ("zero nameservers", {"nameServer": {"replicas": 0}}, "spec.nameServer.replicas", "greater than or equal to 1"),
    ("wrong storage type", {"storage": {"type": "hostPath"}}, "spec.storage.type", "'ephemeral' or 'persistentClaim'"),
    ("size not a quantity", {"storage": {"size": "ten gigs"}}, "spec.storage.size", "pattern"),
    ("size as a number", {"storage": {"size": 10}}, "spec.storage.size", "valid string"),
    ("bad storage class", {"storage": {"storageClassName": "Fast SSD"}}, "spec.storage.storageClassName", "pattern"),
    ("wrong retention", {"retention": {"whenDeleted": "Keep"}}, "spec.retention.whenDeleted", "'Retain' or 'Delete'"),
    ("wrong anti-affinity", {"placement": {"antiAffinity": "soft"}}, "spec.placement.antiAffinity", "'preferred'"),
    ("wrong pull policy", {"imagePullPolicy": "Sometimes"}, "spec.imagePullPolicy", "'Always'"),
    ("image with a space", {"image": "broker image"}, "spec.image", "pattern"),
    ("empty image", {"image": ""}, "spec.image", "at least 1"),
    ("bad cluster name", {"clusterName": "my cluster"}, "spec.clusterName", "pattern"),
    ("cluster name too long", {"clusterName": "c" * 61}, "spec.clusterName", "at most 60"),
    (
        "zero ready timeout",
        {"rollout": {"podReadyTimeoutSeconds": 0}},
        "spec.rollout.podReadyTimeoutSeconds",
        "greater than or equal to 1",
    ),
    (
        "negative lag",
        {"rollout": {"maxSlaveLagBytes": -1}},
        "spec.rollout.maxSlaveLagBytes",
        "greater than or equal to 0",
    ),
    ("drain as a string", {"scaleDown": {"drain": "yes"}}, "spec.scaleDown.drain", "valid boolean"),
    (
        "cpu not a quantity",
        {"broker": {"resources": {"requests": {"cpu": "lots"}}}},
        "spec.broker.resources.requests.cpu",
        "quantity",
    ),
    (
        "negative memory",
        {"broker": {"resources": {"limits": {"memory": -1}}}},
        "spec.broker.resources.limits.memory",
        "negative",
    ),
    ("resource name", {"broker": {"resources": {"limits": {"c p u": "1"}}}}, "spec.broker.resources.limits", "not a"),
    ("bad label key", {"template": {"labels": {"bad key": "v"}}}, "spec.template.labels", "not a valid label key"),
    ("bad label value", {"template": {"labels": {"team": "a b"}}}, "spec.template.labels.team", "pattern"),
    ("affinity as a list", {"template": {"affinity": [1]}}, "spec.template.affinity", "valid dictionary"),
    ("deeply nested affinity", {"template": {"affinity": _nest(500)}}, "spec.template.affinity", "deeper than 16"),
    (
        "huge affinity",
        {"template": {"affinity": {"nodeAffinity": {"terms": [{"k": i} for i in range(5000)]}}}},
        "spec.template.affinity",
        "more than 2000 values",
    ),
    (
        "toleration not an object",
        {"broker": {"template": {"tolerations": ["x"]}}},
        "spec.broker.template.tolerations[0]",
        "",
    ),
    ("secret without a name", {"imagePullSecrets": [{}]}, "spec.imagePullSecrets[0].name", "required"),
    ("spec not an object", ["groups"], "spec", "must be an object"),
]


@pytest.mark.parametrize(("raw", "path", "words"), [row[1:] for row in _BAD_SPECS], ids=[row[0] for row in _BAD_SPECS])
def test_a_bad_spec_is_refused_naming_the_field(raw: Any, path: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(raw)
    message = str(caught.value)
    assert message.startswith(path + ":") or f"; {path}:" in message, message
    assert words in message, message
    assert caught.value.problems, "each problem is listed with its path"
    assert all(p.startswith("spec") for p, _ in caught.value.problems)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec({"broker": {"groups": 0, "config": {"brokerId": "1"}}, "storage": {"type": "nfs"}})
    paths = {path for path, _ in caught.value.problems}
    assert paths == {"spec.broker.groups", "spec.broker.config", "spec.storage.type"}


def test_spec_error_is_a_value_error() -> None:
    assert issubclass(SpecError, ValueError)


def test_every_known_unowned_key_is_accepted_with_a_valid_value() -> None:
    samples = {"bool": "true", "int": "1", "float": "0.5"}
    special = {"deleteWhen": "04", "messageDelayLevel": "1s 5s", "msgTraceTopicName": "TRACE"}
    config = {}
    for key, kind in BROKER_KEYS.items():
        if key in OWNED_KEYS:
            continue
        config[key] = special.get(key) or (kind[0] if isinstance(kind, tuple) else samples.get(kind, "x"))
    keys = list(config)
    for start in range(0, len(keys), MAX_CONFIG_KEYS):
        chunk = {k: config[k] for k in keys[start : start + MAX_CONFIG_KEYS]}
        assert parse_spec({"broker": {"config": chunk}}).broker.config == chunk


# -- status -------------------------------------------------------------------------------------------------------


def test_status_parses_leniently_and_dumps_camel_case() -> None:
    status = parse_status(
        {
            "observedGeneration": 3,
            "phase": "Ready",
            "readyGroups": 2,
            "groupStatus": [{"index": 0, "brokerName": "c-0", "master": {"pod": "c-broker-0-0", "ready": True}}],
            "fieldFromAnOlderOperator": {"x": 1},
        }
    )
    assert status.ready_groups == 2
    assert status.group_status[0].master is not None and status.group_status[0].master.ready
    dumped = status.model_dump(by_alias=True, exclude_none=True)
    assert dumped["groupStatus"][0]["brokerName"] == "c-0"
    assert "fieldFromAnOlderOperator" not in dumped
    assert parse_status(None).phase is None


def test_the_spec_model_refuses_extra_fields_everywhere() -> None:
    def walk(model: type[Any]) -> None:
        assert model.model_config.get("extra") == "forbid", model.__name__
        for field in model.model_fields.values():
            for arg in (field.annotation, *typing.get_args(field.annotation)):
                if isinstance(arg, type) and hasattr(arg, "model_fields"):
                    walk(arg)

    walk(RocketClusterSpec)
