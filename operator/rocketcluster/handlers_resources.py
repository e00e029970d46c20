"""kopf glue for RocketTopic and RocketConsumerGroup: observe, render, plan, write, report. Thin, like `handlers`.

`rocketcluster-operator` loads this module beside `rocketcluster.handlers` (see `main`). It shares that module's
scheduler: its Kubernetes client, its per-object locks (so the operator's shutdown waits for a pass under way),
its admin sessions to the NameServers' pod IPs, and its resync tick, which also schedules a pass over every
topic and group (`handlers.RESYNC_HOOKS`): a group that a scale-out adds gets them within one resync. A watch
event schedules a pass only when the spec changed (a generation the status has not seen) or the object is new,
so the status this module writes does not start another pass.

No kopf timers and no change handlers: kopf puts finalizers on resources with timers. The only finalizer is the
one kopf adds for the deletion handlers below, which match only `spec.deletionPolicy: Delete`: such a resource
keeps it until the topic or group is removed from the brokers (kopf removes and adds it as the policy
changes). With `Retain`, the default, deleting the resource never waits on the operator.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from broker.client.admin import Admin
from broker.client.admin import changes as admin_changes
from broker.client.admin import requests as admin_requests
from broker.client.api import ClientAPI
from broker.client.errors import BrokerResponseError, RocketError
from broker.protocol.codes import ResponseCode
from broker.protocol.headers import CreateTopicRequestHeader
from broker.transport.errors import RemotingError
from rocketcluster import cluster_access, gather, handlers, names, report
from rocketcluster.kube import ApiError
from rocketcluster.model import SpecError, parse_spec
from rocketcluster.model_resources import name_problem, parse_group_spec, parse_topic_spec
from rocketcluster.observe import ready_nameserver_addrs
from rocketcluster.pass_scheduler import PassScheduler
from rocketcluster.plan_resources import (
    Master,
    ResourceObservation,
    ResourcePlan,
    broker_made_topic,
    finish,
    older_owner,
    plan_resource,
    resource_status,
)
from rocketcluster.render_resources import (
    GROUP_FIELDS,
    TOPIC_FIELDS,
    render_group,
    render_topic,
    topic_header_fields,
)

__all__ = ["CONSUMER_GROUP", "TOPIC", "reconcile_resource", "schedule_all"]

log = logging.getLogger("rocketcluster.operator.resources")

ADMIN_TIMEOUT = gather.ADMIN_TIMEOUT
DELETE_RETRY_SECONDS = 15
DELETE_TIMEOUT_SECONDS = 1800  # after this, kopf gives up and removes its finalizer (the failure is an Event)
_UNREACHABLE = (RemotingError, TimeoutError, OSError)
_ADMIN_FAILURES = (RocketError, *_UNREACHABLE)


async def _read_topics(api: ClientAPI, addr: str) -> dict[str, dict[str, Any]]:
    return {name: tc.to_json() for name, tc in (await admin_requests.get_all_topic_configs(api, addr)).items()}


async def _write_topic(api: ClientAPI, addr: str, config: Mapping[str, Any]) -> None:
    await api.create_topic(addr, CreateTopicRequestHeader.from_ext_fields(topic_header_fields(config)))


async def _write_group(api: ClientAPI, addr: str, config: Mapping[str, Any]) -> None:
    await admin_requests.create_subscription_group(api, addr, config)


async def _delete_topic(admin: Admin, masters: Mapping[str, str], name: str, cluster_name: str) -> None:
    api = admin.instance.api
    for addr in masters.values():
        await asyncio.wait_for(admin_changes.delete_topic_in_broker(api, addr, name), ADMIN_TIMEOUT)
    for addr in admin.instance.namesrvs:  # the route goes at once, not when the brokers next register
        await asyncio.wait_for(admin_changes.delete_topic_in_namesrv(api, addr, name, cluster_name), ADMIN_TIMEOUT)


async def _delete_group(admin: Admin, masters: Mapping[str, str], name: str, cluster_name: str) -> None:
    api = admin.instance.api
    for addr in masters.values():
        try:
            call = admin_changes.delete_subscription_group(api, addr, name, clean_offset=True)
            await asyncio.wait_for(call, ADMIN_TIMEOUT)
        except BrokerResponseError as exc:
            if exc.response_code != ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                raise


@dataclass(frozen=True, slots=True)
class Kind:
    """What differs between RocketTopic and RocketConsumerGroup; the passes are the same."""

    kind: str
    plural: str
    word: str  # "topic" / "group", for messages
    name_field: str  # the spec's and the status's field with the RocketMQ name
    parse: Callable[[Any], Any]
    render: Callable[[Any, str, Mapping[str, Any] | None], dict[str, Any]]
    fields: tuple[str, ...]
    read: Callable[[ClientAPI, str], Awaitable[Mapping[str, Mapping[str, Any]]]]
    write: Callable[[ClientAPI, str, Mapping[str, Any]], Awaitable[None]]
    delete: Callable[[Admin, Mapping[str, str], str, str], Awaitable[None]]

    def rocketmq_name(self, body: Mapping[str, Any]) -> str:
        """spec.topicName / spec.groupName, else metadata.name (from the raw object: any body, even invalid)."""
        spec = body.get("spec") or {}
        value = spec.get(self.name_field) if isinstance(spec, Mapping) else None
        return str(value) if isinstance(value, str) and value else str(body["metadata"]["name"])


TOPIC = Kind(
    kind=names.TOPIC_KIND,
    plural=names.TOPIC_PLURAL,
    word="topic",
    name_field="topicName",
    parse=parse_topic_spec,
    render=render_topic,
    fields=TOPIC_FIELDS,
    read=_read_topics,
    write=_write_topic,
    delete=_delete_topic,
)
CONSUMER_GROUP = Kind(
    kind=names.CONSUMER_GROUP_KIND,
    plural=names.CONSUMER_GROUP_PLURAL,
    word="group",
    name_field="groupName",
    parse=parse_group_spec,
    render=render_group,
    fields=GROUP_FIELDS,
    read=admin_requests.get_all_subscription_groups,
    write=_write_group,
    delete=_delete_group,
)
_KINDS = {k.kind: k for k in (TOPIC, CONSUMER_GROUP)}

Key = tuple[str, str, str]  # (kind, namespace, name)
_known: dict[Key, str] = {}  # every topic and group kopf has shown us -> uid
# The last body the watch showed of each: who else names a topic is looked up here, not by a list per pass
# (which would cost the API server a list of every topic for every topic on every resync).
_bodies: dict[Key, Mapping[str, Any]] = {}


# -- watching and scheduling ---------------------------------------------------------------------------------


@kopf.on.event(names.GROUP, names.VERSION, names.TOPIC_PLURAL)
async def track_topic(type: str | None, body: kopf.Body, **_: Any) -> None:
    _track(TOPIC, type, body)


@kopf.on.event(names.GROUP, names.VERSION, names.CONSUMER_GROUP_PLURAL)
async def track_group(type: str | None, body: kopf.Body, **_: Any) -> None:
    _track(CONSUMER_GROUP, type, body)


def _track(kind: Kind, type_: str | None, body: Mapping[str, Any]) -> None:
    meta = body["metadata"]
    key = (kind.kind, str(meta["namespace"]), str(meta["name"]))
    if type_ == "DELETED":
        uid = _known.pop(key, None)
        _bodies.pop(key, None)
        if uid is not None:
            handlers.locks.pop(uid, None)
        _passes.forget(key)
        return
    new = key not in _known
    _known[key] = str(meta["uid"])
    _bodies[key] = _owner_facts(body)
    seen = (body.get("status") or {}).get("observedGeneration")
    if new or seen != meta.get("generation"):
        _passes.schedule(key)


def _owner_facts(body: Mapping[str, Any]) -> dict[str, Any]:
    """What `older_owner` reads of a body (kept per object, so a copy of no more than that)."""
    meta = body["metadata"]
    keep = ("name", "uid", "creationTimestamp", "deletionTimestamp")
    spec = body.get("spec")
    return {
        "metadata": {k: meta[k] for k in keep if k in meta},
        "spec": dict(spec) if isinstance(spec, Mapping) else {},
    }


def schedule_all() -> None:
    """A pass over every topic and group (the resync tick of `handlers` calls this)."""
    for key in list(_known):
        _passes.schedule(key)


handlers.RESYNC_HOOKS.append(schedule_all)


@kopf.on.cleanup()
async def close(**_: Any) -> None:
    _passes.cancel_all()


async def _pass(key: Key) -> None:
    kind_name, namespace, name = key
    kind = _KINDS[kind_name]
    raw = await handlers.kube_client().get(names.API_VERSION, kind.kind, namespace, name)
    if raw is not None and not raw["metadata"].get("deletionTimestamp"):
        await reconcile_resource(kind, raw)


_passes = PassScheduler(
    _pass,
    describe=lambda key: f"{key[0]} {key[1]}/{key[2]}",
    expected=(kopf.TemporaryError, ApiError, *_ADMIN_FAILURES),
    active=handlers.active,
)


# -- one pass --------------------------------------------------------------------------------------------------


async def reconcile_resource(kind: Kind, body: Mapping[str, Any]) -> None:
    """One pass over one RocketTopic or RocketConsumerGroup, under the object's lock."""
    lock = handlers.locks.setdefault(str(body["metadata"]["uid"]), asyncio.Lock())
    async with lock:
        await _reconcile(kind, body)


async def _reconcile(kind: Kind, body: Mapping[str, Any]) -> None:
    meta = body["metadata"]
    namespace, name, generation = str(meta["namespace"]), str(meta["name"]), int(meta.get("generation", 1))
    old = body.get("status") or {}
    kube = handlers.kube_client()
    try:
        spec = kind.parse(body.get("spec"))
    except SpecError as exc:
        await _report(kind, body, None, None, ("False", "InvalidSpec", str(exc)), None, invalid=True)
        return
    rname = kind.rocketmq_name(body)
    problem_text = name_problem("topic" if kind is TOPIC else "group", rname)
    if problem_text is not None:
        message = f"metadata.name is the {kind.word} name when spec.{kind.name_field} is not set: {problem_text}"
        await _report(kind, body, rname, None, ("False", "InvalidSpec", message), None, invalid=True)
        return
    observation = ResourceObservation(
        kind=kind.word,
        name=rname,
        generation=generation,
        adopted=old.get("adopted"),
        adopted_generation=old.get("adoptedGeneration"),
    )
    cluster = await kube.get(names.API_VERSION, names.KIND, namespace, spec.cluster_ref)
    if cluster is None or cluster["metadata"].get("deletionTimestamp"):
        problem = ("ClusterNotFound", f"RocketCluster {spec.cluster_ref!r} is not in namespace {namespace}")
        await _report_plan(kind, body, rname, None, observation, problem)
        return
    try:
        cluster_spec = parse_spec(cluster.get("spec"))
    except SpecError:
        problem = ("ClusterNotReady", f"RocketCluster {spec.cluster_ref!r} has an invalid spec (its InvalidSpec)")
        await _report_plan(kind, body, rname, None, observation, problem)
        return
    cluster_name = cluster_spec.effective_cluster_name(spec.cluster_ref)
    if kind is TOPIC and (owned := broker_made_topic(rname, cluster_name)) is not None:
        await _report(kind, body, rname, cluster_name, ("False", "InvalidSpec", owned), None, invalid=True)
        return
    others = [b for (k, ns, _), b in list(_bodies.items()) if k == kind.kind and ns == namespace]
    owner = older_owner(body, others, lambda b: ((b.get("spec") or {}).get("clusterRef"), kind.rocketmq_name(b)))
    if owner is not None:
        problem = ("Conflict", f"{kind.kind} {owner!r} already manages the {kind.word} {rname} of this cluster")
        await _report_plan(kind, body, rname, cluster_name, observation, problem)
        return
    pods = await kube.list("v1", "Pod", namespace, {names.LABEL_CLUSTER: spec.cluster_ref})
    addrs = ready_nameserver_addrs(pods)
    if not addrs:
        problem = ("ClusterNotReady", f"no NameServer pod of RocketCluster {spec.cluster_ref!r} is ready")
        await _report_plan(kind, body, rname, cluster_name, observation, problem)
        return
    try:
        access = await cluster_access.admin_access(kube, namespace, spec.cluster_ref, cluster_spec)
    except cluster_access.SecretMissing as exc:
        await _report_plan(kind, body, rname, cluster_name, observation, ("ClusterNotReady", str(exc)))
        return
    async with gather.AdminSession(addrs, access) as session:
        admin = session.require()
        api = admin.instance.api
        try:
            masters, missing = await _masters(admin, cluster_name, cluster_spec.broker.groups)
        except _ADMIN_FAILURES as exc:
            problem = ("ClusterNotReady", f"the NameServers did not give the cluster's brokers: {exc}")
            await _report_plan(kind, body, rname, cluster_name, observation, problem)
            return
        found: list[Master] = []
        failures: dict[str, str] = {}
        unreachable = False
        for broker_name, addr in sorted(masters.items()):
            try:
                held = await asyncio.wait_for(kind.read(api, addr), ADMIN_TIMEOUT)
            except _ADMIN_FAILURES as exc:
                failures[broker_name] = f"reading its {kind.word}s: {exc or type(exc).__name__}"
                unreachable = unreachable or isinstance(exc, _UNREACHABLE)
                continue
            config = held.get(rname)
            found.append(Master(broker_name, addr, dict(config) if config is not None else None))
        observation = dataclasses.replace(observation, masters=found, missing=missing)
        plan = plan_resource(observation, lambda existing: kind.render(spec, rname, existing), kind.fields)
        if failures:  # nothing is decided or written on a partial view (an unreadable master may hold it)
            undecided = dataclasses.replace(
                plan,
                adopted=observation.adopted,
                adopted_generation=observation.adopted_generation,
                broker_names=tuple(m.broker_name for m in found if m.existing is not None),
            )
            await _report(kind, body, rname, cluster_name, finish(plan, failures, unreachable), undecided)
            return
        done: list[str] = []
        for write in plan.writes:
            try:
                await asyncio.wait_for(kind.write(api, write.addr, write.config), ADMIN_TIMEOUT)
                done.append(f"{'created on' if write.created else 'updated on'} {write.broker_name}")
            except _ADMIN_FAILURES as exc:
                failures[write.broker_name] = str(exc) or type(exc).__name__
                unreachable = unreachable or isinstance(exc, _UNREACHABLE)
    if done:
        message = f"{kind.word} {rname}: {', '.join(done)}"
        log.info("%s %s/%s: %s", kind.kind, namespace, name, message)
        await kube.post_event(body, "Normal", "Applied", message)
    if plan.adopted and old.get("adopted") is None:
        await kube.post_event(body, "Normal", "Adopted", plan.ready[2])
    told = {c.get("reason") for c in old.get("conditions") or [] if c.get("type") == "Ready"}
    if not told & {"BrokerRefused", "BrokerUnreachable"}:  # once per episode, not on every resync
        for broker_name, why in failures.items():
            await kube.post_event(body, "Warning", "BrokerRefused", f"{kind.word} {rname} on {broker_name}: {why}")
    holders = tuple(b for b in plan.broker_names if b not in failures)
    plan = dataclasses.replace(plan, broker_names=holders)
    await _report(kind, body, rname, cluster_name, finish(plan, failures, unreachable), plan)


async def _masters(admin: Admin, cluster_name: str, groups: int) -> tuple[dict[str, str], list[str]]:
    """brokerName -> master address of each group the spec has (index < groups), and those with no master."""
    info = await asyncio.wait_for(admin.cluster_info(), ADMIN_TIMEOUT)
    masters, missing = {}, []
    for g in range(groups):
        broker_name = names.broker_name(cluster_name, g)
        data = info.brokers.get(broker_name)
        addr = data.broker_addrs.get(0) if data is not None else None
        if addr is None:
            missing.append(broker_name)
        else:
            masters[broker_name] = addr
    return masters, missing


async def _report_plan(
    kind: Kind,
    body: Mapping[str, Any],
    rname: str,
    cluster_name: str | None,
    observation: ResourceObservation,
    problem: tuple[str, str],
) -> None:
    plan = plan_resource(dataclasses.replace(observation, problem=problem), lambda _: {}, ())
    await _report(kind, body, rname, cluster_name, plan.ready, plan)


async def _report(
    kind: Kind,
    body: Mapping[str, Any],
    rname: str | None,
    cluster_name: str | None,
    ready: tuple[str, str, str],
    plan: ResourcePlan | None,
    *,
    invalid: bool = False,
) -> None:
    meta = body["metadata"]
    old = body.get("status") or {}
    new = resource_status(
        name_field=kind.name_field,
        name=rname,
        cluster_name=cluster_name,
        generation=int(meta.get("generation", 1)),
        ready=ready,
        plan=plan,
        old=old,
        now_iso=report.now_iso(),
        invalid=invalid,
    )
    if report.differs(new, old):
        before: Mapping[str, Any] = next((c for c in old.get("conditions") or [] if c.get("type") == "Ready"), {})
        if ready[0] == "False" and before.get("reason") != ready[1]:
            log.warning("%s %s/%s: %s: %s", kind.kind, meta["namespace"], meta["name"], ready[1], ready[2])
            if ready[1] in ("InvalidSpec", "Conflict", "Differs"):
                await handlers.kube_client().post_event(body, "Warning", ready[1], ready[2])
        await handlers.kube_client().patch_status(str(meta["namespace"]), str(meta["name"]), new, kind=kind.kind)


# -- deletion (deletionPolicy: Delete) -------------------------------------------------------------------------


@kopf.on.delete(
    names.GROUP,
    names.VERSION,
    names.TOPIC_PLURAL,
    field="spec.deletionPolicy",
    value="Delete",
    timeout=DELETE_TIMEOUT_SECONDS,
)
async def delete_topic(body: kopf.Body, **_: Any) -> None:
    await delete_resource(TOPIC, body)


@kopf.on.delete(
    names.GROUP,
    names.VERSION,
    names.CONSUMER_GROUP_PLURAL,
    field="spec.deletionPolicy",
    value="Delete",
    timeout=DELETE_TIMEOUT_SECONDS,
)
async def delete_group(body: kopf.Body, **_: Any) -> None:
    await delete_resource(CONSUMER_GROUP, body)


async def delete_resource(kind: Kind, body: Mapping[str, Any]) -> None:
    """Remove the topic or group from every master of the cluster (a group being drained too), and a topic from
    the NameServers. Nothing to do when the cluster is gone or going (its brokers go with it), or the spec never
    named one. Waiting for a NameServer or a broker raises TemporaryError: kopf keeps its finalizer and retries."""
    meta = body["metadata"]
    namespace, name = str(meta["namespace"]), str(meta["name"])
    lock = handlers.locks.setdefault(str(meta["uid"]), asyncio.Lock())
    async with lock:
        try:
            spec = kind.parse(body.get("spec"))
        except SpecError:
            log.info(
                "%s %s/%s: deleted with an invalid spec: nothing on the brokers to remove", kind.kind, namespace, name
            )
            return
        rname = kind.rocketmq_name(body)
        kube = handlers.kube_client()
        cluster = await kube.get(names.API_VERSION, names.KIND, namespace, spec.cluster_ref)
        if cluster is None or cluster["metadata"].get("deletionTimestamp"):
            log.info("%s %s/%s: cluster %s is gone: nothing to remove", kind.kind, namespace, name, spec.cluster_ref)
            return
        try:
            cluster_spec = parse_spec(cluster.get("spec"))
            cluster_name = cluster_spec.effective_cluster_name(spec.cluster_ref)
        except SpecError as exc:
            raise kopf.TemporaryError(f"RocketCluster {spec.cluster_ref} has an invalid spec: {exc}", delay=60) from exc
        pods = await kube.list("v1", "Pod", namespace, {names.LABEL_CLUSTER: spec.cluster_ref})
        addrs = ready_nameserver_addrs(pods)
        if not addrs:
            raise kopf.TemporaryError("no NameServer is ready to take the deletion", delay=DELETE_RETRY_SECONDS)
        try:
            access = await cluster_access.admin_access(kube, namespace, spec.cluster_ref, cluster_spec)
        except cluster_access.SecretMissing as exc:
            raise kopf.TemporaryError(str(exc), delay=DELETE_RETRY_SECONDS) from exc
        async with gather.AdminSession(addrs, access) as session:
            admin = session.require()
            try:
                info = await asyncio.wait_for(admin.cluster_info(), ADMIN_TIMEOUT)
                masters = {
                    broker_name: addr
                    for broker_name in info.clusters.get(cluster_name, [])
                    if (data := info.brokers.get(broker_name)) and (addr := data.broker_addrs.get(0))
                }
                await kind.delete(admin, masters, rname, cluster_name)
            except _ADMIN_FAILURES as exc:
                message = f"removing the {kind.word} {rname}: {exc or type(exc).__name__}"
                await kube.post_event(body, "Warning", "BrokerRefused", message)
                raise kopf.TemporaryError(message, delay=DELETE_RETRY_SECONDS) from exc
        message = f"removed the {kind.word} {rname} from {', '.join(sorted(masters)) or 'no broker group'}"
        log.info("%s %s/%s: %s", kind.kind, namespace, name, message)
        await kube.post_event(body, "Normal", "Deleted", message)
