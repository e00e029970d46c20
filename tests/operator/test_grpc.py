"""spec.broker.grpc: what the operator renders for the brokers' gRPC endpoint, and the specs it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from rocketcluster.model import SpecError, parse_spec
from rocketcluster.render import ClusterRef, broker_conf_properties, render_cluster
from rocketcluster.render_grpc import grpc_service_name

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
        "NodePort external access",
        {"broker": {"grpc": {"enabled": True}}, "externalAccess": {"type": "NodePort", "nodePortBase": 30100}},
        "NodePort",
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
