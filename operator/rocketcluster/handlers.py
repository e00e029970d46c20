"""The kopf handlers: observe, plan, act, report. Thin glue over render, observe and plan (all pure).

One idempotent `reconcile` serves create, update and resume, and a resync loop catches drift (a child edited
or deleted by hand, a pod that went down, a drain that finished). Waiting is never a sleep: a plan that has to
wait raises `kopf.TemporaryError(delay=...)`, which frees the worker and lets a deletion preempt it.

No finalizer: nothing the operator does needs the resource to outlive its deletion (children go by owner
reference, claims by the StatefulSets' retention policy), so `kubectl delete rmq` and a namespace deletion never
wait on the operator, running or not. This is why drift is caught by our own loop over the clusters kopf has
shown us, not by a `kopf.timer`: kopf puts a finalizer on every resource that has a timer. All state
is in the RocketCluster's status and its children, so any number of clusters in any namespaces share one
operator, and a restarted operator resumes a roll or a drain where the status says it stopped.

Broker admin calls (topic copy, write permission, lag) go over the wire through the project's own admin
client, to pod IPs: the operator reaches them from inside the cluster and from a node alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

import kopf

from broker.client import Admin
from rocketcluster import metrics, names
from rocketcluster.kube import ApiError, Kube
from rocketcluster.main import watched_namespaces
from rocketcluster.model import RocketClusterSpec, SpecError, parse_spec
from rocketcluster.observe import (
    BrokerFacts,
    GroupFacts,
    build_observed,
    build_status,
    claim_size,
    merge_conditions,
    pod_ready,
    ready_nameserver_addrs,
    registered_everywhere,
    with_rejections,
)
from rocketcluster.plan import (
    Action,
    AddWritePerm,
    ApplyChildren,
    ClearManualRollRequest,
    CopyMetadata,
    CreateGroup,
    DeleteGroup,
    DeletePod,
    RecreateStatefulSet,
    ResizeClaims,
    Wait,
    WipeWritePerm,
    plan,
)
from rocketcluster.pod_watch import watch_paths, watch_pods
from rocketcluster.render import render_broker_group, render_cluster
from rocketcluster.render_network import network_policy_names

__all__ = ["Outcome", "reconcile"]

log = logging.getLogger("rocketcluster.operator")

RESOURCE = (names.GROUP, names.VERSION, names.PLURAL)
# How often every cluster is re-checked for drift (seconds); tests shorten it.
RESYNC_SECONDS = float(os.environ.get("ROCKETCLUSTER_RESYNC_SECONDS", "30"))
ADMIN_TIMEOUT = 5.0  # one admin call; a broker that does not answer in time is "unknown", not an error
PERM_WRITE = 0x2
APPLY_CONCURRENCY = 6
ORPHAN_DELETE_SECONDS = 30.0  # how long a StatefulSet deleted with its pods orphaned may take to go
# Where the operator's pod runs (the chart sets it from the downward API): the NetworkPolicies admit it.
OPERATOR_NAMESPACE = os.environ.get("POD_NAMESPACE") or None
_kube: Kube | None = None
_locks: dict[str, asyncio.Lock] = {}  # one pass at a time per cluster (uid): change handler, resync, pod events
_clusters: dict[tuple[str, str], str] = {}  # (namespace, name) -> uid of every RocketCluster kopf has shown us
_passes: dict[tuple[str, str], asyncio.Task[None]] = {}  # a pass started by a pod event or the resync loop
_changed_again: set[tuple[str, str]] = set()
_resync_task: asyncio.Task[None] | None = None
_watch_tasks: list[asyncio.Task[None]] = []  # the pod watches (rocketcluster.pod_watch)
# Run on every resync tick too: the RocketTopic and RocketConsumerGroup passes (rocketcluster.handlers_resources)
RESYNC_HOOKS: list[Callable[[], None]] = []


class _RoutineProgress(logging.Filter):
    """kopf logs a TemporaryError at ERROR. Here it is routine (a cluster waiting for a slave to catch up), so
    it is lowered to INFO: an operator's ERROR lines should be worth reading."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and " failed temporarily" in record.getMessage():
            record.levelno, record.levelname = logging.INFO, "INFO"
        return record.levelno >= logging.getLogger().getEffectiveLevel()


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    global _kube, _resync_task
    # Our own names for kopf's bookkeeping on the resource, so users see which operator wrote them. The
    # finalizer is no longer added (see the module's docstring); naming it lets kopf remove it from resources
    # an older operator version put it on.
    settings.persistence.finalizer = f"{names.GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=names.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=names.GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING  # Events come from our explicit calls; log noise stays in the log
    settings.watching.server_timeout = 300
    logging.getLogger("kopf.objects").addFilter(_RoutineProgress())
    _kube = Kube.login(settings)
    try:
        metrics.serve(metrics.metrics_port())
    except (OSError, ValueError) as exc:  # a bad setting is not retried: the operator stops, saying why
        raise kopf.PermanentError(str(exc)) from exc
    _resync_task = asyncio.create_task(_resync_forever())
    for path, patterns in watch_paths(watched_namespaces(sys.argv[1:])):
        _watch_tasks.append(asyncio.create_task(watch_pods(_kube, path, patterns, on_pod)))


@kopf.on.cleanup()
async def close(**_: Any) -> None:
    for task in [_resync_task, *_watch_tasks, *_passes.values()]:
        if task is not None:
            task.cancel()
    # let passes under way finish their API calls before the session goes (kopf stops handlers first)
    for lock in list(_locks.values()):
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                await lock.acquire()
    if _kube is not None:
        await _kube.close()


@kopf.on.create(*RESOURCE)
@kopf.on.update(*RESOURCE)
@kopf.on.resume(*RESOURCE)
async def on_change(body: kopf.Body, **_: Any) -> None:
    try:
        outcome = await reconcile(body)
    except OSError as exc:  # the API server dropped or refused the connection: retried, no traceback
        raise kopf.TemporaryError(str(exc), delay=5) from exc
    # Waiting for pods needs no retry: their events start the next pass (on_pod). Anything else the plan
    # waits for (a slave catching up, a drain, a registration) is polled by retrying this handler.
    if outcome.wait is not None and not outcome.pods_settling:
        raise kopf.TemporaryError(outcome.wait.message, delay=outcome.wait.retry_after_seconds)


@kopf.on.event(*RESOURCE)
async def track(type: str | None, body: kopf.Body, **_: Any) -> None:
    """Keep the set of clusters the resync loop visits; forget a deleted one's lock and pass."""
    meta = body["metadata"]
    key = (str(meta["namespace"]), str(meta["name"]))
    if type == "DELETED":
        metrics.forget(*key)
        uid = _clusters.pop(key, None)
        if uid is not None:
            _locks.pop(uid, None)
        _passes.pop(key, None)
    else:
        _clusters[key] = str(meta["uid"])


async def _resync_forever() -> None:
    """Drift (a child edited or deleted by hand; a wait that no event ends): a pass over every cluster."""
    while True:
        await asyncio.sleep(RESYNC_SECONDS)
        for key in list(_clusters):
            _schedule_pass(key)
        for hook in RESYNC_HOOKS:
            hook()


def on_pod(namespace: str, labels: Mapping[str, str]) -> None:
    """A pod of some cluster changed (created, ready, crashed, deleted): plan that cluster again, soon. Called
    by the pod watch (rocketcluster.pod_watch), which asks the API server for the clusters' pods only."""
    cluster = labels.get(names.LABEL_CLUSTER)
    if cluster:
        _schedule_pass((namespace, cluster))


def _schedule_pass(key: tuple[str, str]) -> None:
    """Bursts of triggers for one cluster make one pass plus at most one more, never a pass per trigger."""
    running = _passes.get(key)
    if running is not None and not running.done():
        _changed_again.add(key)
        return
    _passes[key] = asyncio.create_task(_pass(key))


async def _pass(key: tuple[str, str]) -> None:
    namespace, name = key
    while True:
        _changed_again.discard(key)
        try:
            raw = await _kube_client().get(names.API_VERSION, names.KIND, namespace, name)
            if raw is None or raw["metadata"].get("deletionTimestamp"):
                return
            await reconcile(kopf.Body(cast(kopf.RawBody, raw)))
        except (kopf.TemporaryError, ApiError, OSError) as exc:  # the next trigger or resync tries again
            log.info("%s/%s: pass: %s", namespace, name, exc)
        except Exception:  # a bug in one cluster's pass must not end the loop that serves them all
            log.exception("%s/%s: pass failed", namespace, name)
        if key not in _changed_again:
            return


def _kube_client() -> Kube:
    if _kube is None:
        raise kopf.TemporaryError("the operator has not logged in yet", delay=5)
    return _kube


def _now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What a pass left to wait for: the plan's Wait, and whether a pod is still coming up."""

    wait: Wait | None = None
    pods_settling: bool = False


async def reconcile(body: kopf.Body) -> Outcome:
    """One pass over one RocketCluster."""
    meta = body["metadata"]
    uid = str(meta["uid"])
    lock = _locks.setdefault(uid, asyncio.Lock())
    async with lock:
        started, result = time.monotonic(), "error"
        try:
            outcome = await _reconcile(body)
            result = "waiting" if outcome.wait is not None else "ok"
            return outcome
        finally:
            metrics.pass_finished(str(meta["namespace"]), str(meta["name"]), result, time.monotonic() - started)


async def _reconcile(body: kopf.Body) -> Outcome:
    kube = _kube_client()
    # The resource as it is now, not as the event that started this pass saw it: the status holds the planner's
    # progress, and a pass planning from a copy older than the previous pass's status write would drop what that
    # pass recorded (a scale-out's pending metadata copy was lost that way).
    fresh = await kube.get(names.API_VERSION, names.KIND, body["metadata"]["namespace"], body["metadata"]["name"])
    if fresh is None or fresh["metadata"].get("uid") != body["metadata"]["uid"]:
        return Outcome()  # deleted (or replaced by a new incarnation, whose own events start its passes)
    body = kopf.Body(cast(kopf.RawBody, fresh))
    meta = fresh["metadata"]
    name, namespace, generation = str(meta["name"]), str(meta["namespace"]), int(meta.get("generation", 1))
    status: dict[str, Any] = dict(fresh.get("status") or {})
    try:
        cluster = names.ClusterRef(name, namespace, str(meta["uid"]))
        spec = parse_spec(fresh.get("spec"))
    except (SpecError, ValueError) as exc:
        await _report_problem(body, status, "InvalidSpec", "SpecError", str(exc))
        return Outcome()  # nothing to retry until the user edits the resource (an update event)
    problem = await _unbuildable(kube, spec)
    if problem is not None:
        await _report_problem(body, status, "InvalidSpec", *problem)
        return Outcome()

    label = {names.LABEL_CLUSTER: name}
    statefulsets = await kube.list("apps/v1", "StatefulSet", namespace, label)
    pods = await kube.list("v1", "Pod", namespace, label)
    expansion = await _volume_expansion(kube, namespace, label, spec, statefulsets)
    rejected: list[str] = []
    async with _AdminSession(ready_nameserver_addrs(pods)) as admin:
        facts = await admin.facts(spec.effective_cluster_name(name), spec, pods)
        observed = build_observed(
            name=name,
            generation=generation,
            now=time.time(),
            spec=spec,
            annotations=meta.get("annotations") or {},
            statefulsets=statefulsets,
            pods=pods,
            facts=facts,
            status=status,
            volume_expansion=expansion,
        )
        decided = plan(observed)
        try:
            for action in decided.actions:
                rejected += await _execute(action, body, cluster, spec, facts, admin)
        except ApiError as exc:  # an action other than an apply was refused: the same step is planned again
            if exc.status >= 500 or exc.status in (409, 429):
                raise  # the API server's trouble, not the spec's: kopf retries with backoff
            await _report_problem(body, status, "Degraded", "ApplyRejected", str(exc))
            return Outcome(Wait("ApplyRejected", str(exc), 60))
    if rejected:
        decided = with_rejections(decided, rejected)
    new_status = build_status(
        name=name,
        namespace=namespace,
        spec=spec,
        plan=decided,
        observed=observed,
        pods=pods,
        old_status=status,
        now_iso=_now_iso(),
    )
    if _differs(new_status, status):
        await kube.patch_status(namespace, name, new_status)
    metrics.status_written(namespace, name, new_status)
    expected = spec.name_server.replicas + spec.broker.groups * (1 + spec.broker.slaves_per_group)
    settling = len(pods) < expected or not all(pod_ready(p) for p in pods)
    return Outcome(decided.wait, settling)


async def _volume_expansion(
    kube: Kube,
    namespace: str,
    label: Mapping[str, str],
    spec: RocketClusterSpec,
    statefulsets: list[dict[str, Any]],
) -> bool | None:
    """Whether the brokers' claims may grow (their StorageClass's allowVolumeExpansion), asked only while some
    StatefulSet's claim size differs from the spec's; None when it could not be told."""
    sizes = {claim_size(sts) for sts in statefulsets} - {None}
    if spec.storage.type != "persistentClaim" or sizes <= {spec.storage.size}:
        return None
    claims = await kube.list("v1", "PersistentVolumeClaim", namespace, label)
    # the class the claims really have: with no storageClassName in the spec, the default class at creation
    classes = {(c.get("spec") or {}).get("storageClassName") for c in claims} - {None}
    cls = next(iter(classes), None) if len(classes) <= 1 else None
    cls = cls or spec.storage.storage_class_name
    if not cls:
        return None
    found = await kube.get("storage.k8s.io/v1", "StorageClass", None, str(cls))
    return None if found is None else found.get("allowVolumeExpansion") is True


async def _unbuildable(kube: Kube, spec: RocketClusterSpec) -> tuple[str, str] | None:
    """A spec the schema accepts but the cluster cannot build: (reason, message), else None."""
    cls = spec.storage.storage_class_name
    if (
        spec.storage.type == "persistentClaim"
        and cls
        and await kube.get("storage.k8s.io/v1", "StorageClass", None, cls) is None
    ):
        return "StorageClassNotFound", f"spec.storage.storageClassName: StorageClass {cls!r} does not exist"
    return None


async def _report_problem(
    body: kopf.Body, status: Mapping[str, Any], condition: str, reason: str, message: str
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
            _now_iso(),
        ),
    }
    if _differs(new, status):
        log.warning("%s/%s: %s: %s", meta["namespace"], meta["name"], reason, message)
        kube = _kube_client()
        await kube.post_event(body, "Warning", reason, message)
        await kube.patch_status(meta["namespace"], meta["name"], new)
    metrics.status_written(meta["namespace"], meta["name"], new)


def _differs(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Whether a merge patch of `new` onto `old` changes anything (None removes a key)."""
    for key, value in new.items():
        if value is None:
            if old.get(key) is not None:
                return True
        elif old.get(key) != value:
            return True
    return False


class _AdminSession:
    """The broker admin client for one reconcile, to the NameServers' pod IPs; None-safe when none is up."""

    def __init__(self, namesrv_addrs: list[str]) -> None:
        self.admin = Admin(";".join(namesrv_addrs)) if namesrv_addrs else None

    async def __aenter__(self) -> _AdminSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.admin is not None:
            await self.admin.shutdown()

    def require(self) -> Admin:
        if self.admin is None:
            raise kopf.TemporaryError("no NameServer is ready to take admin requests", delay=10)
        return self.admin

    async def _ask(self, what: str, call: Any) -> Any:
        try:
            return await asyncio.wait_for(call, ADMIN_TIMEOUT)
        except Exception as exc:  # any failure makes the fact unknown, which the planner handles
            log.info("admin: %s failed: %s", what, exc)
            return None

    async def facts(self, cluster_name: str, spec: RocketClusterSpec, pods: list[dict[str, Any]]) -> BrokerFacts:
        if self.admin is None:
            return BrokerFacts()
        infos = await self._ask("cluster info", self.admin.cluster_info_per_nameserver())
        if not infos:
            return BrokerFacts()
        indexes = sorted(
            {
                int(g)
                for p in pods
                if (g := ((p.get("metadata") or {}).get("labels") or {}).get(names.LABEL_GROUP)) and g.isdigit()
            }
        )
        groups: dict[int, GroupFacts] = {}
        for g in indexes:
            broker_name = names.broker_name(cluster_name, g)
            registered = registered_everywhere(
                [data.broker_addrs if (data := info.brokers.get(broker_name)) else {} for info in infos.values()]
            )
            lag: dict[int, int | None] = {}
            diverged: dict[int, str] = {}
            detached: set[int] = set()
            writable = consumer_lag = unread = None
            if 0 in registered:
                if len(registered) > 1:
                    replication = await self._ask(f"{broker_name} lag", self.admin.replication_lag(broker_name))
                    if replication is not None:
                        lag = {s.broker_id: s.lag_bytes for s in replication.slaves}
                        diverged = {s.broker_id: s.diverged for s in replication.slaves if s.diverged}
                        detached = {s.broker_id for s in replication.slaves if s.attached is False}
                route = await self._ask(f"{broker_name} route", self.admin.topic_route(broker_name))
                if route is not None:
                    perms = [q.perm for q in route.queue_datas if q.broker_name == broker_name]
                    writable = bool(perms) and all(p & PERM_WRITE for p in perms)
                if g >= spec.broker.groups:  # only a group being drained needs its consumer lag
                    found = await self._ask(f"{broker_name} consumer lag", self.admin.consumer_lag(broker_name))
                    if found is not None:
                        consumer_lag, unread = found.total, found.unread_per_topic
            groups[g] = GroupFacts(
                registered=registered,
                lag_bytes=lag,
                diverged=diverged,
                detached=frozenset(detached),
                writable=writable,
                consumer_lag=consumer_lag,
                unread=unread,
            )
        return BrokerFacts(groups)


def _shared_children(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if names.LABEL_GROUP not in (o["metadata"].get("labels") or {})]


async def _execute(
    action: Action,
    body: kopf.Body,
    cluster: names.ClusterRef,
    spec: RocketClusterSpec,
    facts: BrokerFacts,
    admin: _AdminSession,
) -> list[str]:
    """Carry out one action; returns the children the API server refused to apply (the rest still are)."""
    kube = _kube_client()
    ns, c = cluster.namespace, cluster.name
    cluster_name = spec.effective_cluster_name(c)
    if isinstance(action, Wait):
        return []
    if not isinstance(action, ApplyChildren):  # applies happen every pass; the rest is news for `kubectl describe`
        log.info("%s/%s: %s (%s)", ns, c, action.describe(), action.reason)
        await kube.post_event(body, "Normal", action.reason, action.describe())
        metrics.action_taken(ns, c, action.reason)
    if isinstance(action, ApplyChildren):
        objs = _shared_children(render_cluster(cluster, spec, OPERATOR_NAMESPACE))
        sizes = dict(action.claim_sizes)
        for g in action.groups:
            objs += render_broker_group(cluster, spec, g, sizes.get(g))
        if not spec.network_policy.enabled:  # turned off: the policies made before go
            for policy in network_policy_names(c):
                await kube.delete("networking.k8s.io/v1", "NetworkPolicy", ns, policy)
        return await _apply_all(kube, body, objs)
    if isinstance(action, CreateGroup):
        return await _apply_all(kube, body, render_broker_group(cluster, spec, action.group))
    if isinstance(action, DeletePod):
        await kube.delete("v1", "Pod", ns, action.pod)
    elif isinstance(action, CopyMetadata):
        source = _master_addr(facts, action.source)
        target = _master_addr(facts, action.group)
        await admin.require().copy_metadata(source, target)
    elif isinstance(action, WipeWritePerm):
        await admin.require().wipe_write_perm(names.broker_name(cluster_name, action.group))
    elif isinstance(action, AddWritePerm):
        await admin.require().add_write_perm(names.broker_name(cluster_name, action.group))
    elif isinstance(action, DeleteGroup):
        await _delete_group(kube, cluster, action)
    elif isinstance(action, ResizeClaims):
        await _resize_claims(kube, cluster, action)
    elif isinstance(action, RecreateStatefulSet):
        return await _recreate_statefulset(kube, body, cluster, spec, action.group)
    elif isinstance(action, ClearManualRollRequest):
        patch = {"metadata": {"annotations": {names.ANNOTATION_MANUAL_ROLLING_UPDATE: None}}}
        path = f"/apis/{names.API_VERSION}/namespaces/{ns}/{names.PLURAL}/{c}"
        await kube.request("PATCH", path, body=patch, content_type="application/merge-patch+json")
    return []


async def _apply_all(kube: Kube, body: kopf.Body, objs: list[dict[str, Any]]) -> list[str]:
    """Apply children a few at a time: a pass is a dozen round trips, and an edit should show within seconds.
    Order does not matter to the API server (a StatefulSet whose ServiceAccount is not there yet waits).

    One child the API server refuses (a 4xx that is about the object, not the server's state) does not stop
    the others: it gets a Warning Event, and the pass reports it. Returns "Kind name: message" per refusal."""
    limit = asyncio.Semaphore(APPLY_CONCURRENCY)
    refused: list[str] = []

    async def one(obj: dict[str, Any]) -> None:
        async with limit:
            try:
                await kube.apply(obj)
            except ApiError as exc:
                if exc.status >= 500 or exc.status in (409, 429):
                    raise  # the API server's trouble, not the object's: the pass is retried
                what = f"{obj['kind']} {obj['metadata']['name']}: {exc.message or exc}"
                log.warning("%s/%s: apply refused: %s", body["metadata"]["namespace"], body["metadata"]["name"], what)
                await kube.post_event(body, "Warning", "ApplyRejected", what[:1000])
                refused.append(what)

    await asyncio.gather(*(one(obj) for obj in objs))
    return sorted(refused)


async def _resize_claims(kube: Kube, cluster: names.ClusterRef, action: ResizeClaims) -> None:
    selector = names.broker_group_selector(cluster.name, action.group)
    for pvc in await kube.list("v1", "PersistentVolumeClaim", cluster.namespace, selector):
        requests = ((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}
        if requests.get("storage") != action.size:
            patch = {"spec": {"resources": {"requests": {"storage": action.size}}}}
            await kube.merge_patch("v1", "PersistentVolumeClaim", cluster.namespace, pvc["metadata"]["name"], patch)


async def _recreate_statefulset(
    kube: Kube, body: kopf.Body, cluster: names.ClusterRef, spec: RocketClusterSpec, group: int
) -> list[str]:
    """Delete the group's StatefulSet with its pods orphaned, wait until it is gone, and apply it anew."""
    name = names.broker_statefulset(cluster.name, group)
    await kube.delete("apps/v1", "StatefulSet", cluster.namespace, name, orphan=True)
    deadline = time.monotonic() + ORPHAN_DELETE_SECONDS
    while await kube.get("apps/v1", "StatefulSet", cluster.namespace, name) is not None:
        if time.monotonic() > deadline:
            raise kopf.TemporaryError(f"StatefulSet {name} is still being deleted", delay=10)
        await asyncio.sleep(0.5)
    return await _apply_all(kube, body, render_broker_group(cluster, spec, group))


def _master_addr(facts: BrokerFacts, group: int) -> str:
    addr = facts.groups.get(group, GroupFacts()).registered.get(0)
    if addr is None:
        raise kopf.TemporaryError(f"the master of broker group {group} is not registered yet", delay=10)
    return addr


async def _delete_group(kube: Kube, cluster: names.ClusterRef, action: DeleteGroup) -> None:
    ns, c, g = cluster.namespace, cluster.name, action.group
    await kube.delete("apps/v1", "StatefulSet", ns, names.broker_statefulset(c, g))
    await kube.delete("v1", "ConfigMap", ns, names.broker_config_map(c, g))
    await kube.delete("policy/v1", "PodDisruptionBudget", ns, names.broker_pdb(c, g))
    if action.delete_pvcs:  # retention.whenScaled: Delete; with Retain the claims stay for a later scale-out
        for pvc in await kube.list("v1", "PersistentVolumeClaim", ns, names.broker_group_selector(c, g)):
            await kube.delete("v1", "PersistentVolumeClaim", ns, pvc["metadata"]["name"])
