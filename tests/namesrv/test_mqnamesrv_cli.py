"""The mqnamesrv console script as a real process: -c, -p, bad keys, listening and SIGTERM shutdown."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport import connect

MQNAMESRV = str(Path(sys.executable).with_name("mqnamesrv"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(tmp_path)}


def test_print_config_and_bad_key(tmp_path) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=19999\norderMessageEnable=true\n")
    out = subprocess.run(
        [MQNAMESRV, "-c", str(conf), "-p"], capture_output=True, text=True, env=_env(tmp_path), timeout=30
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert {"listenPort=19999", "orderMessageEnable=true", "scanNotActiveBrokerInterval=5000"} <= set(lines)
    # an unknown key: warned about by name and file, and ignored (as the broker does)
    conf.write_text("listenPort=19999\nlistenPrt=1\n")
    typo = subprocess.run(
        [MQNAMESRV, "-c", str(conf), "-p"], capture_output=True, text=True, env=_env(tmp_path), timeout=30
    )
    assert typo.returncode == 0, typo.stderr
    assert f"unknown NameServer config key 'listenPrt' in {conf} is ignored" in typo.stderr
    assert "listenPort=19999" in typo.stdout.splitlines() and "listenPrt" not in typo.stdout
    # a bad value of a known key still stops it, naming the key
    conf.write_text("listenPort=nine\n")
    bad = subprocess.run([MQNAMESRV, "-c", str(conf)], capture_output=True, text=True, env=_env(tmp_path), timeout=30)
    assert bad.returncode != 0
    assert "listenPort" in bad.stderr and str(conf) in bad.stderr


def test_serves_and_stops_on_sigterm(tmp_path) -> None:
    port = _free_port()
    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"listenPort={port}\nbindAddress=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\n")
    proc = subprocess.Popen(
        [MQNAMESRV, "-c", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp_path)
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("The Name Server boot success. serializeType=JSON")
        assert f"127.0.0.1:{port}" in line

        async def query() -> RemotingCommand:
            conn = await connect(("127.0.0.1", port))
            reply = await conn.invoke(RemotingCommand(code=RequestCode.GET_BROKER_CLUSTER_INFO), 5)
            conn.close()
            return reply

        assert asyncio.run(query()).code == ResponseCode.SUCCESS
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert time.monotonic() - started < 10
        assert "The Name Server shutdown OK" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
