"""The operator's metrics as a scraper reads them: recorded through the functions the handlers call, then read
back from the exposition text with prometheus-client's own parser (never from the objects)."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rocketcluster import metrics


def samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.REGISTRY).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(name: str, **labels: str) -> float | None:
    return samples().get((name, tuple(sorted(labels.items()))))


def test_passes_actions_and_durations_are_counted() -> None:
    before = value("rocketcluster_operator_reconcile_duration_seconds_count") or 0
    for result in ("ok", "ok", "waiting", "error"):
        metrics.pass_finished("team-a", "orders", result, 0.2)
    metrics.action_taken("team-a", "orders", "POD_HAS_OLD_REVISION")
    metrics.action_taken("team-a", "orders", "POD_HAS_OLD_REVISION")
    assert value("rocketcluster_operator_reconcile_total", namespace="team-a", cluster="orders", result="ok") == 2
    assert value("rocketcluster_operator_reconcile_total", namespace="team-a", cluster="orders", result="error") == 1
    assert (
        value(
            "rocketcluster_operator_actions_total", namespace="team-a", cluster="orders", reason="POD_HAS_OLD_REVISION"
        )
        == 2
    )
    assert value("rocketcluster_operator_reconcile_duration_seconds_count") == before + 4
    assert value("process_resident_memory_bytes") is not None  # the operator's own memory, for its pod's limit


@pytest.mark.parametrize(
    ("status", "phase", "groups", "ready"),
    [
        ({"phase": "Ready", "groups": 2, "readyGroups": 2}, "Ready", 2, 2),
        ({"phase": "Progressing", "groups": 3, "readyGroups": 2}, "Progressing", 3, 2),
        ({"phase": "Invalid"}, "Invalid", None, None),  # a refused spec: no group counts in its status
        ({}, "Pending", None, None),
    ],
)
def test_the_phase_gauge_has_one_phase_set(
    status: dict[str, object], phase: str, groups: int | None, ready: int | None
) -> None:
    metrics.forget("team-b", "shop")
    metrics.status_written("team-b", "shop", status)
    for candidate in metrics.PHASES:
        expected = 1 if candidate == phase else 0
        assert value("rocketcluster_cluster_phase", namespace="team-b", cluster="shop", phase=candidate) == expected
    assert value("rocketcluster_cluster_groups", namespace="team-b", cluster="shop") == groups
    assert value("rocketcluster_cluster_ready_groups", namespace="team-b", cluster="shop") == ready


def test_a_deleted_cluster_leaves_no_series() -> None:
    metrics.status_written("team-c", "gone", {"phase": "Ready", "groups": 1, "readyGroups": 1})
    metrics.pass_finished("team-c", "gone", "ok", 0.1)
    metrics.action_taken("team-c", "gone", "ScaleOut")
    metrics.status_written("team-c", "kept", {"phase": "Ready", "groups": 1, "readyGroups": 1})
    metrics.forget("team-c", "gone")
    labels = [dict(key[1]) for key in samples()]
    assert not [lab for lab in labels if lab.get("cluster") == "gone"]
    assert [lab for lab in labels if lab.get("cluster") == "kept"]


@pytest.mark.parametrize("raw", ["http", "-1", "65536", "80 80", "1.5"])
def test_a_bad_metrics_port_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match="ROCKETCLUSTER_METRICS_PORT"):
        metrics.metrics_port({"ROCKETCLUSTER_METRICS_PORT": raw})


def test_the_endpoint_serves_the_registry_and_a_port_in_use_is_named() -> None:
    assert metrics.metrics_port({}) == 8081
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    metrics.serve(port)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    assert "rocketcluster_operator_reconcile_duration_seconds" in text
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        with pytest.raises(OSError, match=f"ROCKETCLUSTER_METRICS_PORT={busy.getsockname()[1]}"):
            metrics.serve(busy.getsockname()[1])
