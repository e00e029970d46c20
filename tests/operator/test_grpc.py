"""spec.broker.grpc: what the operator renders for the brokers' gRPC endpoint, and the specs it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from rocketcluster.model import ExternalAccessStatus, SpecError, parse_spec
from rocketcluster.render import ClusterRef, broker_conf_properties, render_cluster
from rocketcluster.render_external import broker_node_port, external_status, grpc_external_address
from rocketcluster.render_grpc import grpc_node_port, grpc_route_domain, grpc_route_port_offset, grpc_service_name
from rocketcluster.render_security import render_certificate

CLUSTER = ClusterRef("rc", "ns", "uid-1")
LOAD_BALANCER = {"type": "LoadBalancer"}


def _spec(grpc: dict[str, Any] | None, **more: Any) -> Any:
    broker: dict[str, Any] = {"groups": 2, "slavesPerGroup": 1}
    if grpc is not None:
        broker["grpc"] = grpc
    return parse_spec({"broker": broker, **more})


def _objects(spec: Any, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in render_cluster(CLUSTER, spec) if o["kind"] == kind}


def _broker_container(spec: Any, g: int = 0) -> dict[str, Any]:
    statefulset = _objects(spec, "StatefulSet")[f"rc-broker-{g}"]
    container: dict[str, Any] = statefulset["spec"]["template"]["spec"]["containers"][0]
    return container


def _port_numbers(ports: list[dict[str, Any]]) -> list[int]:
    return [p["port"] for p in ports]


def test_off_renders_exactly_what_it_did_without_the_field() -> None:
    assert render_cluster(CLUSTER, _spec({"enabled": False, "port": 9000})) == render_cluster(CLUSTER, _spec(None))
    assert grpc_service_name("rc") not in _objects(_spec(None), "Service")
    for g in range(2):
        for ordinal in range(2):
            conf = broker_conf_properties(CLUSTER, _spec(None), g, ordinal)
            assert "enableProxy" not in conf and "grpcServerPort" not in conf


@pytest.mark.parametrize(("grpc", "port"), [({"enabled": True}, 8081), ({"enabled": True, "port": 9081}, 9081)])
def test_on_every_broker_serves_it_on_one_port(grpc: dict[str, Any], port: int) -> None:
    spec = _spec(grpc)
    for g in range(2):
        for ordinal in range(2):
            conf = broker_conf_properties(CLUSTER, spec, g, ordinal)
            assert (conf["enableProxy"], conf["grpcServerPort"]) == ("true", str(port))
        container = _broker_container(spec, g)
        assert {"name": "grpc", "containerPort": port, "protocol": "TCP"} in container["ports"]
    services = _objects(spec, "Service")
    headless = services["rc-broker"]["spec"]
    assert _port_numbers(headless["ports"]) == [10911, 10912, port]
    access = services["rc-broker-grpc"]["spec"]
    # the access point: every Ready broker pod (no publishNotReadyAddresses), the gRPC port only
    assert access == {
        "type": "ClusterIP",
        "selector": {"rocketcluster.io/cluster": "rc", "app.kubernetes.io/component": "broker"},
        "ports": [{"name": "grpc", "port": port, "targetPort": port, "protocol": "TCP"}],
    }
    config_map = _objects(spec, "ConfigMap")["rc-connection"]["data"]
    assert config_map["GRPC_ENDPOINT"] == f"rc-broker-grpc.ns.svc:{port}"


def test_the_probes_do_not_change() -> None:
    off, on = _broker_container(_spec(None)), _broker_container(_spec({"enabled": True}))
    for probe in ("readinessProbe", "startupProbe", "livenessProbe"):
        assert on[probe] == off[probe]


def test_the_broker_policy_admits_the_clients_on_the_grpc_port() -> None:
    policies = _objects(_spec({"enabled": True, "port": 9081}), "NetworkPolicy")
    rules = policies["rc-broker"]["spec"]["ingress"]
    clients = rules[0]
    assert clients["ports"] == [{"protocol": "TCP", "port": 10911}, {"protocol": "TCP", "port": 9081}]
    # the HA port stays the brokers' own; the NameServers' policy does not gain the port
    assert [r["ports"] for r in rules[1:]] == [[{"protocol": "TCP", "port": 10912}]]
    nameserver_ports = [p["port"] for r in policies["rc-nameserver"]["spec"]["ingress"] for p in r["ports"]]
    assert 9081 not in nameserver_ports
    off = _objects(_spec(None), "NetworkPolicy")["rc-broker"]["spec"]["ingress"][0]["ports"]
    assert off == [{"protocol": "TCP", "port": 10911}]


def test_load_balancer_pods_carry_the_grpc_port_on_their_own_service() -> None:
    spec = _spec({"enabled": True}, externalAccess=LOAD_BALANCER)
    services = _objects(spec, "Service")
    for g in range(2):
        for ordinal in range(2):
            body = services[f"rc-broker-{g}-{ordinal}-external"]["spec"]
            assert _port_numbers(body["ports"]) == [10911, 8081]
            assert body["type"] == "LoadBalancer"
    assert _port_numbers(services["rc-nameserver-external"]["spec"]["ports"]) == [9876]
    rules = _objects(spec, "NetworkPolicy")["rc-broker"]["spec"]["ingress"]
    anyone = [r for r in rules if "from" not in r]
    assert anyone == [{"ports": [{"protocol": "TCP", "port": 10911}, {"protocol": "TCP", "port": 8081}]}]
    off = _objects(_spec(None, externalAccess=LOAD_BALANCER), "Service")["rc-broker-0-0-external"]["spec"]
    assert _port_numbers(off["ports"]) == [10911]


_TLS = {"tls": {"enabled": True, "secretName": "rc-tls"}}
_BASES = {"nodePortBase": 30100}
NODE_PORT = {"type": "NodePort", "nodePortBase": 30100, "grpcNodePortBase": 30200}
_REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("enableProxy in config", {"broker": {"config": {"enableProxy": "true"}}}, "spec.broker.grpc.enabled"),
    ("grpcServerPort in config", {"broker": {"config": {"grpcServerPort": "8082"}}}, "spec.broker.grpc.port"),
    ("the main port", {"broker": {"grpc": {"enabled": True, "port": 10911}}}, "taken by"),
    ("the HA port", {"broker": {"grpc": {"port": 10912}}}, "taken by"),
    ("a privileged port", {"broker": {"grpc": {"enabled": True, "port": 443}}}, "greater than or equal to 1024"),
    ("past 65535", {"broker": {"grpc": {"enabled": True, "port": 70000}}}, "less than or equal to 65535"),
    ("a port as text", {"broker": {"grpc": {"enabled": True, "port": "8081"}}}, "valid integer"),
    ("enabled as text", {"broker": {"grpc": {"enabled": "yes"}}}, "valid boolean"),
    ("an unknown field", {"broker": {"grpc": {"enabled": True, "tls": True}}}, "unknown field"),
    (
        "the metrics port",
        {"broker": {"grpc": {"enabled": True, "port": 5557}}, "metrics": {"enabled": True}},
        "spec.metrics.port",
    ),
    (
        "NodePort without grpcNodePortBase",
        {"broker": {"grpc": {"enabled": True}}, "externalAccess": {"type": "NodePort", "nodePortBase": 30100}},
        "needs grpcNodePortBase",
    ),
    (
        "gRPC nodePorts over the remoting ones",
        {
            "broker": {"grpc": {"enabled": True}},
            "externalAccess": {**{"type": "NodePort"}, **_BASES, "grpcNodePortBase": 30105},
        },
        "overlap",
    ),
    (
        "gRPC nodePorts under the remoting ones but reaching them",
        {
            "broker": {"grpc": {"enabled": True}},
            "externalAccess": {"type": "NodePort", **_BASES, "grpcNodePortBase": 30096},
        },
        "overlap",
    ),
    (
        "gRPC nodePorts past 32767",
        {
            "broker": {"groups": 3, "grpc": {"enabled": True}},
            "externalAccess": {"type": "NodePort", **_BASES, "grpcNodePortBase": 32755},
        },
        "past 32767",
    ),
    (
        "grpcNodePortBase with LoadBalancer",
        {"broker": {"grpc": {"enabled": True}}, "externalAccess": {"type": "LoadBalancer", "grpcNodePortBase": 30200}},
        "only for type NodePort",
    ),
    (
        "grpcNodePortBase out of the nodePort range",
        {
            "broker": {"grpc": {"enabled": True}},
            "externalAccess": {"type": "NodePort", **_BASES, "grpcNodePortBase": 8081},
        },
        "greater than or equal to 30000",
    ),
]


@pytest.mark.parametrize(("raw", "words"), [(r[1], r[2]) for r in _REFUSED], ids=[r[0] for r in _REFUSED])
def test_the_model_refuses(raw: dict[str, Any], words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(raw)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    "raw",
    [
        {"broker": {"grpc": {"enabled": False}}, "externalAccess": {"type": "NodePort", "nodePortBase": 30100}},
        {"broker": {"grpc": {"enabled": False}}, "security": _TLS},
        # the endpoint checks signatures and ACLs, and speaks TLS with the brokers' certificate
        {"broker": {"grpc": {"enabled": True}}, "security": {"authentication": {"enabled": True}}},
        {"broker": {"grpc": {"enabled": True}}, "security": _TLS},
        {"broker": {"grpc": {"enabled": True}}, "security": {"authentication": {"enabled": True}, **_TLS}},
        {"broker": {"grpc": {"enabled": True, "port": 5557}}},  # metrics off: its port is free
        {"broker": {"grpc": {"enabled": True}}, "externalAccess": NODE_PORT},
        # the gRPC block just below the NameServers' nodePort, or just past the last broker's
        {"broker": {"grpc": {"enabled": True}}, "externalAccess": {**NODE_PORT, "grpcNodePortBase": 30095}},
        {"broker": {"grpc": {"enabled": True}}, "externalAccess": {**NODE_PORT, "grpcNodePortBase": 30106}},
        {"broker": {"grpc": {"enabled": True}}, "externalAccess": {**NODE_PORT, "grpcNodePortBase": 32763}},
        # without the endpoint the base is kept, unused (turning gRPC on needs no other edit)
        {"broker": {"grpc": {"enabled": False}}, "externalAccess": {**NODE_PORT, "grpcNodePortBase": 30105}},
        {"broker": {"grpc": {"enabled": True}, "config": {"grpcMaxInboundMessageSize": "8388608"}}},
    ],
)
def test_the_model_accepts(raw: dict[str, Any]) -> None:
    parse_spec(raw)


def test_with_authentication_and_tls_the_brokers_check_and_encrypt_the_grpc_port() -> None:
    """The gRPC endpoint reads the same broker.conf keys as the remoting port: authentication on, and TLS
    enforcing with the mounted certificate, which the broker also serves on the gRPC port."""
    spec = _spec({"enabled": True}, security={"authentication": {"enabled": True}, **_TLS})
    conf = broker_conf_properties(CLUSTER, spec, 0, 0)
    assert (conf["enableProxy"], conf["grpcServerPort"]) == ("true", "8081")
    assert conf["authenticationEnabled"] == "true"
    assert conf["tls.server.mode"] == "enforcing"
    assert conf["tls.server.certPath"] and conf["tls.server.keyPath"]


_ISSUER = {"tls": {"enabled": True, "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}}


@pytest.mark.parametrize(
    ("grpc", "more", "domain"),
    [
        ({"enabled": True}, {"security": _TLS}, "ns.pod"),  # TLS: the route names the pods' DNS names
        ({"enabled": True}, {"security": _ISSUER}, "ns.pod"),
        ({"enabled": True}, {}, None),  # plaintext: pod IPs, no DNS lookup on the client's path
        ({"enabled": False}, {"security": _TLS}, None),
        ({"enabled": True}, {"security": _TLS, "externalAccess": LOAD_BALANCER}, None),  # the addresses outside
        ({"enabled": True}, {"security": _TLS, "externalAccess": NODE_PORT}, None),
    ],
)
def test_with_tls_the_route_names_the_brokers_by_their_pods_dns_names(
    grpc: dict[str, Any], more: dict[str, Any], domain: str | None
) -> None:
    spec = _spec(grpc, **more)
    assert grpc_route_domain("ns", spec) == domain
    for g, ordinal in ((0, 0), (1, 1)):
        assert broker_conf_properties(CLUSTER, spec, g, ordinal).get("grpcRouteDomain") == domain


def test_an_issued_certificate_names_what_grpc_clients_dial() -> None:
    names = render_certificate(CLUSTER, _spec({"enabled": True}, security=_ISSUER))["spec"]["dnsNames"]  # type: ignore[index]
    # the access point a client is given, and every pod name the route may hand it
    assert {
        "rc-broker-grpc.ns.svc",
        "rc-broker-grpc.ns.svc.cluster.local",
        "*.ns.pod",
        "*.ns.pod.cluster.local",
    } <= set(names)
    without = render_certificate(CLUSTER, _spec(None, security=_ISSUER))["spec"]["dnsNames"]  # type: ignore[index]
    assert not [n for n in without if "grpc" in n or n.endswith(".pod")]


def test_the_route_domain_is_the_operators_key() -> None:
    with pytest.raises(SpecError, match="grpcRouteDomain"):
        parse_spec({"broker": {"config": {"grpcRouteDomain": "other.pod"}}})


# -- NodePort external access --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("g", "ordinal", "port"), [(0, 0, 30200), (0, 1, 30201), (0, 4, 30204), (1, 0, 30205), (2, 3, 30213)]
)
def test_each_pod_has_a_fixed_grpc_node_port(g: int, ordinal: int, port: int) -> None:
    access = _spec({"enabled": True}, externalAccess=NODE_PORT).external_access
    assert access is not None
    assert grpc_node_port(access, g, ordinal) == port
    # the route finds it from the broker's remoting nodePort, by one offset for every pod
    offset = grpc_route_port_offset(_spec({"enabled": True}, externalAccess=NODE_PORT))
    assert offset is not None and broker_node_port(access, g, ordinal) + offset == port


@pytest.mark.parametrize(
    ("grpc", "access", "offset"),
    [
        ({"enabled": True}, NODE_PORT, 99),
        ({"enabled": True}, {**NODE_PORT, "grpcNodePortBase": 30090}, -11),
        ({"enabled": False}, NODE_PORT, None),
        ({"enabled": True}, LOAD_BALANCER, None),
        ({"enabled": True}, None, None),
    ],
)
def test_route_port_offset_only_under_node_port(grpc: dict[str, Any], access: Any, offset: int | None) -> None:
    spec = _spec(grpc, **({"externalAccess": access} if access else {}))
    assert grpc_route_port_offset(spec) == offset
    conf = broker_conf_properties(CLUSTER, spec, 1, 1)
    assert conf.get("grpcRoutePortOffset") == (None if offset is None else str(offset))
    if grpc["enabled"]:  # every pod listens on the one gRPC port, behind whatever nodePort
        assert conf["grpcServerPort"] == "8081"


def test_node_port_pods_carry_a_grpc_node_port_on_their_own_service() -> None:
    spec = _spec({"enabled": True, "port": 9081}, externalAccess=NODE_PORT)
    services = _objects(spec, "Service")
    for g in range(2):
        for ordinal in range(2):
            ports = services[f"rc-broker-{g}-{ordinal}-external"]["spec"]["ports"]
            remoting = 30101 + 5 * g + ordinal
            assert ports == [
                {"name": "main", "port": remoting, "targetPort": remoting, "nodePort": remoting, "protocol": "TCP"},
                {
                    "name": "grpc",
                    "port": 9081,
                    "targetPort": 9081,
                    "protocol": "TCP",
                    "nodePort": 30200 + 5 * g + ordinal,
                },
            ]
    # the access point inside the cluster stays a ClusterIP Service over the pods' one gRPC port
    assert services["rc-broker-grpc"]["spec"]["ports"][0]["targetPort"] == 9081
    rules = _objects(spec, "NetworkPolicy")["rc-broker"]["spec"]["ingress"]
    anyone = [r for r in rules if "from" not in r]
    assert anyone == [
        {"ports": [{"protocol": "TCP", "port": 30101, "endPort": 30110}, {"protocol": "TCP", "port": 9081}]}
    ]
    off = _objects(_spec(None, externalAccess=NODE_PORT), "Service")["rc-broker-0-0-external"]["spec"]["ports"]
    assert [p["name"] for p in off] == ["main"]


def _pod(name: str, host_ip: str | None = "10.250.0.1") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"hostIP": host_ip} if host_ip else {}}


_ADDRESS_CASES: list[tuple[str, Any, dict[str, Any], dict[str, str], str | None]] = [
    ("NodePort, the node's IP", NODE_PORT, _pod("rc-broker-1-1"), {}, "10.250.0.1:30206"),
    (
        "NodePort, advertisedHost",
        {**NODE_PORT, "advertisedHost": "mq.example.com"},
        _pod("rc-broker-1-1", None),
        {},
        "mq.example.com:30206",
    ),
    ("NodePort, no pod yet", NODE_PORT, _pod("rc-broker-1-1", None), {}, None),
    (
        "LoadBalancer",
        LOAD_BALANCER,
        _pod("rc-broker-1-1"),
        {"rc-broker-1-1-external": "lb.example.com"},
        "lb.example.com:8081",
    ),
    ("LoadBalancer, not provisioned", LOAD_BALANCER, _pod("rc-broker-1-1"), {}, None),
]


@pytest.mark.parametrize(
    ("access", "pod", "hosts", "address"), [c[1:] for c in _ADDRESS_CASES], ids=[c[0] for c in _ADDRESS_CASES]
)
def test_grpc_external_address(access: Any, pod: dict[str, Any], hosts: dict[str, str], address: str | None) -> None:
    spec = _spec({"enabled": True}, externalAccess=access)
    assert grpc_external_address(spec, "rc", 1, 1, pod, hosts) == address
    off = _spec({"enabled": False}, externalAccess=access)
    assert grpc_external_address(off, "rc", 1, 1, pod, hosts) is None


def test_external_status_names_the_grpc_endpoint_and_every_brokers_grpc_address() -> None:
    pods = [_pod("rc-broker-0-0"), _pod("rc-nameserver-0")]
    status = external_status("rc", _spec({"enabled": True}, externalAccess=NODE_PORT), pods, {})
    assert status is not None
    assert status["grpcEndpoint"] == "10.250.0.1:30200"
    assert status["brokers"][:2] == [
        {"pod": "rc-broker-0-0", "address": "10.250.0.1:30101", "grpcAddress": "10.250.0.1:30200"},
        {"pod": "rc-broker-0-1", "address": None, "grpcAddress": None},
    ]
    ExternalAccessStatus.model_validate(status)  # the status schema holds the new fields
    off = external_status("rc", _spec(None, externalAccess=NODE_PORT), pods, {})
    assert off is not None and "grpcEndpoint" not in off and "grpcAddress" not in off["brokers"][0]
