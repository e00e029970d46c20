"""rocketcluster.render: the children of a RocketCluster, checked against the shared contract, and broker.conf
files read back by the broker's own loader."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config.properties import parse_properties
from broker.namesrv.config import NamesrvConfig
from broker.server.config import load_broker_config
from rocketcluster import names
from rocketcluster.model import RocketClusterSpec, parse_spec
from rocketcluster.render import (
    BROKER_GRACE_SECONDS,
    ClusterRef,
    broker_config_data,
    config_hash,
    data_hash,
    namesrv_addr,
    render_broker_conf,
    render_broker_group,
    render_cluster,
    render_nameserver,
)

CLUSTER = ClusterRef(name="demo", namespace="mq", uid="0b5c-uid")


def _spec(**raw: Any) -> RocketClusterSpec:
    return parse_spec(raw)


def _by_kind_name(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def _statefulset(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return _by_kind_name(objects)[("StatefulSet", name)]


def _container(statefulset: dict[str, Any]) -> dict[str, Any]:
    containers = statefulset["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


# -- the set of children ------------------------------------------------------------------------------------------


def test_every_child_by_kind_and_name() -> None:
    objects = render_cluster(CLUSTER, _spec(broker={"groups": 2}))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ServiceAccount", "demo-rocketmq"),
        ("ConfigMap", "demo-connection"),
        ("NetworkPolicy", "demo-nameserver"),
        ("NetworkPolicy", "demo-broker"),
        ("ConfigMap", "demo-nameserver-config"),
        ("Service", "demo-nameserver-headless"),
        ("Service", "demo-nameserver"),
        ("StatefulSet", "demo-nameserver"),
        ("PodDisruptionBudget", "demo-nameserver"),
        ("Service", "demo-broker"),
        ("ConfigMap", "demo-broker-0-config"),
        ("StatefulSet", "demo-broker-0"),
        ("PodDisruptionBudget", "demo-broker-0"),
        ("ConfigMap", "demo-broker-1-config"),
        ("StatefulSet", "demo-broker-1"),
        ("PodDisruptionBudget", "demo-broker-1"),
    ]


def _policies(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}


def test_network_policies_admit_the_clients_the_cluster_and_the_operator_only() -> None:
    policies = _policies(render_cluster(CLUSTER, _spec(), operator_namespace="ops"))
    nameserver, broker = policies["demo-nameserver"], policies["demo-broker"]
    assert nameserver["podSelector"]["matchLabels"] == names.nameserver_selector("demo")
    assert broker["podSelector"]["matchLabels"] == names.broker_selector("demo")
    assert nameserver["policyTypes"] == broker["policyTypes"] == ["Ingress"]  # egress is not limited
    clients = [
        {"podSelector": {}},  # by default, the cluster's namespace
        {"podSelector": {"matchLabels": {names.LABEL_CLUSTER: "demo"}}},
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ops"}},
            "podSelector": {"matchLabels": {"rocketcluster.io/operator": "true"}},
        },
    ]
    assert nameserver["ingress"] == [{"from": clients, "ports": [{"protocol": "TCP", "port": 9876}]}]
    main, ha = broker["ingress"]
    assert main == {"from": clients, "ports": [{"protocol": "TCP", "port": 10911}]}
    # replication and restores: between the cluster's brokers only
    assert ha == {
        "from": [{"podSelector": {"matchLabels": names.broker_selector("demo")}}],
        "ports": [{"protocol": "TCP", "port": 10912}],
    }


def test_network_policies_follow_the_spec() -> None:
    allowed = [{"namespaceSelector": {"matchLabels": {"team": "pay"}}}, {"ipBlock": {"cidr": "10.1.0.0/16"}}]
    spec = _spec(networkPolicy={"allowFrom": allowed}, metrics={"enabled": True})
    broker = _policies(render_cluster(CLUSTER, spec))["demo-broker"]
    main, _ha, metrics = broker["ingress"]
    assert main["from"][:2] == allowed and len(main["from"]) == 3  # no operator pod: it runs outside
    assert metrics == {"from": [{"namespaceSelector": {}}], "ports": [{"protocol": "TCP", "port": 5557}]}
    scrapers = [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]
    spec = _spec(networkPolicy={"metricsFrom": scrapers}, metrics={"enabled": True})
    assert _policies(render_cluster(CLUSTER, spec))["demo-nameserver"]["ingress"][1]["from"] == scrapers
    assert _policies(render_cluster(CLUSTER, _spec(networkPolicy={"enabled": False}))) == {}


@pytest.mark.parametrize(
    "bad",
    [
        {"allowFrom": "everyone"},
        {"allowFrom": [1, 2]},
        {"enabled": "yes please"},
        {"unknownField": True},
        {"allowFrom": [{"podSelector": {"matchLabels": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {}}}}}}}}}}] * 200},
    ],
)
def test_bad_network_policy_specs_are_refused_naming_the_field(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="networkPolicy"):
        parse_spec({"networkPolicy": bad})


def test_every_child_is_owned_labelled_and_namespaced() -> None:
    for obj in render_cluster(CLUSTER, _spec(broker={"groups": 3})):
        meta = obj["metadata"]
        assert obj["apiVersion"] and obj["kind"]
        assert meta["namespace"] == "mq"
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "rocketcluster.io/v1alpha1",
                "kind": "RocketCluster",
                "name": "demo",
                "uid": "0b5c-uid",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        labels = meta["labels"]
        assert labels[names.LABEL_NAME] == "rocketmq"
        assert labels[names.LABEL_INSTANCE] == "demo"
        assert labels[names.LABEL_MANAGED_BY] == "rocketcluster-operator"
        assert labels[names.LABEL_CLUSTER] == "demo"
        if labels.get(names.LABEL_COMPONENT) == "broker" and meta["name"] != "demo-broker":
            assert labels[names.LABEL_GROUP] == meta["name"].split("-")[2]


def test_selectors_match_their_pods_and_never_another_cluster() -> None:
    spec = _spec(broker={"groups": 2})
    mine = render_cluster(CLUSTER, spec)
    other = render_cluster(ClusterRef("demo2", "mq", "u2"), spec)

    def pod_labels(objects: list[dict[str, Any]]) -> list[dict[str, str]]:
        return [o["spec"]["template"]["metadata"]["labels"] for o in objects if o["kind"] == "StatefulSet"]

    def selectors(objects: list[dict[str, Any]]) -> list[dict[str, str]]:
        out = []
        for o in objects:
            if o["kind"] in ("StatefulSet", "PodDisruptionBudget"):
                out.append(o["spec"]["selector"]["matchLabels"])
            elif o["kind"] == "Service":
                out.append(o["spec"]["selector"])
        return out

    for selector in selectors(mine):
        assert any(selector.items() <= labels.items() for labels in pod_labels(mine)), selector
        assert not any(selector.items() <= labels.items() for labels in pod_labels(other)), selector
    for sts in (o for o in mine if o["kind"] == "StatefulSet"):
        assert sts["spec"]["selector"]["matchLabels"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    group0 = _statefulset(mine, "demo-broker-0")["spec"]["selector"]["matchLabels"]
    assert not group0.items() <= _statefulset(mine, "demo-broker-1")["spec"]["template"]["metadata"]["labels"].items()


# -- NameServer ---------------------------------------------------------------------------------------------------


def test_nameserver_statefulset_services_and_pdb() -> None:
    objects = _by_kind_name(render_nameserver(CLUSTER, _spec(nameServer={"replicas": 3})))
    sts = objects[("StatefulSet", "demo-nameserver")]["spec"]
    assert sts["replicas"] == 3
    assert sts["serviceName"] == "demo-nameserver-headless"
    assert sts["updateStrategy"] == {"type": "OnDelete"}
    pod = sts["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "config", "configMap": {"name": "demo-nameserver-config"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
        {"name": "home", "emptyDir": {"sizeLimit": "64Mi"}},
    ]
    assert pod["serviceAccountName"] == "demo-rocketmq"
    container = _container(objects[("StatefulSet", "demo-nameserver")])
    assert container["name"] == "nameserver"
    assert container["command"] == ["mqnamesrv", "-c", "/etc/rocketcluster/namesrv.conf"]
    assert container["volumeMounts"] == [
        {"name": "config", "mountPath": "/etc/rocketcluster", "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "home", "mountPath": "/home/rocketmq"},  # the NameServer's kvConfig.json
    ]
    assert container["ports"] == [{"name": "namesrv", "containerPort": 9876, "protocol": "TCP"}]
    assert container["readinessProbe"]["exec"]["command"] == ["rocketcluster-probe", "namesrv"]
    assert container["livenessProbe"]["tcpSocket"] == {"port": "namesrv"}

    headless = objects[("Service", "demo-nameserver-headless")]["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    client = objects[("Service", "demo-nameserver")]["spec"]
    assert client["type"] == "ClusterIP" and "clusterIP" not in client
    assert [p["port"] for p in client["ports"]] == [9876]
    assert objects[("PodDisruptionBudget", "demo-nameserver")]["spec"]["maxUnavailable"] == 1


def test_namesrv_addr_lists_every_nameserver_pod_by_dns_name() -> None:
    assert namesrv_addr(CLUSTER, _spec(nameServer={"replicas": 3})) == (
        "demo-nameserver-0.demo-nameserver-headless.mq.svc:9876;"
        "demo-nameserver-1.demo-nameserver-headless.mq.svc:9876;"
        "demo-nameserver-2.demo-nameserver-headless.mq.svc:9876"
    )


def test_connection_config_map() -> None:
    objects = _by_kind_name(render_cluster(CLUSTER, _spec(clusterName="prod")))
    data = objects[("ConfigMap", "demo-connection")]["data"]
    assert data == {
        "CLUSTER_NAME": "prod",
        "NAMESRV_ADDR": namesrv_addr(CLUSTER, _spec()),
        "NAMESRV_SERVICE": "demo-nameserver.mq.svc:9876",
    }


def test_service_account_mounts_no_token() -> None:
    objects = _by_kind_name(render_cluster(CLUSTER, _spec()))
    assert objects[("ServiceAccount", "demo-rocketmq")]["automountServiceAccountToken"] is False
    for sts in (o for o in objects.values() if o["kind"] == "StatefulSet"):
        assert sts["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


# -- broker groups --------------------------------------------------------------------------------------------------


def test_broker_statefulset_follows_the_contract() -> None:
    spec = _spec(broker={"groups": 2, "slavesPerGroup": 2}, retention={"whenDeleted": "Delete"})
    objects = render_broker_group(CLUSTER, spec, 1)
    sts = _statefulset(objects, "demo-broker-1")["spec"]
    assert sts["replicas"] == 3
    assert sts["serviceName"] == "demo-broker"
    assert sts["updateStrategy"] == {"type": "OnDelete"}
    assert sts["podManagementPolicy"] == "Parallel"
    assert sts["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Delete", "whenScaled": "Retain"}
    pod = sts["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == BROKER_GRACE_SECONDS >= 60
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == pod["securityContext"]["fsGroup"] == 10001
    container = _container(_statefulset(objects, "demo-broker-1"))
    assert container["name"] == "broker"
    assert container["command"] == ["mqbroker", "-c", "/etc/rocketcluster/broker-$(POD_INDEX).conf"]
    assert container["ports"] == [
        {"name": "main", "containerPort": 10911, "protocol": "TCP"},
        {"name": "ha", "containerPort": 10912, "protocol": "TCP"},
    ]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {
        "POD_NAME": "metadata.name",
        "POD_INDEX": "metadata.labels['apps.kubernetes.io/pod-index']",
        "BROKER_IP1": "status.podIP",
    }
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["data"]["mountPath"] == "/data"
    assert mounts["config"] == {"name": "config", "mountPath": "/etc/rocketcluster", "readOnly": True}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "demo-broker-1-config"
    assert "data" not in volumes  # the claim template provides it
    assert container["readinessProbe"]["exec"]["command"] == ["rocketcluster-probe", "broker"]
    assert container["livenessProbe"]["tcpSocket"] == {"port": "main"}
    assert container["securityContext"] == {  # the restricted Pod Security Standard, and a read-only root
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    assert {mounts["tmp"]["mountPath"], mounts["home"]["mountPath"]} == {"/tmp", "/home/rocketmq"}
    assert volumes["tmp"] == {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}
    pdb = _by_kind_name(objects)[("PodDisruptionBudget", "demo-broker-1")]["spec"]
    assert pdb == {"maxUnavailable": 1, "selector": {"matchLabels": names.broker_group_selector("demo", 1)}}


@pytest.mark.parametrize(
    ("storage", "claim", "volume"),
    [
        (
            {},
            {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
            None,
        ),
        (
            {"size": "50Gi", "storageClassName": "fast-ssd"},
            {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "50Gi"}},
                "storageClassName": "fast-ssd",
            },
            None,
        ),
        ({"type": "ephemeral", "size": "2Gi"}, None, {"name": "data", "emptyDir": {"sizeLimit": "2Gi"}}),
    ],
)
def test_storage(storage: dict[str, Any], claim: dict[str, Any] | None, volume: dict[str, Any] | None) -> None:
    sts = _statefulset(render_broker_group(CLUSTER, _spec(storage=storage), 0), "demo-broker-0")["spec"]
    volumes = {v["name"]: v for v in sts["template"]["spec"]["volumes"]}
    if claim is None:
        assert "volumeClaimTemplates" not in sts
    else:
        [template] = sts["volumeClaimTemplates"]
        assert template["metadata"]["name"] == "data"
        assert template["metadata"]["labels"] == names.broker_group_labels("demo", 0)
        assert template["spec"] == claim
    assert volumes.get("data") == volume


def test_a_statefulset_can_keep_the_claim_size_it_was_made_with() -> None:
    spec = _spec(storage={"size": "20Gi"})
    kept = _statefulset(render_broker_group(CLUSTER, spec, 0, claim_size="10Gi"), "demo-broker-0")["spec"]
    assert kept["volumeClaimTemplates"][0]["spec"]["resources"] == {"requests": {"storage": "10Gi"}}
    grown = _statefulset(render_broker_group(CLUSTER, spec, 0), "demo-broker-0")["spec"]
    assert grown["volumeClaimTemplates"][0]["spec"]["resources"] == {"requests": {"storage": "20Gi"}}
    assert kept["template"] == grown["template"]  # the pods are the same either way: nothing rolls


def test_the_pvc_name_the_statefulset_controller_makes_is_the_one_names_predicts() -> None:
    sts = _statefulset(render_broker_group(CLUSTER, _spec(), 0), "demo-broker-0")
    claim = sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
    assert f"{claim}-{sts['metadata']['name']}-1" == names.broker_pvc("demo", 0, 1) == "data-demo-broker-0-1"


@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        ({}, "preferredDuringSchedulingIgnoredDuringExecution"),
        ({"antiAffinity": "required"}, "requiredDuringSchedulingIgnoredDuringExecution"),
        ({"antiAffinity": "none"}, None),
    ],
)
def test_anti_affinity_keeps_a_group_apart(placement: dict[str, Any], expected: str | None) -> None:
    spec = _spec(placement={**placement, "topologyKey": "topology.kubernetes.io/zone"})
    objects = render_cluster(CLUSTER, spec)
    for name, selector in [
        ("demo-broker-0", names.broker_group_selector("demo", 0)),
        ("demo-nameserver", names.nameserver_selector("demo")),
    ]:
        pod = _statefulset(objects, name)["spec"]["template"]["spec"]
        if expected is None:
            assert "affinity" not in pod
            continue
        [term] = pod["affinity"]["podAntiAffinity"][expected]
        term = term.get("podAffinityTerm", term)
        assert term == {"labelSelector": {"matchLabels": selector}, "topologyKey": "topology.kubernetes.io/zone"}


def test_a_template_affinity_replaces_the_placement() -> None:
    affinity: dict[str, Any] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    }
    spec = _spec(broker={"template": {"affinity": affinity}})
    objects = render_cluster(CLUSTER, spec)
    assert _statefulset(objects, "demo-broker-0")["spec"]["template"]["spec"]["affinity"] == affinity
    assert "podAntiAffinity" in _statefulset(objects, "demo-nameserver")["spec"]["template"]["spec"]["affinity"]


def test_templates_merge_into_the_pods_and_operator_labels_win() -> None:
    spec = _spec(
        template={
            "labels": {"team": "pay", names.LABEL_CLUSTER: "hijack"},
            "annotations": {"a": "1"},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "nodeSelector": {"pool": "mq"},
            "priorityClassName": "critical",
            "securityContext": {"fsGroupChangePolicy": "OnRootMismatch"},
            "containerSecurityContext": {"readOnlyRootFilesystem": False},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        },
        broker={"template": {"labels": {"team": "brokers"}}},
        imagePullSecrets=[{"name": "regcred"}],
    )
    objects = render_cluster(CLUSTER, spec)
    broker = _statefulset(objects, "demo-broker-0")["spec"]["template"]
    nameserver = _statefulset(objects, "demo-nameserver")["spec"]["template"]
    assert broker["metadata"]["labels"]["team"] == "brokers"
    assert nameserver["metadata"]["labels"]["team"] == "pay"
    for template in (broker, nameserver):
        assert template["metadata"]["labels"][names.LABEL_CLUSTER] == "demo"
        assert template["metadata"]["annotations"]["a"] == "1"
        pod = template["spec"]
        assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
        assert pod["nodeSelector"] == {"pool": "mq"}
        assert pod["priorityClassName"] == "critical"
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        assert pod["topologySpreadConstraints"][0]["maxSkew"] == 1
        assert pod["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
        assert pod["securityContext"]["runAsUser"] == 10001
        assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is False  # the template's word
    assert broker["metadata"]["annotations"][names.ANNOTATION_CONFIG_HASH] == config_hash(CLUSTER, spec, 0)


def test_resources_and_image() -> None:
    spec = _spec(
        image="registry.local/mq:2",
        imagePullPolicy="Always",
        broker={"resources": {"requests": {"memory": "2Gi", "cpu": 1}, "limits": {"memory": "2Gi"}}},
    )
    container = _container(_statefulset(render_cluster(CLUSTER, spec), "demo-broker-0"))
    assert container["image"] == "registry.local/mq:2"
    assert container["imagePullPolicy"] == "Always"
    assert container["resources"] == {"requests": {"cpu": 1, "memory": "2Gi"}, "limits": {"memory": "2Gi"}}
    nameserver = _container(_statefulset(render_cluster(CLUSTER, spec), "demo-nameserver"))
    assert "resources" not in nameserver


# -- broker.conf ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replication", "ordinal", "role"),
    [("ASYNC", 0, "ASYNC_MASTER"), ("SYNC", 0, "SYNC_MASTER"), ("ASYNC", 1, "SLAVE"), ("SYNC", 2, "SLAVE")],
)
def test_broker_conf_is_what_the_broker_loads(replication: str, ordinal: int, role: str) -> None:
    spec = _spec(
        clusterName="prod",
        broker={
            "slavesPerGroup": 2,
            "replication": replication,
            "flushDiskType": "SYNC_FLUSH",
            "config": {"deleteWhen": "03;15", "fileReservedTime": "48", "slaveReadEnable": "true"},
        },
    )
    text = render_broker_conf(CLUSTER, spec, 3, ordinal)
    properties = parse_properties(text)
    loaded = load_broker_config(properties)
    assert loaded.unknown_keys == []
    broker = loaded.broker
    assert broker.broker_cluster_name == "prod"
    assert broker.broker_name == "prod-3"
    assert broker.broker_id == ordinal
    assert broker.broker_role == role
    assert broker.flush_disk_type == "SYNC_FLUSH"
    assert broker.namesrv_addr == namesrv_addr(CLUSTER, spec)
    assert (broker.listen_port, broker.ha_listen_port) == (10911, 10912)
    assert str(broker.store_path_root_dir) == "/data/store"  # a Path: the store and the broker share the key
    assert (broker.delete_when, broker.file_reserved_time, broker.slave_read_enable) == ("03;15", 48, True)
    keys = [line.split("=", 1)[0] for line in text.splitlines() if not line.startswith("#")]
    assert keys == sorted(keys)


def test_every_user_settable_key_survives_the_broker_loader() -> None:
    config = {
        "autoCreateTopicEnable": "false",
        "defaultTopicQueueNums": "16",
        "diskSpaceCleanForciblyRatio": "0.9",
        "messageDelayLevel": "1s 10s 1m",
        "msgTraceTopicName": "TRACE_TOPIC",
        "mappedFileSizeCommitLog": "104857600",
        "warmMappedFileEnable": "true",
    }
    text = render_broker_conf(CLUSTER, _spec(broker={"config": config}), 0, 0)
    loaded = load_broker_config(parse_properties(text))
    assert loaded.unknown_keys == []
    assert {k: parse_properties(text)[k] for k in config} == config


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x2FF, exclude_characters="\x7f"), max_size=40))
def test_a_string_value_reads_back_unchanged(value: str) -> None:
    # Backslashes, '=', ':', '#' and non-ASCII letters inside a value must not change it on the way through.
    spec = _spec(broker={"config": {"msgTraceTopicName": value}})
    assert parse_properties(render_broker_conf(CLUSTER, spec, 0, 0))["msgTraceTopicName"] == value.strip()


def test_group_config_map_holds_one_file_per_ordinal() -> None:
    spec = _spec(broker={"slavesPerGroup": 2})
    data = broker_config_data(CLUSTER, spec, 0)
    assert sorted(data) == ["broker-0.conf", "broker-1.conf", "broker-2.conf"]
    for ordinal in range(3):
        assert parse_properties(data[f"broker-{ordinal}.conf"])["brokerId"] == str(ordinal)
    cm = _by_kind_name(render_broker_group(CLUSTER, spec, 0))[("ConfigMap", "demo-broker-0-config")]
    assert cm["data"] == data


# -- the config hash and determinism -----------------------------------------------------------------------------------


def _hash(raw: dict[str, Any], g: int = 0) -> str:
    return config_hash(CLUSTER, parse_spec(raw), g)


@pytest.mark.parametrize(
    ("change", "rolls"),
    [
        # keys the broker reads at start only roll; keys it applies at run time do not (they are set live)
        ({"broker": {"config": {"waitTimeMillsInSendQueue": "300"}}}, True),
        ({"broker": {"config": {"transactionCheckInterval": "10000"}}}, True),
        ({"broker": {"config": {"authenticationWhitelist": "10"}}}, True),
        ({"broker": {"config": {"deleteWhen": "03"}}}, False),
        ({"broker": {"config": {"maxMessageSize": "1048576", "autoCreateTopicEnable": "false"}}}, False),
        ({"broker": {"replication": "SYNC"}}, True),
        ({"broker": {"flushDiskType": "SYNC_FLUSH"}}, True),
        ({"nameServer": {"replicas": 3}}, True),
        ({"clusterName": "other"}, True),
        ({"broker": {"slavesPerGroup": 2}}, False),
        ({"broker": {"slavesPerGroup": 0}}, False),
        ({"broker": {"groups": 5}}, False),
        ({"rollout": {"podReadyTimeoutSeconds": 30}}, False),
    ],
)
def test_the_config_hash_changes_only_with_what_a_pod_reads(change: dict[str, Any], rolls: bool) -> None:
    assert (_hash(change) != _hash({})) is rolls


def test_the_config_map_carries_the_live_keys_the_hash_leaves_out() -> None:
    spec = parse_spec({"broker": {"config": {"deleteWhen": "03", "waitTimeMillsInSendQueue": "300"}}})
    for ordinal in (0, 1):
        properties = parse_properties(render_broker_conf(CLUSTER, spec, 0, ordinal))
        assert (properties["deleteWhen"], properties["waitTimeMillsInSendQueue"]) == ("03", "300")
    # with no live key in the spec, the hash is the ConfigMap's files' own (an upgrade rolls nothing)
    plain = parse_spec({"broker": {"config": {"waitTimeMillsInSendQueue": "300"}}})
    files = {f"broker-{o}.conf": render_broker_conf(CLUSTER, plain, 0, o) for o in (0, 1)}
    assert config_hash(CLUSTER, plain, 0) == data_hash(files)


def test_groups_have_different_files_and_hashes() -> None:
    assert _hash({}, 0) != _hash({}, 1)


def test_rendering_is_deterministic() -> None:
    raw = {
        "broker": {"groups": 3, "config": {"deleteWhen": "03", "fileReservedTime": "12", "slaveReadEnable": "true"}},
        "template": {"labels": {"b": "2", "a": "1"}, "nodeSelector": {"z": "1", "y": "2"}},
    }
    reordered = {
        "template": {"nodeSelector": {"y": "2", "z": "1"}, "labels": {"a": "1", "b": "2"}},
        "broker": {"config": {"slaveReadEnable": "true", "fileReservedTime": "12", "deleteWhen": "03"}, "groups": 3},
    }
    first = json.dumps(render_cluster(CLUSTER, parse_spec(raw)))
    assert json.dumps(render_cluster(CLUSTER, parse_spec(raw))) == first
    assert json.dumps(render_cluster(CLUSTER, parse_spec(reordered))) == first


def test_rendering_does_not_share_mutable_state_with_the_spec() -> None:
    spec = _spec(template={"tolerations": [{"key": "k", "operator": "Exists"}], "affinity": {"nodeAffinity": {}}})
    first = render_cluster(CLUSTER, spec)
    _statefulset(first, "demo-broker-0")["spec"]["template"]["spec"]["tolerations"][0]["key"] = "changed"
    _statefulset(first, "demo-broker-0")["spec"]["template"]["spec"]["affinity"]["x"] = 1
    assert render_cluster(CLUSTER, spec) != first
    assert spec.template.tolerations == [{"key": "k", "operator": "Exists"}]


# -- cluster names -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "Demo", "9lives", "a_b", "x-", "a" * (names.MAX_CLUSTER_NAME_LENGTH + 1)])
def test_a_cluster_name_that_would_make_invalid_children_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match=r"metadata\.name"):
        ClusterRef(name, "mq", "uid")


def test_the_longest_cluster_name_gives_valid_child_names() -> None:
    name = "a" * names.MAX_CLUSTER_NAME_LENGTH
    objects = render_cluster(ClusterRef(name, "mq", "uid"), _spec(broker={"groups": 64, "slavesPerGroup": 4}))
    for obj in objects:
        limit = 63 if obj["kind"] == "Service" else 253
        assert len(obj["metadata"]["name"]) <= limit, obj["metadata"]["name"]
        if obj["kind"] == "StatefulSet":
            # the controller-revision-hash label is "<statefulset>-<up to 10 characters>", at most 63
            assert len(obj["metadata"]["name"]) + 11 <= 63
            assert len(f"{obj['metadata']['name']}-{obj['spec']['replicas'] - 1}") <= 63


@pytest.mark.parametrize(
    ("metrics", "exporter", "port", "annotations"),
    [
        ({}, "DISABLE", None, {}),
        ({"enabled": False, "port": 6000}, "DISABLE", None, {}),
        (
            {"enabled": True},
            "PROM",
            5557,
            {"prometheus.io/scrape": "true", "prometheus.io/port": "5557", "prometheus.io/path": "/metrics"},
        ),
        (
            {"enabled": True, "port": 9100},
            "PROM",
            9100,
            {"prometheus.io/scrape": "true", "prometheus.io/port": "9100", "prometheus.io/path": "/metrics"},
        ),
    ],
)
def test_metrics_reach_broker_conf_the_container_port_and_the_scrape_annotations(
    metrics: dict[str, Any], exporter: str, port: int | None, annotations: dict[str, str]
) -> None:
    spec = _spec(metrics=metrics)
    nameserver_objects = _by_kind_name(render_nameserver(CLUSTER, spec))
    conf = nameserver_objects[("ConfigMap", "demo-nameserver-config")]["data"]["namesrv.conf"]
    namesrv = NamesrvConfig.from_properties(parse_properties(conf))  # what mqnamesrv -c reads
    assert (namesrv.listen_port, namesrv.metrics_exporter_type) == (9876, exporter)
    nameserver = nameserver_objects[("StatefulSet", "demo-nameserver")]
    nameserver_annotations = nameserver["spec"]["template"]["metadata"]["annotations"]
    assert {k: v for k, v in nameserver_annotations.items() if k.startswith("prometheus.io/")} == annotations
    assert {p["name"]: p["containerPort"] for p in _container(nameserver)["ports"]}.get("metrics") == port
    loaded = load_broker_config(parse_properties(render_broker_conf(CLUSTER, spec, 0, 0)))
    assert loaded.unknown_keys == []
    assert loaded.broker.metrics_exporter_type == exporter
    if port is not None:
        assert loaded.broker.metrics_prom_exporter_port == port
    statefulset = _statefulset(render_broker_group(CLUSTER, spec, 0), "demo-broker-0")
    container_ports = {p["name"]: p["containerPort"] for p in _container(statefulset)["ports"]}
    assert container_ports.get("metrics") == port
    pod_annotations = statefulset["spec"]["template"]["metadata"]["annotations"]
    assert {k: v for k, v in pod_annotations.items() if k.startswith("prometheus.io/")} == annotations


def test_turning_metrics_on_rolls_the_brokers_and_the_nameservers() -> None:
    assert config_hash(CLUSTER, _spec(), 0) != config_hash(CLUSTER, _spec(metrics={"enabled": True}), 0)

    def nameserver_hash(spec: RocketClusterSpec) -> str:
        sts = _statefulset(render_nameserver(CLUSTER, spec), "demo-nameserver")
        return str(sts["spec"]["template"]["metadata"]["annotations"][names.ANNOTATION_CONFIG_HASH])

    assert nameserver_hash(_spec()) != nameserver_hash(_spec(metrics={"enabled": True}))
    assert nameserver_hash(_spec()) == nameserver_hash(_spec(broker={"config": {"deleteWhen": "01"}}))
