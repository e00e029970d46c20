"""The operator on the control-plane tier: a real API server and controller manager, no node.

The StatefulSet controller creates pods and claims that stay Pending (nothing schedules them), which is
enough to see what the operator builds, how the API server validates the CRD, how status and the roll plan
are recorded, and what garbage collection and retention do. The operator runs as a real process: the
`rocketcluster-operator` console script, as users run it.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from e2e.operator_harness import CRD_FILE, OperatorProcess, running_operator

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = pytest.mark.k8s

SHAPE = {"groups": 2, "slavesPerGroup": 1}


def manifest(name: str, **spec: Any) -> str:
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": name}}
    body["spec"] = {"broker": dict(SHAPE)} | spec
    return json.dumps(body)


@pytest.fixture(scope="module")
def crd(k8s_control_plane: Kube) -> Kube:
    kube = k8s_control_plane
    kube.run("apply", "--server-side", "-f", str(CRD_FILE))
    kube.wait_established("rocketclusters.rocketcluster.io")
    return kube


@pytest.fixture(scope="module")
def namespaces(crd: Kube) -> Iterator[tuple[str, str]]:
    names = (f"rc-a-{uuid.uuid4().hex[:6]}", f"rc-b-{uuid.uuid4().hex[:6]}")
    for ns in names:
        crd.run("create", "namespace", ns)
    yield names
    for ns in names:
        crd.run("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator_process(
    crd: Kube, namespaces: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    with running_operator(crd, list(namespaces), tmp_path_factory.mktemp("operator")) as proc:
        yield proc


@pytest.fixture(scope="module")
def operator(crd: Kube, operator_process: OperatorProcess) -> Kube:
    return crd


def cluster(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    return kube.get("-n", ns, "rmq", name)


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == type_), None)


def child_names(kube: Kube, ns: str, kind: str, name: str) -> set[str]:
    out = kube.run("get", "-n", ns, kind, "-l", f"rocketcluster.io/cluster={name}", "-o", "name")
    return {line.split("/", 1)[1] for line in out.split()}


def test_invalid_manifests_are_refused_naming_the_field(crd: Kube, namespaces: tuple[str, str]) -> None:
    ns = namespaces[0]
    cases = {
        "owned config key": (manifest("bad1", broker={**SHAPE, "config": {"brokerId": "3"}}), "brokerId"),
        "negative groups": (manifest("bad2", broker={"groups": -1}), "spec.broker.groups"),
        "unknown field": (manifest("bad3", brokr={"groups": 1}), "brokr"),
        "sync without slaves": (manifest("bad4", broker={"groups": 1, "slavesPerGroup": 0, "replication": "SYNC"}),
                                "slavesPerGroup"),
    }  # fmt: skip
    for what, (body, field) in cases.items():
        refused = dry_run(crd, ns, body)
        assert refused.returncode != 0, f"{what}: accepted"
        assert field in refused.stderr, f"{what}: {refused.stderr}"
    assert dry_run(crd, ns, manifest("good")).returncode == 0


def dry_run(kube: Kube, ns: str, body: str) -> subprocess.CompletedProcess[str]:
    """`kubectl apply --dry-run=server`: the API server validates (schema, CEL, unknown fields), stores nothing."""
    args = ["apply", "-n", ns, "--dry-run=server", "--validate=strict", "-f", "-"]
    cmd = [str(kube.kubectl_bin), "--kubeconfig", str(kube.kubeconfig), *args]
    return subprocess.run(cmd, input=body, capture_output=True, text=True, timeout=60)


def test_storage_class_cannot_change(crd: Kube, namespaces: tuple[str, str]) -> None:
    ns = namespaces[1]
    crd.apply(manifest("immutable", storage={"type": "persistentClaim", "storageClassName": "fast"}), namespace=ns)
    try:
        edit = manifest("immutable", storage={"type": "persistentClaim", "storageClassName": "slow"})
        refused = dry_run(crd, ns, edit)
        assert refused.returncode != 0 and "storageClassName" in refused.stderr, refused.stderr
    finally:
        crd.run("delete", "-n", ns, "rmq", "immutable", "--wait=false", check=False)


def test_operator_builds_the_children_of_two_groups(operator: Kube, namespaces: tuple[str, str]) -> None:
    kube, ns = operator, namespaces[0]
    kube.apply(manifest("alpha"), namespace=ns)
    kube.wait_for(
        "both broker StatefulSets and the NameServer",
        lambda: {"alpha-nameserver", "alpha-broker-0", "alpha-broker-1"} <= child_names(kube, ns, "sts", "alpha"),
        timeout=60,
    )
    sts = kube.get("-n", ns, "statefulset", "alpha-broker-1")
    assert sts["spec"]["replicas"] == 2 and sts["spec"]["updateStrategy"]["type"] == "OnDelete"
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    conf = kube.get("-n", ns, "configmap", "alpha-broker-1-config")["data"]
    assert "brokerId=1" in conf["broker-1.conf"] and "brokerRole=SLAVE" in conf["broker-1.conf"]
    assert "brokerName=alpha-1" in conf["broker-0.conf"] and "brokerRole=ASYNC_MASTER" in conf["broker-0.conf"]
    assert {"alpha-nameserver", "alpha-nameserver-headless", "alpha-broker"} <= child_names(kube, ns, "svc", "alpha")
    assert {"alpha-broker-0", "alpha-broker-1", "alpha-nameserver"} <= child_names(kube, ns, "pdb", "alpha")
    connection = kube.get("-n", ns, "configmap", "alpha-connection")["data"]
    assert connection["NAMESRV_ADDR"].split(";") == [
        f"alpha-nameserver-{i}.alpha-nameserver-headless.{ns}.svc:9876" for i in range(2)
    ]

    def status_written() -> dict[str, Any] | None:
        obj = cluster(kube, ns, "alpha")
        st = obj.get("status") or {}
        return obj if st.get("observedGeneration") == obj["metadata"]["generation"] else None

    obj = kube.wait_for("status with observedGeneration", status_written, timeout=60)
    ready = condition(obj, "Ready")
    assert ready is not None and ready["status"] == "False" and ready["reason"], obj["status"]
    assert "rocketcluster.io/cluster=alpha" in obj["status"]["labelSelector"]
    # printer columns come from the CRD: kubectl shows them
    table = kube.run("get", "-n", ns, "rmq", "alpha")
    assert "GROUPS" in table.upper() and "PHASE" in table.upper()


def test_scale_subresource_adds_a_group(operator: Kube, namespaces: tuple[str, str]) -> None:
    kube, ns = operator, namespaces[0]
    kube.apply(manifest("scaled", broker={"groups": 2, "slavesPerGroup": 0}), namespace=ns)
    kube.wait_for("two groups", lambda: "scaled-broker-1" in child_names(kube, ns, "statefulset", "scaled"), timeout=60)
    kube.run("scale", "-n", ns, "rmq/scaled", "--replicas=3")
    assert cluster(kube, ns, "scaled")["spec"]["broker"]["groups"] == 3
    kube.wait_for("a third group", lambda: "scaled-broker-2" in child_names(kube, ns, "sts", "scaled"), timeout=120)


def test_image_change_records_an_ordered_roll_plan(operator: Kube, namespaces: tuple[str, str]) -> None:
    """The pods exist (Pending, unscheduled): the roll is planned over them, slaves before masters."""
    kube, ns = operator, namespaces[1]
    kube.apply(manifest("rolled", nameServer={"replicas": 1}), namespace=ns)

    def all_pods() -> bool:
        pods = child_names(kube, ns, "pod", "rolled")
        return len(pods) == 5

    kube.wait_for("the StatefulSets' pods", all_pods, timeout=60)
    new_image = '{"spec": {"image": "rocketcluster.local/broker:0.2.0"}}'
    kube.run("patch", "-n", ns, "rmq", "rolled", "--type=merge", "-p", new_image)

    def rollout() -> dict[str, Any] | None:
        """The recorded roll once it lists broker pods (NameServers go first, and may be all it shows at first)."""
        roll = (cluster(kube, ns, "rolled").get("status") or {}).get("rollout") or {}
        return roll if any("-broker-" in p for p in [roll.get("current") or "", *roll.get("pending", [])]) else None

    roll = kube.wait_for("a roll plan in status", rollout, timeout=60)
    order = [roll["current"], *roll["pending"]] if roll.get("current") else roll["pending"]
    order = [p for p in order if p]
    brokers = [p for p in order if "-broker-" in p]
    assert brokers, roll
    for g in (0, 1):
        slave, master = f"rolled-broker-{g}-1", f"rolled-broker-{g}-0"
        if slave in brokers and master in brokers:
            assert brokers.index(slave) < brokers.index(master), order
    progressing = condition(cluster(kube, ns, "rolled"), "Progressing")
    assert progressing is not None and progressing["status"] == "True", progressing


def test_unchanged_cluster_writes_nothing(operator: Kube, namespaces: tuple[str, str]) -> None:
    kube, ns = operator, namespaces[0]
    kube.apply(manifest("steady", broker={"groups": 1, "slavesPerGroup": 0}, nameServer={"replicas": 1}), namespace=ns)
    kube.wait_for("children", lambda: "steady-broker-0" in child_names(kube, ns, "statefulset", "steady"), timeout=60)
    kinds = ["statefulset", "service", "configmap", "pdb", "serviceaccount"]

    def versions() -> dict[str, object]:
        """Each child's writes other than status: when a node runs, the StatefulSet and disruption controllers
        update the status of StatefulSets and PDBs (new resourceVersions) without anyone rewriting them."""
        found: dict[str, object] = {}
        for kind in kinds:
            for i in kube.get("-n", ns, kind, "-l", "rocketcluster.io/cluster=steady")["items"]:
                meta = i["metadata"]
                writes = sorted(
                    (m["manager"], m["operation"], m.get("time", ""))
                    for m in meta.get("managedFields", [])
                    if m.get("subresource") != "status"
                )
                found[f"{kind}/{meta['name']}"] = (meta.get("generation"), writes)
        return found

    time.sleep(8)  # let the first passes settle (status written, kopf's annotations stored)
    before = versions()
    time.sleep(10)  # three resync ticks of the operator (ROCKETCLUSTER_RESYNC_SECONDS=3)
    after = versions()
    moved = {k for k in before if after.get(k) != before[k]}
    assert not moved, f"children rewritten by an unchanged reconcile: {sorted(moved)}"
    assert len(before) >= 7


def test_the_operator_metrics_agree_with_the_status(
    operator: Kube, operator_process: OperatorProcess, namespaces: tuple[str, str]
) -> None:
    """After the steady cluster above: its passes are counted, and its phase gauge is the phase its status
    shows (one phase at 1, the others 0)."""
    kube, ns = operator, namespaces[0]
    phase = cluster(kube, ns, "steady")["status"]["phase"]
    mine = {"namespace": ns, "cluster": "steady"}
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(operator_process.scrape()):
        for s in family.samples:
            if {k: s.labels.get(k) for k in mine} == mine:
                key = s.labels.get("phase") or s.labels.get("result") or ""
                found.setdefault(s.name, {})[key] = s.value
    # resync every 3 s; "waiting" while its pods come up (or stay Pending without a node), then "ok"
    assert sum(found["rocketcluster_operator_reconcile_total"].values()) >= 3, found
    assert set(found["rocketcluster_operator_reconcile_total"]) <= {"ok", "waiting"}, found
    phases = found["rocketcluster_cluster_phase"]
    assert phases[phase] == 1 and sum(phases.values()) == 1, (phase, phases)


def test_two_clusters_stay_independent_and_delete_keeps_claims(operator: Kube, namespaces: tuple[str, str]) -> None:
    kube, ns = operator, namespaces[1]
    small = {"broker": {"groups": 1, "slavesPerGroup": 1}, "nameServer": {"replicas": 1}}
    kube.apply(manifest("one", **small), namespace=ns)
    kube.apply(manifest("two", **small), namespace=ns)
    for name in ("one", "two"):
        kube.wait_for(f"{name}'s claims", lambda n=name: len(child_names(kube, ns, "pvc", n)) == 2, timeout=60)
    two_before = _uids(kube, ns, "two")
    # no finalizer: a deletion never waits on the operator (a CI run under load once waited > 60 s for one)
    assert not cluster(kube, ns, "one")["metadata"].get("finalizers")

    kube.run("delete", "-n", ns, "rmq", "one", "--wait=true", "--timeout=60s")
    kube.wait_for("one's StatefulSets collected", lambda: not child_names(kube, ns, "statefulset", "one"), timeout=90)
    assert len(child_names(kube, ns, "pvc", "one")) == 2, "whenDeleted: Retain keeps the claims"
    assert _uids(kube, ns, "two") == two_before, "deleting one cluster touched the other"


def _uids(kube: Kube, ns: str, name: str) -> dict[str, str]:
    items = kube.get("-n", ns, "statefulset,configmap,service", "-l", f"rocketcluster.io/cluster={name}")["items"]
    return {f"{i['kind']}/{i['metadata']['name']}": i["metadata"]["uid"] for i in items}


def test_missing_storage_class_is_reported_not_crashed_on(operator: Kube, namespaces: tuple[str, str]) -> None:
    kube, ns = operator, namespaces[0]
    kube.apply(manifest("nosc", storage={"type": "persistentClaim", "storageClassName": "no-such-class"}), namespace=ns)

    def invalid() -> dict[str, Any] | None:
        c = condition(cluster(kube, ns, "nosc"), "InvalidSpec")
        return c if c and c["status"] == "True" else None

    found = kube.wait_for("InvalidSpec", invalid, timeout=60)
    assert found["reason"] == "StorageClassNotFound" and "no-such-class" in found["message"]
    assert not child_names(kube, ns, "statefulset", "nosc")
    assert cluster(kube, ns, "nosc")["status"]["phase"] == "Invalid"


def test_a_refused_child_does_not_hold_back_the_others(operator: Kube, namespaces: tuple[str, str]) -> None:
    """A ResourceQuota forbids PodDisruptionBudgets: the API server refuses both of the cluster's, the
    StatefulSets and the rest are applied anyway, and Degraded (ApplyRejected) names each refused object."""
    kube, ns = operator, namespaces[1]
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-pdbs"},
        "spec": {"hard": {"count/poddisruptionbudgets.policy": "0"}},
    }
    kube.apply(json.dumps(quota), namespace=ns)
    try:
        kube.apply(manifest("quota", broker={"groups": 1, "slavesPerGroup": 1}, nameServer={"replicas": 1}), ns)

        def rejected() -> dict[str, Any] | None:
            c = condition(cluster(kube, ns, "quota"), "Degraded")
            return c if c and c["reason"] == "ApplyRejected" else None

        found = kube.wait_for("Degraded/ApplyRejected", rejected, timeout=60)
        assert "PodDisruptionBudget quota-broker-0" in found["message"], found
        assert "PodDisruptionBudget quota-nameserver" in found["message"], found
        assert child_names(kube, ns, "statefulset", "quota") == {"quota-nameserver", "quota-broker-0"}
        assert not child_names(kube, ns, "pdb", "quota")
        assert cluster(kube, ns, "quota")["status"]["phase"] == "Degraded"
        events = kube.run("get", "-n", ns, "events", "--field-selector", "reason=ApplyRejected", "-o", "name")
        assert events.strip(), "no Warning Event for the refused objects"
    finally:
        kube.run("delete", "-n", ns, "resourcequota", "no-pdbs", check=False)

    def healed() -> bool:
        c = condition(cluster(kube, ns, "quota"), "Degraded")
        return bool(c and c["reason"] != "ApplyRejected") and len(child_names(kube, ns, "pdb", "quota")) == 2

    kube.wait_for("the PDBs applied once the quota is gone", healed, timeout=90)
    kube.run("delete", "-n", ns, "rmq", "quota", "--wait=true", "--timeout=60s")
