"""Reporting what a pass could not do: a spec that cannot be built becomes a condition, an Event and a log line,
written only when it changes, so a cluster stuck on one problem does not flood the API server.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any, Final

import kopf

from rocketcluster import metrics
from rocketcluster.kube import Kube
from rocketcluster.observe import merge_conditions
from rocketcluster.plan import Plan

__all__ = ["ANNOUNCED_REASONS", "announce_refusal", "differs", "now_iso", "report_problem"]

log = logging.getLogger("rocketcluster.operator")

# Degraded reasons a plan reports that need a person (a step the operator refuses to take by itself): each new
# one gets a Warning Event and a log line beside the condition.
ANNOUNCED_REASONS: Final = frozenset({"MasterOnLostNode"})


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


async def announce_refusal(kube: Kube, body: kopf.Body, status: Mapping[str, Any], plan: Plan) -> None:
    """A Warning Event and a log line when the plan's Degraded condition names a refusal (ANNOUNCED_REASONS)
    that the status does not show yet with that message: once per new refusal, not once per pass."""
    degraded = plan.condition("Degraded")
    if degraded is None or degraded.status != "True" or degraded.reason not in ANNOUNCED_REASONS:
        return
    before: Mapping[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Degraded"), {})
    if before.get("reason") == degraded.reason and before.get("message") == degraded.message:
        return
    meta = body["metadata"]
    log.warning("%s/%s: %s: %s", meta["namespace"], meta["name"], degraded.reason, degraded.message)
    await kube.post_event(body, "Warning", degraded.reason, degraded.message[:1000])
