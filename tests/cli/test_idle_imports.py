"""What a server process loads when a feature is off: the heavy packages behind metrics (prometheus_client,
numpy), controller mode (pysyncobj, and cryptography through it) and asyncio in the index helper process
are imported only by the feature that needs them, since each costs the idle process resident memory.

Each check runs in a fresh interpreter (a child process), as the servers start: a test process has
imported everything already.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from broker.running_loop import running_loop

HEAVY = ("prometheus_client", "numpy", "pysyncobj", "cryptography")

# A NameServer and a broker as mqnamesrv and mqbroker build them (their modules imported first), started on
# free ports with an empty store; then the heavy packages this process has loaded, as JSON.
_SERVERS = """
import asyncio, sys
import orjson
import broker.cli.mqbroker, broker.cli.mqnamesrv
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.server.broker import BrokerController
from broker.server.config import load_broker_config
from broker.transport.loop import run

async def main(root, metrics):
    ns = NamesrvController(NamesrvConfig.model_validate({
        "listenPort": 0, "kvConfigPath": root + "/kv.json", "metricsExporterType": metrics,
        "metricsPromExporterPort": 0}))
    await ns.start()
    broker = BrokerController(load_broker_config({
        "brokerName": "idle", "listenPort": "0", "brokerIP1": "127.0.0.1", "storePathRootDir": root + "/store",
        "namesrvAddr": f"127.0.0.1:{ns.port}", "mappedFileSizeCommitLog": str(1 << 20),
        "metricsExporterType": metrics, "metricsPromExporterPort": "0"}))
    await broker.start()
    loaded = sorted(name for name in sys.modules if name.split(".")[0] in sys.argv[3].split(","))
    await broker.shutdown()
    await ns.shutdown()
    return loaded

print(orjson.dumps(sorted({name.split(".")[0] for name in run(main(sys.argv[1], sys.argv[2]))})).decode())
"""


def _loaded_by_servers(root: Path, metrics: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", _SERVERS, str(root), metrics, ",".join(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found: list[str] = orjson.loads(proc.stdout.splitlines()[-1])
    return found


def test_servers_with_metrics_and_controller_mode_off_load_none_of_the_heavy_packages(tmp_path: Path) -> None:
    assert _loaded_by_servers(tmp_path, "DISABLE") == []


def test_metrics_on_still_load_what_they_need(tmp_path: Path) -> None:
    assert _loaded_by_servers(tmp_path, "PROM") == ["numpy", "prometheus_client"]


def test_the_index_helper_process_runs_without_asyncio() -> None:
    # call_later_or_now off any loop calls back at once; it must not load asyncio to find that out
    script = (
        "import sys, broker.store.index_helper\n"
        "from broker.store.dispatch_request import call_later_or_now\n"
        "called = []\n"
        "assert call_later_or_now(1.0, lambda: called.append(1)) is None and called == [1]\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('asyncio', 'ssl')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"


def test_running_loop_is_the_loop_inside_one_and_none_outside() -> None:
    import asyncio

    async def inside() -> asyncio.AbstractEventLoop | None:
        return running_loop()

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(inside()) is loop
    finally:
        loop.close()
    assert running_loop() is None


@pytest.mark.parametrize("module", ["broker.cli.mqnamesrv", "broker.cli.mqbroker"])
def test_the_server_entry_modules_import_none_of_the_heavy_packages(module: str) -> None:
    script = f"import sys, {module}\nprint(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}))"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"
