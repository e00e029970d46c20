"""spec.security.tls.issuerRef on the node tier, with cert-manager's own controllers issuing the certificate.

cert-manager runs as a host process against the harness's API server, like the other components: e2e/build.sh
cert-manager builds its controllers (e2e/certmanager/main.go wires them from the cert-manager module the Go module
proxy serves) and copies its CRDs from that module into ~/.cache/rocketcluster/cert-manager-<version>-<hash>/.
Without that build the module is skipped with the command to run (a cold build takes many minutes).

A self-signed Issuer makes a CA Certificate; a CA Issuer signs with it. A RocketCluster (1 NameServer, one
group with a slave, TLS only) names the CA Issuer: the operator makes the Certificate `<name>-tls`, cert-manager
issues it, the pods mount its Secret and the cluster becomes Ready (its probes and the slave's replication speak
TLS). A producer/consumer Job that trusts only the CA sends and consumes every message over TLS.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from e2e.operator_harness import CRD_FILE, ready_status, running_operator
from e2e.test_security_node import CLUSTER, COUNT, TOPIC, _run_job

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.node, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[1]
CA_ISSUER = "rocketcluster-ca"


def _versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (REPO / "e2e" / "versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def cert_manager_dir() -> Path:
    """Where e2e/build.sh cert-manager puts its build: keyed by version and by the wiring's sources."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        digest.update((REPO / "e2e" / "certmanager" / name).read_bytes())
    cache = Path(os.environ.get("ROCKETCLUSTER_CACHE", Path.home() / ".cache" / "rocketcluster"))
    return cache / f"cert-manager-{_versions()['CERT_MANAGER_VERSION']}-{digest.hexdigest()[:12]}"


@pytest.fixture(scope="module")
def cert_manager(k8s_node: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = cert_manager_dir()
    binary = home / "bin" / "cert-manager-controller"
    if not (home / ".complete").exists() or not binary.exists():
        pytest.skip(f"cert-manager is not built (cold cache: {home}); run `e2e/build.sh cert-manager` first")
    for crd in sorted((home / "crds").glob("*.yaml")):
        k8s_node.run("apply", "--server-side", "-f", str(crd))
    for crd in ("certificates", "certificaterequests", "issuers", "clusterissuers"):
        k8s_node.wait_established(f"{crd}.cert-manager.io")
    log = tmp_path_factory.mktemp("cert-manager") / "controller.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(binary), "--kubeconfig", str(k8s_node.kubeconfig), "--cluster-resource-namespace", "default"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def ns(k8s_node: Kube, cert_manager: Path) -> Iterator[str]:
    name = f"cert-manager-{uuid.uuid4().hex[:6]}"
    k8s_node.run("apply", "--server-side", "-f", str(CRD_FILE.parent))
    k8s_node.wait_established("rocketclusters.rocketcluster.io")
    k8s_node.run("create", "namespace", name)
    k8s_node.run("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted")
    k8s_node.run(
        "create", "configmap", "-n", name, "secure-roundtrip", f"--from-file={REPO / 'e2e' / 'secure_roundtrip.py'}"
    )
    yield name
    for kind in ("rmqt", "rmq"):
        k8s_node.run("delete", kind, "--all", "-n", name, "--wait=true", "--timeout=90s", check=False, timeout=120)
    k8s_node.run("delete", "namespace", name, "--wait=false", check=False)


def _issuers(ns: str) -> list[dict[str, Any]]:
    """A self-signed Issuer, the CA Certificate it signs, and the CA Issuer that signs with that CA."""
    meta = {"namespace": ns}
    return [
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Issuer",
            "metadata": meta | {"name": "selfsigned"},
            "spec": {"selfSigned": {}},
        },
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": meta | {"name": "root-ca"},
            "spec": {
                "isCA": True,
                "commonName": "rocketcluster-e2e-root",
                "secretName": "root-ca",
                "privateKey": {"algorithm": "ECDSA", "size": 256},
                "issuerRef": {"name": "selfsigned", "kind": "Issuer", "group": "cert-manager.io"},
            },
        },
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Issuer",
            "metadata": meta | {"name": CA_ISSUER},
            "spec": {"ca": {"secretName": "root-ca"}},
        },
    ]


def _condition(kube: Kube, ns: str, kind: str, name: str, type_: str = "Ready") -> bool:
    obj = kube.get("-n", ns, kind, name)
    return any(c["type"] == type_ and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions", []))


def test_an_issued_certificate_serves_tls_clients(
    k8s_node: Kube, ns: str, broker_image: str, cert_manager: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    for obj in _issuers(ns):
        k8s_node.apply(json.dumps(obj), namespace=ns)
    k8s_node.wait_for(
        "the CA Issuer Ready", lambda: _condition(k8s_node, ns, "issuer", CA_ISSUER) or None, timeout=180, interval=2
    )
    with running_operator(k8s_node, [ns], tmp_path_factory.mktemp("op")):
        spec = {
            "image": broker_image,
            "imagePullPolicy": "Never",
            "nameServer": {"replicas": 1},
            "broker": {"groups": 1, "slavesPerGroup": 1},
            "storage": {"type": "ephemeral", "size": "1Gi"},
            "security": {"tls": {"enabled": True, "issuerRef": {"name": CA_ISSUER, "kind": "Issuer"}}},
        }
        body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": CLUSTER}}
        k8s_node.apply(json.dumps(body | {"spec": spec}), namespace=ns)
        k8s_node.wait_for(
            f"cert-manager issued the Certificate {CLUSTER}-tls",
            lambda: _condition(k8s_node, ns, "certificate", f"{CLUSTER}-tls") or None,
            timeout=240,
            interval=2,
        )
        issued = k8s_node.get("-n", ns, "secret", f"{CLUSTER}-tls")["data"]
        ca = base64.b64decode(issued["ca.crt"]).decode()
        root = base64.b64decode(k8s_node.get("-n", ns, "secret", "root-ca")["data"]["tls.crt"]).decode()
        assert ca.strip() == root.strip(), "the cluster's certificate is not signed by the CA Issuer's CA"
        k8s_node.wait_for(
            "the cluster Ready with the issued certificate",
            lambda: ready_status(k8s_node, ns, CLUSTER),
            timeout=900,  # the probes speak TLS from a new process each time: slow on a loaded machine
            interval=3,
        )
        k8s_node.run("create", "configmap", "-n", ns, "cluster-ca", "--from-literal", f"ca.crt={root}")
        topic = {
            "apiVersion": "rocketcluster.io/v1alpha1",
            "kind": "RocketTopic",
            "metadata": {"name": TOPIC},
            "spec": {"clusterRef": CLUSTER, "queues": 4},
        }
        k8s_node.apply(json.dumps(topic), namespace=ns)
        k8s_node.wait_for("the topic Ready", lambda: ready_status(k8s_node, ns, TOPIC, "rmqt"), timeout=120, interval=2)
        result = _run_job(k8s_node, ns, broker_image, "issued", None)  # TLS only, verifying against the CA
        assert result == {"refused": False, "acked": COUNT, "consumed": COUNT}, result
        pods = k8s_node.get("-n", ns, "pods", "-l", f"rocketcluster.io/cluster={CLUSTER}")["items"]
        assert len(pods) == 3 and all(
            any(v.get("secret", {}).get("secretName") == f"{CLUSTER}-tls" for v in p["spec"]["volumes"]) for p in pods
        )
