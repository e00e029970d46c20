"""The few Kubernetes API calls the operator makes, over aiohttp (kopf's own HTTP stack).

kopf watches and reports; it is not an API client. The official `kubernetes` package would add tens of MiB
to an operator that holds many clusters, so this module speaks the REST API directly: server-side apply
for every child (an unchanged object is not written, so its resourceVersion does not move), plus list,
get, delete, the status patch and Events. Credentials come from kopf's login functions (kubeconfig or the pod's
service account), so the operator logs in the way kopf does.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import kopf

__all__ = ["FIELD_MANAGER", "ApiError", "Kube", "resource_path"]

log = logging.getLogger("rocketcluster.kube")

FIELD_MANAGER = "rocketcluster-operator"

# kind -> plural, for the kinds the operator touches (a fixed set: no discovery round trips)
_PLURALS = {
    "Certificate": "certificates",
    "ClusterKopfPeering": "clusterkopfpeerings",
    "ConfigMap": "configmaps",
    "CustomResourceDefinition": "customresourcedefinitions",
    "Event": "events",
    "KopfPeering": "kopfpeerings",
    "NetworkPolicy": "networkpolicies",
    "Node": "nodes",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "Pod": "pods",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "RocketCluster": "rocketclusters",
    "RocketConsumerGroup": "rocketconsumergroups",
    "RocketTopic": "rockettopics",
    "RocketUser": "rocketusers",
    "Secret": "secrets",
    "Service": "services",
    "ServiceAccount": "serviceaccounts",
    "StatefulSet": "statefulsets",
    "StorageClass": "storageclasses",
}
_CLUSTER_SCOPED = {"ClusterKopfPeering", "CustomResourceDefinition", "Node", "StorageClass"}
# Sent once more when the server dropped the connection under it: server-side apply is idempotent, but
# aiohttp retries only GET, HEAD, OPTIONS, TRACE, PUT and DELETE itself
_RETRIED_HERE = frozenset(("PATCH",))
_INSTANCE = socket.gethostname()  # the pod's name in a pod: which operator replica reported an Event
_TOKEN_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


class ApiError(Exception):
    """A non-2xx answer, with the API server's own message (a Status object's `message`)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


def resource_path(api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
    """The REST path of a kind's collection, or of one object when `name` is given."""
    plural = _PLURALS.get(kind)
    if plural is None:
        raise ValueError(f"the operator does not handle kind {kind!r}")
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespace and kind not in _CLUSTER_SCOPED:
        base += f"/namespaces/{quote(namespace, safe='')}"
    path = f"{base}/{plural}"
    return f"{path}/{quote(name, safe='')}" if name else path


class Kube:
    """One aiohttp session against the API server. Create it inside the operator's event loop."""

    def __init__(self, info: kopf.ConnectionInfo) -> None:
        self._info = info
        self._session: aiohttp.ClientSession | None = None
        self._token_read_at = time.monotonic()

    @classmethod
    def login(cls, settings: kopf.OperatorSettings) -> Kube:
        """In a pod, its service account; elsewhere, the kubeconfig (KUBECONFIG or ~/.kube/config)."""
        info = kopf.login_with_service_account(settings=settings) or kopf.login_with_kubeconfig(settings=settings)
        if info is None:
            raise kopf.PermanentError("no Kubernetes credentials: neither a service account nor a kubeconfig")
        return cls(info)

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # kopf's own SSL context: kubeconfig CA/client-cert data or the service account's CA
            connector = aiohttp.TCPConnector(ssl=self._info.as_ssl_context(), limit=20)
            self._session = aiohttp.ClientSession(
                base_url=self._info.server.rstrip("/"), connector=connector, timeout=aiohttp.ClientTimeout(total=30)
            )
        return self._session

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        self._refresh_token()
        headers = {"Accept": "application/json", **self._info.as_http_headers()}
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _refresh_token(self) -> None:
        # A projected service-account token is rotated by the kubelet: read the file again each minute
        if not self._info.token or time.monotonic() - self._token_read_at < 60 or not _TOKEN_FILE.exists():
            return
        token = _TOKEN_FILE.read_text().strip()
        if token:
            self._info = dataclasses.replace(self._info, token=token)
        self._token_read_at = time.monotonic()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Any:
        """The decoded JSON answer. A non-2xx answer raises ApiError; a connection the API server dropped or
        refused raises ConnectionError (an OSError, which every caller treats as passing), after one retry
        of an idempotent request (aiohttp's own, or `_RETRIED_HERE`)."""
        url = f"{path}?{urlencode(params)}" if params else path
        data = json.dumps(body, separators=(",", ":")) if body is not None else None
        headers = self._headers(content_type if data is not None else None)
        for attempt in (1, 2):
            try:
                async with self._session_now().request(method, url, data=data, headers=headers) as resp:
                    text = await resp.text()
                    status_code, reason = resp.status, resp.reason or ""
                break
            except aiohttp.ServerDisconnectedError as exc:
                if attempt == 1 and method in _RETRIED_HERE:
                    continue
                raise ConnectionError(f"{method} {path}: the API server closed the connection") from exc
            except aiohttp.ClientConnectionError as exc:  # aiohttp's own, not all of them OSErrors
                raise ConnectionError(f"{method} {path}: {exc or type(exc).__name__}") from exc
        if status_code >= 400:
            try:
                status = json.loads(text)
                message, reason = status.get("message", text), status.get("reason", reason)
            except ValueError:
                message = text[:500]
            raise ApiError(status_code, reason, message)
        return json.loads(text) if text else None

    async def watch(self, path: str, params: Mapping[str, str], read_timeout: float) -> AsyncIterator[dict[str, Any]]:
        """The events of one watch request ({"type": ..., "object": ...}), until the server ends it. An
        answer other than 200 raises ApiError (410 Gone: the resourceVersion is too old, list again)."""
        url = f"{path}?{urlencode(params)}"
        timeout = aiohttp.ClientTimeout(total=None, sock_read=read_timeout)
        try:
            async with self._session_now().get(url, headers=self._headers(), timeout=timeout) as resp:
                if resp.status >= 400:
                    text = await resp.text()
                    raise ApiError(resp.status, resp.reason or "", text[:500])
                pending = b""
                # lines by hand: aiohttp's readline refuses lines over 64 KiB, and an object can be larger
                async for chunk in resp.content.iter_any():
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if line.strip():
                            event: dict[str, Any] = json.loads(line)
                            yield event
        except aiohttp.ClientError as exc:  # a dropped watch is routine: the caller watches again
            raise ConnectionError(f"watch {path}: {exc or type(exc).__name__}") from exc
        except TimeoutError as exc:
            raise ConnectionError(f"watch {path}: nothing for {read_timeout:.0f} s") from exc

    async def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Server-side apply, owning every field the operator renders (force: the operator is the owner)."""
        meta = obj["metadata"]
        path = resource_path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        params = {"fieldManager": FIELD_MANAGER, "force": "true"}
        result: dict[str, Any] = await self.request(
            "PATCH", path, body=obj, content_type="application/apply-patch+yaml", params=params
        )
        return result

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = await self.request("GET", resource_path(api_version, kind, namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    async def list(
        self, api_version: str, kind: str, namespace: str | None, selector: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        params = {"labelSelector": ",".join(f"{k}={v}" for k, v in sorted(selector.items()))}
        result = await self.request("GET", resource_path(api_version, kind, namespace), params=params)
        items: list[dict[str, Any]] = result.get("items", [])
        return items

    async def delete(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        orphan: bool = False,
        grace_period_seconds: int | None = None,
    ) -> bool:
        """Delete one object (background propagation); False when it was already gone.

        With `uid`, only that incarnation: a pod the StatefulSet already recreated is left alone. With
        `orphan`, what the object owns stays (a StatefulSet's pods keep running, without an owner). With
        `grace_period_seconds` 0, a pod goes at once, without its kubelet's confirmation (a force delete).
        """
        propagation = "Orphan" if orphan else "Background"
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        try:
            await self.request("DELETE", resource_path(api_version, kind, namespace, name), body=body)
        except ApiError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    async def merge_patch(
        self, api_version: str, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A JSON merge patch of one object (fields the operator does not own by server-side apply)."""
        path = resource_path(api_version, kind, namespace, name)
        result: dict[str, Any] = await self.request(
            "PATCH", path, body=patch, content_type="application/merge-patch+json"
        )
        return result

    async def patch_status(
        self, namespace: str, name: str, status: Mapping[str, Any], kind: str = "RocketCluster"
    ) -> dict[str, Any] | None:
        """Merge-patch the status (the status subresource) of a RocketCluster, or of another of our kinds; None
        when the object is gone: a user may delete it while a pass runs, and a gone object has no status to keep.
        """
        path = resource_path("rocketcluster.io/v1alpha1", kind, namespace, name) + "/status"
        try:
            result: dict[str, Any] = await self.request(
                "PATCH", path, body={"status": status}, content_type="application/merge-patch+json"
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    async def post_event(self, about: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """An Event on `about` (a RocketCluster) for `kubectl describe`. Best effort: a lost Event is logged,
        never fails the pass that reported it. (kopf.event would need kopf's handler context, which the
        operator's own resync and pod-event passes do not run in.)"""
        meta = about["metadata"]
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": about["apiVersion"],
                "kind": about["kind"],
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": FIELD_MANAGER},
            "reportingComponent": FIELD_MANAGER,
            "reportingInstance": _INSTANCE,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.request("POST", resource_path("v1", "Event", meta["namespace"]), body=event)
        except (ApiError, OSError, TimeoutError) as exc:
            log.warning("%s/%s: Event %s not posted: %s", meta["namespace"], meta["name"], reason, exc)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
