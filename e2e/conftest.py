"""Fixtures for end-to-end tests on a real local Kubernetes (the harness in e2e/cluster.sh).

- ``k8s_control_plane``: etcd + kube-apiserver + kube-controller-manager.
- ``k8s_node``: the control plane plus scheduler, containerd, kubelet, kube-proxy, CNI, CoreDNS and
  the local-path volume provisioner; the node is Ready and CoreDNS answers.

Each tier is started at most once per test run, and stopped at the end of the run if it was not running
when the run began (set ``E2E_KEEP_CLUSTER=1`` to leave it up). `make e2e` runs the files in two pytest-xdist processes
(whole files each): either process starts the node tier under a host lock, the run's controller stops it once
both are done, and the three files that load the node most (Spark, the lifecycle under load, data safety) go to
one process together, so they never run at the same time.

Both give a :class:`Kube` whose kubeconfig is ``.data/k8s/kubeconfig``. ``E2E_KUBECONFIG=<file>`` runs both
tiers' tests on that cluster instead (a kind cluster of e2e/kind/, or any other), and the host harness is
neither started nor stopped. A test is skipped, with the reason, only when this machine cannot run the tier at
all (not root, no cgroup controllers, ...); a tier that fails to start fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from e2e.host_work import build_image, host_lock, image_on_node

REPO = Path(__file__).resolve().parent.parent
CLUSTER = REPO / "e2e" / "cluster.sh"
KUBECONFIG = REPO / ".data" / "k8s" / "kubeconfig"
CACHE = Path(os.environ.get("ROCKETCLUSTER_CACHE", Path.home() / ".cache" / "rocketcluster"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "node: needs the node tier of the Kubernetes harness (pods run)")
    config.addinivalue_line("markers", "kind: needs a multi-node kind cluster (e2e/kind/, `make e2e-kind`)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The kind tier is opt-in: its tests run only when selected with ``-m kind`` or ``E2E_KIND=1``;
    any other run reports them as skipped, with how to run them."""
    if os.environ.get("E2E_KIND") == "1" or "kind" in (config.getoption("markexpr", "") or "").replace("not kind", ""):
        return
    skip = pytest.mark.skip(reason="kind tier not selected: run `make e2e-kind` (or E2E_KIND=1)")
    for item in items:
        if "kind" in item.keywords:
            item.add_marker(skip)


# Files that run one after another in one pytest-xdist process: the three that load the node's two cores most,
# and the two that take fixed NodePorts beside automatically allocated ones
_GROUPS = {
    "test_spark_k8s.py": "heavy",
    "test_lifecycle.py": "heavy",
    "test_data_safety.py": "heavy",
    "test_external_access_node.py": "node-ports",
    "test_grpc_node.py": "node-ports",
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's per-file scheduling, with the files of a group as one unit (one process runs them in turn).
    Its own `--dist loadgroup` does not work with pytest 9, whose items no longer keep their ids in `_nodeid`."""
    from xdist.scheduler import LoadScopeScheduling

    class FileGroups(LoadScopeScheduling):  # type: ignore[misc]  # xdist has no type hints
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return _GROUPS.get(Path(file).name, file)

    return FileGroups(config, log)


_TIER_AT_START = pytest.StashKey[str]()


def pytest_sessionstart(session: pytest.Session) -> None:
    # the process that runs the session: the only one under plain pytest, the controller under pytest-xdist
    if not hasattr(session.config, "workerinput") and not os.environ.get("E2E_KUBECONFIG"):
        session.config.stash[_TIER_AT_START] = _tier_running()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A harness that was not running when the run began is stopped once every test is done (also after a failed
    start, whose processes `down` cleans up)."""
    if session.config.stash.get(_TIER_AT_START, None) == "none" and os.environ.get("E2E_KEEP_CLUSTER") != "1":
        subprocess.run(["bash", str(CLUSTER), "down"], capture_output=True, text=True, timeout=300)


def _versions() -> dict[str, str]:
    out = {}
    for line in (REPO / "e2e" / "versions.env").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def _kubectl_path() -> Path:
    return CACHE / f"kubernetes-{_versions()['K8S_VERSION']}" / "bin" / "kubectl"


@dataclass
class Kube:
    """kubectl against the harness cluster, with small helpers for tests."""

    kubeconfig: Path
    kubectl_bin: Path
    tier: str
    started_in: float = field(default=0.0)

    def run(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60) -> str:
        if self.kubeconfig == KUBECONFIG and not self.kubeconfig.exists():  # other suites may wipe .data/
            subprocess.run(["bash", str(CLUSTER), "kubeconfig"], capture_output=True, check=True)
        cmd = [str(self.kubectl_bin), "--kubeconfig", str(self.kubeconfig), *args]
        p = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
        return p.stdout

    def apply(self, manifest: str, namespace: str | None = None) -> None:
        ns = ["-n", namespace] if namespace else []
        self.run("apply", *ns, "-f", "-", input=manifest)

    def get(self, *args: str) -> dict:
        return json.loads(self.run("get", *args, "-o", "json"))

    def wait_for(self, what: str, predicate, timeout: float = 60, interval: float = 0.5):
        """Poll ``predicate()`` until it returns something truthy; fail with ``what`` on timeout."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                last = predicate()
            except AssertionError as e:  # kubectl errors while the object is not there yet
                last = e
            if last and not isinstance(last, Exception):
                return last
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")

    def wait_established(self, *crds: str, timeout: float = 60) -> None:
        """Wait until each CRD (``<plural>.<group>``) is Established. ``kubectl wait`` alone fails when it
        looks before the API server has written the CRD's first conditions, so the wait is a poll."""
        for crd in crds:
            self.wait_for(
                f"crd/{crd} Established",
                lambda crd=crd: any(
                    c.get("type") == "Established" and c.get("status") == "True"
                    for c in (self.get(f"crd/{crd}").get("status") or {}).get("conditions") or []
                ),
                timeout=timeout,
            )

    def host_address(self) -> str:
        """This machine's source address toward the cluster's nodes (and, routed through them, its pods)."""
        node_ip = next(
            a["address"]
            for n in self.get("nodes")["items"]
            for a in n["status"]["addresses"]
            if a["type"] == "InternalIP"
        )
        route = subprocess.run(["ip", "-o", "route", "get", node_ip], capture_output=True, text=True, check=True)
        words = route.stdout.split()
        return words[words.index("src") + 1]

    def policy_admitting_this_host(self) -> dict[str, Any]:
        """A RocketCluster ``spec.networkPolicy`` for a test whose operator and clients run on this machine,
        outside the cluster: on a network that enforces NetworkPolicies (kind here), the generated policies
        admit this machine's address beside their defaults. Empty on the host-process harness, whose
        bridge enforces none, so that the tests there keep the operator's defaults."""
        if self.tier in ("node", "control-plane"):
            return {}
        host = {"ipBlock": {"cidr": f"{self.host_address()}/32"}}
        return {
            "networkPolicy": {
                "allowFrom": [{"podSelector": {}}, host],
                "metricsFrom": [{"namespaceSelector": {}}, host],
            }
        }


def _cannot_run(tier: str) -> str | None:
    """Why this machine cannot run the tier at all, or None."""
    if os.uname().sysname != "Linux":
        return "the Kubernetes harness needs Linux"
    if os.geteuid() != 0:
        return "the Kubernetes harness needs root (dummy interface, mounts, cgroups)"
    if not shutil.which("ip"):
        return "iproute2 ('ip') is missing"
    if not _kubectl_path().exists() and not (shutil.which("go") or Path("/usr/local/go/bin/go").exists()):
        return "no cached Kubernetes binaries and no Go toolchain to build them"
    if tier == "node":
        cg = Path("/sys/fs/cgroup")
        v2 = (cg / "cgroup.controllers").exists()
        if not v2:
            missing = [c for c in ("cpu", "cpuacct", "cpuset", "memory", "pids") if not (cg / c).exists()]
            if missing:
                return f"cgroup v1 controllers missing: {', '.join(missing)} (the kubelet needs them)"
        if not Path("/proc/sys/net/ipv4/ip_forward").exists():
            return "no /proc/sys/net (network namespace support needed for pods)"
    return None


def _tier_running() -> str:
    p = subprocess.run(["bash", str(CLUSTER), "tier"], capture_output=True, text=True)
    return p.stdout.strip() or "none"


class _Harness:
    """Starts tiers on demand (control-plane < node); `pytest_sessionfinish` stops them."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    def ensure(self, tier: str) -> Kube:
        given = os.environ.get("E2E_KUBECONFIG")
        if given:
            return _given_cluster(Path(given))
        reason = _cannot_run(tier)
        if reason:
            pytest.skip(f"Kubernetes {tier} tier cannot run on this machine: {reason}")
        if os.environ.get("PYTEST_XDIST_WORKER"):
            tier = "node"  # the other process may need it; the node tier holds the control plane
        with host_lock("harness"):
            running = _tier_running()
            if running == "node" or running == tier:
                if not KUBECONFIG.exists():
                    subprocess.run(["bash", str(CLUSTER), "kubeconfig"], capture_output=True, check=True)
                return Kube(KUBECONFIG, _kubectl_path(), running)
            t0 = time.monotonic()
            p = subprocess.run(["bash", str(CLUSTER), "up", tier], capture_output=True, text=True, timeout=3600)
            if p.returncode != 0:
                raise RuntimeError(f"`e2e/cluster.sh up {tier}` failed:\n{p.stderr[-4000:]}")
            self.timings[tier] = time.monotonic() - t0
            return Kube(KUBECONFIG, _kubectl_path(), tier, self.timings[tier])


def _given_cluster(kubeconfig: Path) -> Kube:
    """The cluster ``E2E_KUBECONFIG`` names. Its tier is ``kind`` when its nodes are kind's (their providerID
    says so), else ``external``."""
    if not kubeconfig.is_file():
        raise RuntimeError(f"E2E_KUBECONFIG={kubeconfig}: no such file")
    kube = Kube(kubeconfig, _kubectl_path(), "external")
    ids = kube.run("get", "nodes", "-o", "jsonpath={.items[*].spec.providerID}").split()
    if ids and all(i.startswith("kind://") for i in ids):
        kube.tier = "kind"
    return kube


@pytest.fixture(scope="session")
def _harness() -> _Harness:
    return _Harness()


@pytest.fixture(scope="session")
def k8s_control_plane(_harness: _Harness) -> Kube:
    return _harness.ensure("control-plane")


@pytest.fixture(scope="session")
def k8s_node(_harness: _Harness) -> Kube:
    return _harness.ensure("node")


KIND_CLUSTER = REPO / "e2e" / "kind" / "cluster.sh"


@pytest.fixture(scope="session")
def k8s_kind() -> Iterator[Kube]:
    """A multi-node kind cluster: the one ``E2E_KIND_KUBECONFIG`` names, or else 1 control plane + 2 workers
    started by ``e2e/kind/cluster.sh up 3`` (and deleted at the end unless ``E2E_KEEP_CLUSTER=1``)."""
    given = os.environ.get("E2E_KIND_KUBECONFIG")
    if given:
        yield Kube(Path(given), _kubectl_path(), "kind")
        return
    reason = _cannot_run("control-plane")
    if reason:
        pytest.skip(f"kind cannot run on this machine: {reason}")
    t0 = time.monotonic()
    p = subprocess.run(["bash", str(KIND_CLUSTER), "up", "3"], capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"`e2e/kind/cluster.sh up 3` failed:\n{p.stderr[-4000:]}")
    path = (
        Path(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else Path("/var/lib/rocketcluster/kind/kubeconfig")
    )
    try:
        yield Kube(path, _kubectl_path(), "kind", time.monotonic() - t0)
    finally:
        if os.environ.get("E2E_KEEP_CLUSTER") != "1":
            subprocess.run(["bash", str(KIND_CLUSTER), "down"], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="session")
def kind_broker_image(k8s_kind: Kube) -> str:
    """The broker image of this tree, built by images/build.sh and put on every kind node with
    ``kind load docker-image``."""
    return _image_on_kind("rocketcluster.local/broker:0.1.0")


def _image_on_kind(image: str) -> str:
    """Builds the image of this tree (unless ``E2E_REUSE_IMAGES=1``) and puts it on every kind node."""
    if os.environ.get("E2E_REUSE_IMAGES") != "1":
        build_image("broker")
    p = subprocess.run(["bash", str(KIND_CLUSTER), "load", image], capture_output=True, text=True)
    assert p.returncode == 0, f"kind load of {image} failed:\n{p.stderr[-4000:]}"
    return image


@pytest.fixture(scope="session")
def broker_image(k8s_node: Kube) -> str:
    """The broker image of the code in this tree: built with images/build.sh (docker layer and wheel
    caches keep a rebuild near 30 s) and imported into the node's containerd. ``E2E_REUSE_IMAGES=1``
    skips the rebuild when the node already has the image."""
    image = "rocketcluster.local/broker:0.1.0"
    if k8s_node.tier == "kind":
        return _image_on_kind(image)
    if k8s_node.tier == "external":  # no way to put it there: the cluster must pull it from where it is pushed
        return os.environ.get("E2E_BROKER_IMAGE", image)
    ctr = ["ctr", "--address", "/run/rocketcluster-k8s/containerd/containerd.sock", "-n", "k8s.io"]
    have = subprocess.run([*ctr, "images", "ls", "-q"], capture_output=True, text=True).stdout.split()
    if os.environ.get("E2E_REUSE_IMAGES") == "1" and image in have:
        return image
    return image_on_node("broker", image)
