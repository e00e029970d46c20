"""The brokers' gRPC endpoint (spec.broker.grpc): the broker.conf keys, ports, Service and client address that
let RocketMQ 5's SDKs reach a cluster. Pure: spec -> data.

A 5.x SDK is given one access point, which it asks for a topic's route (QueryRoute); every other call goes to
the endpoints the route names, one per broker: brokerIP1:grpcServerPort, as the broker registered brokerIP1
(the pod IP, or its load balancer's address under externalAccess type LoadBalancer). So:
- every broker pod listens on the same port (a route answered by one broker names the others at its own port);
- the access point is a ClusterIP Service over every Ready broker pod (`grpc_service`); any broker answers
  QueryRoute, from the NameServers;
- the broker pods' own addresses need nothing more: they are pod IPs, reachable in the cluster, and the broker
  NetworkPolicy admits the clients on the port (`grpc_policy_ports`);
- under LoadBalancer the per-pod Service carries the port as well (`grpc_service_ports`), so the address the
  route names works from outside. NodePort cannot work (a node's IP at the gRPC port reaches no broker), and
  the model refuses it.
"""

from __future__ import annotations

from typing import Any, Final

from rocketcluster import names
from rocketcluster.model import RocketClusterSpec

__all__ = [
    "GRPC_PORT_NAME",
    "grpc_conf_properties",
    "grpc_container_ports",
    "grpc_endpoint_address",
    "grpc_policy_ports",
    "grpc_service",
    "grpc_service_name",
    "grpc_service_ports",
]

Obj = dict[str, Any]

GRPC_PORT_NAME: Final = "grpc"


def grpc_service_name(c: str) -> str:
    """The access point Service of the cluster's brokers (exists only while the endpoint is on)."""
    return f"{c}-broker-grpc"


def grpc_conf_properties(spec: RocketClusterSpec) -> dict[str, str]:
    """broker.conf keys of every broker pod; none when the endpoint is off (the broker's default is off)."""
    grpc = spec.broker.grpc
    if not grpc.enabled:
        return {}
    return {"enableProxy": "true", "grpcServerPort": str(grpc.port)}


def grpc_container_ports(spec: RocketClusterSpec) -> list[Obj]:
    """The broker container's gRPC port."""
    if not spec.broker.grpc.enabled:
        return []
    return [{"name": GRPC_PORT_NAME, "containerPort": spec.broker.grpc.port, "protocol": "TCP"}]


def grpc_service_ports(spec: RocketClusterSpec) -> list[Obj]:
    """The gRPC port of a broker Service (the headless one, the access point, a per-pod load balancer)."""
    if not spec.broker.grpc.enabled:
        return []
    port = spec.broker.grpc.port
    return [{"name": GRPC_PORT_NAME, "port": port, "targetPort": port, "protocol": "TCP"}]


def grpc_service(c: str, spec: RocketClusterSpec) -> tuple[str, dict[str, str], Obj] | None:
    """(name, labels, Service spec) of the access point; None when off. Ready pods only: a broker still
    recovering its store answers no route."""
    if not spec.broker.grpc.enabled:
        return None
    body: Obj = {"type": "ClusterIP", "selector": names.broker_selector(c), "ports": grpc_service_ports(spec)}
    return grpc_service_name(c), names.cluster_labels(c, names.COMPONENT_BROKER), body


def grpc_endpoint_address(c: str, namespace: str, spec: RocketClusterSpec) -> str | None:
    """host:port a 5.x SDK takes as its endpoints (the access point Service's DNS name); None when off."""
    if not spec.broker.grpc.enabled:
        return None
    return f"{grpc_service_name(c)}.{namespace}.svc:{spec.broker.grpc.port}"


def grpc_policy_ports(spec: RocketClusterSpec) -> list[Obj]:
    """NetworkPolicy ports to admit the clients on, beside the broker's main port."""
    if not spec.broker.grpc.enabled:
        return []
    return [{"protocol": "TCP", "port": spec.broker.grpc.port}]
