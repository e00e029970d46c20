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
