"""ControllerConfig and `mqcontroller -c`: RocketMQ's shipped controller configs load; bad ones are refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from broker.config.errors import ConfigError
from broker.config.properties import parse_properties
from broker.controller.config import ControllerConfig, parse_peers

MQCONTROLLER = str(Path(sys.executable).with_name("mqcontroller"))

# distribution/conf/controller/cluster-3n-namesrv-plugin/namesrv-n1.conf as shipped (licence block and all)
SHIPPED_NAMESRV_N1 = """<!--
  Licensed to the Apache Software Foundation (ASF) under one or more
  contributor license agreements.
-->
listenPort = 9886
enableControllerInNamesrv = true
controllerDLegerGroup = group1
controllerDLegerPeers = n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858
controllerDLegerSelfId = n1
"""


def test_shipped_embedded_config_loads() -> None:
    values = parse_properties(SHIPPED_NAMESRV_N1)
    config = ControllerConfig.from_properties(values, warn_unknown=False)
    assert config.self_peer.address == "127.0.0.1:9868"
    assert [p.peer_id for p in config.peers] == ["n0", "n1", "n2"]
    assert config.raft_address(config.self_peer) == "127.0.0.1:9869"
    assert config.enable_elect_unclean_master is False and config.notify_broker_role_changed is True
    assert config.scan_not_active_broker_interval == 5000


@pytest.mark.parametrize(
    ("peers", "problem"),
    [
        ("", "no peer"),
        ("n0127.0.0.1:9878", "not id-host:port"),
        ("n0-127.0.0.1", "not id-host:port"),
        ("n0-127.0.0.1:port", "no valid port"),
        ("n0-127.0.0.1:0", "no valid port"),
        ("n0-127.0.0.1:70000", "no valid port"),
        ("n0-a:1;n0-b:2", "listed twice"),
        (";".join(f"n{i}-h:{1000 + i}" for i in range(16)), "at most"),
    ],
)
def test_malformed_peers(peers: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_peers(peers)
    with pytest.raises(ConfigError):
        ControllerConfig.from_properties({"controllerDLegerPeers": peers, "controllerDLegerSelfId": "n0"})


@pytest.mark.parametrize(
    "values",
    [
        {"controllerDLegerPeers": "n0-127.0.0.1:9878", "controllerDLegerSelfId": "n9"},
        {"controllerDLegerPeers": "n0-127.0.0.1:65535", "controllerDLegerSelfId": "n0"},
        {"controllerDLegerPeers": "n0-127.0.0.1:9878", "controllerDLegerSelfId": "n0", "controllerType": "Raft"},
        {
            "controllerDLegerPeers": "n0-127.0.0.1:9878",
            "controllerDLegerSelfId": "n0",
            "enableElectUncleanMaster": "maybe",
        },
        {
            "controllerDLegerPeers": "n0-127.0.0.1:9878",
            "controllerDLegerSelfId": "n0",
            "scanNotActiveBrokerInterval": "-1",
        },
    ],
)
def test_bad_values_are_refused(values: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        ControllerConfig.from_properties(values)


@pytest.mark.parametrize(
    ("peers", "password", "raft_bind"),
    [
        ("n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858", "", "127.0.0.1"),  # RocketMQ's quick start
        ("n0-localhost:9878", "", "127.0.0.1"),
        ("n0-[::1]:9878", "", "127.0.0.1"),
        ("n0-127.0.0.1:9878;n1-10.0.0.2:9878", "", None),
        ("n0-c-0.c-headless.ns.svc:9878", "", None),
        ("n0-10.0.0.1:9878;n1-10.0.0.2:9878", "s3cret", "0.0.0.0"),
        ("n0-127.0.0.1:9878", "s3cret", "0.0.0.0"),
    ],
)
def test_the_raft_port_needs_a_secret_key_beyond_loopback(peers: str, password: str, raft_bind: str | None) -> None:
    """pysyncobj unpickles what a holder of the key sends: without controllerRaftPassword the key is the group
    name, so the Raft port listens on loopback alone and peers elsewhere are refused."""
    values = {"controllerDLegerPeers": peers, "controllerDLegerSelfId": "n0", "controllerRaftPassword": password}
    if raft_bind is None:
        with pytest.raises(ConfigError, match="controllerRaftPassword is required"):
            ControllerConfig.from_properties(values)
    else:
        assert ControllerConfig.from_properties(values).raft_bind_address == raft_bind


def test_mqcontroller_print_and_refusals(tmp_path: Path) -> None:
    conf = tmp_path / "controller.conf"
    conf.write_text(
        "controllerDLegerGroup = group1\ncontrollerDLegerPeers = n0-127.0.0.1:9878\ncontrollerDLegerSelfId = n0\n"
        "controllerRaftPassword = s3cret\nlistenPrt = 1\n"
    )
    out = subprocess.run([MQCONTROLLER, "-c", str(conf), "-p"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "controllerDLegerSelfId=n0" in out.stdout.splitlines()
    assert "s3cret" not in out.stdout
    assert "unknown controller config key 'listenPrt'" in out.stderr
    conf.write_text("controllerDLegerPeers = n0-127.0.0.1:9878\ncontrollerDLegerSelfId = n1\n")
    bad = subprocess.run([MQCONTROLLER, "-c", str(conf)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "controllerDLegerSelfId" in bad.stderr
    missing = subprocess.run(
        [MQCONTROLLER, "-c", str(tmp_path / "nope.conf")], capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 1 and "nope.conf" in missing.stderr


def test_a_refused_config_names_the_problem_and_never_the_raft_password() -> None:
    values = {
        "controllerDLegerPeers": "n0-127.0.0.1:9878",
        "controllerDLegerSelfId": "n1",
        "controllerRaftPassword": "TopSecret42",
    }
    with pytest.raises(ConfigError) as caught:
        ControllerConfig.from_properties(values)
    assert "controllerDLegerSelfId 'n1' is not in the peers" in str(caught.value)
    assert "TopSecret42" not in str(caught.value)
