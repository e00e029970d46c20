"""Reporting what a pass could not do: a spec that cannot be built becomes a condition, an Event and a log line,
written only when it changes, so a cluster stuck on one problem does not flood the API server.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from rocketcluster import metrics
from rocketcluster.kube import Kube
from rocketcluster.observe import merge_conditions

__all__ = ["differs", "now_iso", "report_problem"]

log = logging.getLogger("rocketcluster.operator")


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


async def report_problem(
    kube: Kube, body: kopf.Body, status: Mapping[str, Any], condition: str, reason: str, message: str
) -> None:
    meta = body["metadata"]
    generation = int(meta.get("generation", 1))
    phase = "Invalid" if condition == "InvalidSpec" else "Degraded"
    new = {
        "observedGeneration": generation,
        "phase": phase,
        "conditions": merge_conditions(
            status.get("conditions") or [],
            [
                {"type": condition, "status": "True", "reason": reason, "message": message[:4000]},
                {"type": "Ready", "status": "False", "reason": reason, "message": message[:4000]},
            ],
            generation,
            now_iso(),
        ),
    }
    if differs(new, status):
        log.warning("%s/%s: %s: %s", meta["namespace"], meta["name"], reason, message)
        await kube.post_event(body, "Warning", reason, message)
        await kube.patch_status(meta["namespace"], meta["name"], new)
    metrics.status_written(meta["namespace"], meta["name"], new)


def differs(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Whether a merge patch of `new` onto `old` changes anything (None removes a key)."""
    for key, value in new.items():
        if value is None:
            if old.get(key) is not None:
                return True
        elif old.get(key) != value:
            return True
    return False
