"""Operator benchmarks on the local Kubernetes harness: `python -m bench.operator many|ready`.

many  (control-plane tier, no pods need to run): one operator process holds N small RocketClusters. Then
      edits one cluster at a time (its image) and times how long until its broker StatefulSet carries the
      change, and reads the operator's RSS from /proc. Targets: edit reflected <= 5 s, RSS <= 150 MiB
      with 50 clusters.
ready (node tier, the broker image loaded): times `kubectl apply` of 2 groups x (master + slave) to
      Ready=True. Target: <= 60 s warm.

The harness tier is started if it is not running (`e2e/cluster.sh up`), and left running. The peer for the
edit latency is the API server itself: an edit of an unmanaged ConfigMap, timed by the same polling, is the
floor the operator's number should be read against.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from e2e.operator_harness import CRD_FILE, OperatorProcess

REPO = Path(__file__).resolve().parent.parent

CACHE = Path(os.environ.get("ROCKETCLUSTER_CACHE", Path.home() / ".cache" / "rocketcluster"))
KUBECONFIG = REPO / ".data" / "k8s" / "kubeconfig"


def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> str:
    version = next(
        line.split("=", 1)[1]
        for line in (REPO / "e2e" / "versions.env").read_text().splitlines()
        if line.startswith("K8S_VERSION=")
    )
    binary = CACHE / f"kubernetes-{version}" / "bin" / "kubectl"
    p = subprocess.run(
        [str(binary), "--kubeconfig", str(KUBECONFIG), *args], input=stdin, capture_output=True, text=True, timeout=120
    )
    if check and p.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


def ensure_tier(tier: str) -> None:
    running = subprocess.run(["bash", "e2e/cluster.sh", "tier"], capture_output=True, text=True, cwd=REPO).stdout
    if running.strip() not in (tier, "node"):
        subprocess.run(["bash", "e2e/cluster.sh", "up", tier], check=True, cwd=REPO)
    subprocess.run(["bash", "e2e/cluster.sh", "kubeconfig"], check=True, cwd=REPO, capture_output=True)
    kubectl("apply", "--server-side", "-f", str(CRD_FILE))
    kubectl("wait", "--for=condition=Established", "crd/rocketclusters.rocketcluster.io", "--timeout=60s")


def cluster(name: str, image: str, **spec: Any) -> str:
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": name}}
    body["spec"] = {"image": image, **spec}
    return json.dumps(body)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def sts_image(ns: str, name: str) -> str:
    out = kubectl("get", "-n", ns, "sts", name, "-o", "jsonpath={.spec.template.spec.containers[0].image}", check=False)
    return out.strip()


def wait_until(predicate: Any, timeout: float) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise TimeoutError
        time.sleep(0.05)
    return time.monotonic() - start


def bench_many(count: int, edits: int) -> dict[str, Any]:
    ensure_tier("control-plane")
    ns = f"bench-op-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", ns)
    log = Path(tempfile.mkdtemp()) / "operator.log"
    op = OperatorProcess(KUBECONFIG, [ns], log, resync_seconds=30)
    op.start()
    assert op.proc is not None
    try:
        # No pod may run (none is needed here): on the node tier they would start 150 brokers on 2 cores
        nowhere = {"nodeSelector": {"rocketcluster.io/bench": "no-such-node"}}
        small = {"nameServer": {"replicas": 1}, "broker": {"groups": 1, "slavesPerGroup": 1}, "template": nowhere}
        manifests = "\n---\n".join(
            cluster(f"c{i:02d}", "rocketcluster.local/broker:0.1.0", **small) for i in range(count)
        )
        t0 = time.monotonic()
        kubectl("apply", "-n", ns, "-f", "-", stdin=manifests)
        wait_until(lambda: len(kubectl("get", "-n", ns, "sts", "-o", "name").split()) >= 2 * count, 600)
        created_s = time.monotonic() - t0
        time.sleep(10)  # every cluster's first passes settle
        rss_settled = rss_mib(op.proc.pid)
        latencies = []
        for k in range(edits):
            name = f"c{(k * 7) % count:02d}"
            image = f"rocketcluster.local/broker:edit-{k}"
            kubectl("patch", "-n", ns, "rmq", name, "--type=merge", "-p", json.dumps({"spec": {"image": image}}))
            latencies.append(wait_until(lambda n=name, i=image: sts_image(ns, f"{n}-broker-0") == i, 60))
        # the floor: an edit the operator has no part in (an unmanaged ConfigMap), seen by the same polling
        kubectl("create", "configmap", "-n", ns, "floor", "--from-literal=k=0")
        floors = []
        for k in range(edits):
            kubectl(
                "patch", "-n", ns, "configmap", "floor", "--type=merge", "-p", json.dumps({"data": {"k": str(k + 1)}})
            )
            seen = lambda v=str(k + 1): kubectl("get", "-n", ns, "cm", "floor", "-o", "jsonpath={.data.k}") == v  # noqa: E731
            floors.append(wait_until(seen, 60))
        rss_end = rss_mib(op.proc.pid)
    finally:
        text = op.stop()
        kubectl("delete", "namespace", ns, "--wait=false", check=False)
    return {
        "clusters": count,
        "all StatefulSets created (s)": round(created_s, 1),
        "edit -> StatefulSet, median (s)": round(statistics.median(latencies), 2),
        "edit -> StatefulSet, max (s)": round(max(latencies), 2),
        "unmanaged edit seen (floor), median (s)": round(statistics.median(floors), 2),
        "operator RSS settled (MiB)": round(rss_settled, 1),
        "operator RSS after edits (MiB)": round(rss_end, 1),
        "tracebacks in the operator log": text.count("Traceback"),
    }


def bench_ready(groups: int, slaves: int) -> dict[str, Any]:
    ensure_tier("node")
    ns = f"bench-ready-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", ns)
    log = Path(tempfile.mkdtemp()) / "operator.log"
    op = OperatorProcess(KUBECONFIG, [ns], log)
    op.start()
    try:
        spec = {
            "imagePullPolicy": "Never",
            "nameServer": {"replicas": 1},
            "broker": {"groups": groups, "slavesPerGroup": slaves},
            "storage": {"type": "persistentClaim", "size": "256Mi"},
        }
        t0 = time.monotonic()
        kubectl("apply", "-n", ns, "-f", "-", stdin=cluster("ready", "rocketcluster.local/broker:0.1.0", **spec))

        def ready() -> bool:
            obj = json.loads(kubectl("get", "-n", ns, "rmq", "ready", "-o", "json"))
            conds = (obj.get("status") or {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

        wait_until(ready, 600)
        seconds = time.monotonic() - t0
    finally:
        op.stop()
        kubectl("delete", "namespace", ns, "--wait=false", check=False)
    return {"groups": groups, "slaves per group": slaves, "kubectl apply -> Ready=True (s)": round(seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.operator", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    many = sub.add_parser("many", help="N clusters on one operator: edit latency and RSS (control-plane tier)")
    many.add_argument("--clusters", type=int, default=50)
    many.add_argument("--edits", type=int, default=10)
    ready = sub.add_parser("ready", help="apply -> Ready=True of G groups x (1 + S) brokers (node tier)")
    ready.add_argument("--groups", type=int, default=2)
    ready.add_argument("--slaves", type=int, default=1)
    args = parser.parse_args()
    result = bench_many(args.clusters, args.edits) if args.what == "many" else bench_ready(args.groups, args.slaves)
    print(f"# python -m bench.operator {args.what}  ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    for key, value in result.items():
        print(f"| {key} | {value} |")


if __name__ == "__main__":
    main()
