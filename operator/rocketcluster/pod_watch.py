"""The pods of every RocketCluster, watched with a server-side label selector.

kopf's event handlers filter labels in the operator, after the API server has streamed every pod of the
watched namespaces: on a shared cluster, thousands of pods the operator never needs. This watch asks the API
server only for pods that carry the operator's `app.kubernetes.io/managed-by` value and a cluster label, in
each watched namespace (or cluster-wide when the operator watches all namespaces or a pattern), and calls
back with each pod's namespace and labels. A watch that ends or breaks is started again from the last
resourceVersion it saw; one the server no longer keeps (410 Gone) lists the pods again first.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from rocketcluster import names
from rocketcluster.kube import ApiError, Kube

__all__ = ["SELECTOR", "watch_paths", "watch_pods"]

log = logging.getLogger("rocketcluster.operator")

SELECTOR: Final = f"{names.LABEL_MANAGED_BY}={names.MANAGED_BY},{names.LABEL_CLUSTER}"  # a bare key: it exists
WATCH_SECONDS: Final = 290  # the server ends each watch request after this; it is renewed at once
_READ_TIMEOUT: Final = WATCH_SECONDS + 30.0
_BACKOFF_MAX: Final = 30.0

OnPod = Callable[[str, Mapping[str, str]], None]


def watch_paths(namespaces: list[str] | None) -> list[tuple[str, list[str] | None]]:
    """(REST path, namespace patterns to keep or None for all) per watch: one per plain namespace, or one
    cluster-wide watch when there is no list or a pattern in it (kopf's `team-*`, `!kube-system`)."""
    if not namespaces:
        return [("/api/v1/pods", None)]
    if any(any(c in ns for c in "*?[!") for ns in namespaces):
        return [("/api/v1/pods", namespaces)]
    return [(f"/api/v1/namespaces/{ns}/pods", None) for ns in namespaces]


def _kept(namespace: str, patterns: list[str] | None) -> bool:
    if patterns is None:
        return True
    included = [p for p in patterns if not p.startswith("!")]
    excluded = [p[1:] for p in patterns if p.startswith("!")]
    if any(fnmatch.fnmatchcase(namespace, p) for p in excluded):
        return False
    return not included or any(fnmatch.fnmatchcase(namespace, p) for p in included)


def _report(pod: Mapping[str, Any], patterns: list[str] | None, on_pod: OnPod) -> None:
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    if _kept(namespace, patterns):
        on_pod(namespace, meta.get("labels") or {})


async def watch_pods(kube: Kube, path: str, patterns: list[str] | None, on_pod: OnPod) -> None:
    """Forever: list, then watch, calling `on_pod` for every pod listed and every change seen."""
    version: str | None = None
    delay = 1.0
    while True:
        try:
            if version is None:
                listed = await kube.request("GET", path, params={"labelSelector": SELECTOR})
                version = str(listed["metadata"]["resourceVersion"])
                for pod in listed.get("items") or []:
                    _report(pod, patterns, on_pod)
            params = {
                "watch": "true",
                "labelSelector": SELECTOR,
                "resourceVersion": version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": str(WATCH_SECONDS),
            }
            async for event in kube.watch(path, params, _READ_TIMEOUT):
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise ApiError(int(obj.get("code") or 500), str(obj.get("reason") or ""), str(obj.get("message")))
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if event.get("type") != "BOOKMARK":
                    _report(obj, patterns, on_pod)
            delay = 1.0
        except ApiError as exc:
            if exc.status == 410:  # compacted away: list again, which also reports what was missed
                version = None
                continue
            log.warning("pod watch %s: %s; again in %.0f s", path, exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX)
        except (OSError, ValueError, KeyError) as exc:  # a dropped connection or a garbled line: watch again
            log.info("pod watch %s: %s; again in %.0f s", path, exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX)
