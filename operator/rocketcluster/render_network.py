"""The NetworkPolicies of a cluster: who may connect to its NameServers and brokers. Pure: spec -> objects.

Two ingress policies, one for the NameServer pods and one for every broker pod of the cluster. Egress is not
limited. Admitted:
- on the NameServer port and the brokers' main port (and gRPC port, spec.broker.grpc): the clients
  (spec.networkPolicy.allowFrom, by default every pod of the cluster's namespace), the cluster's own pods, and
  the operator's pods (the chart labels them `rocketcluster.io/operator: "true"`; the operator's namespace is
  pinned by its immutable `kubernetes.io/metadata.name` label);
- on the brokers' HA port: the cluster's broker pods only (a slave replicating, a master restoring);
- on the metrics port, when spec.metrics is on: spec.networkPolicy.metricsFrom, by default any pod.
An operator that runs outside the cluster (on a node, in a test) is no pod: admit its address with an
ipBlock in allowFrom.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from rocketcluster import names
from rocketcluster.model import RocketClusterSpec
from rocketcluster.render_external import external_policy_rules
from rocketcluster.render_failover import CONTROLLER_PORT, RAFT_PORT
from rocketcluster.render_grpc import grpc_policy_ports

__all__ = ["OPERATOR_POD_LABEL", "network_policies", "network_policy_names"]

Obj = dict[str, Any]

OPERATOR_POD_LABEL: Final = ("rocketcluster.io/operator", "true")
_NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"


def network_policy_names(c: str) -> tuple[str, str]:
    """The NameServers' and the brokers' policy names."""
    return f"{c}-nameserver", f"{c}-broker"


def _ports(*numbers: int) -> list[Obj]:
    return [{"protocol": "TCP", "port": n} for n in numbers]


def _peers(spec: RocketClusterSpec, c: str, operator_namespace: str | None) -> list[Obj]:
    """Who may reach the client ports: the clients, the cluster's own pods, the operator."""
    policy = spec.network_policy
    clients = copy.deepcopy(policy.allow_from) if policy.allow_from is not None else [{"podSelector": {}}]
    peers = [*clients, {"podSelector": {"matchLabels": {names.LABEL_CLUSTER: c}}}]
    if operator_namespace:
        key, value = OPERATOR_POD_LABEL
        peers.append(
            {
                "namespaceSelector": {"matchLabels": {_NAMESPACE_NAME_LABEL: operator_namespace}},
                "podSelector": {"matchLabels": {key: value}},
            }
        )
    return peers


def _metrics_rule(spec: RocketClusterSpec) -> list[Obj]:
    if not spec.metrics.enabled:
        return []
    policy = spec.network_policy
    scrapers = copy.deepcopy(policy.metrics_from) if policy.metrics_from is not None else [{"namespaceSelector": {}}]
    return [{"from": scrapers, "ports": _ports(spec.metrics.port)}]


def network_policies(c: str, spec: RocketClusterSpec, operator_namespace: str | None) -> list[tuple[str, Obj, Obj]]:
    """(name, labels, NetworkPolicy spec) of cluster `c`'s policies; none when spec.networkPolicy.enabled is
    false. `render.render_network_policies` makes them objects of the cluster."""
    if not spec.network_policy.enabled:
        return []
    peers = _peers(spec, c, operator_namespace)
    nameserver_name, broker_name = network_policy_names(c)
    own_brokers = [{"podSelector": {"matchLabels": names.broker_selector(c)}}]
    external_nameserver, external_brokers = external_policy_rules(spec)
    nameserver_rules = [
        {"from": peers, "ports": _ports(names.NAMESERVER_PORT)},
        *external_nameserver,
        *_metrics_rule(spec),
        *_controller_rules(spec, c, peers),
    ]
    broker_rules = [
        {"from": peers, "ports": [*_ports(names.BROKER_MAIN_PORT), *grpc_policy_ports(spec)]},
        *external_brokers,
        {"from": own_brokers, "ports": _ports(names.BROKER_HA_PORT)},
        *_metrics_rule(spec),
    ]
    return [
        (nameserver_name, names.nameserver_labels(c), _spec(names.nameserver_selector(c), nameserver_rules)),
        (broker_name, names.cluster_labels(c, names.COMPONENT_BROKER), _spec(names.broker_selector(c), broker_rules)),
    ]


def _controller_rules(spec: RocketClusterSpec, c: str, peers: list[Obj]) -> list[Obj]:
    """spec.failover: the controller port for the cluster's own pods and the operator (the peers but the
    clients), the Raft port for the NameServers only."""
    if not spec.failover.enabled:
        return []
    clients = len(spec.network_policy.allow_from) if spec.network_policy.allow_from is not None else 1
    own = [{"podSelector": {"matchLabels": names.nameserver_selector(c)}}]
    return [
        {"from": copy.deepcopy(peers[clients:]), "ports": _ports(CONTROLLER_PORT)},
        {"from": own, "ports": _ports(RAFT_PORT)},
    ]


def _spec(selector: dict[str, str], rules: list[Obj]) -> Obj:
    return {"podSelector": {"matchLabels": selector}, "policyTypes": ["Ingress"], "ingress": rules}
