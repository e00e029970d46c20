"""External access (spec.externalAccess): the Services, ports and advertised addresses that let clients outside
the Kubernetes cluster reach the NameServers and every broker. Pure: spec (and observed objects) -> data.

RocketMQ hands every client one address per broker: brokerIP1:listenPort, as the broker registered it with the
NameServers. So a broker reachable from outside must advertise an address that works from outside, and the same
address is then used by the clients inside the cluster too:
- NodePort: every broker pod has a Service of its own with a fixed nodePort (`broker_node_port`), the broker
  listens on that same port number inside its pod (listenPort), and advertises its node's IP (downward API
  status.hostIP) or spec.externalAccess.advertisedHost. Node IP + nodePort is reachable from pods as well.
- LoadBalancer: every broker pod has a LoadBalancer Service on port 10911. Its address is known only once the
  cloud has provisioned it: the operator copies the addresses into a ConfigMap (`addresses_config_map`), which
  the broker's start command waits on before it starts with that address as brokerIP1.
In both cases the HA address (brokerIP2:haListenPort) stays the pod's IP and port 10912: slaves replicate
inside the cluster, never through the external Services.

render.py wraps what this module returns into objects of the cluster (metadata, owner), as for NetworkPolicies.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import Any, Final

from rocketcluster import names
from rocketcluster.model import NODE_PORTS_PER_GROUP, ExternalAccess, RocketClusterSpec
from rocketcluster.render_grpc import grpc_node_port, grpc_policy_ports, grpc_service_ports

__all__ = [
    "ADDRESSES_MOUNT_PATH",
    "LABEL_EXTERNAL",
    "POD_NAME_LABEL",
    "adapt_broker_pod",
    "addresses_config_map",
    "addresses_data",
    "advertised_address",
    "broker_listen_port",
    "broker_node_port",
    "broker_services",
    "external_broker_service",
    "external_conf_properties",
    "external_nameserver_service",
    "external_policy_rules",
    "external_status",
    "grpc_external_address",
    "ingress_hosts",
    "nameserver_node_port",
    "nameserver_service",
    "stale_services",
    "wanted_service_names",
]

Obj = dict[str, Any]

# Marks the Services this module makes, so that the operator finds (and prunes) them by one label selector.
LABEL_EXTERNAL: Final = f"{names.GROUP}/external"
# Set by the StatefulSet controller on every pod: the per-pod Service's selector.
POD_NAME_LABEL: Final = "statefulset.kubernetes.io/pod-name"
ADDRESSES_MOUNT_PATH: Final = "/etc/rocketcluster-external"
_ADDRESSES_VOLUME: Final = "external-addresses"
_PORT_BASE_ENV: Final = "BROKER_PORT_BASE"


# -- names --------------------------------------------------------------------------------------------------------


def external_nameserver_service(c: str) -> str:
    return f"{c}-nameserver-external"


def external_broker_service(c: str, g: int, ordinal: int) -> str:
    """The Service of one broker pod: the pod's name (at most 53 characters) and `-external`."""
    return f"{names.broker_pod(c, g, ordinal)}-external"


def addresses_config_map(c: str) -> str:
    """LoadBalancer: pod name -> its load balancer's host, written by the operator, read by the brokers."""
    return f"{c}-external-addresses"


# -- ports --------------------------------------------------------------------------------------------------------


def nameserver_node_port(access: ExternalAccess) -> int:
    """The NameServers' nodePort: nodePortBase itself."""
    if access.node_port_base is None:
        raise ValueError("spec.externalAccess.nodePortBase is not set")
    return access.node_port_base


def broker_node_port(access: ExternalAccess, g: int, ordinal: int) -> int:
    """Group g's pod `ordinal`: base + 1 + g * NODE_PORTS_PER_GROUP + ordinal. A block per group, sized for the most
    slaves a group may have, so no pod's port moves when slavesPerGroup or groups change."""
    return nameserver_node_port(access) + 1 + g * NODE_PORTS_PER_GROUP + ordinal


def broker_listen_port(spec: RocketClusterSpec, g: int, ordinal: int) -> int:
    """The port the broker listens on and advertises (listenPort)."""
    access = spec.external_access
    if access is not None and access.type == "NodePort":
        return broker_node_port(access, g, ordinal)
    return names.BROKER_MAIN_PORT


def external_conf_properties(spec: RocketClusterSpec, g: int, ordinal: int) -> dict[str, str]:
    """broker.conf keys that external access sets (they replace the operator's defaults of the same keys)."""
    access = spec.external_access
    if access is None or access.type != "NodePort":
        return {}
    out = {"listenPort": str(broker_node_port(access, g, ordinal))}
    if access.advertised_host:
        out["brokerIP1"] = access.advertised_host
    return out


# -- Services -----------------------------------------------------------------------------------------------------


def _service_spec(access: ExternalAccess, selector: Mapping[str, str], port: Obj, *, not_ready: bool) -> Obj:
    body: Obj = {"type": access.type, "selector": dict(selector), "ports": [port]}
    if not_ready:
        # A broker is reachable at its advertised address as soon as it listens: a slave's probe asks its master
        # there, and the operator asks a starting broker there, before either is Ready.
        body["publishNotReadyAddresses"] = True
    return body


def nameserver_service(c: str, spec: RocketClusterSpec) -> tuple[str, dict[str, str], dict[str, str], Obj] | None:
    """(name, labels, annotations, Service spec) of the NameServers' external Service; None when off."""
    access = spec.external_access
    if access is None:
        return None
    port: Obj = {"name": "namesrv", "port": names.NAMESERVER_PORT, "targetPort": names.NAMESERVER_PORT}
    if access.type == "NodePort":
        port["nodePort"] = nameserver_node_port(access)
    port["protocol"] = "TCP"
    labels = {**names.nameserver_labels(c), LABEL_EXTERNAL: "true"}
    body = _service_spec(access, names.nameserver_selector(c), port, not_ready=False)
    return external_nameserver_service(c), labels, dict(sorted(access.annotations.items())), body


def broker_services(c: str, spec: RocketClusterSpec, g: int) -> list[tuple[str, dict[str, str], dict[str, str], Obj]]:
    """(name, labels, annotations, Service spec) of group g's per-pod Services; [] when off."""
    access = spec.external_access
    if access is None:
        return []
    out = []
    labels = {**names.broker_group_labels(c, g), LABEL_EXTERNAL: "true"}
    for ordinal in range(1 + spec.broker.slaves_per_group):
        listen = broker_listen_port(spec, g, ordinal)
        port: Obj = {"name": "main", "port": listen, "targetPort": listen}
        if access.type == "NodePort":
            port["nodePort"] = listen
        port["protocol"] = "TCP"
        selector = {**names.broker_group_selector(c, g), POD_NAME_LABEL: names.broker_pod(c, g, ordinal)}
        body = _service_spec(access, selector, port, not_ready=True)
        # The gRPC route names this broker at its advertised host: its load balancer's, at the gRPC port, or its
        # node's, at its gRPC nodePort (the pod listens on the gRPC port either way).
        grpc_ports = grpc_service_ports(spec)
        if access.type == "NodePort":
            grpc_ports = [{**p, "nodePort": grpc_node_port(access, g, ordinal)} for p in grpc_ports]
        body["ports"] += grpc_ports
        out.append((external_broker_service(c, g, ordinal), labels, dict(sorted(access.annotations.items())), body))
    return out


def wanted_service_names(c: str, spec: RocketClusterSpec, pod_names: Iterable[str]) -> set[str]:
    """The external Services that should exist: the spec's, and those of broker pods still running (a group
    being drained keeps its address until its pods are gone)."""
    if spec.external_access is None:
        return set()
    wanted = {external_nameserver_service(c)}
    wanted |= {name for g in range(spec.broker.groups) for name, *_ in broker_services(c, spec, g)}
    prefix = f"{c}-broker-"
    wanted |= {f"{pod}-external" for pod in pod_names if pod.startswith(prefix)}
    return wanted


def stale_services(
    c: str, spec: RocketClusterSpec, services: Iterable[Mapping[str, Any]], pod_names: Iterable[str]
) -> list[str]:
    """Names of the cluster's external Services (LABEL_EXTERNAL) that should no longer exist, sorted."""
    wanted = wanted_service_names(c, spec, pod_names)
    out = []
    for service in services:
        meta = service.get("metadata") or {}
        labels = meta.get("labels") or {}
        ours = labels.get(LABEL_EXTERNAL) == "true" and labels.get(names.LABEL_CLUSTER) == c
        if ours and str(meta.get("name")) not in wanted:
            out.append(str(meta.get("name")))
    return sorted(out)


# -- LoadBalancer addresses ---------------------------------------------------------------------------------------


def ingress_hosts(services: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Service name -> the first address its load balancer reports (ip, else hostname); unprovisioned ones left out."""
    out: dict[str, str] = {}
    for service in services:
        name = (service.get("metadata") or {}).get("name")
        ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        for entry in ingress:
            if not isinstance(entry, Mapping):
                continue
            host = entry.get("ip") or entry.get("hostname")
            if name and isinstance(host, str) and host:
                out[str(name)] = host
                break
    return out


def addresses_data(c: str, spec: RocketClusterSpec, hosts: Mapping[str, str]) -> dict[str, str]:
    """LoadBalancer: the addresses ConfigMap's data, broker pod name -> its load balancer's host (known ones)."""
    access = spec.external_access
    if access is None or access.type != "LoadBalancer":
        return {}
    data = {}
    for g in range(spec.broker.groups):
        for ordinal in range(1 + spec.broker.slaves_per_group):
            host = hosts.get(external_broker_service(c, g, ordinal))
            if host:
                data[names.broker_pod(c, g, ordinal)] = host
    return dict(sorted(data.items()))


# -- the broker pods ----------------------------------------------------------------------------------------------


def _wait_and_start(conf: str) -> str:
    """LoadBalancer: the shell start command. It waits until the operator has written the pod's load balancer
    address, then starts the broker with it as brokerIP1 (a ConfigMap volume shows a change within a minute)."""
    path = f"{ADDRESSES_MOUNT_PATH}/$POD_NAME"
    return (
        f'while [ ! -s "{path}" ]; do echo "waiting for the load balancer address of $POD_NAME"; sleep 5; done; '
        f'BROKER_IP1="$(cat "{path}")"; export BROKER_IP1; exec mqbroker -c {shlex.quote(conf)}'
    )


def _listen_port_shell() -> str:
    return f"$(({_PORT_BASE_ENV} + POD_INDEX))"


def _exec(script: str) -> Obj:
    return {"exec": {"command": ["sh", "-c", script]}}


def adapt_broker_pod(c: str, spec: RocketClusterSpec, g: int, pod: Obj) -> Obj:
    """Group g's broker pod template (render.render_broker_group's) with external access applied; unchanged when
    off. The template is shared by the group's pods, so what differs per pod is computed from POD_INDEX."""
    access = spec.external_access
    if access is None:
        return pod
    container = pod["spec"]["containers"][0]
    env = [e for e in container.get("env", []) if e["name"] not in ("BROKER_IP1", "BROKER_IP2", _PORT_BASE_ENV)]
    # The HA address stays the pod's own: slaves replicate inside the cluster.
    env.append({"name": "BROKER_IP2", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    if access.type == "NodePort":
        if not access.advertised_host:
            env.append({"name": "BROKER_IP1", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}})
        env.append({"name": _PORT_BASE_ENV, "value": str(broker_node_port(access, g, 0))})
        # Every pod of the group listens on a port of its own: the ports are declared for each ordinal the group
        # may ever have (a template that changed with slavesPerGroup would restart every pod), and the probes
        # compute the pod's port from its ordinal.
        ports = [p for p in container.get("ports", []) if p.get("name") != "main"]
        mains = [
            {"name": f"main-{i}", "containerPort": broker_node_port(access, g, i), "protocol": "TCP"}
            for i in range(NODE_PORTS_PER_GROUP)
        ]
        container["ports"] = mains + ports
        port = _listen_port_shell()
        container["readinessProbe"] = {
            **container["readinessProbe"],
            **_exec(f"exec rocketcluster-probe broker --addr 127.0.0.1:{port}"),
        }
        connect = (
            "exec python3 -c \"import os, socket; socket.create_connection(('127.0.0.1', "
            f"int(os.environ['{_PORT_BASE_ENV}']) + int(os.environ['POD_INDEX'])), 4).close()\""
        )
        for probe in ("startupProbe", "livenessProbe"):
            settings = {k: v for k, v in container[probe].items() if k != "tcpSocket"}
            container[probe] = {**_exec(connect), **settings}
    else:
        env.append({"name": "BROKER_IP1", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
        conf = container["command"][-1]
        container["command"] = ["sh", "-c", _wait_and_start(conf)]
        mounts = container.setdefault("volumeMounts", [])
        mounts.append({"name": _ADDRESSES_VOLUME, "mountPath": ADDRESSES_MOUNT_PATH, "readOnly": True})
        volume = {"name": _ADDRESSES_VOLUME, "configMap": {"name": addresses_config_map(c), "optional": True}}
        pod["spec"].setdefault("volumes", []).append(volume)
    container["env"] = env
    return pod


# -- addresses ----------------------------------------------------------------------------------------------------


def _pod_field(pod: Mapping[str, Any], field: str) -> str | None:
    value = (pod.get("status") or {}).get(field)
    return str(value) if value else None


def advertised_address(
    spec: RocketClusterSpec, c: str, g: int, ordinal: int, pod: Mapping[str, Any], hosts: Mapping[str, str]
) -> str | None:
    """The address broker pod (g, ordinal) registers with the NameServers (brokerIP1:listenPort); None while it
    cannot be known (no pod IP yet, a load balancer not provisioned)."""
    access = spec.external_access
    if access is None:
        ip = _pod_field(pod, "podIP")
        return f"{ip}:{names.BROKER_MAIN_PORT}" if ip else None
    if access.type == "NodePort":
        host = access.advertised_host or _pod_field(pod, "hostIP")
        return f"{host}:{broker_node_port(access, g, ordinal)}" if host else None
    host = hosts.get(external_broker_service(c, g, ordinal))
    return f"{host}:{names.BROKER_MAIN_PORT}" if host else None


def grpc_external_address(
    spec: RocketClusterSpec, c: str, g: int, ordinal: int, pod: Mapping[str, Any], hosts: Mapping[str, str]
) -> str | None:
    """host:port the gRPC route names broker pod (g, ordinal) at, reachable from outside; None when the endpoint
    or external access is off, or while the host cannot be known."""
    access = spec.external_access
    if access is None or not spec.broker.grpc.enabled:
        return None
    if access.type == "NodePort":
        host = access.advertised_host or _pod_field(pod, "hostIP")
        return f"{host}:{grpc_node_port(access, g, ordinal)}" if host else None
    host = hosts.get(external_broker_service(c, g, ordinal))
    return f"{host}:{spec.broker.grpc.port}" if host else None


def external_status(
    c: str, spec: RocketClusterSpec, pods: Iterable[Mapping[str, Any]], hosts: Mapping[str, str]
) -> Obj | None:
    """status.externalAccess: the NameServers' and every broker pod's external host:port; None when off."""
    access = spec.external_access
    if access is None:
        return None
    by_name = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    if access.type == "NodePort":
        # Any node's IP reaches a nodePort; a NameServer pod's node is one that surely exists.
        node = access.advertised_host or next(
            (
                ip
                for i in range(spec.name_server.replicas)
                if (ip := _pod_field(by_name.get(names.nameserver_pod(c, i), {}), "hostIP"))
            ),
            None,
        )
        nameserver = f"{node}:{nameserver_node_port(access)}" if node else None
    else:
        host = hosts.get(external_nameserver_service(c))
        nameserver = f"{host}:{names.NAMESERVER_PORT}" if host else None
    brokers: list[Obj] = []
    for g in range(spec.broker.groups):
        for ordinal in range(1 + spec.broker.slaves_per_group):
            pod = names.broker_pod(c, g, ordinal)
            address = advertised_address(spec, c, g, ordinal, by_name.get(pod, {}), hosts)
            brokers.append({"pod": pod, "address": address})
            if spec.broker.grpc.enabled:
                brokers[-1]["grpcAddress"] = grpc_external_address(spec, c, g, ordinal, by_name.get(pod, {}), hosts)
    out: Obj = {"type": access.type, "nameServer": nameserver, "brokers": brokers}
    if spec.broker.grpc.enabled:
        # any broker answers QueryRoute: the first group's master is the one that is there from the start
        out["grpcEndpoint"] = brokers[0]["grpcAddress"]
    return out


# -- NetworkPolicies ----------------------------------------------------------------------------------------------


def external_policy_rules(spec: RocketClusterSpec) -> tuple[list[Obj], list[Obj]]:
    """Ingress rules (NameServers', brokers') that admit any source on the client ports when external access is
    on: traffic through a nodePort or a load balancer may arrive from anywhere (often SNATed to a node's IP)."""
    access = spec.external_access
    if access is None:
        return [], []
    nameserver = [{"ports": [{"protocol": "TCP", "port": names.NAMESERVER_PORT}]}]
    if access.type == "NodePort":
        first = broker_node_port(access, 0, 0)
        last = broker_node_port(access, spec.broker.groups - 1, NODE_PORTS_PER_GROUP - 1)
        brokers = [{"ports": [{"protocol": "TCP", "port": first, "endPort": last}]}]
        # a gRPC nodePort leads to the pod's one gRPC port
        brokers[0]["ports"] += grpc_policy_ports(spec)
    else:
        brokers = [{"ports": [{"protocol": "TCP", "port": names.BROKER_MAIN_PORT}, *grpc_policy_ports(spec)]}]
    return nameserver, brokers
