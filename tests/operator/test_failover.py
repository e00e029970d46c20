"""spec.failover: the model's checks, the rendered NameServer (controller) and broker (controller mode) config and
pods, loaded back by the broker's, the NameServer's and the controller's own loaders, and the start command run
by a real shell."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from broker.config.properties import parse_properties
from broker.controller.config import ControllerConfig
from broker.namesrv.config import NamesrvConfig
from broker.server.config import load_broker_config
from rocketcluster import names
from rocketcluster.model import SpecError, parse_spec
from rocketcluster.names import ClusterRef
from rocketcluster.render import render_broker_conf, render_cluster, render_nameserver_conf
from rocketcluster.render_failover import (
    CONTROLLER_PORT,
    RAFT_FILE,
    RAFT_PORT,
    controller_addr,
    raft_properties,
    raft_secret_name,
    render_raft_secret,
)
from rocketcluster.render_security import AUTH_FILE, CREDENTIALS_DIR, auth_properties

CLUSTER = ClusterRef("demo", "ns", "uid-1")
FAILOVER = {"failover": {"enabled": True}, "broker": {"replication": "SYNC", "slavesPerGroup": 2}}


def _spec(**raw: Any) -> Any:
    return parse_spec({**FAILOVER, "nameServer": {"replicas": 3}, **raw})


def _by(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def test_off_by_default_changes_nothing() -> None:
    plain = parse_spec({"broker": {"replication": "SYNC"}})
    off = parse_spec({"broker": {"replication": "SYNC"}, "failover": {"enabled": False}})
    assert not plain.failover.enabled
    assert render_cluster(CLUSTER, plain) == render_cluster(CLUSTER, off)
    text = render_nameserver_conf(plain, CLUSTER) + render_broker_conf(CLUSTER, plain, 0, 0)
    assert "controller" not in text.lower().replace("rocketcluster", "")


@pytest.mark.parametrize(
    ("raw", "path", "words"),
    [
        ({"failover": {"enabled": True}}, "spec", "needs broker.replication SYNC"),
        (
            {"failover": {"enabled": True}, "broker": {"replication": "ASYNC", "slavesPerGroup": 1}},
            "spec",
            "SYNC",
        ),
        ({"failover": {"enabled": "yes"}}, "spec.failover.enabled", "boolean"),
        ({"failover": {"controllerStorageSize": "lots"}}, "spec.failover.controllerStorageSize", "pattern"),
        ({"failover": {"enabled": True, "peers": 3}}, "spec.failover.peers", "unknown field"),
        ({"broker": {"config": {"enableControllerMode": "true"}}}, "spec.broker.config", "owned"),
        ({"broker": {"config": {"controllerAddr": "x:9878"}}}, "spec.broker.config", "owned"),
        ({"broker": {"config": {"allAckInSyncStateSet": "false"}}}, "spec.broker.config", "owned"),
    ],
)
def test_bad_failover_specs_are_refused_naming_the_field(raw: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(raw)
    assert any(p == path and words in m for p, m in caught.value.problems), caught.value.problems


def test_the_nameserver_conf_names_every_controller_and_loads_with_the_password_and_self_id(tmp_path: Path) -> None:
    spec = _spec()
    text = render_nameserver_conf(spec, CLUSTER)
    assert "Password" not in text  # the secret is only in the Secret
    for ordinal in range(3):
        merged = text + raft_properties("s3cret-_x") + f"controllerDLegerSelfId=n{ordinal}\n"
        props = parse_properties(merged)
        props["kvConfigPath"] = str(tmp_path / "kv.json")
        namesrv = NamesrvConfig.from_properties(props)
        assert namesrv.enable_controller_in_namesrv
        controller = ControllerConfig.from_properties(props, warn_unknown=False)
        assert [p.peer_id for p in controller.peers] == ["n0", "n1", "n2"]
        me = controller.self_peer
        assert me.host == f"demo-nameserver-{ordinal}.demo-nameserver-headless.ns.svc" and me.port == CONTROLLER_PORT
        assert controller.raft_password == "s3cret-_x"
        assert controller.raft_address(me).endswith(f":{RAFT_PORT}")
        assert str(controller.store_path).startswith(names.DATA_MOUNT_PATH + "/")
        assert not controller.enable_elect_unclean_master
        assert controller.scan_not_active_broker_interval == 1000


@pytest.mark.parametrize("ordinal", [0, 1, 2])
def test_every_broker_starts_in_controller_mode(ordinal: int) -> None:
    spec = _spec()
    loaded = load_broker_config(parse_properties(render_broker_conf(CLUSTER, spec, 0, ordinal)))
    assert loaded.broker.enable_controller_mode
    assert loaded.broker.broker_id == -1
    assert loaded.broker.controller_addr == controller_addr(CLUSTER, spec)
    assert loaded.broker.controller_addr.count(f":{CONTROLLER_PORT}") == 3
    assert loaded.broker.all_ack_in_sync_state_set and not loaded.unknown_keys


@pytest.mark.parametrize(
    ("config", "timeout_ms"),
    [
        ({}, 6000),  # the operator's default: six missed heartbeats
        ({"controllerHeartBeatTimeoutMills": "15000"}, 15000),  # the user's value wins
    ],
)
def test_brokers_are_dead_after_the_heartbeat_timeout(config: dict[str, str], timeout_ms: int) -> None:
    spec = _spec(broker={**FAILOVER["broker"], "config": config})
    loaded = load_broker_config(parse_properties(render_broker_conf(CLUSTER, spec, 0, 1)))
    assert loaded.broker.controller_heart_beat_timeout_mills == timeout_ms
    plain = parse_spec({"broker": {"replication": "SYNC"}})
    assert "controllerHeartBeatTimeoutMills" not in render_broker_conf(CLUSTER, plain, 0, 1)


def test_the_nameserver_statefulset_has_a_volume_the_ports_and_the_secret() -> None:
    objects = render_cluster(CLUSTER, _spec())
    sts = _by(objects, "StatefulSet", "demo-nameserver")
    body = sts["spec"]
    assert body["podManagementPolicy"] == "Parallel"
    assert body["volumeClaimTemplates"][0]["metadata"]["name"] == names.DATA_VOLUME
    assert body["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    pod = body["template"]["spec"]
    container = pod["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"namesrv": 9876, "controller": CONTROLLER_PORT, "raft": RAFT_PORT}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[names.DATA_VOLUME] == names.DATA_MOUNT_PATH
    secrets = [v for v in pod["volumes"] if "secret" in v]
    assert [v["secret"]["secretName"] for v in secrets] == [raft_secret_name("demo")]
    assert {"name": "POD_INDEX"}.items() <= container["env"][-1].items()
    config_map = _by(objects, "ConfigMap", "demo-nameserver-config")
    assert "controllerRaftPassword" not in str(config_map)


def test_ephemeral_storage_gives_the_controller_an_empty_dir() -> None:
    sts = _by(render_cluster(CLUSTER, _spec(storage={"type": "ephemeral"})), "StatefulSet", "demo-nameserver")
    assert "volumeClaimTemplates" not in sts["spec"]
    volume = next(v for v in sts["spec"]["template"]["spec"]["volumes"] if v["name"] == names.DATA_VOLUME)
    assert volume == {"name": names.DATA_VOLUME, "emptyDir": {"sizeLimit": "1Gi"}}


def test_network_policy_admits_the_controller_to_the_cluster_and_raft_to_the_nameservers_only() -> None:
    objects = render_cluster(CLUSTER, _spec(), operator_namespace="ops")
    policy = _by(objects, "NetworkPolicy", next(o["metadata"]["name"] for o in objects if o["kind"] == "NetworkPolicy"))
    rules = {r["ports"][0]["port"]: r["from"] for r in policy["spec"]["ingress"]}
    assert {"podSelector": {}} not in rules[CONTROLLER_PORT]  # not every client of the namespace
    assert {"podSelector": {"matchLabels": {names.LABEL_CLUSTER: "demo"}}} in rules[CONTROLLER_PORT]
    assert any("namespaceSelector" in peer for peer in rules[CONTROLLER_PORT])  # the operator
    assert rules[RAFT_PORT] == [{"podSelector": {"matchLabels": names.nameserver_selector("demo")}}]


def _run_start_command(tmp_path: Path, command: list[str], ordinal: int, with_auth: bool) -> dict[str, str]:
    """The NameServer's `sh -c` script run by /bin/sh, the pod's paths moved under tmp_path."""
    assert command[:2] == ["sh", "-c"]
    etc, raft, home, tmp, creds = (tmp_path / d for d in ("etc", "raft", "home", "tmp", "creds"))
    for d in (etc, raft, home, tmp, creds):
        d.mkdir()
    (etc / names.NAMESERVER_CONF_FILE).write_text(render_nameserver_conf(_spec(), CLUSTER))
    (raft / RAFT_FILE).write_text(raft_properties("pw-1"))
    (creds / AUTH_FILE).write_text(auth_properties("op", "k"))
    script = (
        command[2]
        .replace("'/tmp/", f"'{tmp}/")  # first: the paths below are under /tmp too
        .replace("/etc/rocketcluster-controller/", f"{raft}/")
        .replace(f"{CREDENTIALS_DIR}/", f"{creds}/")
        .replace(f"{names.BROKER_CONFIG_DIR}/", f"{etc}/")
        .replace("/home/rocketmq/", f"{home}/")
        .replace("$(POD_INDEX)", str(ordinal))
        .replace("exec mqnamesrv", "exec echo")
    )
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=True).stdout
    merged = Path(out.split()[-1])
    assert merged.stat().st_mode & 0o077 == 0  # umask 077: only the NameServer's user reads the password
    props = parse_properties(merged.read_text())
    assert ("initAuthenticationUser" in props) == with_auth
    return props


@pytest.mark.parametrize("with_auth", [False, True])
def test_the_start_command_adds_the_password_and_the_self_id_in_a_real_shell(tmp_path: Path, with_auth: bool) -> None:
    security = {"security": {"authentication": {"enabled": True}}} if with_auth else {}
    sts = _by(render_cluster(CLUSTER, _spec(**security)), "StatefulSet", "demo-nameserver")
    props = _run_start_command(tmp_path, sts["spec"]["template"]["spec"]["containers"][0]["command"], 2, with_auth)
    assert props["controllerDLegerSelfId"] == "n2"
    assert props["controllerRaftPassword"] == "pw-1"
    assert props["enableControllerInNamesrv"] == "true"


def test_the_raft_secret() -> None:
    secret = render_raft_secret(CLUSTER, "abc_-123")
    assert secret["metadata"]["name"] == "demo-controller-raft"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert parse_properties(secret["stringData"][RAFT_FILE]) == {"controllerRaftPassword": "abc_-123"}


def test_rendering_is_deterministic() -> None:
    assert render_cluster(CLUSTER, _spec()) == render_cluster(CLUSTER, _spec())
