"""Carrying out the plan's actions: applying children, deleting pods and groups, growing claims, and the admin
calls (metadata copy, write permission) that a scale-out or a drain needs, and the broker keys set at run time.

Each action is done once per pass and is safe to repeat: the next pass plans again from what it observes, so
an action cut short by a crash or a refusal is simply planned again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any

import kopf

from broker.client.errors import RocketError
from broker.transport.errors import RemotingError
from rocketcluster import controller_access, metrics, names
from rocketcluster.gather import ADMIN_TIMEOUT, AdminSession
from rocketcluster.kube import ApiError, Kube
from rocketcluster.model import RocketClusterSpec
from rocketcluster.observe import BrokerFacts, GroupFacts
from rocketcluster.plan import (
    Action,
    AddWritePerm,
    ApplyChildren,
    ClearManualRollRequest,
    CopyMetadata,
    CreateGroup,
    DeleteGroup,
    DeletePod,
    ElectMaster,
    ForceDeletePod,
    RecreateStatefulSet,
    ResizeClaims,
    UpdateBrokerConfig,
    Wait,
    WipeWritePerm,
)
from rocketcluster.render import render_broker_group, render_cluster
from rocketcluster.render_grpc import grpc_service_name
from rocketcluster.render_network import network_policy_names

__all__ = ["PassContext", "execute"]

log = logging.getLogger("rocketcluster.operator")

APPLY_CONCURRENCY = 6
ORPHAN_DELETE_SECONDS = 30.0  # how long a StatefulSet deleted with its pods orphaned may take to go


@dataclasses.dataclass(frozen=True, slots=True)
class PassContext:
    """What the actions of one pass act on and with."""

    kube: Kube
    body: kopf.Body
    cluster: names.ClusterRef
    spec: RocketClusterSpec
    facts: BrokerFacts
    admin: AdminSession
    operator_namespace: str | None  # where the operator's pod runs: the NetworkPolicies admit it


def _shared_children(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if names.LABEL_GROUP not in (o["metadata"].get("labels") or {})]


async def execute(ctx: PassContext, action: Action) -> list[str]:
    """Carry out one action; returns the children the API server refused to apply (the rest still are)."""
    kube, body, cluster, spec, admin = ctx.kube, ctx.body, ctx.cluster, ctx.spec, ctx.admin
    ns, c = cluster.namespace, cluster.name
    cluster_name = spec.effective_cluster_name(c)
    if isinstance(action, Wait):
        return []
    if not isinstance(action, ApplyChildren):  # applies happen every pass; the rest is news for `kubectl describe`
        log.info("%s/%s: %s (%s)", ns, c, action.describe(), action.reason)
        await kube.post_event(body, "Normal", action.reason, action.describe())
        metrics.action_taken(ns, c, action.reason)
    if isinstance(action, ApplyChildren):
        objs = _shared_children(render_cluster(cluster, spec, ctx.operator_namespace))
        sizes, held = dict(action.claim_sizes), dict(action.held_replicas)
        for g in action.groups:
            objs += render_broker_group(cluster, spec, g, sizes.get(g), held.get(g))
        if not spec.network_policy.enabled:  # turned off: the policies made before go
            for policy in network_policy_names(c):
                await kube.delete("networking.k8s.io/v1", "NetworkPolicy", ns, policy)
        if not spec.broker.grpc.enabled:  # turned off: the access point made before goes
            await kube.delete("v1", "Service", ns, grpc_service_name(c))
        return await _apply_all(kube, body, objs)
    if isinstance(action, CreateGroup):
        return await _apply_all(kube, body, render_broker_group(cluster, spec, action.group))
    if isinstance(action, DeletePod):
        await kube.delete("v1", "Pod", ns, action.pod)
    elif isinstance(action, ForceDeletePod):
        await _force_delete(ctx, action)
    elif isinstance(action, CopyMetadata):
        source = _master_addr(ctx.facts, action.source)
        target = _master_addr(ctx.facts, action.group)
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
    elif isinstance(action, UpdateBrokerConfig):
        await _update_broker_config(ctx, action)
    elif isinstance(action, ElectMaster):
        await _elect_master(ctx, action)
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


async def _update_broker_config(ctx: PassContext, action: UpdateBrokerConfig) -> None:
    """UPDATE_BROKER_CONFIG to one broker. A refusal (a value out of the broker's range) or no answer is a
    Warning Event, not a failed pass: the next pass reads the broker's values and plans it again, and the
    other steps of this one go on."""
    try:
        await asyncio.wait_for(ctx.admin.require().update_broker_config(action.addr, dict(action.keys)), ADMIN_TIMEOUT)
    except (RocketError, RemotingError, OSError, TimeoutError) as exc:
        what = f"broker {action.pod} did not take {', '.join(k for k, _ in action.keys)}: {exc}"
        log.warning("%s/%s: %s", ctx.cluster.namespace, ctx.cluster.name, what)
        await ctx.kube.post_event(ctx.body, "Warning", "ConfigNotApplied", what[:1000])


async def _elect_master(ctx: PassContext, action: ElectMaster) -> None:
    """electMaster at the controller leader. A refusal (the slave left the SyncStateSet meanwhile) or no answer
    is a Warning Event: the next pass plans the handover again from what it then observes."""
    cluster_name = ctx.spec.effective_cluster_name(ctx.cluster.name)
    broker_name = names.broker_name(cluster_name, action.group)
    label = {names.LABEL_CLUSTER: ctx.cluster.name, names.LABEL_COMPONENT: names.COMPONENT_NAMESERVER}
    pods = await ctx.kube.list("v1", "Pod", ctx.cluster.namespace, label)
    try:
        await controller_access.elect_master(pods, cluster_name, broker_name, action.broker_id)
    except (controller_access.ControllerRefused, RemotingError, OSError, TimeoutError) as exc:
        what = f"the controller did not elect {action.pod} master of {broker_name}: {exc}"
        log.warning("%s/%s: %s", ctx.cluster.namespace, ctx.cluster.name, what)
        await ctx.kube.post_event(ctx.body, "Warning", "MasterHandoverFailed", what[:1000])


async def _force_delete(ctx: PassContext, action: ForceDeletePod) -> None:
    """Delete the pod on a lost node with grace period 0, that incarnation only (the uid precondition: a pod
    the StatefulSet already recreated under the same name is left alone)."""
    gone = await ctx.kube.delete("v1", "Pod", ctx.cluster.namespace, action.pod, uid=action.uid, grace_period_seconds=0)
    what = "force-deleted" if gone else "already gone or recreated:"
    log.warning(
        "%s/%s: %s pod %s (node %s lost)", ctx.cluster.namespace, ctx.cluster.name, what, action.pod, action.node
    )


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
