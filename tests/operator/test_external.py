"""spec.externalAccess: the model and the API server refuse what cannot work, and render/observe give every
broker pod a Service, a listen port and an advertised address of its own (rocketcluster.render_external)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from rocketcluster import names
from rocketcluster.model import NODE_PORT_MAX, NODE_PORT_MIN, SpecError, parse_spec
from rocketcluster.observe import BrokerFacts, GroupFacts, build_observed
from rocketcluster.render import ClusterRef, render_broker_conf, render_cluster
from rocketcluster.render_external import (
    addresses_data,
    advertised_address,
    broker_node_port,
    external_status,
    ingress_hosts,
    stale_services,
)
from tests.operator.test_crd_apiserver import Kubectl, _cluster, kubectl  # noqa: F401 (the fixture)

CLUSTER = ClusterRef("rc", "ns", "uid-1")
NODE_PORT = {"type": "NodePort", "nodePortBase": 30100}
LOAD_BALANCER = {"type": "LoadBalancer", "annotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}}


def _spec(access: dict[str, Any] | None, **more: Any) -> Any:
    raw: dict[str, Any] = {"broker": {"groups": 2, "slavesPerGroup": 1}, **more}
    if access is not None:
        raw["externalAccess"] = access
    return parse_spec(raw)


def _by_kind(objs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


# -- ports ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("g", "ordinal", "port"),
    [(0, 0, 30101), (0, 1, 30102), (0, 4, 30105), (1, 0, 30106), (2, 3, 30114), (63, 4, 30420)],
)
def test_each_pod_has_a_fixed_node_port(g: int, ordinal: int, port: int) -> None:
    access = _spec(NODE_PORT).external_access
    assert access is not None
    assert broker_node_port(access, g, ordinal) == port


def test_node_ports_never_collide_and_stay_in_range_at_the_largest_base() -> None:
    base = NODE_PORT_MAX - 64 * 5
    spec = parse_spec(
        {"broker": {"groups": 64, "slavesPerGroup": 4}, "externalAccess": {**NODE_PORT, "nodePortBase": base}}
    )
    access = spec.external_access
    assert access is not None
    ports = [broker_node_port(access, g, i) for g, i in itertools.product(range(64), range(5))]
    assert len(set(ports)) == len(ports) and base not in ports
    assert min(ports) >= NODE_PORT_MIN and max(ports) == NODE_PORT_MAX


# -- hostile specs: the model, then the API server ------------------------------------------------------------------

_REFUSED: list[tuple[str, Any, str, str]] = [
    # (id, spec, the model's words, the API server's words)
    (
        "unknown type",
        {"externalAccess": {"type": "HostPort", "nodePortBase": 30000}},
        "'NodePort' or 'LoadBalancer'",
        "spec.externalAccess.type",
    ),
    ("type missing", {"externalAccess": {"nodePortBase": 30000}}, "type", "spec.externalAccess.type: Required"),
    ("type a number", {"externalAccess": {"type": 1}}, "type", "spec.externalAccess.type"),
    ("NodePort without a base", {"externalAccess": {"type": "NodePort"}}, "needs nodePortBase", "needs nodePortBase"),
    (
        "base below the range",
        {"externalAccess": {**NODE_PORT, "nodePortBase": 29999}},
        "greater than or equal to 30000",
        "spec.externalAccess.nodePortBase",
    ),
    (
        "base above the range",
        {"externalAccess": {**NODE_PORT, "nodePortBase": 40000}},
        "less than or equal to 32767",
        "spec.externalAccess.nodePortBase",
    ),
    (
        "base a string",
        {"externalAccess": {**NODE_PORT, "nodePortBase": "30000"}},
        "valid integer",
        "spec.externalAccess.nodePortBase",
    ),
    (
        "brokers' ports past 32767",
        {"broker": {"groups": 10}, "externalAccess": {**NODE_PORT, "nodePortBase": 32720}},
        "past 32767",
        "must be at most 32767",
    ),
    (
        "ports collide with metrics",
        {"metrics": {"enabled": True, "port": 30102}, "externalAccess": NODE_PORT},
        "include spec.metrics.port",
        "include spec.metrics.port",
    ),
    (
        "base with LoadBalancer",
        {"externalAccess": {**LOAD_BALANCER, "nodePortBase": 30000}},
        "only for type NodePort",
        "nodePortBase is only for type NodePort",
    ),
    (
        "advertisedHost with LoadBalancer",
        {"externalAccess": {**LOAD_BALANCER, "advertisedHost": "mq.example.com"}},
        "only for type NodePort",
        "advertisedHost is only for type NodePort",
    ),
    (
        "advertisedHost not a host",
        {"externalAccess": {**NODE_PORT, "advertisedHost": "a b;c"}},
        "pattern",
        "spec.externalAccess.advertisedHost",
    ),
    (
        "annotation value a number",
        {"externalAccess": {**LOAD_BALANCER, "annotations": {"a": 1}}},
        "valid string",
        "spec.externalAccess.annotations.a",
    ),
    (
        "annotations a list",
        {"externalAccess": {**LOAD_BALANCER, "annotations": ["a"]}},
        "valid dictionary",
        "spec.externalAccess.annotations",
    ),
    (
        "annotation too long",
        {"externalAccess": {**LOAD_BALANCER, "annotations": {"a": "x" * 5000}}},
        "at most 4096",
        "spec.externalAccess.annotations.a",
    ),
    (
        "too many annotations",
        {"externalAccess": {**LOAD_BALANCER, "annotations": {f"a{i}": "x" for i in range(40)}}},
        "at most 32",
        "spec.externalAccess.annotations",
    ),
    (
        "unknown field",
        {"externalAccess": {**NODE_PORT, "hostPort": True}},
        "unknown field",
        'unknown field "spec.externalAccess.hostPort"',
    ),
    ("externalAccess a string", {"externalAccess": "NodePort"}, "valid dictionary", "spec.externalAccess"),
]


@pytest.mark.parametrize(("spec", "words"), [(r[1], r[2]) for r in _REFUSED], ids=[r[0] for r in _REFUSED])
def test_the_model_refuses_hostile_external_access(spec: Any, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    assert "spec.externalAccess" in str(caught.value) and words in str(caught.value)


@pytest.mark.parametrize(("spec", "words"), [(r[1], r[3]) for r in _REFUSED], ids=[r[0] for r in _REFUSED])
def test_the_api_server_refuses_hostile_external_access(kubectl: Kubectl, spec: Any, words: str) -> None:  # noqa: F811
    done = kubectl.apply(_cluster("ext", spec), dry_run=True)
    assert done.returncode != 0, f"accepted: {spec}"
    assert words in done.stderr, done.stderr


@pytest.mark.parametrize("access", [NODE_PORT, LOAD_BALANCER, {**NODE_PORT, "advertisedHost": "mq.example.com"}])
def test_the_api_server_accepts_what_the_model_accepts_and_adds_no_external_access(
    kubectl: Kubectl,  # noqa: F811
    access: dict[str, Any],
) -> None:
    assert kubectl.apply(_cluster("ext-ok", {"externalAccess": access}), dry_run=True).returncode == 0
    created = kubectl.ok("create", "-f", "-", "--dry-run=server", "-o", "json", input=_json({}))
    assert "externalAccess" not in created, "off when absent: the API server must not default it"


def _json(spec: dict[str, Any]) -> str:
    import json

    return json.dumps(_cluster("ext-default", spec))


# -- render ---------------------------------------------------------------------------------------------------------


def test_off_renders_exactly_what_it_did_without_the_field() -> None:
    plain = parse_spec({"broker": {"groups": 2, "slavesPerGroup": 1}})
    assert render_cluster(CLUSTER, _spec(None)) == render_cluster(CLUSTER, plain)
    assert not [o for o in render_cluster(CLUSTER, plain) if o["metadata"]["name"].endswith("-external")]


def test_node_port_services_one_per_pod_and_the_nameservers() -> None:
    services = _by_kind(render_cluster(CLUSTER, _spec(NODE_PORT)), "Service")
    external = {n: s for n, s in services.items() if n.endswith("-external")}
    assert sorted(external) == [
        "rc-broker-0-0-external",
        "rc-broker-0-1-external",
        "rc-broker-1-0-external",
        "rc-broker-1-1-external",
        "rc-nameserver-external",
    ]
    ns = external["rc-nameserver-external"]["spec"]
    assert ns["type"] == "NodePort" and ns["ports"][0]["nodePort"] == 30100 and ns["ports"][0]["targetPort"] == 9876
    pod = external["rc-broker-1-1-external"]
    assert pod["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == "rc-broker-1-1"
    # the broker listens on its nodePort, so the Service maps the port to itself
    assert pod["spec"]["ports"][0] == {
        "name": "main",
        "port": 30107,
        "targetPort": 30107,
        "nodePort": 30107,
        "protocol": "TCP",
    }
    assert pod["spec"]["publishNotReadyAddresses"] is True
    assert pod["metadata"]["labels"][names.LABEL_GROUP] == "1"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    # the in-cluster Services are unchanged, and so is the connection ConfigMap's contract
    assert services["rc-nameserver"]["spec"]["type"] == "ClusterIP"
    connection = _by_kind(render_cluster(CLUSTER, _spec(NODE_PORT)), "ConfigMap")["rc-connection"]["data"]
    assert sorted(connection) == ["CLUSTER_NAME", "NAMESRV_ADDR", "NAMESRV_SERVICE"]


def test_node_port_broker_conf_listens_on_the_node_port_and_keeps_the_ha_port() -> None:
    text = render_broker_conf(CLUSTER, _spec(NODE_PORT), 1, 1)
    assert "listenPort=30107\n" in text and "haListenPort=10912\n" in text and "brokerIP1" not in text
    hosted = render_broker_conf(CLUSTER, _spec({**NODE_PORT, "advertisedHost": "mq.example.com"}), 0, 0)
    assert "brokerIP1=mq.example.com\n" in hosted and "listenPort=30101\n" in hosted


def _broker_container(spec: Any, g: int = 0) -> dict[str, Any]:
    sts = _by_kind(render_cluster(CLUSTER, spec), "StatefulSet")[names.broker_statefulset("rc", g)]
    return dict(sts["spec"]["template"]["spec"]["containers"][0])


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") or e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}


@pytest.mark.parametrize(
    ("access", "ip1"),
    [
        (NODE_PORT, "status.hostIP"),
        ({**NODE_PORT, "advertisedHost": "10.1.2.3"}, None),
        (LOAD_BALANCER, "status.podIP"),
    ],
)
def test_broker_pod_advertises_outside_and_replicates_inside(access: dict[str, Any], ip1: str | None) -> None:
    env = _env(_broker_container(_spec(access), 1))
    assert env.get("BROKER_IP1") == ip1  # with advertisedHost, broker.conf's brokerIP1 wins and no env is set
    assert env["BROKER_IP2"] == "status.podIP"  # the HA address: slaves replicate inside the cluster
    assert env["POD_INDEX"] == "metadata.labels['apps.kubernetes.io/pod-index']"


def test_node_port_probes_compute_the_pods_port_from_its_ordinal() -> None:
    container = _broker_container(_spec(NODE_PORT), 1)
    assert _env(container)["BROKER_PORT_BASE"] == "30106"
    assert container["readinessProbe"]["exec"]["command"][-1].endswith(
        "--addr 127.0.0.1:$((BROKER_PORT_BASE + POD_INDEX))"
    )
    for probe in ("startupProbe", "livenessProbe"):
        assert "tcpSocket" not in container[probe] and "BROKER_PORT_BASE" in container[probe]["exec"]["command"][-1]
    # every ordinal a group may ever have is declared, so changing slavesPerGroup does not change the template
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert [ports[f"main-{i}"] for i in range(5)] == [30106, 30107, 30108, 30109, 30110] and ports["ha"] == 10912
    one_slave = _by_kind(render_cluster(CLUSTER, _spec(NODE_PORT)), "StatefulSet")["rc-broker-0"]["spec"]["template"]
    more = parse_spec({"broker": {"groups": 2, "slavesPerGroup": 3}, "externalAccess": NODE_PORT})
    three = _by_kind(render_cluster(CLUSTER, more), "StatefulSet")["rc-broker-0"]["spec"]["template"]
    assert one_slave == three


def test_load_balancer_start_waits_for_the_address_the_operator_writes() -> None:
    spec = _spec(LOAD_BALANCER)
    container = _broker_container(spec)
    script = container["command"][-1]
    assert container["command"][:2] == ["sh", "-c"]
    assert "/etc/rocketcluster-external/$POD_NAME" in script and script.endswith(
        "exec mqbroker -c '/etc/rocketcluster/broker-$(POD_INDEX).conf'"
    )
    sts = _by_kind(render_cluster(CLUSTER, spec), "StatefulSet")["rc-broker-0"]
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert volumes["external-addresses"]["configMap"] == {"name": "rc-external-addresses", "optional": True}
    services = _by_kind(render_cluster(CLUSTER, spec), "Service")
    lb = services["rc-broker-0-1-external"]
    assert lb["spec"]["type"] == "LoadBalancer" and lb["spec"]["ports"][0]["port"] == 10911
    assert "nodePort" not in lb["spec"]["ports"][0]
    assert lb["metadata"]["annotations"] == LOAD_BALANCER["annotations"]
    assert "listenPort=10911\n" in render_broker_conf(CLUSTER, spec, 0, 1)


def test_network_policies_open_the_client_ports_to_any_source() -> None:
    policies = _by_kind(render_cluster(CLUSTER, _spec(NODE_PORT)), "NetworkPolicy")
    broker_rules = policies["rc-broker"]["spec"]["ingress"]
    assert {"ports": [{"protocol": "TCP", "port": 30101, "endPort": 30110}]} in broker_rules
    ha = next(r for r in broker_rules if r["ports"][0]["port"] == 10912)
    assert ha["from"] == [{"podSelector": {"matchLabels": names.broker_selector("rc")}}]  # HA stays inside
    assert {"ports": [{"protocol": "TCP", "port": 9876}]} in policies["rc-nameserver"]["spec"]["ingress"]


# -- load balancer addresses, pruning, status, registration ---------------------------------------------------------

_INGRESS_CASES: list[tuple[str, Any, dict[str, str]]] = [
    ("ip", [{"ip": "203.0.113.7"}], {"s": "203.0.113.7"}),
    ("hostname", [{"hostname": "lb-1.example.com"}], {"s": "lb-1.example.com"}),
    ("ip before hostname", [{"ip": "203.0.113.7", "hostname": "x"}], {"s": "203.0.113.7"}),
    ("not provisioned", [], {}),
    ("ingress null", None, {}),
    ("entry not an object", ["203.0.113.7", {"ip": "203.0.113.8"}], {"s": "203.0.113.8"}),
    ("ip not a string", [{"ip": 7}], {}),
    ("empty ip", [{"ip": ""}], {}),
]


@pytest.mark.parametrize(("ingress", "hosts"), [c[1:] for c in _INGRESS_CASES], ids=[c[0] for c in _INGRESS_CASES])
def test_ingress_hosts(ingress: Any, hosts: dict[str, str]) -> None:
    service = {"metadata": {"name": "s"}, "status": {"loadBalancer": {"ingress": ingress}}}
    assert ingress_hosts([service]) == hosts


def test_addresses_config_map_data_lists_the_provisioned_pods_only() -> None:
    hosts = {"rc-broker-0-0-external": "203.0.113.1", "rc-broker-1-1-external": "lb.example.com", "other": "x"}
    assert addresses_data("rc", _spec(LOAD_BALANCER), hosts) == {
        "rc-broker-0-0": "203.0.113.1",
        "rc-broker-1-1": "lb.example.com",
    }
    assert addresses_data("rc", _spec(NODE_PORT), hosts) == {}


def _service(name: str, cluster: str = "rc", external: bool = True) -> dict[str, Any]:
    labels = {names.LABEL_CLUSTER: cluster, **({"rocketcluster.io/external": "true"} if external else {})}
    return {"metadata": {"name": name, "labels": labels}}


def test_stale_services_are_those_of_pods_no_spec_or_running_pod_needs() -> None:
    services = [
        _service("rc-nameserver-external"),
        _service("rc-broker-0-1-external"),
        _service("rc-broker-0-3-external"),  # a slave removed by a lower slavesPerGroup
        _service("rc-broker-2-0-external"),  # a group being drained: its pod still runs
        _service("rc-broker-3-0-external"),  # a group gone
        _service("rc-broker-3-1-external", cluster="other"),
        _service("rc-nameserver", external=False),
    ]
    pods = ["rc-broker-2-0", "rc-nameserver-0"]
    assert stale_services("rc", _spec(NODE_PORT), services, pods) == [
        "rc-broker-0-3-external",
        "rc-broker-3-0-external",
    ]
    # turned off: every external Service goes, whatever runs
    assert stale_services("rc", _spec(None), services, pods) == [
        "rc-broker-0-1-external",
        "rc-broker-0-3-external",
        "rc-broker-2-0-external",
        "rc-broker-3-0-external",
        "rc-nameserver-external",
    ]


def _pod(name: str, pod_ip: str | None = "10.88.0.9", host_ip: str | None = "10.250.0.1") -> dict[str, Any]:
    status = {k: v for k, v in (("podIP", pod_ip), ("hostIP", host_ip)) if v}
    g, ordinal = name.split("-")[-2:]
    labels = {
        names.LABEL_CLUSTER: "rc",
        names.LABEL_COMPONENT: names.COMPONENT_BROKER,
        names.LABEL_GROUP: g,
        names.LABEL_POD_INDEX: ordinal,
    }
    return {"metadata": {"name": name, "labels": labels, "uid": name}, "status": status}


@pytest.mark.parametrize(
    ("access", "pod", "hosts", "address"),
    [
        (None, _pod("rc-broker-0-1"), {}, "10.88.0.9:10911"),
        (None, _pod("rc-broker-0-1", pod_ip=None), {}, None),
        (NODE_PORT, _pod("rc-broker-0-1"), {}, "10.250.0.1:30102"),
        (NODE_PORT, _pod("rc-broker-0-1", host_ip=None), {}, None),
        (
            {**NODE_PORT, "advertisedHost": "mq.example.com"},
            _pod("rc-broker-0-1", host_ip=None),
            {},
            "mq.example.com:30102",
        ),
        (LOAD_BALANCER, _pod("rc-broker-0-1"), {"rc-broker-0-1-external": "203.0.113.5"}, "203.0.113.5:10911"),
        (LOAD_BALANCER, _pod("rc-broker-0-1"), {}, None),
    ],
)
def test_advertised_address(access: Any, pod: dict[str, Any], hosts: dict[str, str], address: str | None) -> None:
    assert advertised_address(_spec(access), "rc", 0, 1, pod, hosts) == address


def test_a_broker_counts_as_registered_only_at_its_external_address() -> None:
    spec = _spec(NODE_PORT)
    pods = [_pod("rc-broker-0-0"), _pod("rc-broker-0-1")]

    def observed(registered: dict[int, str]) -> dict[int, bool]:
        facts = BrokerFacts({0: GroupFacts(registered=registered)})
        obs = build_observed(
            name="rc",
            generation=1,
            now=0.0,
            spec=spec,
            annotations={},
            statefulsets=[],
            pods=pods,
            facts=facts,
            status={},
        )
        return {p.ordinal: p.registered for p in obs.broker_groups[0].pods}

    assert observed({0: "10.250.0.1:30101", 1: "10.250.0.1:30102"}) == {0: True, 1: True}
    # the pod IP and 10911 is the address of a broker that has not restarted with external access yet
    assert observed({0: "10.88.0.9:10911", 1: "10.250.0.1:30101"}) == {0: False, 1: False}


def test_external_status_lists_the_nameservers_and_every_broker() -> None:
    pods = [_pod("rc-broker-0-0"), {"metadata": {"name": "rc-nameserver-0"}, "status": {"hostIP": "10.250.0.1"}}]
    status = external_status("rc", _spec(NODE_PORT), pods, {})
    assert status is not None
    assert status["type"] == "NodePort" and status["nameServer"] == "10.250.0.1:30100"
    assert status["brokers"][:2] == [
        {"pod": "rc-broker-0-0", "address": "10.250.0.1:30101"},
        {"pod": "rc-broker-0-1", "address": None},  # no pod yet: no node
    ]
    assert len(status["brokers"]) == 4
    lb = external_status("rc", _spec(LOAD_BALANCER), pods, {"rc-nameserver-external": "lb.example.com"})
    assert lb is not None and lb["nameServer"] == "lb.example.com:9876" and lb["brokers"][0]["address"] is None
    assert external_status("rc", _spec(None), pods, {}) is None
