"""The controller inside the NameServer (enableControllerInNamesrv=true), from RocketMQ's quick-start namesrv.conf.

A real mqnamesrv process: routes stay on listenPort, the controller answers on its peer address.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from broker.controller.client import ControllerClient
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport import connect
from tests.controller.controller_procs import free_ports

MQNAMESRV = str(Path(sys.executable).with_name("mqnamesrv"))


def _quick_start(tmp_path: Path, namesrv_port: int, peer_port: int) -> Path:
    """distribution/conf/controller/quick-start/namesrv.conf, with free ports and a store under tmp_path."""
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        f"listenPort = {namesrv_port}\n"
        "enableControllerInNamesrv = true\n"
        "controllerDLegerGroup = group1\n"
        f"controllerDLegerPeers = n0-127.0.0.1:{peer_port}\n"
        "controllerDLegerSelfId = n0\n"
        f"controllerStorePath = {tmp_path / 'DledgerController'}\n"
        f"kvConfigPath = {tmp_path / 'kv.json'}\n"
    )
    return conf


def test_print_config_does_not_warn_about_controller_keys(tmp_path: Path) -> None:
    conf = _quick_start(tmp_path, 19876, 19878)
    out = subprocess.run(
        [MQNAMESRV, "-c", str(conf), "-p"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr
    assert "enableControllerInNamesrv=true" in out.stdout.splitlines()
    assert "unknown" not in out.stderr
    # enabled without the controller keys: refused, naming the key
    conf.write_text("enableControllerInNamesrv = true\n")
    bad = subprocess.run(
        [MQNAMESRV, "-c", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert bad.returncode == 1 and "controllerD" in bad.stderr, bad.stderr


async def test_quick_start_namesrv_serves_routes_and_the_controller(tmp_path: Path) -> None:
    namesrv_port, peer_port = free_ports(2)
    conf = _quick_start(tmp_path, namesrv_port, peer_port)
    proc = subprocess.Popen(
        [MQNAMESRV, "-c", str(conf)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.to_thread(proc.stdout.readline)
        assert "The Name Server boot success" in line, line
        conn = await connect(("127.0.0.1", namesrv_port))
        reply = await conn.invoke(RemotingCommand(code=RequestCode.GET_BROKER_CLUSTER_INFO), 5)
        conn.close()
        assert reply.code == ResponseCode.SUCCESS
        client = ControllerClient([f"127.0.0.1:{peer_port}"])
        try:
            deadline = time.monotonic() + 30
            while True:
                meta = await client.metadata(f"127.0.0.1:{peer_port}")
                if meta.ext_fields.get("isLeader") == "true":
                    break
                assert time.monotonic() < deadline, meta.ext_fields
                await asyncio.sleep(0.2)
            assert meta.ext_fields["controllerLeaderAddress"] == f"127.0.0.1:{peer_port}"
            assert meta.ext_fields["peers"] == f"n0:127.0.0.1:{peer_port}"
            fields = {"clusterName": "DefaultCluster", "brokerName": "broker-a"}
            nxt = await client.invoke_leader(
                RemotingCommand(code=RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, ext_fields=fields)
            )
            assert nxt.code == ResponseCode.SUCCESS and nxt.ext_fields["nextBrokerId"] == "1"
        finally:
            await client.close()
    finally:
        proc.terminate()
        proc.wait(15)
