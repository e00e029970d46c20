"""The chart for real on the node tier: the operator image runs in-cluster, from `helm install` to `helm uninstall`.

`helm install` with a namespace list: the operator pod (non-root, read-only root filesystem) becomes Ready
through kopf's liveness endpoint and reconciles a cluster in the watched namespace to Ready=True through
the API server's ClusterIP. Its two replicas each keep a keep-alive in the KopfPeering at two priorities, and
`helm test` passes. `helm upgrade` of the operator restarts no broker. `helm uninstall` keeps the CRD,
the cluster's resource and its volumes.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from e2e.host_work import image_on_node
from e2e.operator_harness import REPO, ready_status

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.node]

CHART = REPO / "charts" / "rocketcluster-operator"
CACHE = Path(os.environ.get("ROCKETCLUSTER_CACHE", Path.home() / ".cache" / "rocketcluster"))
OPERATOR_IMAGE = "rocketcluster.local/operator:0.1.0"
RELEASE = "rcop"


def helm(kube: Kube, *args: str) -> str:
    lines = (REPO / "e2e/versions.env").read_text().splitlines()
    version = next(line.split("=", 1)[1] for line in lines if line.startswith("HELM_VERSION="))
    binary = CACHE / f"helm-{version}" / "bin" / "helm"
    p = subprocess.run(
        [str(binary), "--kubeconfig", str(kube.kubeconfig), *args], capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, f"helm {' '.join(args)}: {p.stderr}"
    return p.stdout


@pytest.fixture(scope="module")
def operator_image(k8s_node: Kube) -> str:
    """The operator image of this tree, built and imported into the node (as broker_image does)."""
    return image_on_node("operator", OPERATOR_IMAGE)


@pytest.fixture(scope="module")
def namespaces(k8s_node: Kube) -> Iterator[tuple[str, str]]:
    system, workload = f"rc-system-{uuid.uuid4().hex[:6]}", f"rc-apps-{uuid.uuid4().hex[:6]}"
    for ns in (system, workload):
        k8s_node.run("create", "namespace", ns)
    yield system, workload
    # the operator is uninstalled by the test: its finalizer goes by hand, as docs/kubernetes.md tells users
    finalizers = json.dumps({"metadata": {"finalizers": None}})
    k8s_node.run("patch", "-n", workload, "rmq", "demo", "--type=merge", "-p", finalizers, check=False)
    k8s_node.run("delete", "rmq", "--all", "-n", workload, "--wait=true", "--timeout=60s", check=False, timeout=90)
    for ns in (system, workload):
        k8s_node.run("delete", "namespace", ns, "--wait=false", check=False)


def _pod_uids(kube: Kube, ns: str, selector: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.get("-n", ns, "pods", "-l", selector)["items"]}


def test_install_run_upgrade_uninstall(
    k8s_node: Kube, broker_image: str, operator_image: str, namespaces: tuple[str, str]
) -> None:
    kube = k8s_node
    system, workload = namespaces
    values = ["--set", "image.pullPolicy=Never", "--set", f"watchNamespaces={{{workload}}}"]
    helm(kube, "install", RELEASE, str(CHART), "-n", system, *values, "--wait", "--timeout", "180s")
    kube.wait_established("rocketclusters.rocketcluster.io")
    pod = kube.get("-n", system, "pods")["items"][0]
    container = pod["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["spec"]["securityContext"].get("runAsNonRoot") or container["securityContext"].get("runAsNonRoot")
    assert all(c["ready"] for c in pod["status"]["containerStatuses"]), "liveness/readiness on /healthz"

    cluster = {
        "apiVersion": "rocketcluster.io/v1alpha1",
        "kind": "RocketCluster",
        "metadata": {"name": "demo"},
        "spec": {
            "image": broker_image,
            "imagePullPolicy": "Never",
            "nameServer": {"replicas": 1},
            "broker": {"groups": 1, "slavesPerGroup": 1},
            "storage": {"type": "persistentClaim", "size": "256Mi"},
        },
    }
    kube.apply(json.dumps(cluster), namespace=workload)
    kube.wait_for(
        "Ready=True from the in-cluster operator", lambda: ready_status(kube, workload, "demo"), timeout=300, interval=1
    )

    # two replicas (the chart's default), each with its keep-alive in the namespace's KopfPeering, at two
    # different priorities: one works, the other stands by
    peering = f"{RELEASE}-rocketcluster-operator"
    peers = kube.get("-n", workload, "kopfpeering", peering).get("status") or {}
    assert len(peers) == 2 and len({p["priority"] for p in peers.values()}) == 2, peers
    assert set(peers) == {p["metadata"]["name"] for p in kube.get("-n", system, "pods")["items"]}, peers
    # `helm test`: the test pod reaches /healthz and /metrics through the health Service
    tested = helm(kube, "test", RELEASE, "-n", system, "--timeout", "180s")
    assert "Succeeded" in tested, tested
    selector = "rocketcluster.io/cluster=demo"
    brokers = _pod_uids(kube, workload, selector)

    # an upgrade of the operator (new pod annotation: its pod is replaced) restarts no broker
    helm(kube, "upgrade", RELEASE, str(CHART), "-n", system, *values, "--set", "podAnnotations.upgraded=yes",
         "--wait", "--timeout", "180s")  # fmt: skip
    kube.wait_for(
        "the upgraded operator pod",
        lambda: any(
            (p["metadata"].get("annotations") or {}).get("upgraded") == "yes" and p["status"].get("phase") == "Running"
            for p in kube.get("-n", system, "pods")["items"]
        ),
        timeout=120,
    )
    kube.wait_for("the cluster still Ready", lambda: ready_status(kube, workload, "demo"), timeout=60)
    assert _pod_uids(kube, workload, selector) == brokers, "an operator upgrade restarted brokers"

    helm(kube, "uninstall", RELEASE, "-n", system, "--wait", "--timeout", "120s")
    assert kube.run("get", "crd", "rocketclusters.rocketcluster.io", "-o", "name").strip()
    assert kube.get("-n", workload, "rmq", "demo")["metadata"]["name"] == "demo"
    assert len(kube.run("get", "-n", workload, "pvc", "-o", "name").split()) == 2
    assert _pod_uids(kube, workload, selector) == brokers, "uninstalling restarted brokers"
