"""The operator as a real process against the harness's API server, for the e2e tests.

`OperatorProcess` runs `rocketcluster-operator` (the console script users run) with the harness kubeconfig,
watching the namespaces a test names, and keeps its log. `stop()` fails the test when the log holds a
traceback: a crash or an unhandled error in a handler is a defect even when the objects look right.
`ready_status` is what the tests wait for: a resource's status once it says Ready=True for the current generation.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OPERATOR = REPO / ".venv" / "bin" / "rocketcluster-operator"
CRD_FILE = REPO / "crds" / "rocketclusters.rocketcluster.io.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OperatorProcess:
    def __init__(
        self,
        kubeconfig: Path,
        namespaces: list[str],
        log: Path,
        resync_seconds: float = 3,
        peering: str | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.peering = peering  # kopf's --peering=<name> (one of several replicas), else --standalone
        self.namespaces = namespaces
        self.log = log
        self.liveness_port = free_port()
        self.metrics_port = free_port()
        self.resync_seconds = resync_seconds
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> None:
        env = dict(
            os.environ,
            KUBECONFIG=str(self.kubeconfig),
            ROCKETCLUSTER_RESYNC_SECONDS=str(self.resync_seconds),
            ROCKETCLUSTER_METRICS_PORT=str(self.metrics_port),
        )
        mode = f"--peering={self.peering}" if self.peering else "--standalone"
        args = [str(OPERATOR), mode, f"--liveness=http://127.0.0.1:{self.liveness_port}/healthz"]
        for ns in self.namespaces:
            args += ["--namespace", ns]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        deadline = time.monotonic() + timeout
        while not self.alive():
            assert self.proc.poll() is None, f"the operator exited:\n{self.tail()}"
            assert time.monotonic() < deadline, f"the operator's liveness never answered:\n{self.tail()}"
            time.sleep(0.3)

    def alive(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.liveness_port}/healthz", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def scrape(self) -> str:
        """The operator's /metrics, as Prometheus reads it."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())

    def tail(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"

    def finish(self, kube: Any) -> str:
        """Delete every RocketCluster the operator watches (a deletion never waits on the operator, but its log
        should show it taking them), then stop it; returns the log."""
        for ns in self.namespaces:
            kube.run("delete", "rmq", "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False, timeout=150)
        return self.stop()

    def kill(self) -> None:
        """kill -9: no goodbye to the API server (its peering keep-alive stays until it expires)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> str:
        """Stop gracefully (SIGTERM, as the kubelet does); returns the log."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@contextmanager
def running_operator(kube: Any, namespaces: list[str], log_dir: Path) -> Iterator[OperatorProcess]:
    """The operator watching `namespaces` for the block; then their clusters are deleted while it still runs,
    and its log must hold no traceback."""
    proc = OperatorProcess(kube.kubeconfig, namespaces, log_dir / "operator.log")
    proc.start()
    try:
        yield proc
    finally:
        text = proc.finish(kube)
    assert "Traceback" not in text, text[-6000:]


@contextmanager
def crds_and_namespace(kube: Any, prefix: str) -> Iterator[str]:
    """Every CRD of the chart applied and Established, then a new namespace `<prefix>-<6 hex>`, deleted after."""
    name = f"{prefix}-{os.urandom(3).hex()}"
    # --force-conflicts: the chart test may have installed the CRDs with helm (same files, another manager)
    kube.run("apply", "--server-side", "--force-conflicts", "-f", str(CRD_FILE.parent))
    kube.wait_established("rocketclusters.rocketcluster.io")
    kube.run("create", "namespace", name)
    try:
        yield name
    finally:
        kube.run("delete", "namespace", name, "--wait=false", check=False)


def ready_status(kube: Any, ns: str, name: str, kind: str = "rmq", groups: int | None = None) -> dict[str, Any] | None:
    """The status of `kind`/`name` once it describes the object's current generation and says Ready=True (with
    `groups` ready broker groups, when given); None until then. `kube.wait_for` returns it."""
    obj = kube.get("-n", ns, kind, name)
    status: dict[str, Any] = obj.get("status") or {}
    if status.get("observedGeneration") != obj["metadata"]["generation"]:
        return None
    if groups is not None and status.get("readyGroups") != groups:
        return None
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", []))
    return status if ready else None
