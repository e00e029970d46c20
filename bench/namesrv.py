"""NameServer benchmark: GET_ROUTEINFO_BY_TOPIC lookups per second over loopback.

Run `python -m bench.namesrv [--seconds 3] [--topics 200]`. A NameServer runs in a child process
(`python -m bench.namesrv serve`); this process registers two broker groups (master + slave) with
`--topics` topics, then keeps 1 or 64 route lookups in flight on one connection, for old clients
(version 317, fastjson form) and new ones (479, standard JSON). Prints a markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import subprocess
import sys
import tempfile
import time
import zlib

from bench.net import _machine
from bench.proc import cpu_s
from broker.namesrv.body import DataVersion, RegisterBrokerBody, TopicConfig, encode_register_body
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport import RemotingConnection, connect
from broker.transport.loop import run

__all__ = ["main"]

log = logging.getLogger(__name__)


async def _serve() -> None:
    kv_dir = tempfile.mkdtemp(prefix="bench-namesrv-")
    controller = NamesrvController(
        NamesrvConfig(listen_port=0, bind_address="127.0.0.1", kv_config_path=os.path.join(kv_dir, "kv.json"))
    )
    await controller.start()
    print(controller.port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await controller.shutdown()


async def _register(conn: RemotingConnection, topics: list[str]) -> None:
    body = RegisterBrokerBody(
        topic_configs={t: TopicConfig(t, 8, 8, 6) for t in topics}, data_version=DataVersion(1, 0, 1)
    )
    raw = encode_register_body(body, compressed=True)
    for name, base in (("broker-a", 1), ("broker-b", 3)):
        for broker_id in (0, 1):
            addr = f"10.0.0.{base + broker_id}:10911"
            ext = {
                "brokerName": name,
                "brokerAddr": addr,
                "clusterName": "DefaultCluster",
                "haServerAddr": f"10.0.0.{base + broker_id}:10912",
                "brokerId": str(broker_id),
                "compressed": "true",
                "bodyCrc32": str(zlib.crc32(raw) & 0x7FFFFFFF),
            }
            reply = await conn.invoke(RemotingCommand(code=RequestCode.REGISTER_BROKER, ext_fields=ext, body=raw), 10)
            if reply.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"register failed: {reply.remark}")


async def _lookups(
    conn: RemotingConnection, pid: int, topics: list[str], window: int, version: int, seconds: float
) -> tuple[float, float]:
    done = 0
    stop = False

    async def worker(seed: int) -> None:
        nonlocal done
        rng = random.Random(seed)
        while not stop:
            cmd = RemotingCommand(
                code=RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": rng.choice(topics)}, version=version
            )
            reply = await conn.invoke(cmd, 10)
            if reply.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"lookup failed: {reply.remark}")
            done += 1

    tasks = [asyncio.ensure_future(worker(i)) for i in range(window)]
    await asyncio.sleep(0.5)
    count0, cpu0, t0 = done, cpu_s(pid), time.perf_counter()
    await asyncio.sleep(seconds)
    count1, cpu1, t1 = done, cpu_s(pid), time.perf_counter()
    stop = True
    await asyncio.gather(*tasks)
    return (count1 - count0) / (t1 - t0), (cpu1 - cpu0) / (t1 - t0)


async def _bench(seconds: float, topic_count: int) -> list[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.namesrv", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdin is not None
    port = int(proc.stdout.readline())
    rows = []
    try:
        conn = await connect(("127.0.0.1", port))
        topics = [f"BenchTopic{i}" for i in range(topic_count)]
        await _register(conn, topics)
        for version in (317, 479):
            for window in (1, 64):
                rate, cpu = await _lookups(conn, proc.pid, topics, window, version, seconds)
                per_lookup = cpu / rate * 1e6 if rate else 0.0
                rows.append(f"| {version} | {window} | {rate:,.0f} | {cpu:.0%} | {per_lookup:.1f} |")
        conn.close()
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.namesrv", description=__doc__.split("\n")[0])
    parser.add_argument("mode", nargs="?", default="bench", choices=["bench", "serve"])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--topics", type=int, default=200)
    args = parser.parse_args(argv)
    if args.mode == "serve":
        run(_serve())
        return
    machine = _machine()
    rows = run(_bench(args.seconds, args.topics))
    after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(
        "\n".join(
            [
                f"### bench/namesrv.py ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
                "",
                f"Command: `.venv/bin/python -m bench.namesrv --seconds {args.seconds:g} --topics {args.topics}`. "
                f"Machine: {machine}. Load after: {after}.",
                "Two broker groups (master + slave) registered with compressed bodies; random topic per lookup.",
                "",
                "| client version | in flight | route lookups/s | NameServer CPU | NameServer µs CPU/lookup |",
                "|---|---|---|---|---|",
                *rows,
            ]
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
