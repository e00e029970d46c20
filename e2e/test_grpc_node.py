"""spec.broker.grpc on the node tier: the official Python SDK 5.1.2 in a pod reaches a RocketCluster's gRPC endpoint.

One RocketCluster (1 NameServer, 1 group without slaves, ephemeral storage, the image of this tree, the default
NetworkPolicies) with `broker.grpc.enabled`. A Job in the cluster's namespace (e2e/grpc_roundtrip.py) takes
GRPC_ENDPOINT from the connection ConfigMap as its one access point: QueryRoute goes through the `<name>-broker-grpc`
Service, every other call to the broker's pod IP at the gRPC port, as the route names it. It sends 50 messages and
receives and acks all of them with the SimpleConsumer. The host is not in the pod network, so the client runs in a
pod. Then the endpoint is turned off: the access point Service, GRPC_ENDPOINT and enableProxy go.

A third cluster has two groups and `externalAccess: {type: NodePort}` with `grpcNodePortBase`: each broker pod's
Service has a gRPC nodePort of its own, and the route names every broker at the node's IP and that port. From the
host, the SDK takes the first broker's external gRPC address (status.externalAccess.grpcEndpoint) as its endpoint
and sends and receives through both brokers' nodePorts; a Job inside the cluster, given the in-cluster access point
(GRPC_ENDPOINT, the ClusterIP Service), takes the same route (node IP and nodePort reach the brokers from a pod).

A second cluster has `externalAccess: {type: LoadBalancer}` too. The test plays the cloud's controller (it writes
the Services' load balancer addresses, which kube-proxy then programs) and, from the host, outside the pod
network, the same SDK takes the broker's load balancer address at the gRPC port as its endpoint: the route names
the broker there, and 20 messages go and come back. The operator's log must hold no traceback.
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
from tests.peers import REPO

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.node, pytest.mark.timeout(900)]

CLUSTER = "grpc"
COUNT = 50


@pytest.fixture(scope="module")
def ns(k8s_node: Kube) -> Iterator[str]:
    with crds_and_namespace(k8s_node, "grpc") as name:
        yield name


@pytest.fixture(scope="module")
def operator(k8s_node: Kube, ns: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator(k8s_node, [ns], tmp_path_factory.mktemp("op")) as proc:
        yield proc


@pytest.fixture
def sdk_loop() -> Iterator[None]:
    """The official Python SDK runs in this process, beside `asyncio.run()`s (see tests/peers/python_sdk.py)."""
    from tests.peers.python_sdk import sdk_loop_for_threads_without_one

    with sdk_loop_for_threads_without_one():
        yield


@pytest.fixture(scope="module")
def cluster(k8s_node: Kube, ns: str, broker_image: str, operator: OperatorProcess) -> dict[str, Any]:
    spec = {
        "image": broker_image,
        "imagePullPolicy": "Never",
        "nameServer": {"replicas": 1},
        "broker": {"groups": 1, "slavesPerGroup": 0, "grpc": {"enabled": True}},
        "storage": {"type": "ephemeral", "size": "1Gi"},
    }
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": CLUSTER}}
    k8s_node.apply(json.dumps(body | {"spec": spec}), namespace=ns)
    status: dict[str, Any] = k8s_node.wait_for(
        "the cluster Ready", lambda: ready_status(k8s_node, ns, CLUSTER, groups=1), timeout=420, interval=2
    )
    return status


def _job(image: str, topic: str, cluster: str = CLUSTER, name: str = "grpc-client") -> dict[str, Any]:
    container = {
        "name": "grpc",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["python3", "/scripts/grpc_roundtrip.py", "--topic", topic, "--count", str(COUNT)],
        "envFrom": [{"configMapRef": {"name": f"{cluster}-connection"}}],
        "volumeMounts": [{"name": "scripts", "mountPath": "/scripts"}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [container],
                    "volumes": [{"name": "scripts", "configMap": {"name": "grpc-roundtrip"}}],
                }
            },
        },
    }


def _finished(kube: Kube, ns: str, name: str = "grpc-client") -> dict[str, Any] | None:
    status: dict[str, Any] = kube.get("-n", ns, "job", name).get("status", {})
    return status if status.get("succeeded") or status.get("failed") else None


def test_the_official_sdk_in_a_pod_sends_and_receives_through_the_endpoint(
    k8s_node: Kube, ns: str, broker_image: str, cluster: dict[str, Any]
) -> None:
    kube = k8s_node
    connection = kube.get("-n", ns, "configmap", f"{CLUSTER}-connection")["data"]
    assert connection["GRPC_ENDPOINT"] == f"{CLUSTER}-broker-grpc.{ns}.svc:8081"
    service = kube.get("-n", ns, "service", f"{CLUSTER}-broker-grpc")
    assert [p["port"] for p in service["spec"]["ports"]] == [8081]
    kube.run("create", "configmap", "-n", ns, "grpc-roundtrip", f"--from-file={REPO / 'e2e' / 'grpc_roundtrip.py'}")
    kube.apply(json.dumps(_job(broker_image, "GrpcInside")), namespace=ns)
    job = kube.wait_for("the gRPC Job finished", lambda: _finished(kube, ns), 300, 2)
    logs = kube.run("logs", "-n", ns, "job/grpc-client", check=False)
    assert '"received"' in logs, f"{job}\n{logs[-3000:]}"
    result = json.loads(logs.strip().splitlines()[-1])
    assert result["acked"] == COUNT, result
    assert result["received"] == COUNT and result["received_crc"] == result["sent_crc"], result


def test_turned_off_the_access_point_and_the_address_go(k8s_node: Kube, ns: str, cluster: dict[str, Any]) -> None:
    kube = k8s_node
    patch = json.dumps({"spec": {"broker": {"grpc": {"enabled": False}}}})
    kube.run("patch", "-n", ns, "rmq", CLUSTER, "--type=merge", "-p", patch)

    def gone() -> bool:
        services = kube.get("-n", ns, "service")["items"]
        data = kube.get("-n", ns, "configmap", f"{CLUSTER}-connection")["data"]
        conf = kube.get("-n", ns, "configmap", f"{CLUSTER}-broker-0-config")["data"]["broker-0.conf"]
        names = {s["metadata"]["name"] for s in services}
        return f"{CLUSTER}-broker-grpc" not in names and "GRPC_ENDPOINT" not in data and "enableProxy" not in conf

    kube.wait_for("the gRPC Service, address and keys gone", gone, 120, 2)
    headless = kube.get("-n", ns, "service", f"{CLUSTER}-broker")
    assert [p["port"] for p in headless["spec"]["ports"]] == [10911, 10912]


LB_CLUSTER = "grpclb"
# addresses no other test of the harness gives its load balancers
LB_NAMESRV_IP, LB_BROKER_IP = "10.250.0.211", "10.250.0.212"
LB_COUNT = 20


def test_load_balancer_clients_outside_use_the_brokers_address_at_the_grpc_port(
    k8s_node: Kube, ns: str, broker_image: str, operator: OperatorProcess, sdk_loop: None
) -> None:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    kube = k8s_node
    spec = {
        "image": broker_image,
        "imagePullPolicy": "Never",
        "nameServer": {"replicas": 1},
        "broker": {"groups": 1, "slavesPerGroup": 0, "grpc": {"enabled": True}},
        "storage": {"type": "ephemeral", "size": "1Gi"},
        "externalAccess": {"type": "LoadBalancer"},
    }
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": LB_CLUSTER}}
    kube.apply(json.dumps(body | {"spec": spec}), namespace=ns)
    service = f"{LB_CLUSTER}-broker-0-0-external"
    kube.wait_for("the broker's external Service", lambda: kube.run("get", "-n", ns, "svc", service, check=False))
    ports = [p["port"] for p in kube.get("-n", ns, "svc", service)["spec"]["ports"]]
    assert ports == [10911, 8081]
    for name, ip in ((f"{LB_CLUSTER}-nameserver-external", LB_NAMESRV_IP), (service, LB_BROKER_IP)):
        patch = {"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}
        kube.run("patch", "-n", ns, "svc", name, "--subresource=status", "--type=merge", "-p", json.dumps(patch))

    kube.wait_for("the LoadBalancer cluster Ready", lambda: ready_status(kube, ns, LB_CLUSTER), timeout=300, interval=2)
    topic = "GrpcLb"
    wait_answering(kube, f"{LB_NAMESRV_IP}:9876")
    with BlockingAdmin(f"{LB_NAMESRV_IP}:9876") as admin:
        admin.create_topic(topic, cluster=LB_CLUSTER, read_queue_nums=4, write_queue_nums=4)
    config = ClientConfiguration(f"{LB_BROKER_IP}:8081", Credentials(), request_timeout=10)
    consumer = SimpleConsumer(config, "GrpcLbGroup", {topic: FilterExpression()}, await_duration=5)
    consumer.startup()
    producer = Producer(config, (topic,))
    producer.startup()
    try:
        sent = []
        for i in range(LB_COUNT):
            msg = Message()
            msg.topic, msg.body = topic, f"lb {i}".encode()
            receipt = producer.send(msg)
            sent.append(msg.body)
        # the route named the broker at its load balancer's address (the send went there)
        assert f"{LB_BROKER_IP}:8081" in str(receipt.message_queue.endpoints), str(receipt.message_queue.endpoints)
        got: dict[bytes, None] = {}
        deadline = time.monotonic() + 90
        while len(got) < LB_COUNT and time.monotonic() < deadline:
            for m in consumer.receive(32, 15):
                consumer.ack(m)
                got[bytes(m.body)] = None
        assert sorted(got) == sorted(sent)
    finally:
        producer.shutdown()
        consumer.shutdown()


NP_CLUSTER = "grpcnp"
NODE_IP = "10.250.0.1"  # the harness's node (docs/kubernetes-harness.md)
# nodePorts no other test of the harness takes (e2e/test_external_access_node.py has 31200..)
NP_BASE, NP_GRPC_BASE = 31300, 31320


def test_node_port_clients_outside_and_inside_take_each_brokers_grpc_node_port(
    k8s_node: Kube, ns: str, broker_image: str, operator: OperatorProcess, sdk_loop: None
) -> None:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    kube = k8s_node
    spec = {
        "image": broker_image,
        "imagePullPolicy": "Never",
        "nameServer": {"replicas": 1},
        "broker": {"groups": 2, "slavesPerGroup": 0, "grpc": {"enabled": True}},
        "storage": {"type": "ephemeral", "size": "1Gi"},
        "externalAccess": {"type": "NodePort", "nodePortBase": NP_BASE, "grpcNodePortBase": NP_GRPC_BASE},
    }
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": NP_CLUSTER}}
    kube.apply(json.dumps(body | {"spec": spec}), namespace=ns)

    status = kube.wait_for(
        "the NodePort cluster Ready", lambda: ready_status(kube, ns, NP_CLUSTER, groups=2), timeout=420, interval=2
    )
    grpc_ports = {0: NP_GRPC_BASE, 1: NP_GRPC_BASE + 5}
    for g, node_port in grpc_ports.items():
        service = kube.get("-n", ns, "svc", f"{NP_CLUSTER}-broker-{g}-0-external")["spec"]
        assert [(p["name"], p["port"], p.get("nodePort")) for p in service["ports"]] == [
            ("main", NP_BASE + 1 + 5 * g, NP_BASE + 1 + 5 * g),
            ("grpc", 8081, node_port),
        ]
    external = status["externalAccess"]
    assert external["grpcEndpoint"] == f"{NODE_IP}:{NP_GRPC_BASE}", external
    assert [b["grpcAddress"] for b in external["brokers"]] == [f"{NODE_IP}:{p}" for p in grpc_ports.values()]
    conf = kube.get("-n", ns, "configmap", f"{NP_CLUSTER}-broker-1-config")["data"]["broker-0.conf"]
    assert f"grpcRoutePortOffset={NP_GRPC_BASE - NP_BASE - 1}" in conf

    topic = "GrpcNodePort"
    wait_answering(kube, f"{NODE_IP}:{NP_BASE}")
    with BlockingAdmin(f"{NODE_IP}:{NP_BASE}") as admin:
        admin.create_topic(topic, cluster=NP_CLUSTER, read_queue_nums=4, write_queue_nums=4)
    # outside: the host is not in the pod network; it reaches the brokers at the node's IP and nodePorts only
    config = ClientConfiguration(external["grpcEndpoint"], Credentials(), request_timeout=10)
    consumer = SimpleConsumer(config, "GrpcNpGroup", {topic: FilterExpression()}, await_duration=5)
    consumer.startup()
    producer = Producer(config, (topic,))
    producer.startup()
    try:
        sent, used = [], Counter[str]()
        for i in range(LB_COUNT):
            msg = Message()
            msg.topic, msg.body = topic, f"np {i}".encode()
            receipt = producer.send(msg)
            sent.append(msg.body)
            used[str(receipt.message_queue.endpoints)] += 1
        # the route named both brokers, each at the node's IP and its own gRPC nodePort, and sends went to both
        assert len(used) == 2, used
        for port in grpc_ports.values():
            assert any(f"{NODE_IP}:{port}" in e for e in used), used
        got: dict[bytes, None] = {}
        deadline = time.monotonic() + 120
        while len(got) < LB_COUNT and time.monotonic() < deadline:
            for m in consumer.receive(32, 15):
                consumer.ack(m)
                got[bytes(m.body)] = None
        assert sorted(got) == sorted(sent)
    finally:
        producer.shutdown()
        consumer.shutdown()

    # inside: a pod given the in-cluster access point (the ClusterIP Service) follows the same route
    connection = kube.get("-n", ns, "configmap", f"{NP_CLUSTER}-connection")["data"]
    assert connection["GRPC_ENDPOINT"] == f"{NP_CLUSTER}-broker-grpc.{ns}.svc:8081"
    kube.run(
        "create",
        "configmap",
        "-n",
        ns,
        "grpc-roundtrip",
        f"--from-file={REPO / 'e2e' / 'grpc_roundtrip.py'}",
        check=False,
    )
    job_name = "grpc-np-client"
    kube.apply(json.dumps(_job(broker_image, "GrpcNodePortInside", NP_CLUSTER, job_name)), namespace=ns)
    job = kube.wait_for("the in-cluster gRPC Job finished", lambda: _finished(kube, ns, job_name), 300, 2)
    logs = kube.run("logs", "-n", ns, f"job/{job_name}", check=False)
    assert '"received"' in logs, f"{job}\n{logs[-3000:]}"
    result = json.loads(logs.strip().splitlines()[-1])
    assert result["acked"] == COUNT, result
    assert result["received"] == COUNT and result["received_crc"] == result["sent_crc"], result
