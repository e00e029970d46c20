"""The kopf handlers and the pass scheduler: one pass observes, plans, acts and reports, as thin glue over
gather (the facts), observe and plan (pure), execute (the actions) and report.

One idempotent `reconcile` serves create, update and resume, and a resync loop catches drift (a child edited
or deleted by hand, a pod that went down, a drain that finished). Waiting is never a sleep: a plan that has to
wait raises `kopf.TemporaryError(delay=...)`, which frees the worker and lets a deletion preempt it.

No finalizer: nothing the operator does needs the resource to outlive its deletion (children go by owner
reference, claims by the StatefulSets' retention policy), so `kubectl delete rmq` and a namespace deletion never
wait on the operator, running or not. This is why drift is caught by our own loop over the clusters kopf has
shown us, not by a `kopf.timer`: kopf puts a finalizer on every resource that has a timer. All state
is in the RocketCluster's status and its children, so any number of clusters in any namespaces share one
operator, and a restarted operator resumes a roll or a drain where the status says it stopped.
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

from rocketcluster import cluster_access, controller_access, credentials_rotation, metrics, names
from rocketcluster.execute import PassContext, execute
from rocketcluster.external import sync_external
from rocketcluster.gather import AdminSession, broker_nodes, unbuildable, volume_expansion
from rocketcluster.kube import ApiError, Kube
from rocketcluster.main import watched_namespaces
from rocketcluster.model import SpecError, parse_spec
from rocketcluster.observe import build_observed, build_status, pod_ready, ready_nameserver_addrs, with_rejections
from rocketcluster.pass_scheduler import PassScheduler
from rocketcluster.peering import LIFETIME_SECONDS, Leadership, choose_priority, own_identity, peering_arguments
from rocketcluster.plan import Wait, plan
from rocketcluster.pod_watch import watch_paths, watch_pods
from rocketcluster.report import announce_refusal, differs, now_iso, report_problem

__all__ = ["Outcome", "reconcile"]

log = logging.getLogger("rocketcluster.operator")

RESOURCE = (names.GROUP, names.VERSION, names.PLURAL)
# How often every cluster is re-checked for drift (seconds); tests shorten it.
RESYNC_SECONDS = float(os.environ.get("ROCKETCLUSTER_RESYNC_SECONDS", "30"))
# Where the operator's pod runs (the chart sets it from the downward API): the NetworkPolicies admit it.
OPERATOR_NAMESPACE = os.environ.get("POD_NAMESPACE") or None
_kube: Kube | None = None
locks: dict[str, asyncio.Lock] = {}  # one pass at a time per cluster (uid): change handler, resync, pod events
_clusters: dict[tuple[str, str], str] = {}  # (namespace, name) -> uid of every RocketCluster kopf has shown us
_resync_task: asyncio.Task[None] | None = None
_watch_tasks: list[asyncio.Task[None]] = []  # the pod watches (rocketcluster.pod_watch)
# Whether this replica is the one at work (rocketcluster.peering); standalone until `configure` says otherwise.
leadership = Leadership(None, own_identity(), None)
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
    await _join_peering(settings, _kube)
    try:
        metrics.serve(metrics.metrics_port())
    except (OSError, ValueError) as exc:  # a bad setting is not retried: the operator stops, saying why
        raise kopf.PermanentError(str(exc)) from exc
    _resync_task = asyncio.create_task(_resync_forever())
    for path, patterns in watch_paths(watched_namespaces(sys.argv[1:])):
        _watch_tasks.append(asyncio.create_task(watch_pods(_kube, path, patterns, on_pod)))


async def _join_peering(settings: kopf.OperatorSettings, kube: Kube) -> None:
    """With --peering: our keep-alive lifetime, and a priority below the replica already at work (kopf pauses
    every replica that shares the highest priority, and all replicas run the same command line)."""
    global leadership
    name, priority = peering_arguments(sys.argv[1:])
    namespaces = watched_namespaces(sys.argv[1:])
    if name is None:
        return
    if namespaces is not None and any(any(c in ns for c in "*?[!") for ns in namespaces):
        # kopf keeps a KopfPeering in every namespace a pattern matches; the pass guard reads named ones only
        raise kopf.PermanentError("--peering needs plain --namespace names or all namespaces, not patterns")
    leadership = Leadership(name, own_identity(), namespaces)
    settings.peering.lifetime = LIFETIME_SECONDS
    if priority is None:
        now = datetime.datetime.now(datetime.UTC)
        priority = choose_priority(await leadership.statuses(kube), leadership.identity, now)
        settings.peering.priority = priority
    leadership.priority = priority
    log.info("peering %r as %s with priority %d", name, leadership.identity, priority)


async def active() -> bool:
    """Whether this replica may reconcile now (kopf's handlers are paused on the others; our loops ask this)."""
    return await leadership.active(kube_client())


@kopf.on.cleanup()
async def close(**_: Any) -> None:
    for task in [_resync_task, *_watch_tasks]:
        if task is not None:
            task.cancel()
    passes.cancel_all()
    for timer in _timers.values():
        timer.cancel()
    # let passes under way finish their API calls before the session goes (kopf stops handlers first)
    for lock in list(locks.values()):
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
    meta = body["metadata"]
    _pass_again_for((str(meta["namespace"]), str(meta["name"])), outcome.wait)
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
            locks.pop(uid, None)
        passes.forget(key)
        _pass_again_for(key, None)
    else:
        _clusters[key] = str(meta["uid"])


async def _resync_forever() -> None:
    """Drift (a child edited or deleted by hand; a wait that no event ends): a pass over every cluster."""
    while True:
        await asyncio.sleep(RESYNC_SECONDS)
        for key in list(_clusters):
            passes.schedule(key)
        for hook in RESYNC_HOOKS:
            hook()


def on_pod(namespace: str, labels: Mapping[str, str]) -> None:
    """A pod of some cluster changed (created, ready, crashed, deleted): plan that cluster again, soon. Called
    by the pod watch (rocketcluster.pod_watch), which asks the API server for the clusters' pods only."""
    cluster = labels.get(names.LABEL_CLUSTER)
    if cluster:
        passes.schedule((namespace, cluster))


async def _pass(key: tuple[str, str]) -> None:
    namespace, name = key
    raw = await kube_client().get(names.API_VERSION, names.KIND, namespace, name)
    if raw is not None and not raw["metadata"].get("deletionTimestamp"):
        outcome = await reconcile(kopf.Body(cast(kopf.RawBody, raw)))
        _pass_again_for(key, outcome.wait)


# Waits whose end no event announces and that should not wait for the resync tick: a lost node's grace (its
# pods turned not ready when the node was marked lost; nothing changes when the grace runs out).
_TIMED_WAITS = frozenset({"NODE_LOST"})
_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}  # one pending pass per cluster at most


def _pass_again_for(key: tuple[str, str], wait: Wait | None) -> None:
    """Schedule one more pass when the plan's wait (a _TIMED_WAITS one) runs out; a newer pass replaces it."""
    pending = _timers.pop(key, None)
    if pending is not None:
        pending.cancel()
    if wait is not None and wait.reason in _TIMED_WAITS:
        _timers[key] = asyncio.get_running_loop().call_later(wait.retry_after_seconds, passes.schedule, key)


# Passes started by pod events and the resync loop; an API server that is away is retried by the next trigger.
passes = PassScheduler(_pass, describe="/".join, expected=(kopf.TemporaryError, ApiError, OSError), active=active)


def kube_client() -> Kube:
    if _kube is None:
        raise kopf.TemporaryError("the operator has not logged in yet", delay=5)
    return _kube


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What a pass left to wait for: the plan's Wait, and whether a pod is still coming up."""

    wait: Wait | None = None
    pods_settling: bool = False


async def reconcile(body: kopf.Body) -> Outcome:
    """One pass over one RocketCluster."""
    meta = body["metadata"]
    uid = str(meta["uid"])
    lock = locks.setdefault(uid, asyncio.Lock())
    async with lock:
        started, result = time.monotonic(), "error"
        try:
            outcome = await _reconcile(body)
            result = "waiting" if outcome.wait is not None else "ok"
            return outcome
        finally:
            metrics.pass_finished(str(meta["namespace"]), str(meta["name"]), result, time.monotonic() - started)


async def _reconcile(body: kopf.Body) -> Outcome:
    kube = kube_client()
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
        await report_problem(kube, body, status, "InvalidSpec", "SpecError", str(exc))
        return Outcome()  # nothing to retry until the user edits the resource (an update event)
    problem = await unbuildable(kube, spec)
    if problem is not None:
        await report_problem(kube, body, status, "InvalidSpec", *problem)
        return Outcome()

    try:
        cluster, access = await cluster_access.prepare(kube, cluster, spec)
        await controller_access.ensure_raft_secret(kube, cluster, spec)
    except cluster_access.SecretMissing as exc:
        await report_problem(kube, body, status, "Degraded", "SecretMissing", str(exc))
        return Outcome(Wait("SecretMissing", str(exc), 30))

    label = {names.LABEL_CLUSTER: name}
    statefulsets = await kube.list("apps/v1", "StatefulSet", namespace, label)
    pods = await kube.list("v1", "Pod", namespace, label)
    try:  # a rotation of the operator's credentials: a user change on the masters, a Secret write (a roll follows)
        rotation = await credentials_rotation.rotate(kube, cluster, spec, pods, access)
    except cluster_access.SecretMissing as exc:
        await report_problem(kube, body, status, "Degraded", "SecretMissing", str(exc))
        return Outcome(Wait("SecretMissing", str(exc), 30))
    external_hosts = await sync_external(kube, cluster, spec, pods)
    expansion = await volume_expansion(kube, namespace, label, spec, statefulsets)
    nodes = await broker_nodes(kube, spec, pods)  # spec.failover: pods on a lost node are fenced
    rejected: list[str] = []
    async with AdminSession(ready_nameserver_addrs(pods), access) as admin:
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
            external_hosts=external_hosts,
            nodes=nodes,
        )
        decided = plan(observed)
        await announce_refusal(kube, body, status, decided)
        context = PassContext(kube, body, cluster, spec, facts, admin, OPERATOR_NAMESPACE)
        try:
            for action in decided.actions:
                rejected += await execute(context, action)
        except ApiError as exc:  # an action other than an apply was refused: the same step is planned again
            if exc.status >= 500 or exc.status in (409, 429):
                raise  # the API server's trouble, not the spec's: kopf retries with backoff
            await report_problem(kube, body, status, "Degraded", "ApplyRejected", str(exc))
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
        now_iso=now_iso(),
        external_hosts=external_hosts,
    )
    if differs(new_status, status):
        await kube.patch_status(namespace, name, new_status)
    metrics.status_written(namespace, name, new_status)
    expected = spec.name_server.replicas + spec.broker.groups * (1 + spec.broker.slaves_per_group)
    settling = len(pods) < expected or not all(pod_ready(p) for p in pods)
    return Outcome(decided.wait or rotation, settling)
