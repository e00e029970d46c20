"""The cluster pass's step of a rotation of the operator's own credentials (rocketcluster.plan_credentials holds
the states and why they are safe): it creates or deletes the operator's user on every broker group's master and
then writes the Secret; the pods roll to it by the usual secrets-hash path. Nothing here logs a secret.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from broker.client.admin import auth as admin_auth
from broker.client.errors import RocketError
from broker.transport.errors import RemotingError
from rocketcluster import gather, names
from rocketcluster.cluster_access import AdminAccess, SecretMissing, secret_data
from rocketcluster.kube import Kube
from rocketcluster.model import RocketClusterSpec
from rocketcluster.observe import pod_ready, ready_nameserver_addrs
from rocketcluster.plan_credentials import CredentialsError, RotationStep, pods_rolled, rotation_step
from rocketcluster.plan_types import Wait
from rocketcluster.render_security import operator_secret_name

__all__ = ["rotate"]

log = logging.getLogger("rocketcluster.operator")

_SECRET_BYTES = 32
_ADMIN_FAILURES = (RocketError, RemotingError, TimeoutError, OSError)
_RETRY_SECONDS = 10
_T = gather.ADMIN_TIMEOUT  # each admin call's bound


def _pod_hashes(pods: Sequence[Mapping[str, Any]]) -> list[tuple[str | None, bool]]:
    return [
        ((p.get("metadata") or {}).get("annotations", {}).get(names.ANNOTATION_SECRETS_HASH), pod_ready(p))
        for p in pods
    ]


async def _on_every_master(
    access: AdminAccess, pods: Sequence[Mapping[str, Any]], cluster_name: str, step: RotationStep
) -> str | None:
    """Create (or set the password of) `step.create_user`, or delete `step.delete_user`, on every master the
    NameServers know. None when done everywhere, else why not."""
    async with gather.AdminSession(ready_nameserver_addrs(pods), access) as session:
        if session.admin is None:
            return "no NameServer is ready"
        admin = session.admin
        api = admin.instance.api
        try:
            info = await asyncio.wait_for(admin.cluster_info(), _T)
            masters = {
                broker: addr
                for broker in info.clusters.get(cluster_name, [])
                if (data := info.brokers.get(broker)) and (addr := data.broker_addrs.get(0))
            }
            if not masters:
                return f"no master of cluster {cluster_name} is registered"
            for addr in masters.values():
                if step.create_user is not None:
                    user = step.create_user
                    held = await asyncio.wait_for(admin_auth.get_user(api, addr, user.access_key), _T)
                    if held is None:
                        call = admin_auth.create_user(api, addr, user.access_key, user.secret_key, "Super")
                    else:  # a pass that stopped before writing the Secret: the same name, maybe another secret
                        call = admin_auth.update_user(api, addr, user.access_key, user.secret_key, "Super", "enable")
                    await asyncio.wait_for(call, _T)
                if step.delete_user is not None:
                    held = await asyncio.wait_for(
                        admin_auth.get_user(api, addr, step.delete_user), gather.ADMIN_TIMEOUT
                    )
                    if held is not None:
                        await asyncio.wait_for(
                            admin_auth.delete_user(api, addr, step.delete_user), gather.ADMIN_TIMEOUT
                        )
        except _ADMIN_FAILURES as exc:
            return str(exc) or type(exc).__name__
    return None


async def rotate(
    kube: Kube,
    cluster: names.ClusterRef,
    spec: RocketClusterSpec,
    pods: Sequence[Mapping[str, Any]],
    access: AdminAccess,
) -> Wait | None:
    """One step of a rotation, if one is asked for or under way; the Wait says when to look again. SecretMissing
    when the Secret cannot be used (edited during a rotation, auth.properties gone)."""
    if not spec.security.authentication.enabled:
        return None
    name = operator_secret_name(cluster.name)
    data = secret_data(await kube.get("v1", "Secret", cluster.namespace, name))
    expected = spec.name_server.replicas + spec.broker.groups * (1 + spec.broker.slaves_per_group)
    rolled = pods_rolled(_pod_hashes(pods), expected, cluster.secrets_hash)
    try:
        step = rotation_step(data, name, rolled=rolled, fresh_secret=secrets.token_urlsafe(_SECRET_BYTES))
    except CredentialsError as exc:
        raise SecretMissing(str(exc)) from None
    if step.phase == "steady":
        return None
    if step.wait_for_roll:
        return Wait("CredentialsRotation", "rotating the operator's credentials: waiting for the pods to roll", 15)
    if step.create_user is not None or step.delete_user is not None:
        problem = await _on_every_master(access, pods, spec.effective_cluster_name(cluster.name), step)
        if problem is not None:
            log.info("%s/%s: credentials rotation (%s) waits: %s", cluster.namespace, cluster.name, step.phase, problem)
            return Wait("CredentialsRotation", f"rotating the operator's credentials: {problem}", _RETRY_SECONDS)
    if step.secret is not None:
        patch = {k: base64.b64encode(v.encode("utf-8")).decode("ascii") for k, v in step.secret.items()}
        removed = {k: None for k in (data or {}) if k not in step.secret}
        await kube.merge_patch("v1", "Secret", cluster.namespace, name, {"data": patch | removed})
    log.info("%s/%s: credentials rotation: %s done", cluster.namespace, cluster.name, step.phase)
    return Wait("CredentialsRotation", f"rotating the operator's credentials: {step.phase} done", 2)
