"""spec.failover's glue to the outside: the controllers' Raft password Secret, and the requests the operator sends
to the controllers inside the NameServer pods (find the leader, elect a master).

The controllers advertise their peers by DNS name (`<nameserver pod>.<headless Service>...:9878`), which the
operator cannot resolve when it runs outside the Kubernetes cluster; it maps the leader's name to the pod's IP
(the first label of the name is the pod's name) and dials that, as the admin client dials NameServer pod IPs.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport.client import RemotingClient
from rocketcluster import names
from rocketcluster.cluster_access import secret_data
from rocketcluster.kube import ApiError, Kube, resource_path
from rocketcluster.model import RocketClusterSpec
from rocketcluster.observe import pod_ip, pod_ready
from rocketcluster.render_failover import CONTROLLER_PORT, RAFT_FILE, raft_secret_name, render_raft_secret

__all__ = ["ControllerRefused", "elect_master", "ensure_raft_secret", "leader_ip", "sync_state_sets"]

log = logging.getLogger("rocketcluster.operator")

_PASSWORD_BYTES = 32
_TIMEOUT = 5.0


class ControllerRefused(RuntimeError):
    """No controller leader could be reached, or it refused the request (its code and remark)."""


async def ensure_raft_secret(kube: Kube, cluster: names.ClusterRef, spec: RocketClusterSpec) -> None:
    """With spec.failover, make the Raft password Secret the first time (create only: a changed password would
    split the controllers). The NameServer pods wait for it (a missing Secret volume holds a pod back)."""
    if not spec.failover.enabled:
        return
    name = raft_secret_name(cluster.name)
    found = secret_data(await kube.get("v1", "Secret", cluster.namespace, name))
    if found is not None and found.get(RAFT_FILE):
        return
    secret = render_raft_secret(cluster, secrets.token_urlsafe(_PASSWORD_BYTES))
    try:
        await kube.request("POST", resource_path("v1", "Secret", cluster.namespace), body=secret)
        log.info("%s/%s: created the Secret %s (the controllers' Raft password)", cluster.namespace, cluster.name, name)
    except ApiError as exc:
        if exc.status != 409:  # 409: another operator replica made it first
            raise


def _nameserver_ips(pods: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """NameServer pod name -> IP, for the running ones."""
    out = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(names.LABEL_COMPONENT) == names.COMPONENT_NAMESERVER and (ip := pod_ip(pod)):
            out[str(pod["metadata"]["name"])] = ip
    return out


async def leader_ip(client: RemotingClient, pods: Sequence[Mapping[str, Any]], port: int = CONTROLLER_PORT) -> str:
    """ip:port of the controller leader, asked of each ready NameServer pod's controller (on `port`) in turn. A
    leader that is not one of the cluster's NameServer pods by name is never dialed (one not ready yet is: its
    controller may lead before its NameServer passes the probe)."""
    ips = _nameserver_ips(pods)
    asked = _nameserver_ips([p for p in pods if pod_ready(p)])
    problems = []
    for pod, ip in sorted(asked.items()):
        try:
            reply = await client.invoke(
                f"{ip}:{port}", RemotingCommand(code=RequestCode.CONTROLLER_GET_METADATA_INFO), _TIMEOUT
            )
        except Exception as exc:  # a controller that does not answer: ask the next
            problems.append(f"{pod}: {exc}")
            continue
        leader = reply.ext_fields.get("controllerLeaderAddress", "")
        if reply.code != ResponseCode.SUCCESS or not leader:
            problems.append(f"{pod}: no leader known")
            continue
        host, _, leader_port = leader.rpartition(":")
        leader_pod = host.split(".", 1)[0]
        if leader_pod in ips and leader_port.isdigit() and 0 < int(leader_port) < 65536:
            return f"{ips[leader_pod]}:{int(leader_port)}"
        problems.append(f"{pod}: the leader {leader[:200]!r} is no NameServer pod that runs")
    raise ControllerRefused("no controller leader: " + ("; ".join(problems) or "no NameServer pod is ready"))


async def _invoke_leader(
    client: RemotingClient, pods: Sequence[Mapping[str, Any]], port: int, make: Callable[[], RemotingCommand]
) -> RemotingCommand:
    """A request made by `make` to the leader; once more to the new leader when it changed in between
    (CONTROLLER_NOT_LEADER: the first was not applied)."""
    for _ in range(2):
        leader = await leader_ip(client, pods, port)
        reply = await asyncio.wait_for(client.invoke(leader, make(), _TIMEOUT), _TIMEOUT * 2)
        if reply.code != ResponseCode.CONTROLLER_NOT_LEADER:
            break
    return reply


async def sync_state_sets(
    pods: Sequence[Mapping[str, Any]], broker_names: Sequence[str], port: int = CONTROLLER_PORT
) -> dict[str, frozenset[int]]:
    """brokerName -> the broker ids in its SyncStateSet, as the controller leader holds it
    (CONTROLLER_GET_SYNC_STATE_DATA); groups it does not know are left out. Raises ControllerRefused."""
    client = RemotingClient()
    body = orjson.dumps(list(broker_names))
    try:
        reply = await _invoke_leader(
            client, pods, port, lambda: RemotingCommand(code=RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=body)
        )
    finally:
        await client.close()
    if reply.code != ResponseCode.SUCCESS:
        raise ControllerRefused(f"getSyncStateSet: code {reply.code} {reply.remark or ''}")
    return parse_sync_state_sets(reply.body or b"")


def parse_sync_state_sets(body: bytes) -> dict[str, frozenset[int]]:
    """The SyncStateSets of a CONTROLLER_GET_SYNC_STATE_DATA reply; ControllerRefused when it is not one."""
    try:
        table = orjson.loads(body).get("replicasInfoTable") or {}
        return {
            str(name): frozenset(int(r["brokerId"]) for r in info.get("inSyncReplicas") or [])
            for name, info in table.items()
        }
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ControllerRefused(f"getSyncStateSet: a reply that is no replicas table ({exc})") from None


async def elect_master(
    pods: Sequence[Mapping[str, Any]], cluster_name: str, broker_name: str, broker_id: int, port: int = CONTROLLER_PORT
) -> Mapping[str, str]:
    """CONTROLLER_ELECT_MASTER with designateElect: make broker `broker_id` (its controller id) the master of
    `broker_name`. The controller refuses a broker outside the SyncStateSet. Returns the reply's fields."""
    client = RemotingClient()
    try:
        fields = {
            "clusterName": cluster_name,
            "brokerName": broker_name,
            "brokerId": str(broker_id),
            "designateElect": "true",
        }
        reply = await _invoke_leader(
            client, pods, port, lambda: RemotingCommand(code=RequestCode.CONTROLLER_ELECT_MASTER, ext_fields=fields)
        )
    finally:
        await client.close()
    if reply.code != ResponseCode.SUCCESS:
        raise ControllerRefused(f"electMaster {broker_name} id {broker_id}: code {reply.code} {reply.remark or ''}")
    return dict(reply.ext_fields)
