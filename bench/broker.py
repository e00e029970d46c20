"""Broker benchmark in the spirit of RocketMQ's benchmark producer/consumer: `python -m bench.broker`.

Starts `mqbroker` in its own process (so the load generator does not share its core), then runs, over
one TCP connection: sync sends (1 in flight), pipelined sends (64 in flight), batches of 32, and
consumption of the backlog with pipelined pulls; for each flush type asked (ASYNC_FLUSH, SYNC_FLUSH).
It prints msgs/s with p50/p99 latency under a live progress display, and with `--markdown FILE`
writes a results block for docs/benchmarks.md.

The generator is deliberately cheap so it measures the broker: each request frame is encoded once
with the binary ROCKETMQ header (as the Java benchmark client sends) and only its opaque and the
UNIQ_KEY of each message (which every RocketMQ client sets itself) are patched per request; responses
are matched by opaque in a bare asyncio Protocol, no future per request. Like broker.client's
connections, it writes the requests one read's replies make room for with a single write rather than
a syscall per frame: the generator shares the two cores with the broker it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import binascii
import datetime
import hmac
import json
import os
import platform
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench.proc import cpu_s
from broker.auth.settings import STATEFUL_AUTHENTICATION, STATELESS_AUTHENTICATION
from broker.client.admin import auth as admin_auth
from broker.client.api import ClientAPI
from broker.protocol.batch import BatchMessage, encode_batch
from broker.protocol.codes import RequestCode
from broker.protocol.command import FrameDecoder, RemotingCommand, decode_frame, encode_binary
from broker.protocol.properties import encode_properties
from broker.protocol.signature import ACCESS_KEY, SIGNATURE, Credentials, sign_command, signed_content
from broker.transport.client import RemotingClient, connect
from broker.transport.loop import run
from broker.transport.tls import client_context

__all__ = ["main"]

# Offset of the opaque in a binary-header frame: length(4) + type/len(4) + code(2) + lang(1) + version(2).
_OPAQUE_AT = 13
_OPAQUE = struct.Struct(">i")
_I32 = struct.Struct(">i")
TOPIC = "BenchTopic"
QUEUES = 8
# The properties a Java producer sends with each message (KEYS and TAGS as the benchmark's options set
# them); the UNIQ_KEY's counter part is patched per message.
_UNIQ_PLACEHOLDER = b"7F0000010B6C18B4AAC2" + b"0" * 12
_PROPS = {"KEYS": "k", "TAGS": "bench", "WAIT": "true", "UNIQ_KEY": _UNIQ_PLACEHOLDER.decode()}
# --auth: the broker's initAuthenticationUser (SUPER: sets up the user, reads the queue depths) and the NORMAL user
# the load is signed as, allowed by its ACL to send to and pull from the topic. A Signature is always 28 characters
# of Base64 (20 bytes of HMAC-SHA1): each frame's is written over this placeholder.
BENCH_ADMIN = Credentials("bench-admin", "bench-admin-secret")
BENCH_USER = Credentials("bench-user", "bench-user-secret")
_SIGNATURE_PLACEHOLDER = b"S" * 27 + b"="
STRATEGIES = {"stateless": STATELESS_AUTHENTICATION, "stateful": STATEFUL_AUTHENTICATION}


@dataclass(slots=True)
class PhaseResult:
    name: str
    messages: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    broker_cpu_s: float = 0.0  # CPU time (user + system) the broker process used during the phase

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0

    @property
    def cpu_us_per_msg(self) -> float:
        """Broker CPU per message: what the broker costs, whatever share of a core the machine gave it."""
        return self.broker_cpu_s / self.messages * 1e6 if self.messages else 0.0


class BenchConnection(asyncio.Protocol):
    """Pipelined requests over one connection; `window` in flight; latencies recorded per request."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder()
        self.sent_at: dict[int, float] = {}
        self.on_response: callable = None  # type: ignore[valid-type]
        self.opaque = 0
        self.unsent: list[bytes] = []
        self.in_receive = False  # requests sent while replies are read go out in one write after them
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop sets TCP_NODELAY itself

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        self.in_receive = True
        for cmd in self.decoder.feed(data):
            started = self.sent_at.pop(cmd.opaque, None)
            if started is not None:
                self.on_response(cmd, now - started)
        self.in_receive = False
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)

    def send_frame(self, template: bytearray, uniq_at: tuple[int, ...] = (), signer: FrameSigner | None = None) -> None:
        self.opaque += 1
        _OPAQUE.pack_into(template, _OPAQUE_AT, self.opaque)
        for n, at in enumerate(uniq_at):  # a fresh UNIQ_KEY per message, as every RocketMQ client sets
            template[at : at + 12] = _uniq_digits(self.opaque, n)
        if signer is not None:
            signer.sign(template, self.opaque)
        self.sent_at[self.opaque] = time.perf_counter()
        self.unsent.append(bytes(template))

    def flush(self) -> None:
        """Write the frames sent so far, unless replies are still being read (then after them)."""
        if self.unsent and not self.in_receive:
            assert self.transport is not None
            self.transport.write(b"".join(self.unsent))
            self.unsent.clear()


def _uniq_digits(opaque: int, n: int) -> bytes:
    """The last 12 hex digits of the UNIQ_KEY of message n of request `opaque`."""
    return b"%012X" % ((opaque << 8) + n)


class FrameSigner:
    """Signs a request frame again after `send_frame` patched its UNIQ_KEYs, as AclClientRPCHook signs every
    request: it keeps the signed content (broker.protocol.signature) with the same placeholders, patches them
    alike, and writes the HMAC-SHA1's Base64 over the frame's Signature value."""

    def __init__(self, frame: bytearray, secret_key: str) -> None:
        cmd = decode_frame(bytes(frame[4:]))
        fields = {k: v for k, v in cmd.ext_fields.items() if k != SIGNATURE}
        self.content = bytearray(signed_content(fields, cmd.body))
        self.uniq_at = _uniq_slots(self.content)
        self.signature_at = frame.find(_SIGNATURE_PLACEHOLDER)
        assert self.signature_at > 0, "the frame carries no signature placeholder"
        self.key = secret_key.encode()

    def sign(self, frame: bytearray, opaque: int) -> None:
        for n, at in enumerate(self.uniq_at):
            self.content[at : at + 12] = _uniq_digits(opaque, n)
        digest = hmac.digest(self.key, self.content, "sha1")
        frame[self.signature_at : self.signature_at + len(_SIGNATURE_PLACEHOLDER)] = binascii.b2a_base64(
            digest, newline=False
        )


@dataclass(slots=True)
class Template:
    """A request frame sent again and again: where its UNIQ_KEYs' digits sit (found once, before any patch hides
    the placeholders) and, signed, the FrameSigner that signs it again after each patch."""

    frame: bytearray
    uniq_at: tuple[int, ...]
    signer: FrameSigner | None

    @classmethod
    def of(cls, frame: bytearray, signed: bool = False) -> Template:
        return cls(frame, _uniq_slots(frame), FrameSigner(frame, BENCH_USER.secret_key) if signed else None)


def _uniq_slots(template: bytearray) -> tuple[int, ...]:
    """Where the last 12 hex digits of each UNIQ_KEY placeholder sit in a request frame."""
    found: list[int] = []
    at = template.find(_UNIQ_PLACEHOLDER)
    while at >= 0:
        found.append(at + len(_UNIQ_PLACEHOLDER) - 12)
        at = template.find(_UNIQ_PLACEHOLDER, at + 1)
    return tuple(found)


def _send_template(
    queue_id: int, body: bytes, code: int = 310, props: str = "", signed_as: str | None = None
) -> bytearray:
    """A send request frame; `signed_as` (an access key) adds AccessKey and a Signature placeholder."""
    ext = {
        "a": "BenchPG",
        "b": TOPIC,
        "c": "TBW102",
        "d": str(QUEUES),
        "e": str(queue_id),
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": props,
        "j": "0",
        "k": "false",
    }
    if code == 320:
        ext["m"] = "true"
    if signed_as is not None:
        ext[ACCESS_KEY] = signed_as
        ext[SIGNATURE] = _SIGNATURE_PLACEHOLDER.decode()
    return bytearray(encode_binary(RemotingCommand(code=code, ext_fields=ext, body=body)))


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] * 1000


async def _pipelined(
    conn: BenchConnection,
    templates: list[Template],
    requests: int,
    window: int,
    per_request: int,
    progress: Progress,
    name: str,
    rate: float = 0.0,
) -> PhaseResult:
    """`requests` sends, at most `window` in flight: each reply makes room for the next send, or with
    `rate` the sends go out every millisecond as they fall due (rate msgs/s)."""
    task = progress.add_task(name, total=requests * per_request)
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    done = loop.create_future()
    state = {"sent": 0, "received": 0, "errors": 0}
    n_templates = len(templates)
    started = time.perf_counter()

    def send_up_to(due: int) -> None:
        while state["sent"] < due and state["sent"] - state["received"] < window:
            i = state["sent"]
            state["sent"] = i + 1
            template = templates[i % n_templates]
            conn.send_frame(template.frame, template.uniq_at, template.signer)
        conn.flush()

    def tick() -> None:
        send_up_to(min(requests, int((time.perf_counter() - started) * rate) + 1))
        if state["sent"] < requests:
            loop.call_later(0.001, tick)

    def on_response(cmd: RemotingCommand, latency: float) -> None:
        latencies.append(latency)
        if cmd.code != 0:
            state["errors"] += 1
        state["received"] += 1
        if state["received"] % 512 == 0:
            progress.update(task, completed=state["received"] * per_request)
        if not rate:
            send_up_to(requests)
        if state["received"] == requests and not done.done():
            done.set_result(None)

    conn.on_response = on_response
    if rate:
        tick()
    else:
        send_up_to(requests)
    await done
    elapsed = time.perf_counter() - started
    progress.update(task, completed=requests * per_request)
    latencies.sort()
    return PhaseResult(
        name,
        requests * per_request,
        elapsed,
        _percentile(latencies, 0.5),
        _percentile(latencies, 0.99),
        state["errors"],
    )


async def _queue_depths(port: int, signed: bool) -> dict[int, int]:
    """Messages stored per queue of the bench topic, as the broker counts them (GET_MAX_OFFSET)."""
    conn = await connect(("127.0.0.1", port))
    try:
        depths = {}
        for q in range(QUEUES):
            cmd = RemotingCommand(code=RequestCode.GET_MAX_OFFSET, ext_fields={"topic": TOPIC, "queueId": str(q)})
            if signed:
                sign_command(cmd, BENCH_ADMIN)
            depths[q] = int((await conn.invoke(cmd, 5.0)).ext_fields["offset"])
        return depths
    finally:
        conn.close()


async def _consume(
    conn: BenchConnection, per_queue: dict[int, int], window: int, progress: Progress, signed: bool
) -> PhaseResult:
    total = sum(per_queue.values())
    task = progress.add_task("consume (pull 32)", total=total)
    pulls: list[bytearray] = []
    for q, count in per_queue.items():
        for off in range(0, count, 32):
            ext = {
                "consumerGroup": "BenchCG",
                "topic": TOPIC,
                "queueId": str(q),
                "queueOffset": str(off),
                "maxMsgNums": "32",
                "sysFlag": "4",
                "commitOffset": "0",
                "suspendTimeoutMillis": "0",
                "subscription": "*",
                "subVersion": "0",
            }
            pull = RemotingCommand(code=11, ext_fields=ext)
            if signed:  # nothing of a pull but its opaque changes, and the signature does not cover that
                sign_command(pull, BENCH_USER)
            pulls.append(bytearray(encode_binary(pull)))
    latencies: list[float] = []
    state = {"sent": 0, "received": 0, "msgs": 0, "errors": 0}
    done = asyncio.get_running_loop().create_future()

    def count_records(body: bytes) -> int:
        n, pos, size = 0, 0, len(body)
        while pos + 4 <= size:
            pos += _I32.unpack_from(body, pos)[0]
            n += 1
        return n

    def on_response(cmd: RemotingCommand, latency: float) -> None:
        latencies.append(latency)
        if cmd.code == 0:
            state["msgs"] += count_records(cmd.body)
        else:
            state["errors"] += 1
        state["received"] += 1
        progress.update(task, completed=state["msgs"])
        if state["sent"] < len(pulls):
            conn.send_frame(pulls[state["sent"]])
            state["sent"] += 1
        elif state["received"] == len(pulls) and not done.done():
            done.set_result(None)

    conn.on_response = on_response
    started = time.perf_counter()
    for _ in range(min(window, len(pulls))):
        conn.send_frame(pulls[state["sent"]])
        state["sent"] += 1
    conn.flush()
    await done
    elapsed = time.perf_counter() - started
    latencies.sort()
    return PhaseResult(
        "consume (pull 32)",
        state["msgs"],
        elapsed,
        _percentile(latencies, 0.5),
        _percentile(latencies, 0.99),
        state["errors"],
    )


def _start_broker(
    root: Path, port: int, flush: str, file_size: int, extra: Sequence[str] = ()
) -> subprocess.Popen[str]:
    conf = root / "broker.conf"
    conf.write_text(
        f"brokerName=bench\nlistenPort={port}\nbrokerIP1=127.0.0.1\nstorePathRootDir={root / 'store'}\n"
        f"flushDiskType={flush}\nmappedFileSizeCommitLog={file_size}\nmaxTransferCountOnMessageInMemory=32\n"
        + "".join(f"{line}\n" for line in extra)
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker.cli.mqbroker", "-c", str(conf), "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "NAMESRV_ADDR": ""},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "boot success" not in line:
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}")
    return proc


async def _settle(pid: int | None, idle_share: float = 0.05, window_s: float = 0.5, limit_s: float = 60.0) -> None:
    """Wait until the broker process uses less than `idle_share` of a core over a window."""
    if pid is None:
        return
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        before = cpu_s(pid)
        await asyncio.sleep(window_s)
        if cpu_s(pid) - before < idle_share * window_s:
            return


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _run_flush_type(flush: str, args: argparse.Namespace, progress: Progress) -> list[PhaseResult]:
    """Every phase on a broker of this flush type; with --auth, on a broker with authentication off and then on
    another with it on, the load signed alike on both (so the client does the same work)."""
    if not args.auth:
        return await _run_broker(flush, args, progress, auth=None)
    results = await _run_broker(flush, args, progress, auth="off")
    return results + await _run_broker(flush, args, progress, auth=args.auth)


def _auth_keys(strategy: str) -> list[str]:
    admin = json.dumps({"username": BENCH_ADMIN.access_key, "password": BENCH_ADMIN.secret_key})
    return [
        "authenticationEnabled=true",
        "authorizationEnabled=true",
        f"initAuthenticationUser={admin}",
        f"authenticationStrategy={STRATEGIES[strategy]}",
    ]


async def _allow_bench_user(port: int) -> None:
    """BENCH_USER (NORMAL) may send to and pull from the topic, as its group; made by BENCH_ADMIN."""
    addr = f"127.0.0.1:{port}"
    remoting = RemotingClient(signer=BENCH_ADMIN)
    try:
        api = ClientAPI(remoting)
        await admin_auth.create_user(api, addr, BENCH_USER.access_key, BENCH_USER.secret_key)
        resources = [f"Topic:{TOPIC}", "Group:BenchCG"]
        acl = admin_auth.acl_info(f"User:{BENCH_USER.access_key}", resources, ["Pub", "Sub"], None, "Allow")
        await admin_auth.create_acl(api, addr, acl)
    finally:
        await remoting.close()


async def _run_broker(flush: str, args: argparse.Namespace, progress: Progress, auth: str | None) -> list[PhaseResult]:
    """`auth`: None (no --auth), "off" (the broker does not check; the load is signed) or a strategy."""
    root = Path(tempfile.mkdtemp(prefix="bench-broker-"))
    checks = auth is not None and auth != "off"
    if args.broker_port:
        port, proc = args.broker_port, None
    else:
        port = _free_port()
        # --tls: the broker serves TLS and plaintext on its one port (permissive, self-signed test certificate)
        tls_keys = ["tls.server.mode=permissive", "tls.test.mode.enable=true"] if args.tls != "off" else []
        auth_keys = _auth_keys(auth) if checks and auth else []
        proc = _start_broker(root, port, flush, args.file_size, [*tls_keys, *auth_keys, *args.set])
    try:
        if checks:
            await _allow_bench_user(port)
        results: list[PhaseResult] = []
        for tls in {"off": [False], "on": [True], "both": [False, True]}[args.tls]:
            phases = await _run_connection(port, proc, flush, tls, args, progress, signed=auth is not None)
            if auth is not None:
                for phase in phases:
                    phase.name += f", auth {auth}"
            results += phases
        return results
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(root, ignore_errors=True)


async def _run_connection(
    port: int,
    proc: subprocess.Popen[str] | None,
    flush: str,
    tls: bool,
    args: argparse.Namespace,
    progress: Progress,
    signed: bool = False,
) -> list[PhaseResult]:
    """Every phase over one connection, TLS (the self-signed certificate is not verified) or plaintext; `signed`:
    every request signed as BENCH_USER."""
    loop = asyncio.get_running_loop()
    context = client_context(verify=False) if tls else None
    _t, conn = await loop.create_connection(BenchConnection, "127.0.0.1", port, ssl=context)
    flush = f"{flush} TLS" if tls else flush
    body = os.urandom(args.size)
    props = encode_properties(_PROPS)
    user = BENCH_USER.access_key if signed else None
    templates = [Template.of(_send_template(q, body, props=props, signed_as=user), signed) for q in range(QUEUES)]
    results: list[PhaseResult] = []
    pid = proc.pid if proc is not None else None

    async def phase(run: Any) -> None:
        cpu = cpu_s(pid)
        result = await run
        result.broker_cpu_s = cpu_s(pid) - cpu
        results.append(result)

    # A new broker prepares its CommitLog files in the background (SYNC_FLUSH: 2 GiB of zeros): wait
    # for that to end, so the phases measure the send path rather than the start-up.
    await _settle(pid)
    # create the topic with 8 queues first (auto-creation from TBW102 on the first send)
    await phase(_pipelined(conn, templates, args.sync_num, 1, 1, progress, f"{flush} sync x1"))
    await phase(_pipelined(conn, templates, args.num, 64, 1, progress, f"{flush} pipelined x64"))
    # latency at half the rate (the target's half, or half of what the pipelined phase reached)
    rate = args.paced_rate or results[-1].rate / 2
    paced = max(1, int(rate * 5))  # five seconds
    await phase(_pipelined(conn, templates, paced, 64, 1, progress, f"{flush} paced {rate:,.0f}/s", rate))
    batch_body = encode_batch([BatchMessage(body, props)] * 32)
    batch_templates = [
        Template.of(_send_template(q, batch_body, code=320, signed_as=user), signed) for q in range(QUEUES)
    ]
    batches = max(1, args.num // 32)
    await phase(_pipelined(conn, batch_templates, batches, 8, 32, progress, f"{flush} batch 32 x8"))
    per_queue = await _queue_depths(port, signed)
    await phase(_consume(conn, per_queue, 64, progress, signed))
    results[-1].name = f"{flush} consume (pull 32) x64"
    conn.transport.close()  # type: ignore[union-attr]
    return results


def auth_cost(results: list[PhaseResult], strategy: str) -> list[tuple[str, float, float]]:
    """(phase, broker CPU a message on / off, msgs/s on / off) for each phase run with authentication off and
    on (`--auth`)."""
    on_suffix, off_suffix = f", auth {strategy}", ", auth off"
    on = {r.name.removesuffix(on_suffix): r for r in results if r.name.endswith(on_suffix)}
    out = []
    for r in results:
        if not r.name.endswith(off_suffix):
            continue
        name = r.name.removesuffix(off_suffix)
        mate = on.get(name)
        if mate is not None and r.cpu_us_per_msg and r.rate:
            out.append((name, mate.cpu_us_per_msg / r.cpu_us_per_msg, mate.rate / r.rate))
    return out


def _markdown(results: list[PhaseResult], args: argparse.Namespace, command: str) -> str:
    load = os.getloadavg()
    lines = [
        f"\n## Broker benchmark, {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}\n",
        f"- command: `{command}`",
        f"- machine: {platform.node()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}",
        f"- load average before/after (1/5/15 min): {args.load_before} / {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        f"- {args.size} B bodies, 1 connection, broker in its own process (mqbroker), CommitLog files of "
        f"{args.file_size >> 20} MiB, loopback TCP"
        + (f"; broker.conf also {', '.join(args.set)}" if args.set else "")
        + "\n",
        "| phase | messages | msgs/s | p50 ms | p99 ms | errors | broker CPU µs/msg |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.name} | {r.messages} | {r.rate:,.0f} | {r.p50_ms:.2f} | {r.p99_ms:.2f} | {r.errors} | "
            f"{r.cpu_us_per_msg:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.broker", description=__doc__.split("\n")[0])
    parser.add_argument("--num", type=int, default=200_000, help="messages for the pipelined and batch phases")
    parser.add_argument("--sync-num", type=int, default=5_000, help="messages for the 1-in-flight phase")
    parser.add_argument("--size", type=int, default=1024, help="body size in bytes")
    parser.add_argument("--flush", choices=["ASYNC_FLUSH", "SYNC_FLUSH", "both"], default="both")
    parser.add_argument("--file-size", type=int, default=256 << 20, help="mappedFileSizeCommitLog of the broker")
    parser.add_argument("--broker-port", type=int, help="use a broker already listening on 127.0.0.1:PORT (profiling)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker.conf line for the broker under test (repeatable), e.g. indexHelperEnable=false",
    )
    parser.add_argument(
        "--tls",
        choices=["off", "on", "both"],
        default="off",
        help="the client connection over TLS (on), plaintext (off), or both in turn against the same broker",
    )
    parser.add_argument(
        "--auth",
        choices=sorted(STRATEGIES),
        help="ACL 2.0's cost: every phase on a broker with authentication off, then on one with it on with this "
        "authenticationStrategy; the load is signed for both; prints on / off per phase",
    )
    parser.add_argument("--markdown", help="write a docs/benchmarks.md results block to this file")
    parser.add_argument(
        "--paced-rate",
        type=float,
        default=0.0,
        help="msgs/s of the paced phase (0: half of what the pipelined phase reached)",
    )
    args = parser.parse_args(argv)
    load = os.getloadavg()
    args.load_before = f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    console = Console()
    flushes = ["ASYNC_FLUSH", "SYNC_FLUSH"] if args.flush == "both" else [args.flush]

    async def go() -> list[PhaseResult]:
        out: list[PhaseResult] = []
        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        ) as progress:
            for flush in flushes:
                out += await _run_flush_type(flush, args, progress)
        return out

    results = run(go())
    table = Table(title="broker benchmark")
    for col in ("phase", "messages", "msgs/s", "p50 ms", "p99 ms", "errors", "broker CPU µs/msg"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    for r in results:
        table.add_row(
            r.name,
            str(r.messages),
            f"{r.rate:,.0f}",
            f"{r.p50_ms:.2f}",
            f"{r.p99_ms:.2f}",
            str(r.errors),
            f"{r.cpu_us_per_msg:.1f}",
        )
    console.print(table)
    cost = auth_cost(results, args.auth) if args.auth else []
    if cost:
        ratios = Table(title=f"authentication on ({args.auth}) / off, the load signed for both")
        for col in ("phase", "broker CPU µs/msg on / off", "msgs/s on / off"):
            ratios.add_column(col, justify="left" if col == "phase" else "right")
        for name, cpu, rate in cost:
            ratios.add_row(name, f"{cpu:.3f}", f"{rate:.3f}")
        console.print(ratios)
    if args.markdown:
        command = "python -m bench.broker " + " ".join(argv if argv is not None else sys.argv[1:])
        Path(args.markdown).write_text(_markdown(results, args, command))


if __name__ == "__main__":
    main()
