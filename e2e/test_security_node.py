"""spec.security and RocketUser on the node tier: real brokers with authentication, authorization and TLS on.

One RocketCluster (1 NameServer, one group with a slave, ephemeral storage, the image of this tree) in a namespace
that enforces the restricted Pod Security Standard, TLS from a kubernetes.io/tls Secret (a self-signed CA made
here), serves the module:
- the cluster becomes Ready: its probes sign and speak TLS, the slave replicates from its master over TLS with the
  inner credentials, and the operator's own admin calls (the planner's facts, a RocketTopic) are signed;
- the operator's secret is in its Secret only: not in any ConfigMap, Event or the operator's log;
- a RocketUser gets Ready and a <name>-credentials Secret; a producer/consumer Job that signs with that Secret
  sends and consumes every message; the same Job without credentials is refused (NO_PERMISSION); after the
  RocketUser is deleted, the Job with the old credentials is refused too;
- the gRPC endpoint is on: a Job with the official Python SDK, signing with a RocketUser's Secret over TLS and
  checking every host name it dials against the certificate (the access point's Service name, then the pod DNS
  names the route gives), sends and receives every message;
- a renewed certificate (new Secret content) rolls every pod in the operator's order (NameServer, slave, master)
  and the cluster is Ready again; a Job that trusts only the new CA sends and consumes;
- deleting the operator Secret's secretKey rotates the operator's own user through three rolls: the cluster is Ready
  again, a Job succeeds, the operator's passes go on with the new user, and the old one is refused.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from broker.transport.tls import self_signed_pem
from e2e.operator_harness import CRD_FILE, OperatorProcess, ready_status, running_operator

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.node]

REPO = Path(__file__).resolve().parents[1]
CLUSTER = "sec"
TOPIC = "secure-orders"
COUNT = 200


@pytest.fixture(scope="module")
def ns(k8s_node: Kube) -> Iterator[str]:
    name = f"security-{uuid.uuid4().hex[:6]}"
    k8s_node.run("apply", "--server-side", "-f", str(CRD_FILE.parent))
    for crd in ("rocketclusters", "rockettopics", "rocketusers"):
        k8s_node.wait_established(f"{crd}.rocketcluster.io")
    k8s_node.run("create", "namespace", name)
    k8s_node.run("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted")
    # the names a gRPC client dials: the access point Service, and the brokers' pod DNS names the route gives
    cert, key = self_signed_pem(("rocketcluster-test-ca", f"{CLUSTER}-broker-grpc.{name}.svc", f"*.{name}.pod"))
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": "sec-cert"},
        "data": {k: base64.b64encode(v).decode() for k, v in (("tls.crt", cert), ("tls.key", key), ("ca.crt", cert))},
    }
    k8s_node.apply(json.dumps(secret), namespace=name)
    k8s_node.run("create", "configmap", "-n", name, "cluster-ca", "--from-literal", f"ca.crt={cert.decode()}")
    scripts = [f"--from-file={REPO / 'e2e' / script}" for script in ("secure_roundtrip.py", "grpc_roundtrip.py")]
    k8s_node.run("create", "configmap", "-n", name, "secure-roundtrip", *scripts)
    yield name
    for kind in ("rmqu", "rmqt", "rmq"):
        k8s_node.run("delete", kind, "--all", "-n", name, "--wait=true", "--timeout=90s", check=False, timeout=120)
    k8s_node.run("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(k8s_node: Kube, ns: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator(k8s_node, [ns], tmp_path_factory.mktemp("op")) as proc:
        yield proc
        for kind in ("rmqu", "rmqt"):  # while the cluster still runs: their deletion needs the brokers
            k8s_node.run("delete", kind, "--all", "-n", ns, "--wait=true", "--timeout=90s", check=False, timeout=120)


@pytest.fixture(scope="module")
def cluster(k8s_node: Kube, ns: str, broker_image: str, operator: OperatorProcess) -> dict[str, Any]:
    spec = {
        "image": broker_image,
        "imagePullPolicy": "Never",
        "nameServer": {"replicas": 1},
        "broker": {"groups": 1, "slavesPerGroup": 1, "grpc": {"enabled": True}},
        "storage": {"type": "ephemeral", "size": "1Gi"},
        "security": {
            "authentication": {"enabled": True},
            "authorization": {"enabled": True},
            "tls": {"enabled": True, "secretName": "sec-cert"},
        },
    }
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": CLUSTER}}
    k8s_node.apply(json.dumps(body | {"spec": spec}), namespace=ns)
    status: dict[str, Any] = k8s_node.wait_for(
        "the secured cluster Ready", lambda: ready_status(k8s_node, ns, CLUSTER), timeout=480, interval=3
    )
    topic = {
        "apiVersion": "rocketcluster.io/v1alpha1",
        "kind": "RocketTopic",
        "metadata": {"name": TOPIC},
        "spec": {"clusterRef": CLUSTER, "queues": 4},
    }
    k8s_node.apply(json.dumps(topic), namespace=ns)
    k8s_node.wait_for("the topic Ready", lambda: ready_status(k8s_node, ns, TOPIC, "rmqt"), timeout=120, interval=2)
    return status


def _job(name: str, image: str, secret: str | None, command: list[str] | None = None) -> dict[str, Any]:
    """A Job running `command` (by default secure_roundtrip.py) under the restricted Pod Security Standard, with
    the CA file at /ca/ca.crt (TLS_CA_FILE for our SDK, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH for gRPC's) and, given
    a Secret, its credentials in ACCESS_KEY and SECRET_KEY."""
    env: list[dict[str, Any]] = [
        {"name": "TLS_CA_FILE", "value": "/ca/ca.crt"},
        {"name": "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "value": "/ca/ca.crt"},
        {"name": "HOME", "value": "/tmp"},  # the gRPC SDK makes ~/logs on import; uid 10001 has no home
    ]
    if secret is not None:
        for var, key in (("ACCESS_KEY", "accessKey"), ("SECRET_KEY", "secretKey")):
            env.append({"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
    command = command or [
        "python3",
        "/scripts/secure_roundtrip.py",
        "--topic",
        TOPIC,
        "--group",
        f"app-{name}",
        "--count",
        str(COUNT),
    ]
    container = {
        "name": "roundtrip",
        "image": image,
        "imagePullPolicy": "Never",
        "command": command,
        "envFrom": [{"configMapRef": {"name": f"{CLUSTER}-connection"}}],
        "env": env,
        "volumeMounts": [{"name": "scripts", "mountPath": "/scripts"}, {"name": "ca", "mountPath": "/ca"}],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }  # fmt: skip
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 10001,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [
                        {"name": "scripts", "configMap": {"name": "secure-roundtrip"}},
                        {"name": "ca", "configMap": {"name": "cluster-ca"}},
                    ],
                }
            },
        },
    }  # fmt: skip


def _run_job(
    kube: Kube, ns: str, image: str, name: str, secret: str | None, command: list[str] | None = None
) -> dict[str, Any]:
    kube.apply(json.dumps(_job(name, image, secret, command)), namespace=ns)

    def finished() -> dict[str, Any] | None:
        status: dict[str, Any] = kube.get("-n", ns, "job", name).get("status", {})
        return status if status.get("succeeded") or status.get("failed") else None

    status = kube.wait_for(f"Job {name} finished", finished, timeout=300, interval=2)
    logs = kube.run("logs", "-n", ns, f"job/{name}")
    assert status.get("succeeded"), logs[-3000:]
    result: dict[str, Any] = json.loads(logs.strip().splitlines()[-1])
    return result


def _user(kube: Kube, ns: str, name: str, group: str = "app-") -> dict[str, Any]:
    """A RocketUser `name` that may send to and consume TOPIC in the groups named `group...`; its Ready status."""
    user = {
        "apiVersion": "rocketcluster.io/v1alpha1",
        "kind": "RocketUser",
        "metadata": {"name": name},
        "spec": {
            "clusterRef": CLUSTER,
            "acls": [
                {"resource": {"type": "Topic", "name": TOPIC}, "actions": ["Pub", "Sub"]},
                {"resource": {"type": "Group", "name": group, "patternType": "Prefixed"}, "actions": ["Sub"]},
            ],
        },
    }
    kube.apply(json.dumps(user), namespace=ns)
    status: dict[str, Any] = kube.wait_for(
        "the user Ready", lambda: ready_status(kube, ns, name, "rmqu"), timeout=120, interval=2
    )
    return status


def _secret(kube: Kube, ns: str, name: str) -> dict[str, str]:
    data = kube.get("-n", ns, "secret", name)["data"]
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def test_the_operator_secret_stays_in_its_secret(
    k8s_node: Kube, ns: str, cluster: dict[str, Any], operator: OperatorProcess
) -> None:
    creds = _secret(k8s_node, ns, f"{CLUSTER}-operator-credentials")
    assert creds["accessKey"] == "rocketcluster-operator" and len(creds["secretKey"]) >= 40
    config_maps = k8s_node.run("get", "configmaps", "-n", ns, "-o", "json")
    events = k8s_node.run("get", "events", "-n", ns, "-o", "json")
    assert "authenticationEnabled=true" in config_maps and "tls.server.mode=enforcing" in config_maps
    for text in (config_maps, events, operator.tail(10**7)):
        assert creds["secretKey"] not in text
    assert cluster["readyGroups"] == 1
    pods = k8s_node.get("-n", ns, "pods", "-l", f"rocketcluster.io/cluster={CLUSTER}")["items"]
    assert len(pods) == 3 and all(p["metadata"]["annotations"].get("rocketcluster.io/secrets-hash") for p in pods)


def test_a_job_with_the_users_secret_succeeds_and_without_it_is_refused(
    k8s_node: Kube, ns: str, broker_image: str, cluster: dict[str, Any]
) -> None:
    status = _user(k8s_node, ns, "app")
    assert status["secret"] == "app-credentials" and status["brokerNames"] == [f"{CLUSTER}-0"]
    creds = _secret(k8s_node, ns, "app-credentials")
    assert creds["accessKey"] == "app"

    signed = _run_job(k8s_node, ns, broker_image, "signed", "app-credentials")
    assert signed == {"refused": False, "acked": COUNT, "consumed": COUNT}, signed

    unsigned = _run_job(k8s_node, ns, broker_image, "unsigned", None)
    assert unsigned["refused"] is True and unsigned["acked"] == 0, unsigned
    assert "NoPermission" in unsigned["error"] or "code 16" in unsigned["error"], unsigned

    # the user deleted: its credentials stop working (the Secret goes with the RocketUser, so keep a copy)
    k8s_node.run("create", "secret", "generic", "-n", ns, "old-app", f"--from-literal=accessKey={creds['accessKey']}",
                 f"--from-literal=secretKey={creds['secretKey']}")  # fmt: skip
    k8s_node.run("delete", "rmqu", "app", "-n", ns, "--wait=true", "--timeout=90s", timeout=120)
    revoked = _run_job(k8s_node, ns, broker_image, "revoked", "old-app")
    assert revoked["refused"] is True and creds["secretKey"] not in revoked["error"], revoked


def test_the_official_grpc_sdk_signs_and_speaks_tls_checking_every_host_name_it_dials(
    k8s_node: Kube, ns: str, broker_image: str, cluster: dict[str, Any]
) -> None:
    _user(k8s_node, ns, "grpc-app", group="grpc-app-")
    connection = k8s_node.get("-n", ns, "configmap", f"{CLUSTER}-connection")["data"]
    assert connection["GRPC_ENDPOINT"] == f"{CLUSTER}-broker-grpc.{ns}.svc:8081"
    command = ["python3", "/scripts/grpc_roundtrip.py", "--topic", TOPIC, "--existing-topic",
               "--group", "grpc-app-", "--tls", "--count", str(COUNT)]  # fmt: skip
    result = _run_job(k8s_node, ns, broker_image, "grpc-tls", "grpc-app-credentials", command)
    assert result["acked"] == COUNT, result
    assert result["received"] == COUNT and result["received_crc"] == result["sent_crc"], result


def test_a_renewed_certificate_rolls_the_pods_in_order_and_clients_trust_the_new_one(
    k8s_node: Kube, ns: str, broker_image: str, cluster: dict[str, Any]
) -> None:
    kube = k8s_node

    def pods() -> dict[str, dict[str, Any]]:
        items = kube.get("-n", ns, "pods", "-l", f"rocketcluster.io/cluster={CLUSTER}")["items"]
        return {p["metadata"]["name"]: p for p in items}

    before = pods()
    hashes = {p["metadata"]["annotations"]["rocketcluster.io/secrets-hash"] for p in before.values()}
    assert len(hashes) == 1
    cert, key = self_signed_pem(("rocketcluster-test-ca-2",))
    data = {k: base64.b64encode(v).decode() for k, v in (("tls.crt", cert), ("tls.key", key), ("ca.crt", cert))}
    kube.run("patch", "secret", "sec-cert", "-n", ns, "--type=merge", "-p", json.dumps({"data": data}))
    ca = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cluster-ca"},
        "data": {"ca.crt": cert.decode()},
    }
    kube.apply(json.dumps(ca), namespace=ns)

    def rolled() -> dict[str, dict[str, Any]] | None:
        now = pods()
        renewed = all(
            p["metadata"]["uid"] != before[name]["metadata"]["uid"]
            and p["metadata"]["annotations"]["rocketcluster.io/secrets-hash"] not in hashes
            for name, p in now.items()
        )
        return now if len(now) == 3 and renewed and ready_status(kube, ns, CLUSTER) else None

    after = kube.wait_for("every pod restarted with the new certificate", rolled, timeout=600, interval=3)
    started = {name: p["metadata"]["creationTimestamp"] for name, p in after.items()}
    # the operator's order: NameServers, then each group's slaves, then its master
    assert started[f"{CLUSTER}-nameserver-0"] <= started[f"{CLUSTER}-broker-0-1"] <= started[f"{CLUSTER}-broker-0-0"]

    _user(kube, ns, "app2")
    result = _run_job(kube, ns, broker_image, "renewed", "app2-credentials")  # verifies against the new CA
    assert result == {"refused": False, "acked": COUNT, "consumed": COUNT}, result


@pytest.mark.timeout(2400)  # three rolls of the cluster, each in the operator's safe order
def test_rotating_the_operators_credentials_keeps_the_cluster_serving(
    k8s_node: Kube, ns: str, broker_image: str, cluster: dict[str, Any], operator: OperatorProcess
) -> None:
    kube, name = k8s_node, f"{CLUSTER}-operator-credentials"
    _user(kube, ns, "app3")
    old = _secret(kube, ns, name)
    assert old["accessKey"] == "rocketcluster-operator"
    kube.run("patch", "secret", name, "-n", ns, "--type=json", "-p", '[{"op":"remove","path":"/data/secretKey"}]')
    kube.wait_for(
        "the new user made on the master (the first roll starts)",
        lambda: _secret(kube, ns, name).get("accessKey") == "rocketcluster-operator-g2" or None,
        timeout=300,
        interval=2,
    )
    # No Job runs during the rolls: with one NameServer, a client that starts while it restarts finds no route
    # until the brokers register again (any roll does that); tests/operator/test_credentials_rotation.py shows
    # with the servers' auth code that every mixed state accepts the registrations and the operator.

    def finished() -> dict[str, str] | None:
        now = _secret(kube, ns, name)
        # the last state: both users of auth.properties are the new one, and the old user is removed
        both = now.get("auth.properties", "").count("rocketcluster-operator-g2") == 2
        done = now.get("accessKey") == "rocketcluster-operator-g2" and both and "retiredAccessKey" not in now
        return now if done and ready_status(kube, ns, CLUSTER) else None

    new = kube.wait_for("the rotation's three rolls and the old user's removal", finished, timeout=1800, interval=5)
    changed = new["secretKey"] != old["secretKey"] and old["secretKey"] not in new["auth.properties"]
    assert changed, "the new Secret still holds the old secret key"  # (no secret in the assertion's output)
    after = _run_job(kube, ns, broker_image, "after-rotation", "app3-credentials")
    assert after == {"refused": False, "acked": COUNT, "consumed": COUNT}, after
    # the operator signs with the new user: a new topic gets Ready
    topic = {
        "apiVersion": "rocketcluster.io/v1alpha1",
        "kind": "RocketTopic",
        "metadata": {"name": "after-rotation"},
        "spec": {"clusterRef": CLUSTER, "queues": 2},
    }
    kube.apply(json.dumps(topic), namespace=ns)
    kube.wait_for(
        "a topic Ready after the rotation", lambda: ready_status(kube, ns, "after-rotation", "rmqt"), timeout=120
    )
    # the old operator user is gone from the brokers
    kube.run("create", "secret", "generic", "-n", ns, "old-operator", "--from-literal=accessKey=rocketcluster-operator",
             f"--from-literal=secretKey={old['secretKey']}")  # fmt: skip
    stale = _run_job(kube, ns, broker_image, "old-operator", "old-operator")
    leaked = old["secretKey"] in stale.get("error", "")
    assert stale["refused"] is True and not leaked, {k: v for k, v in stale.items() if k != "error"}
    for text in (kube.run("get", "events", "-n", ns, "-o", "json"), operator.tail(10**7)):
        leaked = new["secretKey"] in text or old["secretKey"] in text
        assert not leaked, "an operator secret key is in the Events or the operator's log"
