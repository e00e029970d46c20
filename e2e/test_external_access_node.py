"""spec.externalAccess NodePort on the node tier: clients outside the cluster and inside it, at the same time.

One RocketCluster (1 NameServer, 1 group with a slave, ephemeral storage, the image of this tree) with
`externalAccess: {type: NodePort, nodePortBase: 31200}`. The host is outside the cluster (not in the pod
network); it reaches the NameServers and the brokers only at the node's IP and their nodePorts:
- status.externalAccess and the NameServer's route name the node's IP and each pod's own nodePort (no pod IP);
- from the host, our SDK and Apache RocketMQ's Java client 5.3.3 (unchanged, tests/peers/java) each send 20
  messages through the NodePort addresses, and each consumes all 40;
- meanwhile a Job inside the cluster (e2e/pod_roundtrip.py, NAMESRV_ADDR from the connection ConfigMap) sends
  and consumes 2000 messages of its own topic;
- the slave replicates from its master (Ready needs its lag measured) over the pod IPs;
- LoadBalancer: the broker waits for its address, then advertises it (the test plays the cloud's controller);
- turned off, the external Services and the addresses ConfigMap go and the brokers advertise their pod IPs again.
The operator's log must hold no traceback.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from broker.client import BlockingAdmin
from e2e.node_checks import wait_answering
from e2e.operator_harness import OperatorProcess, crds_and_namespace, ready_status, running_operator
from tests.interop.interop_harness import SdkConsumer, home_for, sdk_produce
from tests.interop.java_harness import ensure_java, java
from tests.peers import REPO

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.node, pytest.mark.timeout(900)]

CLUSTER = "ext"
BASE = 31200
NODE_IP = "10.250.0.1"  # the harness's node (docs/kubernetes-harness.md)
EXTERNAL_NAMESRV = f"{NODE_IP}:{BASE}"
COUNT = 20
INSIDE_COUNT = 2000


@pytest.fixture(scope="module")
def ns(k8s_node: Kube) -> Iterator[str]:
    with crds_and_namespace(k8s_node, "external") as name:
        yield name


@pytest.fixture(scope="module")
def operator(k8s_node: Kube, ns: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator(k8s_node, [ns], tmp_path_factory.mktemp("op")) as proc:
        yield proc


@pytest.fixture(scope="module")
def cluster(k8s_node: Kube, ns: str, broker_image: str, operator: OperatorProcess) -> dict[str, Any]:
    spec = {
        "image": broker_image,
        "imagePullPolicy": "Never",
        "nameServer": {"replicas": 1},
        "broker": {"groups": 1, "slavesPerGroup": 1},
        "storage": {"type": "ephemeral", "size": "1Gi"},
        "externalAccess": {"type": "NodePort", "nodePortBase": BASE},
    }
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": CLUSTER}}
    k8s_node.apply(json.dumps(body | {"spec": spec}), namespace=ns)
    status: dict[str, Any] = k8s_node.wait_for(
        "the cluster Ready", lambda: ready_status(k8s_node, ns, CLUSTER, groups=1), timeout=420, interval=2
    )
    wait_answering(k8s_node, EXTERNAL_NAMESRV)
    return status


def _inside_job(image: str, topic: str) -> dict[str, Any]:
    """A Job in the cluster's namespace: our SDK in a pod, NAMESRV_ADDR from the connection ConfigMap."""
    container = {
        "name": "roundtrip",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["python3", "/scripts/pod_roundtrip.py", "--client", "ours", "--topic", topic,
                    "--count", str(INSIDE_COUNT)],
        "envFrom": [{"configMapRef": {"name": f"{CLUSTER}-connection"}}],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "volumeMounts": [{"name": "scripts", "mountPath": "/scripts"}],
    }  # fmt: skip
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "inside"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [container],
                    "volumes": [{"name": "scripts", "configMap": {"name": "pod-roundtrip"}}],
                }
            },
        },
    }


def _finished(kube: Kube, ns: str) -> dict[str, Any] | None:
    status: dict[str, Any] = kube.get("-n", ns, "job", "inside").get("status", {})
    return status if status.get("succeeded") or status.get("failed") else None


def test_status_and_route_name_the_node_ip_and_each_pods_node_port(cluster: dict[str, Any]) -> None:
    external = cluster["externalAccess"]
    assert external["type"] == "NodePort"
    assert external["nameServer"] == EXTERNAL_NAMESRV
    assert external["brokers"] == [
        {"pod": f"{CLUSTER}-broker-0-0", "address": f"{NODE_IP}:{BASE + 1}"},
        {"pod": f"{CLUSTER}-broker-0-1", "address": f"{NODE_IP}:{BASE + 2}"},
    ]
    assert cluster["groupStatus"][0]["master"]["address"] == f"{NODE_IP}:{BASE + 1}"
    with BlockingAdmin(EXTERNAL_NAMESRV) as admin:  # from the host, through the NameServers' nodePort
        info = admin.cluster_info()
    assert info.brokers[f"{CLUSTER}-0"].broker_addrs == {0: f"{NODE_IP}:{BASE + 1}", 1: f"{NODE_IP}:{BASE + 2}"}


def test_sdk_and_java_outside_and_a_pod_inside_send_and_consume_at_the_same_time(
    k8s_node: Kube, ns: str, broker_image: str, cluster: dict[str, Any], tmp_path: Any
) -> None:
    problem = ensure_java()
    if problem is not None:
        pytest.skip(f"the Java RocketMQ client cannot be installed here: {problem}")
    kube = k8s_node
    outside, inside = "ExtOutside", "ExtInside"
    with BlockingAdmin(EXTERNAL_NAMESRV) as admin:
        for topic in (outside, inside):
            admin.create_topic(topic, cluster=CLUSTER, read_queue_nums=4, write_queue_nums=4)
    kube.run("create", "configmap", "-n", ns, "pod-roundtrip", f"--from-file={REPO / 'e2e' / 'pod_roundtrip.py'}")
    kube.apply(json.dumps(_inside_job(broker_image, inside)), namespace=ns)
    started = time.monotonic()

    # outside: both clients send through the NodePort addresses, then each consumes everything
    sdk_produce(EXTERNAL_NAMESRV, [("sync", outside)], COUNT, origin="sdk")
    producer = java(["produce", "--namesrv", EXTERNAL_NAMESRV, "--send", f"sync:{outside}", "--count", str(COUNT),
                     "--origin", "java"], home_for(tmp_path, "java-produce"), timeout=90)  # fmt: skip
    producer.start().wait()
    assert producer.returncode == 0 and len(producer.of("sent")) == COUNT, producer.describe()
    assert not producer.of("send_error"), producer.describe()
    args = ["consume", "--namesrv", EXTERNAL_NAMESRV, "--topic", outside, "--group", "CID-ext-java",
            "--expect", str(2 * COUNT), "--timeout", "90"]  # fmt: skip
    consumer = java(args, home_for(tmp_path, "java-consume"), timeout=110)
    consumer.start()
    ours = SdkConsumer(EXTERNAL_NAMESRV, "CID-ext-sdk", [outside], 2 * COUNT).start()
    ours.wait(timeout=90)
    consumer.wait()
    expected = Counter({(origin, i): 1 for origin in ("sdk", "java") for i in range(COUNT)})
    java_got = Counter((r.origin, r.seq) for r in consumer.records())
    sdk_got = Counter((r.origin, r.seq) for r in ours.records)
    assert +(expected - java_got) == Counter(), f"Java consumer missed messages\n{consumer.describe()}"
    assert +(expected - sdk_got) == Counter(), f"our consumer missed: {sorted(expected - sdk_got)}"

    # inside, at the same time: the Job's pod found the NameServers through the connection ConfigMap
    job = kube.wait_for("the inside Job finished", lambda: _finished(kube, ns), 400, 2)
    logs = kube.run("logs", "-n", ns, "job/inside", check=False)
    assert '"consumed"' in logs, f"{job}\n{logs[-3000:]}"
    result = json.loads(logs.strip().splitlines()[-1])
    assert result["acked"] == result["count"] == INSIDE_COUNT, result
    assert result["consumed"] == result["acked"] and result["consumed_crc"] == result["sent_crc"], result
    print(
        f"\noutside: sdk + java {2 * COUNT} sent, each consumer got all; inside: {INSIDE_COUNT} sent and consumed "
        f"in {result['seconds']} s; {time.monotonic() - started:.0f} s in all"
    )


# -- LoadBalancer -----------------------------------------------------------------------------------------------------

LB_CLUSTER = "extlb"
# This harness has no cloud, so nothing provisions load balancers: the test writes each Service's
# status.loadBalancer.ingress itself, as a cloud's controller would. kube-proxy then programs the ingress IP as it
# does a real load balancer's, so connections to it reach the pod (these addresses are on no interface).
LB_NAMESRV_IP, LB_BROKER_IP = "10.250.0.201", "10.250.0.202"


def test_load_balancer_brokers_wait_for_their_address_then_advertise_it(
    k8s_node: Kube, ns: str, broker_image: str, operator: OperatorProcess
) -> None:
    kube = k8s_node
    spec = {
        "image": broker_image,
        "imagePullPolicy": "Never",
        "nameServer": {"replicas": 1},
        "broker": {"groups": 1, "slavesPerGroup": 0},
        "storage": {"type": "ephemeral", "size": "1Gi"},
        "externalAccess": {"type": "LoadBalancer", "annotations": {"example.com/lb-scheme": "internal"}},
    }
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": LB_CLUSTER}}
    kube.apply(json.dumps(body | {"spec": spec}), namespace=ns)
    pod, service = f"{LB_CLUSTER}-broker-0-0", f"{LB_CLUSTER}-broker-0-0-external"

    def waiting() -> bool:
        logs = kube.run("logs", "-n", ns, pod, check=False)
        return "waiting for the load balancer address" in logs

    kube.wait_for("the broker waiting for its address", waiting, timeout=240, interval=2)
    lb = kube.get("-n", ns, "svc", service)
    assert lb["spec"]["type"] == "LoadBalancer" and lb["spec"]["ports"][0]["port"] == 10911
    assert lb["metadata"]["annotations"]["example.com/lb-scheme"] == "internal"
    status = kube.get("-n", ns, "rmq", LB_CLUSTER)["status"]["externalAccess"]
    assert "nameServer" not in status and status["brokers"] == [{"pod": pod}]  # unknown yet (a null is dropped)

    for name, ip in ((f"{LB_CLUSTER}-nameserver-external", LB_NAMESRV_IP), (service, LB_BROKER_IP)):
        patch = {"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}
        kube.run("patch", "-n", ns, "svc", name, "--subresource=status", "--type=merge", "-p", json.dumps(patch))
    ready = kube.wait_for(
        "the LoadBalancer cluster Ready", lambda: ready_status(kube, ns, LB_CLUSTER), timeout=300, interval=2
    )
    assert ready["externalAccess"] == {
        "type": "LoadBalancer",
        "nameServer": f"{LB_NAMESRV_IP}:9876",
        "brokers": [{"pod": pod, "address": f"{LB_BROKER_IP}:10911"}],
    }
    addresses = kube.get("-n", ns, "configmap", f"{LB_CLUSTER}-external-addresses")["data"]
    assert addresses == {pod: LB_BROKER_IP}
    namesrv = f"{LB_NAMESRV_IP}:9876"
    wait_answering(kube, namesrv)
    with BlockingAdmin(namesrv) as admin:
        assert admin.cluster_info().brokers[f"{LB_CLUSTER}-0"].broker_addrs == {0: f"{LB_BROKER_IP}:10911"}
        admin.create_topic("ExtLb", cluster=LB_CLUSTER, read_queue_nums=4, write_queue_nums=4)
    sdk_produce(namesrv, [("sync", "ExtLb")], COUNT, origin="sdk")
    got = SdkConsumer(namesrv, "CID-ext-lb", ["ExtLb"], COUNT).start().wait(timeout=90).records
    assert sorted({r.seq for r in got}) == list(range(COUNT))


def test_turning_it_off_removes_the_external_services_and_brokers_advertise_pod_ips(
    k8s_node: Kube, ns: str, operator: OperatorProcess
) -> None:
    kube = k8s_node
    kube.run("patch", "-n", ns, "rmq", LB_CLUSTER, "--type=merge", "-p", json.dumps({"spec": {"externalAccess": None}}))

    def gone() -> bool:
        selector = f"rocketcluster.io/cluster={LB_CLUSTER},rocketcluster.io/external=true"
        left = kube.run("get", "-n", ns, "svc,configmap", "-l", selector, "-o", "name").split()
        return not left

    kube.wait_for("the external Services and the addresses ConfigMap deleted", gone, timeout=120, interval=2)
    pod_ip = kube.run("get", "-n", ns, "pod", f"{LB_CLUSTER}-broker-0-0", "-o", "jsonpath={.status.podIP}")

    def back() -> dict[str, Any] | None:
        status = ready_status(kube, ns, LB_CLUSTER)
        if status is None or "externalAccess" in status:
            return None
        master = status["groupStatus"][0]["master"]
        return status if master["address"].endswith(":10911") and not master["address"].startswith("10.250.") else None

    status = kube.wait_for("Ready again at the pod IP", back, timeout=300, interval=2)
    namesrv_ip = kube.run("get", "-n", ns, "svc", f"{LB_CLUSTER}-nameserver", "-o", "jsonpath={.spec.clusterIP}")
    wait_answering(kube, f"{namesrv_ip}:9876")
    with BlockingAdmin(f"{namesrv_ip}:9876") as admin:
        addrs = admin.cluster_info().brokers[f"{LB_CLUSTER}-0"].broker_addrs
    assert addrs == {0: status["groupStatus"][0]["master"]["address"]}, (addrs, pod_ip)
