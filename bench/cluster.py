"""A NameServer and one broker in a child process, for the benchmarks that measure a client against them.

The child keeps the servers' CPU out of the measuring process (bench.spark, bench.consume), and prints the
NameServer's port once both are up.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["server_command", "start_cluster"]

_CHILD = """
import asyncio, sys
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.server.broker import BrokerController
from broker.server.config import load_broker_config
from broker.transport.loop import run

async def main(root, broker_name):
    ns = NamesrvController(NamesrvConfig.model_validate({"listenPort": 0, "kvConfigPath": root + "/kv.json"}))
    await ns.start()
    broker = BrokerController(load_broker_config({
        "brokerClusterName": "BenchCluster", "brokerName": broker_name, "listenPort": "0",
        "brokerIP1": "127.0.0.1", "storePathRootDir": root + "/store", "namesrvAddr": f"127.0.0.1:{ns.port}",
        "mappedFileSizeCommitLog": str(256 << 20)}))
    await broker.start()
    print(ns.port, flush=True)
    await asyncio.Event().wait()

run(main(sys.argv[1], sys.argv[2]))
"""


def start_cluster(root: Path, broker_name: str) -> tuple[subprocess.Popen[str], str]:
    """The child process and its NameServer address; the caller kills the child when done."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(root), broker_name],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "NAMESRV_ADDR": ""},
    )
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    if not port:
        proc.kill()
        raise SystemExit("the benchmark's NameServer and broker did not start")
    return proc, f"127.0.0.1:{port}"


def server_command(program: str, conf: Path) -> list[str]:
    """The command line of our `mqnamesrv` or `mqbroker` reading `conf` (a .properties file), as a user
    starts it: its own process, so a benchmark can time its start, read its memory and kill -9 it."""
    if program not in ("mqnamesrv", "mqbroker"):
        raise ValueError(program)
    return [sys.executable, "-m", f"broker.cli.{program}", "-c", str(conf)]
