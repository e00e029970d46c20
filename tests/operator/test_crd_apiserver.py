"""The generated CRD on a real kube-apiserver (and etcd): it is accepted (structural schema, CEL rules within the
cost budget), its defaults are the model's, it refuses what the model refuses with messages naming the field,
its transition rules hold, the status and scale subresources work, and every rendered child passes the API
server's own validation (server-side dry run).

The binaries are the ones the Kubernetes harness builds (`make k8s-build`, cached under
~/.cache/rocketcluster); without them the module is skipped. This module starts its own private etcd and API
server on free loopback ports and stops them at the end.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kopf
import pytest

from rocketcluster import crd
from rocketcluster.kube import Kube
from rocketcluster.model import SpecError, parse_spec
from rocketcluster.model_resources import name_problem, parse_group_spec, parse_topic_spec
from rocketcluster.render import ClusterRef, render_cluster

pytestmark = pytest.mark.k8s

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("ROCKETCLUSTER_CACHE", Path.home() / ".cache" / "rocketcluster"))
NAMESPACE = "crd-test"


def _versions() -> dict[str, str]:
    out = {}
    for line in (REPO / "e2e" / "versions.env").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Kubectl:
    binary: Path
    kubeconfig: Path

    def run(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def ok(self, *args: str, input: str | None = None) -> str:
        done = self.run(*args, input=input)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def api_client(self) -> Kube:
        """The operator's own API client (rocketcluster.kube.Kube) for this API server, as the kubeconfig's user."""
        config = json.loads(self.kubeconfig.read_text())
        server, token = config["clusters"][0]["cluster"]["server"], config["users"][0]["user"]["token"]
        return Kube(kopf.ConnectionInfo(server=server, token=token, insecure=True))

    def apply(self, obj: dict[str, Any], *, dry_run: bool = False) -> subprocess.CompletedProcess[str]:
        args = ["apply", "-f", "-", *(["--dry-run=server"] if dry_run else [])]
        return self.run(*args, input=json.dumps(obj))

    def wait_established(self, crd: str, timeout: float = 60) -> None:
        """Polls the CRD's conditions: `kubectl wait --for=condition=Established` fails at once when it looks
        before the API server has written the first condition."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            conditions = json.loads(self.ok("get", f"crd/{crd}", "-o", "json")).get("status", {}).get("conditions")
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions or []):
                return
            time.sleep(0.2)
        raise AssertionError(f"crd/{crd} not Established after {timeout:.0f} s")


def _wait_ready(kubectl: Kubectl, processes: list[subprocess.Popen[bytes]], logs: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if kubectl.run("get", "--raw", "/readyz").returncode == 0:
            return
        for process in processes:
            if process.poll() is not None:
                log = (logs / "apiserver.log").read_text()[-3000:]
                pytest.fail(f"etcd or kube-apiserver exited with {process.returncode}: {log}")
        time.sleep(0.5)
    pytest.fail(f"kube-apiserver not ready in 120 s: {(logs / 'apiserver.log').read_text()[-3000:]}")


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    versions = _versions()
    kube_bin = CACHE / f"kubernetes-{versions['K8S_VERSION']}" / "bin"
    etcd_bin = CACHE / f"etcd-{versions['ETCD_VERSION']}" / "bin" / "etcd"
    missing = [p for p in (kube_bin / "kube-apiserver", kube_bin / "kubectl", etcd_bin) if not p.exists()]
    if missing:
        pytest.skip(f"no Kubernetes binaries (make k8s-build): {', '.join(map(str, missing))}")
    work = tmp_path_factory.mktemp("apiserver")
    subprocess.run(["openssl", "genrsa", "-out", str(work / "sa.key"), "2048"], check=True, capture_output=True)
    subprocess.run(
        ["openssl", "rsa", "-in", str(work / "sa.key"), "-pubout", "-out", str(work / "sa.pub")],
        check=True,
        capture_output=True,
    )
    token = uuid.uuid4().hex
    (work / "tokens.csv").write_text(f"{token},admin,admin,system:masters\n")
    etcd_client, etcd_peer, secure = _free_port(), _free_port(), _free_port()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        with open(work / "etcd.log", "wb") as etcd_log:
            processes.append(
                subprocess.Popen(
                    [
                        str(etcd_bin),
                        f"--data-dir={work / 'etcd'}",
                        f"--listen-client-urls=http://127.0.0.1:{etcd_client}",
                        f"--advertise-client-urls=http://127.0.0.1:{etcd_client}",
                        f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                        f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                        f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}",
                    ],
                    stdout=etcd_log,
                    stderr=subprocess.STDOUT,
                )
            )
        with open(work / "apiserver.log", "wb") as apiserver_log:
            processes.append(
                subprocess.Popen(
                    [
                        str(kube_bin / "kube-apiserver"),
                        f"--etcd-servers=http://127.0.0.1:{etcd_client}",
                        f"--secure-port={secure}",
                        "--bind-address=127.0.0.1",
                        "--advertise-address=127.0.0.1",
                        f"--cert-dir={work / 'certs'}",
                        "--service-account-issuer=https://kubernetes.default.svc",
                        f"--service-account-key-file={work / 'sa.pub'}",
                        f"--service-account-signing-key-file={work / 'sa.key'}",
                        f"--token-auth-file={work / 'tokens.csv'}",
                        "--authorization-mode=RBAC",
                        "--service-cluster-ip-range=10.97.0.0/24",
                        "--enable-priority-and-fairness=false",
                    ],
                    stdout=apiserver_log,
                    stderr=subprocess.STDOUT,
                )
            )
        kubeconfig = work / "kubeconfig"
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "c",
                            "cluster": {"server": f"https://127.0.0.1:{secure}", "insecure-skip-tls-verify": True},
                        }
                    ],
                    "users": [{"name": "u", "user": {"token": token}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": NAMESPACE}}],
                    "current-context": "c",
                }
            )
        )
        client = Kubectl(kube_bin / "kubectl", kubeconfig)
        _wait_ready(client, processes, work)
        for file in crd.manifests():
            client.ok("apply", "-f", str(REPO / crd.CRD_DIR / file))
            client.wait_established(file.removesuffix(".yaml"))
        client.ok("create", "namespace", NAMESPACE)
        yield client
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _cluster(name: str, spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "rocketcluster.io/v1alpha1",
        "kind": "RocketCluster",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def _drop_empty(value: Any) -> Any:
    if isinstance(value, dict):
        kept = {k: _drop_empty(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in ({}, [])}
    return value


def test_the_api_server_fills_in_the_model_defaults(kubectl: Kubectl) -> None:
    raw = {"broker": {"groups": 2}}
    created = kubectl.ok("create", "-f", "-", "--dry-run=server", "-o", "json", input=json.dumps(_cluster("d", raw)))
    stored = json.loads(created)["spec"]
    model = parse_spec(raw).model_dump(by_alias=True, exclude_none=True)
    assert _drop_empty(stored) == _drop_empty(model)
    assert parse_spec(stored) == parse_spec(raw)


_REFUSED: list[tuple[str, Any, str]] = [
    # (case, spec, what the API server's message says); the model refuses each too
    ("zero groups", {"broker": {"groups": 0}}, "spec.broker.groups"),
    ("huge groups", {"broker": {"groups": 100000}}, "spec.broker.groups"),
    ("groups as a string", {"broker": {"groups": "3"}}, "spec.broker.groups"),
    ("too many slaves", {"broker": {"slavesPerGroup": 9}}, "spec.broker.slavesPerGroup"),
    ("SYNC without a slave", {"broker": {"replication": "SYNC", "slavesPerGroup": 0}}, "SYNC needs slavesPerGroup"),
    ("wrong enum", {"broker": {"replication": "QUORUM"}}, "spec.broker.replication"),
    ("owned key", {"broker": {"config": {"brokerId": "1"}}}, "key 'brokerId' is owned by the operator"),
    ("owned store path", {"broker": {"config": {"storePathCommitLog": "/x"}}}, "key 'storePathCommitLog' is owned"),
    ("unknown key", {"broker": {"config": {"deleteWhne": "04"}}}, "key 'deleteWhne' is not a broker.conf key"),
    ("newline in a value", {"broker": {"config": {"deleteWhen": "04\nbrokerId=2"}}}, "spec.broker.config.deleteWhen"),
    (
        "oversized value",
        {"broker": {"config": {"msgTraceTopicName": "x" * 2000}}},
        "spec.broker.config.msgTraceTopicName",
    ),
    ("unknown field", {"brokr": {"groups": 2}}, 'unknown field "spec.brokr"'),
    ("wrong storage type", {"storage": {"type": "hostPath"}}, "spec.storage.type"),
    ("size not a quantity", {"storage": {"size": "lots"}}, "spec.storage.size"),
    ("bad cpu", {"broker": {"resources": {"requests": {"cpu": "lots"}}}}, "spec.broker.resources.requests.cpu"),
    ("bad label value", {"template": {"labels": {"team": "a b"}}}, "spec.template.labels.team"),
    ("too many labels", {"template": {"labels": {f"l{i}": "v" for i in range(40)}}}, "spec.template.labels"),
    ("affinity as a list", {"template": {"affinity": [1]}}, "spec.template.affinity"),
    # pod template extras (rocketcluster.pod_extras)
    (
        "operator's env",
        {"template": {"env": [{"name": "POD_INDEX", "value": "9"}]}},
        "env variable names BROKER_IP1, POD_INDEX, POD_NAME are the operator's own",
    ),
    (
        "operator's volume",
        {"broker": {"template": {"volumes": [{"name": "data", "emptyDir": {}}]}}},
        "spec.broker.template.volumes: Forbidden: the volume names config, data",
    ),
    (
        "operator's container",
        {"template": {"sidecars": [{"name": "broker", "image": "x"}]}},
        "spec.template.sidecars: Forbidden: the container names broker, nameserver",
    ),
    (
        "mount under /data",
        {"template": {"volumeMounts": [{"name": "x", "mountPath": "/data/x"}]}},
        "spec.template.volumeMounts: Forbidden: a mountPath may not be at or under",
    ),
    ("mount with '..'", {"template": {"volumeMounts": [{"name": "x", "mountPath": "/a/../b"}]}}, "'..'"),
    ("env twice", {"template": {"env": [{"name": "A"}, {"name": "A"}]}}, "Duplicate value"),
    ("sidecar without image", {"template": {"sidecars": [{"name": "s"}]}}, "spec.template.sidecars[0].image"),
    ("env name with '='", {"template": {"env": [{"name": "A=B"}]}}, "spec.template.env[0].name"),
    ("too many volumes", {"template": {"volumes": [{"name": f"v{i}"} for i in range(33)]}}, "spec.template.volumes"),
    ("fixedUserIds a string", {"template": {"fixedUserIds": "no"}}, "spec.template.fixedUserIds"),
    ("failover without SYNC", {"failover": {"enabled": True}}, "spec.failover.enabled"),
]


@pytest.mark.parametrize(("spec", "words"), [row[1:] for row in _REFUSED], ids=[row[0] for row in _REFUSED])
def test_the_api_server_refuses_what_the_model_refuses(kubectl: Kubectl, spec: Any, words: str) -> None:
    with pytest.raises(SpecError):
        parse_spec(spec)
    done = kubectl.apply(_cluster("bad", spec), dry_run=True)
    assert done.returncode != 0, f"accepted: {spec}"
    assert words in done.stderr, done.stderr


@pytest.mark.parametrize("name", ["a" * 42, "9lives"])
def test_a_name_too_long_or_not_a_dns_label_is_refused(kubectl: Kubectl, name: str) -> None:
    with pytest.raises(ValueError):
        ClusterRef(name, NAMESPACE, "uid")
    done = kubectl.apply(_cluster(name, {}), dry_run=True)
    assert done.returncode != 0
    assert "metadata.name must be a DNS-1035 label" in done.stderr, done.stderr


_UPDATES: list[tuple[str, dict[str, Any], str | None]] = [
    # (case, the spec changed to, the refusal, or None when allowed); the first spec is _ORIGINAL
    ("add clusterName equal to the name", {"clusterName": "upd"}, None),
    ("add another clusterName", {"clusterName": "other"}, "spec.clusterName"),
    ("change storage type", {"storage": {"type": "ephemeral"}}, "spec.storage.type"),
    ("set a storage class", {"storage": {"storageClassName": "fast"}}, "spec.storage.storageClassName"),
    # accepted: the operator refuses a shrink with StorageResizeBlocked, so a refused growth can be set back
    ("shrink the volumes", {"storage": {"size": "5Gi"}}, None),
    ("grow the volumes", {"storage": {"size": "20Gi"}}, None),
    ("scale the groups", {"broker": {"groups": 3}}, None),
    ("turn failover on", {"broker": {"replication": "SYNC"}, "failover": {"enabled": True}}, "spec.failover.enabled"),
]


@pytest.fixture(scope="module")
def existing(kubectl: Kubectl) -> str:
    done = kubectl.apply(_cluster("upd", {"storage": {"size": "10Gi"}}))
    assert done.returncode == 0, done.stderr
    return "upd"


@pytest.mark.parametrize(("spec", "refusal"), [row[1:] for row in _UPDATES], ids=[row[0] for row in _UPDATES])
def test_transition_rules(kubectl: Kubectl, existing: str, spec: dict[str, Any], refusal: str | None) -> None:
    done = kubectl.apply(_cluster(existing, spec), dry_run=True)
    if refusal is None:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode != 0, f"accepted: {spec}"
        assert refusal in done.stderr, done.stderr


def test_with_failover_the_nameservers_and_failover_cannot_change(kubectl: Kubectl) -> None:
    spec = {"broker": {"replication": "SYNC"}, "failover": {"enabled": True}, "nameServer": {"replicas": 3}}
    done = kubectl.apply(_cluster("fo", spec))
    assert done.returncode == 0, done.stderr
    for changed, refusal in (
        ({"nameServer": {"replicas": 5}}, "spec.nameServer.replicas"),
        ({"failover": {"enabled": False}}, "spec.failover.enabled"),
        ({"failover": {"enabled": True, "controllerStorageSize": "2Gi"}}, "spec.failover.controllerStorageSize"),
    ):
        done = kubectl.apply(_cluster("fo", {**spec, **changed}), dry_run=True)
        assert done.returncode != 0 and refusal in done.stderr, (changed, done.stderr)
    assert (
        kubectl.apply(_cluster("fo", {**spec, "broker": {"replication": "SYNC", "groups": 2}}), dry_run=True).returncode
        == 0
    )


def test_a_fixed_cluster_name_cannot_change(kubectl: Kubectl) -> None:
    assert kubectl.apply(_cluster("named", {"clusterName": "prod"})).returncode == 0
    assert kubectl.apply(_cluster("named", {"clusterName": "prod"}), dry_run=True).returncode == 0
    removed = kubectl.apply(_cluster("named", {}), dry_run=True)
    assert removed.returncode != 0 and "spec.clusterName" in removed.stderr
    changed = kubectl.apply(_cluster("named", {"clusterName": "prod2"}), dry_run=True)
    assert changed.returncode != 0 and "spec.clusterName" in changed.stderr


def test_status_and_scale_subresources_and_printer_columns(kubectl: Kubectl) -> None:
    assert kubectl.apply(_cluster("sub", {"broker": {"groups": 2}})).returncode == 0
    status = {
        "observedGeneration": 1,
        "phase": "Ready",
        "groups": 2,
        "readyGroups": 2,
        "ready": "2/2",
        "labelSelector": "app.kubernetes.io/component=broker,rocketcluster.io/cluster=sub",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "AllGroupsReady",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
        "groupStatus": [
            {
                "index": 0,
                "brokerName": "sub-0",
                "state": "Active",
                "master": {"pod": "sub-broker-0-0", "ready": True, "address": "10.0.0.5:10911"},
                "slaves": [{"pod": "sub-broker-0-1", "ready": True, "lagBytes": 0}],
                "pvcs": ["data-sub-broker-0-0"],
            }
        ],
        "rollout": {"pending": ["sub-broker-1-1"], "current": None},
        "connectionConfigMap": "sub-connection",
    }
    kubectl.ok(
        "patch", "rocketcluster", "sub", "--subresource=status", "--type=merge", "-p", json.dumps({"status": status})
    )
    stored = json.loads(kubectl.ok("get", "rmq", "sub", "-o", "json"))["status"]
    assert stored["groupStatus"] == status["groupStatus"]
    assert stored["ready"] == "2/2"
    kubectl.ok("scale", "rmq", "sub", "--replicas=3")
    assert json.loads(kubectl.ok("get", "rmq", "sub", "-o", "json"))["spec"]["broker"]["groups"] == 3
    scale = json.loads(
        kubectl.ok("get", "--raw", f"/apis/rocketcluster.io/v1alpha1/namespaces/{NAMESPACE}/rocketclusters/sub/scale")
    )
    assert scale["status"] == {"replicas": 2, "selector": status["labelSelector"]}
    table = kubectl.ok("get", "rocketmq")  # the category: RocketClusters, and topics and groups when there are any
    [block] = [b for b in table.split("\n\n") if "GROUPS" in b.splitlines()[0]]
    header, *rows = block.splitlines()
    assert header.split()[:5] == ["NAME", "GROUPS", "SLAVES/GROUP", "READY", "PHASE"]
    rows = [" ".join([row.split()[0].rsplit("/", 1)[-1], *row.split()[1:]]) for row in rows]
    assert any(row.split()[:5] == ["sub", "3", "1", "2/2", "Ready"] for row in rows), table


@pytest.mark.parametrize(
    "spec",
    [
        {"broker": {"groups": 2, "config": {"deleteWhen": "03"}}, "storage": {"storageClassName": "fast"}},
        {
            "nameServer": {"replicas": 1, "resources": {"limits": {"memory": "256Mi"}}},
            "broker": {"slavesPerGroup": 0, "resources": {"requests": {"cpu": 1}}},
            "storage": {"type": "ephemeral", "size": "1Gi"},
            "placement": {"antiAffinity": "required", "topologyKey": "topology.kubernetes.io/zone"},
            "retention": {"whenDeleted": "Delete", "whenScaled": "Delete"},
            "imagePullSecrets": [{"name": "regcred"}],
            "template": {
                "labels": {"team": "pay"},
                "annotations": {"note": "x"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "mq", "effect": "NoSchedule"}],
                "nodeSelector": {"pool": "mq"},
                "securityContext": {"fsGroupChangePolicy": "OnRootMismatch"},
                "containerSecurityContext": {"readOnlyRootFilesystem": False},
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}
                ],
            },
        },
        {
            "template": {
                "fixedUserIds": False,
                "env": [{"name": "TZ", "value": "UTC"}],
                "volumes": [{"name": "certs", "secret": {"secretName": "mq-certs"}}],
                "volumeMounts": [{"name": "certs", "mountPath": "/etc/certs", "readOnly": True}],
            },
            "broker": {
                "template": {
                    "initContainers": [{"name": "wait", "image": "busybox:1", "command": ["true"]}],
                    "sidecars": [
                        {"name": "shipper", "image": "fluent-bit:3", "resources": {"limits": {"cpu": "100m"}}}
                    ],
                }
            },
        },
        {
            "broker": {"replication": "SYNC", "slavesPerGroup": 2},
            "nameServer": {"replicas": 3},
            "failover": {"enabled": True},
        },
    ],
    ids=["persistent", "ephemeral-with-templates", "extras", "failover"],
)
def test_every_rendered_child_passes_the_api_servers_validation(kubectl: Kubectl, spec: dict[str, Any]) -> None:
    created = json.loads(
        kubectl.ok("create", "-f", "-", "-o", "json", input=json.dumps(_cluster(f"r{uuid.uuid4().hex[:6]}", spec)))
    )
    cluster = ClusterRef(created["metadata"]["name"], NAMESPACE, created["metadata"]["uid"])
    objects = render_cluster(cluster, parse_spec(created["spec"]))
    done = kubectl.apply({"apiVersion": "v1", "kind": "List", "items": objects}, dry_run=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(server dry run)") == len(objects), done.stdout


# -- RocketTopic and RocketConsumerGroup ------------------------------------------------------------------------


def _topic(name: str, spec: Any) -> dict[str, Any]:
    return {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketTopic", "metadata": {"name": name}, "spec": spec}


def _group(name: str, spec: Any) -> dict[str, Any]:
    return _topic(name, spec) | {"kind": "RocketConsumerGroup"}


def test_the_api_server_fills_in_the_topic_and_group_defaults(kubectl: Kubectl) -> None:
    for body, parse in (
        (_topic("dt", {"clusterRef": "c"}), parse_topic_spec),
        (_group("dg", {"clusterRef": "c"}), parse_group_spec),
    ):
        created = kubectl.ok("create", "-f", "-", "--dry-run=server", "-o", "json", input=json.dumps(body))
        stored = json.loads(created)["spec"]
        assert parse(stored) == parse(body["spec"]), stored
        assert stored["deletionPolicy"] == "Retain"
        assert "groupRetryPolicy" not in stored and "queues" not in stored and "readQueueNums" not in stored


_RESOURCES_REFUSED: list[tuple[str, dict[str, Any], str]] = [
    # (case, object, what the API server's message says); the model (or the handler's name check) refuses each too
    ("topic without clusterRef", _topic("t", {}), "spec.clusterRef: Required value"),
    ("zero queues", _topic("t", {"clusterRef": "c", "queues": 0}), "spec.queues"),
    ("too many queues", _topic("t", {"clusterRef": "c", "writeQueueNums": 4096}), "spec.writeQueueNums"),
    ("queues as a string", _topic("t", {"clusterRef": "c", "queues": "8"}), "spec.queues"),
    (
        "queues with readQueueNums",
        _topic("t", {"clusterRef": "c", "queues": 4, "readQueueNums": 2}),
        "give either queues",
    ),
    ("order with DELAY", _topic("t", {"clusterRef": "c", "order": True, "messageType": "DELAY"}), "order needs"),
    ("unknown messageType", _topic("t", {"clusterRef": "c", "messageType": "BATCH"}), "spec.messageType"),
    ("bad perm", _topic("t", {"clusterRef": "c", "perm": "X"}), "spec.perm"),
    ("system topic", _topic("t", {"clusterRef": "c", "topicName": "TBW102"}), "a system topic"),
    ("rmq_sys_ topic", _topic("t", {"clusterRef": "c", "topicName": "rmq_sys_x"}), "a system topic"),
    ("bad topic name", _topic("t", {"clusterRef": "c", "topicName": "a.b"}), "spec.topicName"),
    ("topic name too long", _topic("t", {"clusterRef": "c", "topicName": "t" * 128}), "spec.topicName"),
    ("metadata.name not a topic name", _topic("my.topic", {"clusterRef": "c"}), "metadata.name is the topic name"),
    (
        "message.type attribute",
        _topic("t", {"clusterRef": "c", "attributes": {"message.type": "FIFO"}}),
        "set by spec.messageType",
    ),
    ("bad attribute key", _topic("t", {"clusterRef": "c", "attributes": {"a=b": "1"}}), "is not an attribute name"),
    ("unknown field", _topic("t", {"clusterRef": "c", "partitions": 3}), 'unknown field "spec.partitions"'),
    ("bad deletionPolicy", _topic("t", {"clusterRef": "c", "deletionPolicy": "Orphan"}), "spec.deletionPolicy"),
    ("system group", _group("g", {"clusterRef": "c", "groupName": "TOOLS_CONSUMER"}), "a system group"),
    ("negative retries", _group("g", {"clusterRef": "c", "retryMaxTimes": -1}), "spec.retryMaxTimes"),
    (
        "exponential policy with CUSTOMIZED",
        _group("g", {"clusterRef": "c", "groupRetryPolicy": {"exponentialRetryPolicy": {"initial": 5}}}),
        "goes with type EXPONENTIAL",
    ),
    (
        "max below initial",
        _group(
            "g",
            {
                "clusterRef": "c",
                "groupRetryPolicy": {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 10, "max": 5}},
            },
        ),
        "max is below initial",
    ),
]


@pytest.mark.parametrize(
    ("body", "words"), [row[1:] for row in _RESOURCES_REFUSED], ids=[row[0] for row in _RESOURCES_REFUSED]
)
def test_the_api_server_refuses_hostile_topics_and_groups(kubectl: Kubectl, body: dict[str, Any], words: str) -> None:
    topic = body["kind"] == "RocketTopic"
    try:
        spec = (parse_topic_spec if topic else parse_group_spec)(body["spec"])
        named = spec.topic_name if topic else spec.group_name
        refused_by_us = not named and name_problem("topic" if topic else "group", body["metadata"]["name"]) is not None
    except SpecError:
        refused_by_us = True
    assert refused_by_us, f"the model accepts {body}"
    done = kubectl.apply(body, dry_run=True)
    assert done.returncode != 0, f"accepted: {body}"
    assert words in done.stderr, done.stderr


def test_a_topic_name_and_cluster_cannot_change_and_the_status_shows_in_columns(kubectl: Kubectl) -> None:
    assert kubectl.apply(_topic("orders", {"clusterRef": "c", "queues": 4})).returncode == 0
    assert kubectl.apply(_topic("orders", {"clusterRef": "c", "queues": 16}), dry_run=True).returncode == 0
    for spec, field in (
        ({"clusterRef": "c", "topicName": "Orders"}, "spec.topicName"),
        ({"clusterRef": "d", "queues": 4}, "spec.clusterRef"),
    ):
        done = kubectl.apply(_topic("orders", spec), dry_run=True)
        assert done.returncode != 0 and field in done.stderr and "cannot change" in done.stderr, done.stderr
    ready = {"type": "Ready", "status": "True", "reason": "Applied", "message": "m"}
    status = {
        "observedGeneration": 1,
        "topicName": "orders",
        "clusterName": "c",
        "brokerNames": ["c-0"],
        "adopted": False,
        "conditions": [ready | {"lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }
    kubectl.ok("patch", "rmqt", "orders", "--subresource=status", "--type=merge", "-p", json.dumps({"status": status}))
    assert json.loads(kubectl.ok("get", "rmqt", "orders", "-o", "json"))["status"] == status
    header, *rows = kubectl.ok("get", "rmqt").splitlines()
    assert header.split()[:5] == ["NAME", "CLUSTER", "TOPIC", "READY", "REASON"]
    assert any(row.split()[:5] == ["orders", "c", "orders", "True", "Applied"] for row in rows), rows
    assert kubectl.apply(_group("billing", {"clusterRef": "c"})).returncode == 0
    header, *_ = kubectl.ok("get", "rmqg").splitlines()
    assert header.split()[:5] == ["NAME", "CLUSTER", "GROUP", "READY", "REASON"]
