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
  route names works from outside;
- under NodePort each broker pod's Service gets a gRPC nodePort of its own (`grpc_node_port`, a block apart
  from the remoting one), while the pod keeps listening on the one gRPC port (so the access point Service still
  works). brokerIP1 is the node's IP or advertisedHost, and the endpoint names each broker there at its remoting
  nodePort plus a fixed offset (`grpcRoutePortOffset`, `grpc_route_port_offset`): its gRPC nodePort. Node IP
  and nodePort are reachable from pods as well, so clients inside and outside take the same route.
- with TLS on and no external access, the route names each broker by its pod's DNS name `10-1-2-3.<ns>.pod`
  (`grpcRouteDomain`, `grpc_route_domain`), not its IP: a client that checks the host name it dials against the
  certificate (the official Python SDK always does) finds it there, as the wildcard `*.<ns>.pod`
  (`grpc_certificate_names`), where no certificate could name pod IPs that change with every restart.
"""

from __future__ import annotations

from typing import Any, Final

from rocketcluster import names
from rocketcluster.model import NODE_PORTS_PER_GROUP, ExternalAccess, RocketClusterSpec

__all__ = [
    "GRPC_PORT_NAME",
    "grpc_certificate_names",
    "grpc_conf_properties",
    "grpc_container_ports",
    "grpc_endpoint_address",
    "grpc_node_port",
    "grpc_policy_ports",
    "grpc_route_domain",
    "grpc_route_port_offset",
    "grpc_service",
    "grpc_service_name",
    "grpc_service_ports",
]

Obj = dict[str, Any]

GRPC_PORT_NAME: Final = "grpc"


def grpc_service_name(c: str) -> str:
    """The access point Service of the cluster's brokers (exists only while the endpoint is on)."""
    return f"{c}-broker-grpc"


def grpc_node_port(access: ExternalAccess, g: int, ordinal: int) -> int:
    """NodePort: the gRPC nodePort of group g's pod `ordinal`, grpcNodePortBase + g * NODE_PORTS_PER_GROUP + ordinal
    (a block per group, as the remoting nodePorts, so no pod's port moves when slavesPerGroup changes)."""
    if access.grpc_node_port_base is None:
        raise ValueError("spec.externalAccess.grpcNodePortBase is not set")
    return access.grpc_node_port_base + g * NODE_PORTS_PER_GROUP + ordinal


def grpc_route_port_offset(spec: RocketClusterSpec) -> int | None:
    """NodePort with the endpoint on: every broker's gRPC nodePort minus its remoting nodePort (one number for
    all, both blocks being laid out alike); None otherwise (the route names grpcServerPort)."""
    access = spec.external_access
    if not spec.broker.grpc.enabled or access is None or access.type != "NodePort":
        return None
    if access.node_port_base is None:
        raise ValueError("spec.externalAccess.nodePortBase is not set")
    # the remoting nodePort of (g, i) is nodePortBase + 1 + g * NODE_PORTS_PER_GROUP + i
    return grpc_node_port(access, 0, 0) - (access.node_port_base + 1)


def grpc_route_domain(namespace: str, spec: RocketClusterSpec) -> str | None:
    """TLS on, no external access: the domain of the pods' DNS names (`<namespace>.pod`, found through the pods'
    DNS search list whatever the cluster domain), which the route names the brokers under; None otherwise (the
    route names the address each broker registered)."""
    if not spec.broker.grpc.enabled or not spec.security.tls.enabled or spec.external_access is not None:
        return None
    return f"{namespace}.pod"


def grpc_certificate_names(c: str, namespace: str, spec: RocketClusterSpec) -> list[str]:
    """The DNS names a gRPC client dials, for the cluster's certificate: the access point, and the brokers' pod
    names when the route names them (`grpc_route_domain`)."""
    if not spec.broker.grpc.enabled:
        return []
    service = f"{grpc_service_name(c)}.{namespace}.svc"
    out = [service, f"{service}.cluster.local"]
    domain = grpc_route_domain(namespace, spec)
    if domain is not None:
        out += [f"*.{domain}", f"*.{domain}.cluster.local"]
    return out


def grpc_conf_properties(namespace: str, spec: RocketClusterSpec) -> dict[str, str]:
    """broker.conf keys of every broker pod; none when the endpoint is off (the broker's default is off)."""
    grpc = spec.broker.grpc
    if not grpc.enabled:
        return {}
    out = {"enableProxy": "true", "grpcServerPort": str(grpc.port)}
    offset = grpc_route_port_offset(spec)
    if offset is not None:
        out["grpcRoutePortOffset"] = str(offset)
    domain = grpc_route_domain(namespace, spec)
    if domain is not None:
        out["grpcRouteDomain"] = domain
    return out


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
