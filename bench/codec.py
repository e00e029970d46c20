"""Codec micro-benchmarks: `python -m bench.codec [--num N] [--append]`.

Measures frames encoded/decoded per second with JSON and binary ROCKETMQ headers (a SEND_MESSAGE_V2
request with 12 extFields, the shape the Java benchmark client sends), typed header parsing for the
send and pull paths, and the properties codec. `--append` adds a dated section with the machine
description to docs/benchmarks.md. Run by hand or by `make bench-*`; nothing imports it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

from broker.protocol.command import FrameDecoder, RemotingCommand, decode_frame, encode, encode_binary
from broker.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader, parse_send_request_header
from broker.protocol.properties import decode_properties, encode_properties

__all__ = ["main", "run"]

SEND_V2_EXT = {
    "a": "PID-bench", "b": "BenchmarkTest", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1795342481527",
    "h": "0", "i": "KEYS\x01k0\x02TAGS\x01tagA\x02UNIQ_KEY\x017F0000010B2A6D3A4B5C00001A2B0001\x02WAIT\x01true\x02",
    "j": "0", "k": "false", "m": "false",
}  # fmt: skip
PULL_EXT = {
    "consumerGroup": "CID-bench", "topic": "BenchmarkTest", "queueId": "1", "queueOffset": "123456",
    "maxMsgNums": "32", "sysFlag": "3", "commitOffset": "123400", "suspendTimeoutMillis": "15000",
    "subscription": "*", "subVersion": "1795342677882", "expressionType": "TAG",
}  # fmt: skip
PROPS = decode_properties(SEND_V2_EXT["i"])


def _rate(fn: Callable[[], object], num: int) -> float:
    """Calls per second over `num` calls, best of 3 (the minimum is the least-disturbed run)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(num):
            fn()
        best = min(best, time.perf_counter() - start)
    return num / best


def run(num: int) -> list[tuple[str, float]]:
    cmd = RemotingCommand(code=310, opaque=1, ext_fields=SEND_V2_EXT, body=b"x" * 128)
    json_frame, binary_frame = encode(cmd), encode_binary(cmd)
    stream = json_frame * 64
    decoder = FrameDecoder()
    results = [
        ("encode frame, JSON header", _rate(lambda: encode(cmd), num)),
        ("encode frame, ROCKETMQ header", _rate(lambda: encode_binary(cmd), num)),
        ("decode frame, JSON header", _rate(lambda: decode_frame(json_frame[4:]), num)),
        ("decode frame, ROCKETMQ header", _rate(lambda: decode_frame(binary_frame[4:]), num)),
        ("FrameDecoder.feed, 64 JSON frames per read (per frame)", 64 * _rate(lambda: decoder.feed(stream), num // 64)),
        ("parse SEND_MESSAGE_V2 header", _rate(lambda: parse_send_request_header(310, SEND_V2_EXT), num)),
        ("parse PULL_MESSAGE header", _rate(lambda: PullMessageRequestHeader.from_ext_fields(PULL_EXT), num)),
    ]
    header = SendMessageRequestHeader.from_v2_ext_fields(SEND_V2_EXT)
    results += [
        ("SendMessageRequestHeader.to_v2_ext_fields", _rate(header.to_v2_ext_fields, num)),
        ("decode_properties (4 pairs)", _rate(lambda: decode_properties(SEND_V2_EXT["i"]), num)),
        ("encode_properties (4 pairs)", _rate(lambda: encode_properties(PROPS), num)),
    ]
    return results


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _report(results: list[tuple[str, float]], num: int) -> str:
    lines = [
        f"## Codec micro-benchmarks ({datetime.date.today().isoformat()})",
        "",
        f"Command: `.venv/bin/python -m bench.codec --num {num}`. Machine: {os.cpu_count()} cores, {_cpu_model()}, "
        f"Python {platform.python_version()}. Single thread, best of 3.",
        "",
        "| operation | ops/s | µs/op |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {rate:,.0f} | {1e6 / rate:.2f} |" for name, rate in results]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=200_000, help="calls per measurement")
    parser.add_argument("--append", action="store_true", help="append the results to docs/benchmarks.md")
    args = parser.parse_args()
    report = _report(run(args.num), args.num)
    print(report)
    if args.append:
        path = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
        prefix = "" if path.exists() else "# Benchmarks\n\n"
        with path.open("a") as out:
            out.write(prefix + report + "\n")


if __name__ == "__main__":
    main()
