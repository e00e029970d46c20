"""The operator's Prometheus metrics: its passes (how many, how they ended, how long they took), the actions it
took, and each cluster's phase and groups as its status last said.

One registry of the operator's own (not prometheus-client's global one, which also carries the process
collectors of whatever imported it first), served by `serve()` on ROCKETCLUSTER_METRICS_PORT [8081; 0 turns it
off]. The handlers call `pass_finished`, `action_taken`, `status_written` and `forget`; nothing here talks to
Kubernetes.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, start_http_server

__all__ = [
    "PHASES",
    "REGISTRY",
    "action_taken",
    "forget",
    "metrics_port",
    "pass_finished",
    "serve",
    "status_written",
]

# The phases a RocketCluster's status can show (plan_types.Plan.phase, plus Invalid for a refused spec)
PHASES = ("Pending", "Creating", "Progressing", "Ready", "Degraded", "Paused", "Invalid")

REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)  # the operator's own CPU and memory: RSS is what a pod's limit meets

_passes = Counter(
    "rocketcluster_operator_reconcile",
    "Reconcile passes over a RocketCluster, by how they ended (ok; waiting for something no event ends; error).",
    ["namespace", "cluster", "result"],
    registry=REGISTRY,
)
_pass_seconds = Histogram(
    "rocketcluster_operator_reconcile_duration_seconds",
    "How long one reconcile pass took, admin calls to the brokers included.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
_actions = Counter(
    "rocketcluster_operator_actions",
    "Actions the operator took on a cluster, by reason (POD_HAS_OLD_REVISION, ScaleOut, DrainStarted, ...).",
    ["namespace", "cluster", "reason"],
    registry=REGISTRY,
)
_phase = Gauge(
    "rocketcluster_cluster_phase",
    "1 for a RocketCluster's current phase (as its status says), 0 for the others.",
    ["namespace", "cluster", "phase"],
    registry=REGISTRY,
)
_groups = Gauge(
    "rocketcluster_cluster_groups",
    "Broker groups a RocketCluster asks for.",
    ["namespace", "cluster"],
    registry=REGISTRY,
)
_ready_groups = Gauge(
    "rocketcluster_cluster_ready_groups",
    "Broker groups whose master and slaves are Ready.",
    ["namespace", "cluster"],
    registry=REGISTRY,
)


def metrics_port(environ: Mapping[str, str] = os.environ) -> int:
    """ROCKETCLUSTER_METRICS_PORT as a port number; a value that is not one stops the start, naming it."""
    raw = environ.get("ROCKETCLUSTER_METRICS_PORT", "8081").strip()
    if not raw.isdigit() or int(raw) > 65535:
        raise ValueError(f"ROCKETCLUSTER_METRICS_PORT must be a port number (0 turns metrics off), not {raw!r}")
    return int(raw)


def serve(port: int) -> None:
    """Serve /metrics on every address at `port` (a thread of prometheus-client's); a port in use fails the
    start with the variable named, not a bare OSError."""
    if port == 0:
        return
    try:
        start_http_server(port, registry=REGISTRY)
    except OSError as exc:
        raise OSError(f"ROCKETCLUSTER_METRICS_PORT={port}: cannot serve metrics there: {exc}") from exc


def pass_finished(namespace: str, cluster: str, result: str, seconds: float) -> None:
    _series(_passes, namespace, cluster, result).inc()
    _pass_seconds.observe(seconds)


def action_taken(namespace: str, cluster: str, reason: str) -> None:
    _series(_actions, namespace, cluster, reason).inc()


def status_written(namespace: str, cluster: str, status: Mapping[str, Any]) -> None:
    """The phase and group counts of the status a pass wrote (or found unchanged)."""
    current = str(status.get("phase") or "Pending")
    for phase in PHASES:
        _series(_phase, namespace, cluster, phase).set(1 if phase == current else 0)
    if "groups" in status:
        _series(_groups, namespace, cluster).set(int(status["groups"]))
    if "readyGroups" in status:
        _series(_ready_groups, namespace, cluster).set(int(status["readyGroups"]))


def forget(namespace: str, cluster: str) -> None:
    """A deleted cluster's series go with it: a dashboard should not show it as still there."""
    for metric, values in _seen.pop((namespace, cluster), set()):
        metric.remove(*values)


# (namespace, cluster) -> every (metric, label values) recorded for it, so `forget` knows what to remove
_seen: dict[tuple[str, str], set[tuple[Any, tuple[str, ...]]]] = defaultdict(set)


def _series(metric: Any, namespace: str, cluster: str, *rest: str) -> Any:
    values = (namespace, cluster, *rest)
    _seen[(namespace, cluster)].add((metric, values))
    return metric.labels(*values)
