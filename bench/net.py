"""Network benchmark: frame codec rates and request/response round trips over loopback.

Run `python -m bench.net [--seconds 3] [--append docs/benchmarks.md]`. It measures, in one run:
1. frames encoded/decoded per second with JSON and binary ROCKETMQ headers (a SEND_MESSAGE_V2-like
   request, as the Java benchmark producer sends);
2. round trips per second at 1 and 64 requests in flight on one connection, against our
   RemotingServer + client connection (JSON and ROCKETMQ request headers), and against a bare uvloop
   Protocol server + bare FIFO client that only split frames and answer a prebuilt frame.
The server always runs in a child process (`python -m bench.net serve ...`) so client and server
each get a core. Numbers are printed; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.proc import cpu_s
from broker.protocol.codes import RequestCode, ResponseCode, SerializeType
from broker.protocol.command import FrameDecoder, RemotingCommand, encode, encode_binary
from broker.transport import ConnectionConfig, RemotingConnection, RemotingServer, connect
from broker.transport.loop import run

__all__ = ["main"]

log = logging.getLogger(__name__)

BODY = b"x" * 128
_INT = struct.Struct(">i")


def send_request() -> RemotingCommand:
    """A SEND_MESSAGE_V2 request with the Java producer's single-letter header fields."""
    ext = {
        "a": "benchmark_producer",
        "b": "BenchmarkTest",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": "UNIQ_KEY\x017F0000010001B4AAC26929FE5A0000\x02WAIT\x01true",
        "j": "0",
        "k": "false",
        "l": "16",
        "m": "false",
        "n": "broker-a",
    }
    return RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=BODY)


def send_response(cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(
        ResponseCode.SUCCESS,
        ext_fields={
            "msgId": "7F00000100002A9F0000000000000000",
            "queueId": "3",
            "queueOffset": "12345",
            "transactionId": "7F0000010001B4AAC26929FE5A0000",
        },
    )


# ---------------------------------------------------------------------- codec


def _rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per CPU-second: process time, not wall time, so a busy shared machine distorts it less."""
    count = 0
    batch = 2000
    end = time.perf_counter() + seconds
    start = time.process_time()
    while time.perf_counter() < end:
        for _ in range(batch):
            fn()
        count += batch
    return count / (time.process_time() - start)


def codec_rates(seconds: float) -> dict[str, float]:
    cmd = send_request()
    json_frame = encode(cmd)
    binary_frame = encode_binary(cmd)
    decoder = FrameDecoder()
    stream_json = json_frame * 64
    stream_bin = binary_frame * 64
    per = seconds / 4
    return {
        "encode JSON": _rate(lambda: encode(cmd), per),
        "encode ROCKETMQ": _rate(lambda: encode_binary(cmd), per),
        "decode JSON": 64 * _rate(lambda: decoder.feed(stream_json), per),
        "decode ROCKETMQ": 64 * _rate(lambda: decoder.feed(stream_bin), per),
    }


# ---------------------------------------------------------------------- servers (child process)


def _split_frames(buffer: bytes) -> tuple[int, bytes]:
    """How many whole frames `buffer` starts with (lengths only, nothing decoded), and the rest."""
    pos, size, count = 0, len(buffer), 0
    while size - pos >= 4:
        (length,) = _INT.unpack_from(buffer, pos)
        if pos + 4 + length > size:
            break
        pos += 4 + length
        count += 1
    return count, buffer[pos:]


class _BareServer(asyncio.Protocol):
    """Splits frames by length and answers each with one prebuilt response, all in one write."""

    response = encode(send_response(send_request()))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        count, self.buffer = _split_frames(self.buffer + data if self.buffer else data)
        if count:
            self.transport.write(self.response * count)  # type: ignore[attr-defined]


async def _serve(kind: str) -> None:
    loop = asyncio.get_running_loop()
    if kind == "bare":
        server = await loop.create_server(_BareServer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
    else:
        ours = RemotingServer("127.0.0.1", 0, idle_timeout=None)
        ours.register(RequestCode.SEND_MESSAGE_V2, lambda conn, cmd: send_response(cmd))
        await ours.start()
        port = ours.port
    print(port, flush=True)
    # Exit when the parent closes our stdin.
    await loop.run_in_executor(None, sys.stdin.read)


def _start_server(kind: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.net", "serve", kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


# ---------------------------------------------------------------------- clients


@dataclass
class Result:
    rps: float
    server_cpu: float  # CPU seconds per second of the server process
    client_cpu: float  # same, for this (client) process


class _BareClient(asyncio.Protocol):
    """Closed loop, FIFO: keeps `window` requests in flight and counts whole response frames."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.request = encode(send_request())
        self.buffer = b""
        self.count = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        transport.write(self.request * self.window)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        done, self.buffer = _split_frames(self.buffer + data if self.buffer else data)
        if done:
            self.count += done
            self.transport.write(self.request * done)  # type: ignore[attr-defined]


async def _measure(start_load: Callable[[], object], counter: Callable[[], int], pid: int, seconds: float) -> Result:
    start_load()
    await asyncio.sleep(0.5)  # warm-up
    count0, cpu0, own0, t0 = counter(), cpu_s(pid), time.process_time(), time.perf_counter()
    await asyncio.sleep(seconds)
    count1, cpu1, own1, t1 = counter(), cpu_s(pid), time.process_time(), time.perf_counter()
    elapsed = t1 - t0
    return Result((count1 - count0) / elapsed, (cpu1 - cpu0) / elapsed, (own1 - own0) / elapsed)


async def bare_round_trips(port: int, pid: int, window: int, seconds: float) -> Result:
    loop = asyncio.get_running_loop()
    transport, client = await loop.create_connection(lambda: _BareClient(window), "127.0.0.1", port)
    result = await _measure(lambda: None, lambda: client.count, pid, seconds)
    transport.close()
    return result


async def our_round_trips(port: int, pid: int, window: int, seconds: float, header: SerializeType) -> Result:
    conn: RemotingConnection = await connect(("127.0.0.1", port), config=ConnectionConfig(request_header=header))
    done = 0
    stop = False

    async def worker() -> None:
        nonlocal done
        cmd = send_request()
        while not stop:
            await conn.invoke(cmd, 10)
            done += 1

    tasks: list[asyncio.Task[None]] = []
    result = await _measure(
        lambda: tasks.extend(asyncio.ensure_future(worker()) for _ in range(window)), lambda: done, pid, seconds
    )
    stop = True
    await asyncio.gather(*tasks)
    conn.close()
    return result


async def _client_runs(seconds: float) -> dict[str, Result]:
    results: dict[str, Result] = {}
    for kind in ("bare", "ours"):
        proc, port = _start_server(kind)
        try:
            for window in (1, 64):
                if kind == "bare":
                    results[f"bare echo, {window} in flight"] = await bare_round_trips(port, proc.pid, window, seconds)
                else:
                    for header in (SerializeType.JSON, SerializeType.ROCKETMQ):
                        results[f"ours {header.name}, {window} in flight"] = await our_round_trips(
                            port, proc.pid, window, seconds, header
                        )
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=10)
    return results


# ---------------------------------------------------------------------- report


def _machine() -> str:
    model = "?"
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return f"nproc={os.cpu_count()}, CPU {model}, Python {sys.version.split()[0]}; uptime: {load}"


def report(seconds: float) -> str:
    before = _machine()
    codec = codec_rates(seconds)
    trips = run(_client_runs(seconds))
    after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    lines = [
        f"### bench/net.py ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"Command: `.venv/bin/python -m bench.net --seconds {seconds:g}`. Machine: {before}. Load after: {after}.",
        "Request: SEND_MESSAGE_V2 header (14 extFields) + 128 B body; response: JSON header with 4 extFields.",
        "",
        "| codec (one core) | frames per CPU-second |",
        "|---|---|",
        *(f"| {name} | {rate:,.0f} |" for name, rate in codec.items()),
        "",
        "| round trips (1 connection, server in its own process) | req/s | ratio to bare | server CPU | client CPU "
        "| server µs CPU/req |",
        "|---|---|---|---|---|---|",
    ]
    for name, result in trips.items():
        window = name.rsplit(",", 1)[1].strip()
        bare = trips[f"bare echo, {window}"].rps
        per_request = result.server_cpu / result.rps * 1e6 if result.rps else 0.0
        lines.append(
            f"| {name} | {result.rps:,.0f} | {result.rps / bare:.2f} | {result.server_cpu:.0%} "
            f"| {result.client_cpu:.0%} | {per_request:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.net", description=__doc__.split("\n")[0])
    parser.add_argument("mode", nargs="?", default="bench", choices=["bench", "serve"])
    parser.add_argument("kind", nargs="?", default="ours", choices=["ours", "bare"])
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per case")
    args = parser.parse_args(argv)
    if args.mode == "serve":
        run(_serve(args.kind))
        return
    print(report(args.seconds))


if __name__ == "__main__":
    main()
