"""HA benchmark: `python -m bench.ha [--seconds 5] [--rate N] [--rebuild-mb 256] [--markdown FILE]`.

Runs real `mqbroker` processes on loopback, a master and a slave (brokerId 1, same brokerName, the
slave pointed at the master with haMasterAddress, no NameServer), and measures in one run:
1. SYNC_MASTER versus ASYNC_MASTER send throughput at 64 requests in flight on one connection, 1 KiB
   bodies, rounds alternating between the roles on fresh stores, and the ratio;
2. replication lag under a steady paced load on ASYNC_MASTER (by default half the rate ASYNC_MASTER
   sustained in phase 1): per put, from the master storing it to the slave acknowledging it (the
   master's haLagP50Ms / haLagP99Ms runtime-info figures);
3. the copy rate of a slave that starts with an empty store and rebuilds the master's whole CommitLog
   (haFullTransferFromEmpty), in MB/s.
Numbers are printed (and with --markdown appended to FILE as one block); nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import platform
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench.proc import cpu_s
from broker.protocol.batch import BatchMessage, encode_batch
from broker.protocol.codes import RequestCode
from broker.protocol.command import FrameDecoder, RemotingCommand, encode_binary
from broker.transport.client import connect
from broker.transport.loop import run

__all__ = ["main"]

TOPIC = "HaBench"
QUEUES = 8
_OPAQUE = struct.Struct(">i")
_OPAQUE_AT = 4 + 4 + 2 + 1 + 2  # frame length, header length, code, language, version -> opaque (binary)


def _free_port_pair() -> int:
    """A port p with p and p+1 free (the broker's listen port and its HA port)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        with socket.socket() as s2:
            try:
                s2.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise SystemExit("no free port pair")


class BrokerProc:
    def __init__(self, root: Path, name: str, broker_id: int, role: str, port: int, **extra: object) -> None:
        self.addr = f"127.0.0.1:{port}"
        props: dict[str, object] = {
            "brokerName": "bench-ha",
            "brokerId": broker_id,
            "brokerRole": role,
            "listenPort": port,
            "brokerIP1": "127.0.0.1",
            "storePathRootDir": root / name,
            "mappedFileSizeCommitLog": 128 << 20,
            "diskMaxUsedSpaceRatio": 95,
            **extra,
        }
        conf = root / f"{name}.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "broker.cli.mqbroker", "-c", str(conf), "--log-level", "WARNING"],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "NAMESRV_ADDR": ""},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "boot success" not in line:
            self.proc.kill()
            raise SystemExit(f"broker {name} did not start: {line!r}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


async def runtime_info(addr: str) -> dict[str, str]:
    conn = await connect(addr)
    try:
        resp = await conn.invoke(RemotingCommand(code=RequestCode.GET_BROKER_RUNTIME_INFO), 5.0)
        table: dict[str, str] = orjson.loads(resp.body)["table"]
        return table
    finally:
        conn.close()


async def wait_until(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if await check():  # type: ignore[operator]
                return
        await asyncio.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def _send_frame(queue_id: int, body: bytes, batch: int = 1) -> bytearray:
    """SEND_MESSAGE_V2, or with batch > 1 a SEND_BATCH_MESSAGE of `batch` copies of the body."""
    ext = {
        "a": "HaBenchPG",
        "b": TOPIC,
        "c": "TBW102",
        "d": str(QUEUES),
        "e": str(queue_id),
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": "",
        "j": "0",
        "k": "false",
    }
    code = RequestCode.SEND_MESSAGE_V2
    if batch > 1:
        code, ext["m"] = RequestCode.SEND_BATCH_MESSAGE, "true"
        body = encode_batch([BatchMessage(body, "")] * batch)
    return bytearray(encode_binary(RemotingCommand(code=code, ext_fields=ext, body=body)))


class Sender(asyncio.Protocol):
    """Pipelined sends over one connection, responses matched by opaque (no future per request)."""

    def __init__(self, body: bytes, batch: int = 1) -> None:
        self.frames = [_send_frame(q, body, batch) for q in range(QUEUES)]
        self.decoder = FrameDecoder()
        self.sent_at: dict[int, float] = {}
        self.opaque = 0
        self.latencies: list[float] = []
        self.codes: dict[int, int] = {}
        self.transport: asyncio.Transport | None = None
        self.on_reply: object = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        for cmd in self.decoder.feed(data):
            started = self.sent_at.pop(cmd.opaque, None)
            if started is None:
                continue
            self.latencies.append(now - started)
            self.codes[cmd.code] = self.codes.get(cmd.code, 0) + 1
            if self.on_reply is not None:
                self.on_reply()  # type: ignore[operator]

    def send(self) -> None:
        self.opaque += 1
        frame = self.frames[self.opaque % QUEUES]
        _OPAQUE.pack_into(frame, _OPAQUE_AT, self.opaque)
        self.sent_at[self.opaque] = time.perf_counter()
        assert self.transport is not None
        self.transport.write(bytes(frame))

    @property
    def in_flight(self) -> int:
        return len(self.sent_at)

    async def closed_loop(self, window: int, seconds: float) -> float:
        """Keep `window` requests in flight for `seconds`; returns replies per second."""
        deadline = time.perf_counter() + seconds

        def refill() -> None:
            if time.perf_counter() < deadline:
                self.send()

        self.on_reply = refill
        started = time.perf_counter()
        for _ in range(window):
            self.send()
        await asyncio.sleep(seconds)
        while self.in_flight:
            await asyncio.sleep(0.01)
        return len(self.latencies) / (time.perf_counter() - started)

    async def paced(self, rate: float, seconds: float, max_in_flight: int = 4096) -> float:
        """Send at `rate` per second (1 ms ticks) for `seconds`; returns the achieved reply rate."""
        self.on_reply = None
        started = time.perf_counter()
        sent = 0
        while (now := time.perf_counter()) - started < seconds:
            due = int((now - started) * rate) - sent
            for _ in range(max(0, min(due, max_in_flight - self.in_flight))):
                self.send()
                sent += 1
            await asyncio.sleep(0.001)
        while self.in_flight:
            await asyncio.sleep(0.01)
        return len(self.latencies) / (time.perf_counter() - started)


async def open_sender(addr: str, body: bytes, batch: int = 1) -> Sender:
    host, port = addr.rsplit(":", 1)
    _t, sender = await asyncio.get_running_loop().create_connection(lambda: Sender(body, batch), host, int(port))
    return sender


@dataclass(slots=True)
class Round:
    role: str
    rate: float
    p50_ms: float
    p99_ms: float
    errors: dict[int, int]
    master_cpu_us: float  # master process CPU per acknowledged message (all threads)
    slave_cpu_us: float


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else 0.0


async def start_pair(root: Path, role: str, **master_extra: object) -> tuple[BrokerProc, BrokerProc]:
    port = _free_port_pair()
    master = BrokerProc(root, f"{role.lower()}-m", 0, role, port, **master_extra)
    ha_addr = f"127.0.0.1:{port + 1}"
    slave = BrokerProc(root, f"{role.lower()}-s", 1, "SLAVE", _free_port_pair(), haMasterAddress=ha_addr)

    async def connected() -> bool:
        return (await runtime_info(master.addr))["haConnectedSlaves"] == "1"

    await wait_until(connected, 30, "the slave to connect")
    return master, slave


async def throughput(root: Path, role: str, seconds: float, body: bytes) -> Round:
    master, slave = await start_pair(root, role)
    try:
        warm = await open_sender(master.addr, body)
        await warm.closed_loop(64, 1.0)  # topic auto-creation, first file, JIT-less warm caches
        assert warm.transport is not None
        warm.transport.close()
        sender = await open_sender(master.addr, body)
        cpu0 = cpu_s(master.proc.pid), cpu_s(slave.proc.pid)
        rate = await sender.closed_loop(64, seconds)
        cpu1 = cpu_s(master.proc.pid), cpu_s(slave.proc.pid)
        assert sender.transport is not None
        sender.transport.close()
        errors = {c: n for c, n in sender.codes.items() if c != 0}
        n = max(1, len(sender.latencies))
        return Round(
            role, rate, _pct(sender.latencies, 0.5), _pct(sender.latencies, 0.99), errors,
            (cpu1[0] - cpu0[0]) / n * 1e6, (cpu1[1] - cpu0[1]) / n * 1e6,
        )  # fmt: skip
    finally:
        slave.stop()
        master.stop()
        for name in (f"{role.lower()}-m", f"{role.lower()}-s"):
            shutil.rmtree(root / name, ignore_errors=True)


async def lag_under_load(root: Path, rate: float, seconds: float, body: bytes, batch: int) -> dict[str, float]:
    """`rate` in messages per second; with batch > 1 each request carries `batch` messages."""
    master, slave = await start_pair(root, "ASYNC_MASTER")
    try:
        sender = await open_sender(master.addr, body, batch)
        await sender.paced(rate / batch, 1.0)  # warm-up; the lag window keeps only the most recent puts
        sender.latencies.clear()
        achieved = await sender.paced(rate / batch, seconds) * batch
        info = await runtime_info(master.addr)
        return {
            "rate": rate,
            "achieved": achieved,
            "p50": float(info["haLagP50Ms"]),
            "p99": float(info["haLagP99Ms"]),
            "samples": float(info["haLagSamples"]),
            "send_p99": _pct(sender.latencies, 0.99),
        }
    finally:
        slave.stop()
        master.stop()


async def rebuild(root: Path, megabytes: int) -> dict[str, float]:
    port = _free_port_pair()
    master = BrokerProc(root, "rebuild-m", 0, "ASYNC_MASTER", port, haFullTransferFromEmpty="true")
    slave: BrokerProc | None = None
    try:
        sender = await open_sender(master.addr, os.urandom(16 * 1024))
        total = megabytes * 1024 * 1024
        while int((await runtime_info(master.addr))["commitLogMaxOffset"]) < total:
            await sender.closed_loop(64, 1.0)
        end = int((await runtime_info(master.addr))["commitLogMaxOffset"])
        ha_addr = f"127.0.0.1:{port + 1}"
        slave = BrokerProc(root, "rebuild-s", 1, "SLAVE", _free_port_pair(), haMasterAddress=ha_addr)
        first = 0
        t0 = 0.0
        while True:
            got = int((await runtime_info(slave.addr))["commitLogMaxOffset"])
            now = time.perf_counter()
            if got > 0 and not t0:
                first, t0 = got, now
            if got >= end:
                break
            await asyncio.sleep(0.02)
        seconds = now - t0
        return {"bytes": end, "seconds": seconds, "mb_s": (end - first) / seconds / 1e6 if seconds else 0.0}
    finally:
        if slave is not None:
            slave.stop()
        master.stop()


async def bench(args: argparse.Namespace) -> str:
    root = Path(tempfile.mkdtemp(prefix="bench-ha-"))
    body = os.urandom(1024)
    phases = set(args.phases.split(","))
    lines: list[str] = []
    try:
        if "throughput" in phases:
            rounds: list[Round] = []
            for _ in range(args.rounds):
                for role in ("ASYNC_MASTER", "SYNC_MASTER"):
                    r = await throughput(root, role, args.seconds, body)
                    print(
                        f"{role}: {r.rate:,.0f} msgs/s p50 {r.p50_ms:.2f} ms p99 {r.p99_ms:.2f} ms "
                        f"master {r.master_cpu_us:.1f} us/msg slave {r.slave_cpu_us:.1f} us/msg errors {r.errors}"
                    )
                    rounds.append(r)
            best = {role: max(r.rate for r in rounds if r.role == role) for role in ("ASYNC_MASTER", "SYNC_MASTER")}
            lines += [
                "| role | round | msgs/s | p50 ms | p99 ms | master CPU µs/msg | slave CPU µs/msg | error codes |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for i, r in enumerate(rounds):
                errors = r.errors or "-"
                cells = (
                    f"{r.rate:,.0f} | {r.p50_ms:.2f} | {r.p99_ms:.2f} | {r.master_cpu_us:.1f} | {r.slave_cpu_us:.1f} "
                    f"| {errors}"
                )
                lines.append(f"| {r.role} | {i // 2 + 1} | {cells} |")
            ratio = best["SYNC_MASTER"] / best["ASYNC_MASTER"]
            lines += ["", f"- SYNC_MASTER / ASYNC_MASTER at 64 in flight (best rounds): **{ratio:.2f}** (target 0.8)"]
        if "lag" in phases:
            rate = args.rate or (best["ASYNC_MASTER"] / 2 if "throughput" in phases else 10_000)
            lag = await lag_under_load(root, rate, args.seconds, body, args.lag_batch)
            print(f"lag at {lag['achieved']:,.0f}/s: p50 {lag['p50']:.2f} ms p99 {lag['p99']:.2f} ms")
            lines.append(
                f"- replication lag on ASYNC_MASTER at {lag['achieved']:,.0f} msgs/s (paced at {lag['rate']:,.0f}/s, "
                f"1 KiB, {args.lag_batch} per request, last {lag['samples']:,.0f} puts): "
                f"**p50 {lag['p50']:.2f} ms, p99 {lag['p99']:.2f} ms** "
                f"(target p99 <= 50 ms); send p99 {lag['send_p99']:.2f} ms"
            )
        if "rebuild" in phases:
            rb = await rebuild(root, args.rebuild_mb)
            print(f"rebuild from empty: {rb['bytes'] / 1e6:,.0f} MB in {rb['seconds']:.2f} s = {rb['mb_s']:,.0f} MB/s")
            lines.append(
                f"- slave rebuilding from an empty store: {rb['bytes'] / 1e6:,.0f} MB in {rb['seconds']:.2f} s = "
                f"**{rb['mb_s']:,.0f} MB/s** over loopback (target >= 200 MB/s)"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ha", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measurement time per phase")
    parser.add_argument("--rounds", type=int, default=2, help="ASYNC/SYNC throughput rounds")
    parser.add_argument("--rate", type=float, default=0, help="paced rate for the lag phase (0: half the ASYNC rate)")
    parser.add_argument(
        "--lag-batch",
        type=int,
        default=1,
        help="messages per request in the lag phase (32 reaches the 50k msgs/s target load)",
    )
    parser.add_argument("--rebuild-mb", type=int, default=256, help="CommitLog size the empty slave copies")
    parser.add_argument("--phases", default="throughput,lag,rebuild", help="comma-separated phases to run")
    parser.add_argument("--markdown", metavar="FILE", help="append the results block to FILE")
    args = parser.parse_args(argv)
    command = "python -m bench.ha " + " ".join(argv if argv is not None else sys.argv[1:])
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    table = run(bench(args))
    block = (
        f"\n## HA replication (bench/ha.py), {datetime.date.today().isoformat()}\n\n"
        f"Command: `{command.strip()}`  \n"
        f"Machine: {os.cpu_count()} vCPU, {platform.python_implementation()} {platform.python_version()}, "
        f"uvloop; master, slave and load generator are three processes on loopback  \n"
        f"Load: `{load}`\n\n{table}\n"
    )
    print(block)
    if args.markdown:
        with open(args.markdown, "a") as fh:
            fh.write(block)


if __name__ == "__main__":
    main()
