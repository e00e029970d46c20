"""BROKER_IP1, BROKER_IP2 and NAMESRV_ADDR from the environment: used when broker.conf leaves the key unset."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker.server.config import env_overrides

MQBROKER = [sys.executable, "-m", "broker.cli.mqbroker"]


@pytest.mark.parametrize(
    ("environ", "properties", "expected"),
    [
        ({}, {}, {}),
        ({"BROKER_IP1": "10.1.2.3"}, {}, {"brokerIP1": "10.1.2.3"}),
        ({"BROKER_IP1": " 10.1.2.3 "}, {}, {"brokerIP1": "10.1.2.3"}),
        ({"BROKER_IP1": ""}, {}, {}),
        ({"BROKER_IP1": "10.1.2.3"}, {"brokerIP1": "192.168.0.9"}, {}),  # the file wins
        ({"BROKER_IP1": "10.1.2.3"}, {"brokerIP1": " "}, {"brokerIP1": "10.1.2.3"}),  # a blank key is unset
        ({"NAMESRV_ADDR": "ns-0:9876;ns-1:9876"}, {}, {"namesrvAddr": "ns-0:9876;ns-1:9876"}),
        ({"NAMESRV_ADDR": "ns:9876", "BROKER_IP1": "10.1.2.3"}, {"namesrvAddr": "x:1"}, {"brokerIP1": "10.1.2.3"}),
        (
            {"NAMESRV_ADDR": "ns:9876", "BROKER_IP1": "10.1.2.3"},
            None,
            {"namesrvAddr": "ns:9876", "brokerIP1": "10.1.2.3"},
        ),
        ({"BROKER_IP2": "10.88.0.7"}, {}, {"brokerIP2": "10.88.0.7"}),
        ({"BROKER_IP2": "10.88.0.7"}, {"brokerIP2": "10.0.0.1"}, {}),  # the file wins
        ({"BROKER_IP2": " \t"}, {}, {}),
    ],
)
def test_env_overrides(environ: dict[str, str], properties: dict[str, str] | None, expected: dict[str, str]) -> None:
    assert env_overrides(environ, properties) == expected


def _print_config(conf: Path, **env: str) -> dict[str, str]:
    out = subprocess.run(
        [*MQBROKER, "-c", str(conf), "-p"],
        capture_output=True,
        text=True,
        env={**os.environ, "NAMESRV_ADDR": "", "BROKER_IP1": "", "BROKER_IP2": "", **env},
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return dict(line.split("=", 1) for line in out.stdout.splitlines())


def test_mqbroker_takes_broker_ip1_from_the_environment(tmp_path: Path) -> None:
    # the operator's file sets namesrvAddr and leaves brokerIP1 to the pod's environment
    conf = tmp_path / "broker-1.conf"
    conf.write_text("brokerName=rc-0\nbrokerId=1\nbrokerRole=SLAVE\nnamesrvAddr=ns-0:9876\n")
    props = _print_config(conf, BROKER_IP1="10.244.1.17", NAMESRV_ADDR="elsewhere:9876")
    assert props["brokerIP1"] == "10.244.1.17"
    assert props["brokerIP2"] == "10.244.1.17"  # derived from brokerIP1, as without the environment
    assert props["namesrvAddr"] == "ns-0:9876"
    conf.write_text("brokerName=rc-0\nbrokerIP1=192.168.7.7\n")
    assert _print_config(conf, BROKER_IP1="10.244.1.17")["brokerIP1"] == "192.168.7.7"


def test_mqbroker_takes_broker_ip2_apart_from_broker_ip1(tmp_path: Path) -> None:
    # external access: the node's IP and a nodePort for clients, the pod's IP for the HA address
    conf = tmp_path / "broker-0.conf"
    conf.write_text("brokerName=rc-0\nbrokerId=0\nlistenPort=30101\nhaListenPort=10912\n")
    props = _print_config(conf, BROKER_IP1="10.250.0.1", BROKER_IP2="10.88.0.12")
    assert (props["brokerIP1"], props["listenPort"]) == ("10.250.0.1", "30101")
    assert (props["brokerIP2"], props["haListenPort"]) == ("10.88.0.12", "10912")
