"""kopf glue for RocketUser: the user and its ACL on every broker group's master, and its credentials Secret.

`rocketcluster-operator` loads this module beside `rocketcluster.handlers` (see `main`) and shares its scheduler:
its Kubernetes client, its per-object locks and its resync tick (`handlers.RESYNC_HOOKS`), so a group that a
scale-out adds gets every user within one resync. A watch event schedules a pass when the spec changed or the
object is new. Slaves copy users and ACLs from their master (the brokers' own slave sync).

Deleting a RocketUser removes the user and its ACL from the brokers: a revoked user must not keep access. The
operator therefore holds kopf's finalizer on every RocketUser until that is done (or the cluster is gone). The
credentials Secret is owned by the RocketUser and garbage-collected with it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections.abc import Mapping
from typing import Any

import kopf

from broker.client.admin import Admin
from broker.client.admin import auth as admin_auth
from broker.client.errors import RocketError
from broker.transport.errors import RemotingError
from rocketcluster import cluster_access, gather, handlers, names, report
from rocketcluster.cluster_access import secret_data
from rocketcluster.kube import ApiError, Kube, resource_path
from rocketcluster.model import SpecError, parse_spec
from rocketcluster.model_users import USERNAME_PATTERN as _USERNAME_PATTERN
from rocketcluster.model_users import RocketUserSpec, parse_user_spec
from rocketcluster.observe import merge_conditions, ready_nameserver_addrs
from rocketcluster.pass_scheduler import PassScheduler
from rocketcluster.render_users import (
    SECRET_KEY,
    acl_body,
    plan_user,
    render_user_secret,
    user_secret_name,
)

__all__ = ["reconcile_user", "schedule_all"]

log = logging.getLogger("rocketcluster.operator.users")

ADMIN_TIMEOUT = gather.ADMIN_TIMEOUT
DELETE_RETRY_SECONDS = 15
DELETE_TIMEOUT_SECONDS = 1800
_SECRET_BYTES = 24
_UNREACHABLE = (RemotingError, TimeoutError, OSError)
_ADMIN_FAILURES = (RocketError, *_UNREACHABLE)

Key = tuple[str, str]  # (namespace, name)
_known: dict[Key, str] = {}


@kopf.on.event(names.GROUP, names.VERSION, names.USER_PLURAL)
async def track_user(type: str | None, body: kopf.Body, **_: Any) -> None:
    meta = body["metadata"]
    key = (str(meta["namespace"]), str(meta["name"]))
    if type == "DELETED":
        uid = _known.pop(key, None)
        if uid is not None:
            handlers.locks.pop(uid, None)
        _passes.forget(key)
        return
    new = key not in _known
    _known[key] = str(meta["uid"])
    if new or (body.get("status") or {}).get("observedGeneration") != meta.get("generation"):
        _passes.schedule(key)


def schedule_all() -> None:
    """A pass over every user (the resync tick of `handlers` calls this)."""
    for key in list(_known):
        _passes.schedule(key)


handlers.RESYNC_HOOKS.append(schedule_all)


@kopf.on.cleanup()
async def close(**_: Any) -> None:
    _passes.cancel_all()


async def _pass(key: Key) -> None:
    namespace, name = key
    raw = await handlers.kube_client().get(names.API_VERSION, names.USER_KIND, namespace, name)
    if raw is not None and not raw["metadata"].get("deletionTimestamp"):
        await reconcile_user(raw)


_passes = PassScheduler(
    _pass,
    describe=lambda key: f"RocketUser {key[0]}/{key[1]}",
    expected=(kopf.TemporaryError, ApiError, *_ADMIN_FAILURES),
    active=handlers.active,
)


def username_of(body: Mapping[str, Any]) -> str:
    spec = body.get("spec") or {}
    value = spec.get("username") if isinstance(spec, Mapping) else None
    return str(value) if isinstance(value, str) and value else str(body["metadata"]["name"])


# -- one pass ----------------------------------------------------------------------------------------------------


async def reconcile_user(body: Mapping[str, Any]) -> None:
    """One pass over one RocketUser, under the object's lock."""
    lock = handlers.locks.setdefault(str(body["metadata"]["uid"]), asyncio.Lock())
    async with lock:
        await _reconcile(body)


async def _reconcile(body: Mapping[str, Any]) -> None:
    meta = body["metadata"]
    namespace = str(meta["namespace"])
    kube = handlers.kube_client()
    try:
        spec = parse_user_spec(body.get("spec"))
    except SpecError as exc:
        await _report(body, ("False", "InvalidSpec", str(exc)), invalid=True)
        return
    username = username_of(body)
    if spec.username is None and not re.match(_USERNAME_PATTERN, username):
        message = f"metadata.name {username!r} is not a user name (letters, digits, '_', '-'): set spec.username"
        await _report(body, ("False", "InvalidSpec", message), invalid=True)
        return
    cluster = await kube.get(names.API_VERSION, names.KIND, namespace, spec.cluster_ref)
    if cluster is None or cluster["metadata"].get("deletionTimestamp"):
        await _report(body, ("False", "ClusterNotFound", f"RocketCluster {spec.cluster_ref!r} is not in {namespace}"))
        return
    try:
        cluster_spec = parse_spec(cluster.get("spec"))
    except SpecError:
        await _report(body, ("False", "ClusterNotReady", f"RocketCluster {spec.cluster_ref!r} has an invalid spec"))
        return
    cluster_name = cluster_spec.effective_cluster_name(spec.cluster_ref)
    password = await _ensure_secret(kube, body, username)
    pods = await kube.list("v1", "Pod", namespace, {names.LABEL_CLUSTER: spec.cluster_ref})
    addrs = ready_nameserver_addrs(pods)
    if not addrs:
        await _report(
            body, ("False", "ClusterNotReady", f"no NameServer of RocketCluster {spec.cluster_ref!r} is ready")
        )
        return
    try:
        access = await cluster_access.admin_access(kube, namespace, spec.cluster_ref, cluster_spec)
    except cluster_access.SecretMissing as exc:
        await _report(body, ("False", "ClusterNotReady", str(exc)))
        return
    done: list[str] = []
    failures: dict[str, str] = {}
    unreachable = False
    async with gather.AdminSession(addrs, access) as session:
        admin = session.require()
        try:
            masters = await _masters(admin, cluster_name)
        except _ADMIN_FAILURES as exc:
            await _report(body, ("False", "ClusterNotReady", f"the NameServers did not give the brokers: {exc}"))
            return
        for broker_name, addr in sorted(masters.items()):
            try:
                steps = await _apply(admin, addr, username, spec, password)
                if not steps.nothing:
                    done.append(f"{broker_name}: {steps.describe()}")
            except _ADMIN_FAILURES as exc:
                failures[broker_name] = str(exc) or type(exc).__name__
                unreachable = unreachable or isinstance(exc, _UNREACHABLE)
    if done:
        message = f"user {username}: " + "; ".join(done)
        log.info("RocketUser %s/%s: %s", namespace, meta["name"], message)
        await kube.post_event(body, "Normal", "Applied", message)
    holders = sorted(b for b in masters if b not in failures)
    if failures:
        reason = "BrokerUnreachable" if unreachable else "BrokerRefused"
        text = "; ".join(f"{b}: {why}" for b, why in sorted(failures.items()))
        await _report(body, ("False", reason, f"user {username}: {text}"), cluster_name, holders)
    elif not masters:
        await _report(body, ("False", "ClusterNotReady", f"no master of cluster {cluster_name} is registered"))
    else:
        groups = ", ".join(holders)
        message = f"user {username} and its {len(spec.acls)} ACL rule(s) are on {groups}"
        await _report(body, ("True", "Ready", message), cluster_name, holders)


async def _ensure_secret(kube: Kube, body: Mapping[str, Any], username: str) -> str:
    """The password from the user's Secret, which is made (random) when missing."""
    meta = body["metadata"]
    name = user_secret_name(str(meta["name"]))
    found = secret_data(await kube.get("v1", "Secret", str(meta["namespace"]), name))
    if found is None or not found.get(SECRET_KEY):
        secret = render_user_secret(body, username, secrets.token_urlsafe(_SECRET_BYTES))
        if found is None:
            try:
                await kube.request("POST", resource_path("v1", "Secret", str(meta["namespace"])), body=secret)
            except ApiError as exc:
                if exc.status != 409:
                    raise
        else:  # emptied by hand: a new password
            await kube.apply(secret)
        await kube.post_event(body, "Normal", "SecretCreated", f"Secret {name} holds the credentials of {username}")
        found = secret_data(await kube.get("v1", "Secret", str(meta["namespace"]), name)) or {}
    password = found.get(SECRET_KEY)
    if not password:
        raise kopf.TemporaryError(f"Secret {name} has no {SECRET_KEY} yet", delay=5)
    return password


async def _masters(admin: Admin, cluster_name: str) -> dict[str, str]:
    """brokerName -> master address of every group of the cluster the NameServers know."""
    info = await asyncio.wait_for(admin.cluster_info(), ADMIN_TIMEOUT)
    return {
        broker_name: addr
        for broker_name in info.clusters.get(cluster_name, [])
        if (data := info.brokers.get(broker_name)) and (addr := data.broker_addrs.get(0))
    }


async def _apply(admin: Admin, addr: str, username: str, spec: RocketUserSpec, password: str) -> Any:
    api = admin.instance.api
    subject = f"User:{username}"
    held_user = await asyncio.wait_for(admin_auth.get_user(api, addr, username), ADMIN_TIMEOUT)
    held_acl = None
    if held_user is not None:  # the broker answers an ACL query about an unknown user with an error
        held_acl = await asyncio.wait_for(admin_auth.get_acl(api, addr, subject), ADMIN_TIMEOUT)
    steps = plan_user(held_user, held_acl, spec, password)
    user_type = spec.user_type
    if steps.user == "create":
        await asyncio.wait_for(admin_auth.create_user(api, addr, username, password, user_type), ADMIN_TIMEOUT)
    elif steps.user == "update":
        call = admin_auth.update_user(api, addr, username, password, user_type, "enable")
        await asyncio.wait_for(call, ADMIN_TIMEOUT)
    if steps.acl in ("replace", "delete"):
        # RocketMQ's updateAcl keeps entries the new body does not name: a rule removed from the spec must go
        await asyncio.wait_for(admin_auth.delete_acl(api, addr, subject), ADMIN_TIMEOUT)
    if steps.acl in ("create", "replace"):
        await asyncio.wait_for(admin_auth.create_acl(api, addr, acl_body(username, spec)), ADMIN_TIMEOUT)
    return steps


async def _report(
    body: Mapping[str, Any],
    ready: tuple[str, str, str],
    cluster_name: str | None = None,
    broker_names: list[str] | None = None,
    *,
    invalid: bool = False,
) -> None:
    meta = body["metadata"]
    old = body.get("status") or {}
    generation = int(meta.get("generation", 1))
    status, reason, message = ready
    conditions = [
        {"type": "Ready", "status": status, "reason": reason, "message": message[:4000]},
        {
            "type": "InvalidSpec",
            "status": "True" if invalid else "False",
            "reason": reason if invalid else "Valid",
            "message": message[:4000] if invalid else "",
        },
    ]
    new: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": merge_conditions(old.get("conditions") or [], conditions, generation, report.now_iso()),
        "username": username_of(body),
        "secret": user_secret_name(str(meta["name"])),
    }
    if cluster_name is not None:
        new["clusterName"] = cluster_name
    if broker_names is not None:
        new["brokerNames"] = broker_names
    if report.differs(new, old):
        before: Mapping[str, Any] = next((c for c in old.get("conditions") or [] if c.get("type") == "Ready"), {})
        if status == "False" and before.get("reason") != reason:
            log.warning("RocketUser %s/%s: %s: %s", meta["namespace"], meta["name"], reason, message)
            if reason == "InvalidSpec":
                await handlers.kube_client().post_event(body, "Warning", reason, message)
        await handlers.kube_client().patch_status(str(meta["namespace"]), str(meta["name"]), new, kind=names.USER_KIND)


# -- deletion ------------------------------------------------------------------------------------------------------


@kopf.on.delete(names.GROUP, names.VERSION, names.USER_PLURAL, timeout=DELETE_TIMEOUT_SECONDS)
async def delete_user(body: kopf.Body, **_: Any) -> None:
    await remove_user(body)


async def remove_user(body: Mapping[str, Any]) -> None:
    """Remove the user and its ACL from every master of the cluster. Nothing to do when the cluster is gone or
    going, or the spec never named one; a NameServer or broker not answering raises TemporaryError (kopf keeps
    its finalizer and retries)."""
    meta = body["metadata"]
    namespace, name = str(meta["namespace"]), str(meta["name"])
    lock = handlers.locks.setdefault(str(meta["uid"]), asyncio.Lock())
    async with lock:
        try:
            spec = parse_user_spec(body.get("spec"))
        except SpecError:
            log.info("RocketUser %s/%s: deleted with an invalid spec: nothing to remove", namespace, name)
            return
        username = username_of(body)
        kube = handlers.kube_client()
        cluster = await kube.get(names.API_VERSION, names.KIND, namespace, spec.cluster_ref)
        if cluster is None or cluster["metadata"].get("deletionTimestamp"):
            return
        try:
            cluster_spec = parse_spec(cluster.get("spec"))
        except SpecError as exc:
            raise kopf.TemporaryError(f"RocketCluster {spec.cluster_ref} has an invalid spec: {exc}", delay=60) from exc
        addrs = ready_nameserver_addrs(await kube.list("v1", "Pod", namespace, {names.LABEL_CLUSTER: spec.cluster_ref}))
        if not addrs:
            raise kopf.TemporaryError("no NameServer is ready to take the deletion", delay=DELETE_RETRY_SECONDS)
        try:
            access = await cluster_access.admin_access(kube, namespace, spec.cluster_ref, cluster_spec)
        except cluster_access.SecretMissing as exc:
            raise kopf.TemporaryError(str(exc), delay=DELETE_RETRY_SECONDS) from exc
        cluster_name = cluster_spec.effective_cluster_name(spec.cluster_ref)
        async with gather.AdminSession(addrs, access) as session:
            admin = session.require()
            api = admin.instance.api
            try:
                masters = await _masters(admin, cluster_name)
                for addr in masters.values():
                    if not await asyncio.wait_for(admin_auth.get_user(api, addr, username), ADMIN_TIMEOUT):
                        continue
                    if await asyncio.wait_for(admin_auth.get_acl(api, addr, f"User:{username}"), ADMIN_TIMEOUT):
                        await asyncio.wait_for(admin_auth.delete_acl(api, addr, f"User:{username}"), ADMIN_TIMEOUT)
                    await asyncio.wait_for(admin_auth.delete_user(api, addr, username), ADMIN_TIMEOUT)
            except _ADMIN_FAILURES as exc:
                message = f"removing the user {username}: {exc or type(exc).__name__}"
                await kube.post_event(body, "Warning", "BrokerRefused", message)
                raise kopf.TemporaryError(message, delay=DELETE_RETRY_SECONDS) from exc
        message = f"removed the user {username} from {', '.join(sorted(masters)) or 'no broker group'}"
        log.info("RocketUser %s/%s: %s", namespace, name, message)
        await kube.post_event(body, "Normal", "Deleted", message)
