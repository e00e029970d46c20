"""The operator on the node tier: real pods from the broker image, real volumes, real probes.

A RocketCluster of 1 group x (master + slave) with metrics on reaches Ready=True, and a pod that knows only the
cluster's `<cluster>-connection` ConfigMap creates a topic, sends a message and consumes it back with
`mqadmin`. Then the pods' scrape annotations are followed as Prometheus follows them: each names a live
/metrics whose counters show that message.
The operator runs as a process on the node (pod IPs are routed there), as `rocketcluster-operator`.
On another cluster (``E2E_KUBECONFIG``, e.g. kind) the same runs there; where NetworkPolicies are enforced, the
cluster's policies also admit this machine, where the operator and the metrics scrape run.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from prometheus_client.parser import text_string_to_metric_families

from e2e.operator_harness import CRD_FILE, OperatorProcess, ready_status, running_operator

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.node]


@pytest.fixture(scope="module")
def namespace(k8s_node: Kube) -> Iterator[str]:
    name = f"rc-node-{uuid.uuid4().hex[:6]}"
    k8s_node.run("apply", "--server-side", "-f", str(CRD_FILE))
    k8s_node.wait_established("rocketclusters.rocketcluster.io")
    k8s_node.run("create", "namespace", name)
    yield name
    k8s_node.run("delete", "rmq", "--all", "-n", name, "--wait=true", "--timeout=60s", check=False, timeout=90)
    k8s_node.run("delete", "namespace", name, "--wait=true", "--timeout=120s", check=False, timeout=150)


@pytest.fixture(scope="module")
def operator(k8s_node: Kube, namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator(k8s_node, [namespace], tmp_path_factory.mktemp("op")) as proc:
        yield proc


def test_master_slave_cluster_reaches_ready_and_serves_a_pod(
    k8s_node: Kube, broker_image: str, namespace: str, operator: OperatorProcess
) -> None:
    kube, ns = k8s_node, namespace
    cluster = {
        "apiVersion": "rocketcluster.io/v1alpha1",
        "kind": "RocketCluster",
        "metadata": {"name": "demo"},
        "spec": {
            "image": broker_image,
            "imagePullPolicy": "Never",
            "nameServer": {"replicas": 1},
            "broker": {"groups": 1, "slavesPerGroup": 1, "config": {"autoCreateTopicEnable": "true"}},
            "storage": {"type": "persistentClaim", "size": "256Mi"},
            "metrics": {"enabled": True},
            **kube.policy_admitting_this_host(),
        },
    }
    started = time.monotonic()
    kube.apply(json.dumps(cluster), namespace=ns)
    try:
        ready = kube.wait_for("Ready=True", lambda: ready_status(kube, ns, "demo"), timeout=300, interval=1)
    except AssertionError:
        pods = kube.run("get", "pods", "-n", ns, "-o", "wide", check=False)
        status = json.dumps(kube.get("-n", ns, "rmq", "demo").get("status"), indent=1)
        raise AssertionError(f"not Ready:\n{pods}\n{status}\n{operator.tail(4000)}") from None
    print(f"\nkubectl apply -> Ready=True: {time.monotonic() - started:.1f} s (1 group x master+slave)")
    group = ready["groupStatus"][0]
    assert group["master"]["ready"] and group["slaves"][0]["ready"], group
    assert ready["phase"] == "Ready" and ready["ready"] == "1/1"

    script = (
        "set -e; echo NAMESRV_ADDR=$NAMESRV_ADDR; "
        'mqadmin updateTopic -c "$CLUSTER_NAME" -t E2EOrders -r 2 -w 2; '
        "mqadmin sendMessage -t E2EOrders -p hello-from-a-pod -k e2e-key; "
        "mqadmin consumeMessage -t E2EOrders -c 1 --timeout 30"
    )
    client = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "client", "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "client",
                    "image": broker_image,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", script],
                    "envFrom": [{"configMapRef": {"name": "demo-connection"}}],
                }
            ],
        },
    }
    kube.apply(json.dumps(client))

    def finished() -> str | None:
        phase = kube.get("-n", ns, "pod", "client").get("status", {}).get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    phase = kube.wait_for("the client pod", finished, timeout=180, interval=1)
    logs = kube.run("logs", "-n", ns, "client", check=False)
    assert phase == "Succeeded", logs
    assert "hello-from-a-pod" in logs and "demo-nameserver-0.demo-nameserver-headless" in logs, logs

    _scrape_annotations_lead_to_live_metrics(kube, ns)


def _scrape_annotations_lead_to_live_metrics(kube: Kube, ns: str) -> None:
    """Every pod annotated prometheus.io/scrape answers at podIP:port/path, in the exposition format; the
    master counted the message the client pod sent, and the NameServer counts the broker group."""
    pods = kube.get("-n", ns, "pods", "-l", "rocketcluster.io/cluster=demo")["items"]
    scraped: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for pod in pods:
        notes = pod["metadata"].get("annotations", {})
        assert notes.get("prometheus.io/scrape") == "true", pod["metadata"]["name"]
        url = f"http://{pod['status']['podIP']}:{notes['prometheus.io/port']}{notes['prometheus.io/path']}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
        scraped[pod["metadata"]["name"]] = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
    assert set(scraped) == {"demo-nameserver-0", "demo-broker-0-0", "demo-broker-0-1"}, set(scraped)

    def total(pod: str, name: str, **labels: str) -> float:
        return sum(v for (n, ls), v in scraped[pod].items() if n == name and labels.items() <= dict(ls).items())

    assert total("demo-broker-0-0", "rocketmq_messages_in_total", topic="E2EOrders") == 1
    assert total("demo-broker-0-0", "rocketmq_messages_out_total", topic="E2EOrders") >= 1
    assert total("demo-nameserver-0", "rocketmq_broker_number") >= 1
    print(f"\nscraped {len(scraped)} pods through their prometheus.io annotations")
