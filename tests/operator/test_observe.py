"""Tables for the operator's pure glue: pods -> the planner's observations, plan -> status, and the small
pieces of the API client and console script that need no cluster."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rocketcluster.kube import resource_path
from rocketcluster.main import kopf_arguments
from rocketcluster.model import parse_spec
from rocketcluster.observe import (
    BrokerFacts,
    GroupFacts,
    build_observed,
    build_status,
    claim_size,
    merge_conditions,
    pod_observation,
    ready_nameserver_addrs,
    registered_everywhere,
    with_rejections,
)
from rocketcluster.plan import plan
from rocketcluster.quantity import parse_quantity


def pod(
    name: str,
    *,
    component: str = "broker",
    group: int | None = 0,
    ready: bool = True,
    ip: str | None = "10.88.0.5",
    phase: str = "Running",
    waiting: str | None = None,
    revision: str = "rev-1",
    deleting: bool = False,
    unschedulable: bool = False,
) -> dict[str, Any]:
    labels = {"app.kubernetes.io/component": component, "controller-revision-hash": revision}
    labels["apps.kubernetes.io/pod-index"] = name.rsplit("-", 1)[1]
    if group is not None:
        labels["rocketcluster.io/group"] = str(group)
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if unschedulable:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"})
    status: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if ip:
        status["podIP"] = ip
    if waiting:
        status["containerStatuses"] = [{"state": {"waiting": {"reason": waiting}}}]
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-25T00:00:00Z"
    return {"metadata": meta, "status": status}


FACTS = GroupFacts(registered={0: "10.88.0.5:10911", 1: "10.88.0.6:10911"}, lag_bytes={1: 128})


@pytest.mark.parametrize(
    ("raw", "facts", "expected"),
    [
        (pod("c-broker-0-0"), FACTS, {"ordinal": 0, "ready": True, "registered": True, "lag_bytes": None}),
        (pod("c-broker-0-1", ip="10.88.0.6"), FACTS, {"ordinal": 1, "registered": True, "lag_bytes": 128}),
        # registered under another address: the NameServer still lists the pod's previous incarnation
        (pod("c-broker-0-1", ip="10.88.0.9"), FACTS, {"registered": False}),
        (pod("c-broker-0-0", ip=None, phase="Pending", ready=False), FACTS, {"registered": False, "phase": "Pending"}),
        (pod("c-broker-0-0", waiting="CrashLoopBackOff", ready=False), None, {"waiting_reason": "CrashLoopBackOff"}),
        (pod("c-broker-0-0", unschedulable=True, phase="Pending"), None, {"waiting_reason": "Unschedulable"}),
        (pod("c-broker-0-0", revision="rev-2"), None, {"revision": "rev-2", "uid": "uid-c-broker-0-0"}),
        (
            pod("c-broker-0-1", ip="10.88.0.6"),
            dataclasses.replace(FACTS, lag_bytes={1: None}, diverged={1: "AHEAD of the master"}),
            {"lag_bytes": None, "diverged": "AHEAD of the master"},
        ),
        (pod("c-broker-0-1", ip="10.88.0.6"), dataclasses.replace(FACTS, detached=frozenset({1})), {"attached": False}),
        (pod("c-broker-0-1", ip="10.88.0.6"), FACTS, {"attached": True}),
    ],
)
def test_pod_observation(raw: dict[str, Any], facts: GroupFacts | None, expected: dict[str, Any]) -> None:
    obs = pod_observation(raw, facts)
    assert obs is not None
    for key, value in expected.items():
        assert getattr(obs, key) == value, key


def test_pods_being_deleted_or_without_ordinal_are_not_observed() -> None:
    assert pod_observation(pod("c-broker-0-0", deleting=True)) is None
    odd = pod("c-broker-0-0")
    odd["metadata"]["name"] = "stray"
    del odd["metadata"]["labels"]["apps.kubernetes.io/pod-index"]
    assert pod_observation(odd) is None


def test_only_ready_nameservers_with_an_ip_are_dialled() -> None:
    pods = [
        pod("c-nameserver-0", component="nameserver", group=None, ip="10.88.0.2"),
        pod("c-nameserver-1", component="nameserver", group=None, ip="10.88.0.3", ready=False),
        pod("c-nameserver-2", component="nameserver", group=None, ip=None),
        pod("c-broker-0-0"),
    ]
    assert ready_nameserver_addrs(pods) == ["10.88.0.2:9876"]


def _observed(spec_raw: dict[str, Any], statefulsets: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Any:
    return build_observed(
        name="c",
        generation=3,
        now=1000.0,
        spec=parse_spec(spec_raw),
        annotations={"rocketcluster.io/manual-rolling-update": "true"},
        statefulsets=statefulsets,
        pods=pods,
        facts=BrokerFacts({0: FACTS}),
        status={"created": True},
    )


def sts(name: str, component: str, group: int | None, revision: str = "rev-1") -> dict[str, Any]:
    labels = {"app.kubernetes.io/component": component}
    if group is not None:
        labels["rocketcluster.io/group"] = str(group)
    return {"metadata": {"name": name, "labels": labels}, "status": {"updateRevision": revision}}


@pytest.mark.parametrize(
    ("tables", "expected"),
    [
        ([], {}),  # no NameServer answered
        ([{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}], {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}),
        ([{0: "10.0.0.1:10911"}, {0: "10.0.0.1:10911"}], {0: "10.0.0.1:10911"}),
        ([{0: "10.0.0.1:10911"}, {}], {}),  # the second NameServer has not heard of the new master yet
        ([{}, {0: "10.0.0.1:10911"}], {}),
        ([{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}, {0: "10.0.0.1:10911"}], {0: "10.0.0.1:10911"}),
        ([{0: "10.0.0.9:10911"}, {0: "10.0.0.1:10911"}], {}),  # one still lists the master's old pod IP
    ],
)
def test_a_broker_is_registered_once_every_nameserver_lists_it(
    tables: list[dict[int, str]], expected: dict[int, str]
) -> None:
    assert registered_everywhere(tables) == expected


def test_build_observed_groups_pods_and_settings() -> None:
    observed = _observed(
        {"broker": {"groups": 1, "slavesPerGroup": 1, "replication": "SYNC"}, "scaleDown": {"drainTimeoutSeconds": 60}},
        [sts("c-nameserver", "nameserver", None), sts("c-broker-0", "broker", 0, "rev-2"),
         sts("c-broker-1", "broker", 1)],
        [pod("c-broker-0-1", ip="10.88.0.6"), pod("c-broker-0-0"),
         pod("c-nameserver-0", component="nameserver", group=None)],
    )  # fmt: skip
    assert (observed.groups, observed.slaves_per_group, observed.replication) == (1, 1, "SYNC")
    assert observed.manual_roll and not observed.paused and observed.progress.created
    assert observed.scale_down.drain_timeout_seconds == 60.0
    assert observed.nameserver.statefulset_exists and [p.name for p in observed.nameserver.pods] == ["c-nameserver-0"]
    g0, g1 = observed.broker_groups
    assert (g0.index, g0.update_revision, [p.ordinal for p in g0.pods]) == (0, "rev-2", [0, 1])
    assert (g1.index, g1.pods) == (1, ())  # a group the spec dropped, still there: the planner drains it


def _with_claims(statefulset: dict[str, Any], size: str) -> dict[str, Any]:
    template = {"metadata": {"name": "data"}, "spec": {"resources": {"requests": {"storage": size}}}}
    statefulset["spec"] = {"volumeClaimTemplates": [template]}
    return statefulset


def test_claim_sizes_and_storage_settings_are_observed() -> None:
    assert claim_size(_with_claims(sts("c-broker-0", "broker", 0), "256Mi")) == "256Mi"
    assert claim_size(sts("c-broker-0", "broker", 0)) is None and claim_size(None) is None
    observed = build_observed(
        name="c", generation=3, now=1000.0,
        spec=parse_spec({"storage": {"size": "512Mi"}}), annotations={},
        statefulsets=[_with_claims(sts("c-broker-0", "broker", 0), "256Mi")], pods=[], facts=BrokerFacts(),
        status={}, volume_expansion=False,
    )  # fmt: skip
    assert (observed.storage_size, observed.volume_expansion, observed.ephemeral) == ("512Mi", False, False)
    assert observed.broker_groups[0].claim_size == "256Mi"


def test_refused_children_make_the_cluster_degraded_not_ready() -> None:
    spec_raw = {"broker": {"groups": 1, "slavesPerGroup": 1}, "nameServer": {"replicas": 1}}
    pods = [
        pod("c-broker-0-0"),
        pod("c-broker-0-1", ip="10.88.0.6"),
        pod("c-nameserver-0", component="nameserver", group=None),
    ]
    observed = _observed(spec_raw, [sts("c-nameserver", "nameserver", None), sts("c-broker-0", "broker", 0)], pods)
    decided = plan(dataclasses.replace(observed, manual_roll=False))
    assert decided.phase == "Ready" and with_rejections(decided, []) is decided
    refused = with_rejections(decided, ["PodDisruptionBudget c-broker-0: forbidden field"])
    degraded = refused.condition("Degraded")
    assert degraded is not None and (degraded.status, degraded.reason) == ("True", "ApplyRejected")
    assert "PodDisruptionBudget c-broker-0: forbidden field" in degraded.message
    assert refused.condition("Ready").status == "False" and refused.phase == "Degraded"  # type: ignore[union-attr]
    assert refused.actions == decided.actions and refused.progress == decided.progress


@pytest.mark.parametrize(
    ("text", "value"),
    [("256Mi", 256 * 2**20), ("10Gi", 10 * 2**30), ("10240Mi", 10 * 2**30), ("1.5G", 1_500_000_000),
     ("1e9", 10**9), ("1E", 10**18), ("500m", 0.5), ("4", 4), (" 2Ki ", 2048)],
)  # fmt: skip
def test_quantities(text: str, value: float) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "10 Gi", "10GB", "1e", "ten", "10Gi;rm -rf", "--1", "1" * 70 + "Qi"])
def test_bad_quantities_name_the_text(text: str) -> None:
    with pytest.raises(ValueError, match="is not a quantity"):
        parse_quantity(text)


def test_status_from_a_plan() -> None:
    spec_raw = {"broker": {"groups": 1, "slavesPerGroup": 1}, "nameServer": {"replicas": 1}}
    pods = [
        pod("c-broker-0-0"),
        pod("c-broker-0-1", ip="10.88.0.6"),
        pod("c-nameserver-0", component="nameserver", group=None),
    ]
    observed = _observed(spec_raw, [sts("c-nameserver", "nameserver", None), sts("c-broker-0", "broker", 0)], pods)
    observed = dataclasses.replace(observed, manual_roll=False)
    decided = plan(observed)
    status = build_status(
        name="c", namespace="ns", spec=parse_spec(spec_raw), plan=decided, observed=observed, pods=pods,
        old_status={}, now_iso="2026-11-25T10:00:00Z",
    )  # fmt: skip
    assert status["observedGeneration"] == 3 and status["phase"] == "Ready" and status["ready"] == "1/1"
    assert status["nameServer"]["addresses"] == ["c-nameserver-0.c-nameserver-headless.ns.svc:9876"]
    group = status["groupStatus"][0]
    assert group["brokerName"] == "c-0" and group["master"]["address"] == "10.88.0.5:10911"
    assert group["slaves"] == [{"pod": "c-broker-0-1", "ready": True, "lagBytes": 128}]
    assert group["pvcs"] == ["data-c-broker-0-0", "data-c-broker-0-1"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["lastTransitionTime"] == "2026-11-25T10:00:00Z"
    assert status["labelSelector"] == "app.kubernetes.io/component=broker,rocketcluster.io/cluster=c"


@pytest.mark.parametrize(
    ("old_status", "new_status", "kept"),
    [
        ("True", "True", True),  # unchanged: the time it last flipped stays
        ("False", "True", False),  # flipped: now
        (None, "True", False),  # new condition: now
    ],
)
def test_condition_transition_times(old_status: str | None, new_status: str, kept: bool) -> None:
    old = [] if old_status is None else [{"type": "Ready", "status": old_status, "lastTransitionTime": "T0"}]
    old.append({"type": "Other", "status": "True", "lastTransitionTime": "T0"})
    merged = merge_conditions(old, [{"type": "Ready", "status": new_status, "reason": "R", "message": ""}], 7, "T1")
    ready = next(c for c in merged if c["type"] == "Ready")
    assert ready["lastTransitionTime"] == ("T0" if kept else "T1") and ready["observedGeneration"] == 7
    assert any(c["type"] == "Other" for c in merged), "conditions not re-evaluated are kept"


@pytest.mark.parametrize(
    ("api_version", "kind", "namespace", "name", "path"),
    [
        ("v1", "Pod", "ns", "p-0", "/api/v1/namespaces/ns/pods/p-0"),
        ("apps/v1", "StatefulSet", "ns", None, "/apis/apps/v1/namespaces/ns/statefulsets"),
        ("policy/v1", "PodDisruptionBudget", "ns", "x", "/apis/policy/v1/namespaces/ns/poddisruptionbudgets/x"),
        ("storage.k8s.io/v1", "StorageClass", None, "fast", "/apis/storage.k8s.io/v1/storageclasses/fast"),
        ("storage.k8s.io/v1", "StorageClass", "ns", "fast", "/apis/storage.k8s.io/v1/storageclasses/fast"),
        ("rocketcluster.io/v1alpha1", "RocketCluster", "ns", "c",
         "/apis/rocketcluster.io/v1alpha1/namespaces/ns/rocketclusters/c"),
    ],
)  # fmt: skip
def test_resource_paths(api_version: str, kind: str, namespace: str | None, name: str | None, path: str) -> None:
    assert resource_path(api_version, kind, namespace, name) == path


def test_resource_path_refuses_unknown_kinds() -> None:
    with pytest.raises(ValueError, match="Deployment"):
        resource_path("apps/v1", "Deployment", "ns")


@pytest.mark.parametrize(
    ("argv", "expected_tail"),
    [
        ([], ["--all-namespaces"]),
        (["--standalone"], ["--all-namespaces", "--standalone"]),
        (["--namespace", "a", "-n", "b"], ["--namespace", "a", "-n", "b"]),
        (["--namespace=a"], ["--namespace=a"]),
        (["-A", "--liveness=http://0.0.0.0:8080/healthz"], ["-A", "--liveness=http://0.0.0.0:8080/healthz"]),
    ],
)
def test_console_script_runs_kopf_with_our_module(argv: list[str], expected_tail: list[str]) -> None:
    modules = ["--module", "rocketcluster.handlers", "--module", "rocketcluster.handlers_resources"]
    modules += ["--module", "rocketcluster.handlers_users"]
    assert kopf_arguments(argv) == ["run", *modules, *expected_tail]
