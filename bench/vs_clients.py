"""The clients of bench/vs_rocketmq.py, each a child process that prints one JSON line at the end:

- `loadgen()`: bench/java/LoadGen.java (rocketmq-client, compiled by scripts/reference-rocketmq.sh), the
  same JVM and jars against both brokers; `grpc_loadgen()`: bench/java/GrpcLoadGen.java (rocketmq-client-java,
  compiled by `scripts/reference-rocketmq.sh VERSION grpc`) against a gRPC endpoint;
- `pyclient()`: our Python SDK, `python -m bench.vs_clients send --namesrv A --topic T --inflight N
  --seconds S --size B [--warmup W] [--batch K]`: N sync sends in flight on one Producer (broker.client)
  for W + S seconds, the last S counted; with K > 1 each send is a batch of K messages (send_batch),
  latencies are per batch and msg/s counts messages; `client_cpu_s` is the process's CPU time over the
  counted seconds, as LoadGen reports its JVM's; `--access-key AK --secret-key SK` signs every request
  (the SDK's ACL credentials).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from broker.client import ClientConfig, Credentials, Message, Producer, SendStatus
from broker.transport.loop import run

__all__ = ["ClientError", "child_json", "grpc_loadgen", "loadgen", "pyclient", "quantile"]

#: The load generator's JVM: the same for both brokers.
LOADGEN_JVM = ["-Xms512m", "-Xmx1g", "-XX:+UseG1GC"]


class ClientError(RuntimeError):
    """A client run that failed or printed no result."""


def child_json(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a client child process: the last line of its stdout that is a JSON object."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        raise ClientError(f"timed out after {timeout:.0f} s: {' '.join(cmd)[-300:]}") from exc
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise ClientError(f"rc {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}")
    found: dict[str, Any] = orjson.loads(lines[-1])
    return found


def _java(classes: Path, lib: Path, main: str, mode: str, timeout: float, options: dict[str, object]) -> dict[str, Any]:
    args = [str(a) for key, value in options.items() for a in (f"--{key}", value)]
    with tempfile.TemporaryDirectory(prefix="vs-loadgen-") as home:
        java = shutil.which("java") or "java"
        cmd = [java, *LOADGEN_JVM, f"-Duser.home={home}", "-cp", f"{classes}:{lib}/*", main, mode, *args]
        return child_json(cmd, timeout, env={**os.environ, "HOME": home})


def _build(reference: Path, prefix: str, how: str) -> Path:
    builds = sorted(reference.glob(f"{prefix}-*/.ok"))
    if not builds:
        raise ClientError(f"no compiled {prefix} under {reference} (run {how})")
    return builds[-1].parent


def loadgen(reference: Path, mode: str, timeout: float, **options: object) -> dict[str, Any]:
    """`LoadGen mode --key value ...` with the jars of `reference` (a scripts/reference-rocketmq.sh dir)."""
    classes = _build(reference, "loadgen", "scripts/reference-rocketmq.sh")
    return _java(classes, reference / "lib", "LoadGen", mode, timeout, options)


def grpc_loadgen(reference: Path, client_lib: Path, mode: str, timeout: float, **options: object) -> dict[str, Any]:
    """`GrpcLoadGen mode --key value ...` with rocketmq-client-java's jar in `client_lib`."""
    classes = _build(reference, "grpc-loadgen", "scripts/reference-rocketmq.sh VERSION grpc")
    return _java(classes, client_lib, "GrpcLoadGen", mode, timeout, options)


def pyclient(
    namesrv: str,
    topic: str,
    inflight: int,
    seconds: float,
    size: int,
    warmup: float,
    batch: int = 1,
    credentials: Credentials | None = None,
) -> dict[str, Any]:
    """W1/W2 (batch 1) or W3 (batches) with our Python SDK in a child process (signing with `credentials`)."""
    cmd = [sys.executable, "-m", "bench.vs_clients", "send", "--namesrv", namesrv, "--topic", topic]
    cmd += ["--inflight", str(inflight), "--seconds", str(seconds), "--size", str(size), "--warmup", str(warmup)]
    cmd += ["--batch", str(batch)]
    if credentials is not None:  # a bench user's secret: on the command line of a child of this process only
        cmd += ["--access-key", credentials.access_key, "--secret-key", credentials.secret_key]
    return child_json(cmd, seconds + warmup + 120)


def quantile(ordered: list[float], q: float) -> float:
    """The q-quantile of sorted values (the element at rank floor(n * q)); 0 for none."""
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


async def _send(
    namesrv: str,
    topic: str,
    inflight: int,
    seconds: float,
    size: int,
    warmup: float,
    batch: int,
    credentials: Credentials | None = None,
) -> dict[str, Any]:
    body = b"x" * size
    latencies: list[float] = []
    failures = 0  # failed sends (a batch is one)
    config = ClientConfig(namesrv_addr=namesrv, credentials=credentials)
    async with Producer("vs-python-producer", client_config=config) as producer:
        await producer.publish_info(topic)  # the route, before the clock starts
        start = time.monotonic() + warmup  # sends before it are not counted
        deadline = start + seconds

        async def worker() -> None:
            nonlocal failures
            while time.monotonic() < deadline:
                begin = time.monotonic()
                try:
                    if batch > 1:  # fresh Messages: send_batch sets each one's UNIQ_KEY
                        results = await producer.send_batch([Message(topic, body) for _ in range(batch)])
                        ok = all(r.status is SendStatus.SEND_OK for r in results)
                    else:
                        ok = (await producer.send(Message(topic, body))).status is SendStatus.SEND_OK
                except Exception:
                    ok = False
                if begin >= start:
                    failures += not ok
                    latencies.append(time.monotonic() - begin)

        async def cpu_at_start() -> float:
            await asyncio.sleep(max(0.0, start - time.monotonic()))
            return time.process_time()

        cpu_start, *_ = await asyncio.gather(cpu_at_start(), *(worker() for _ in range(inflight)))
        cpu = time.process_time() - cpu_start
        elapsed = time.monotonic() - start
    latencies.sort()
    count = (len(latencies) - failures) * batch
    return {
        "mode": "send",
        "threads": inflight,
        "batch": batch,
        "count": count,
        "seconds": round(elapsed, 3),
        "msgs_per_s": round(count / elapsed, 1),
        "p50_ms": round(quantile(latencies, 0.5) * 1000, 3),
        "p99_ms": round(quantile(latencies, 0.99) * 1000, 3),
        "failures": failures,
        "client_cpu_s": round(cpu, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="W1/W2/W3 sends with the Python SDK; one JSON line")
    parser.add_argument("mode", choices=["send"])
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--warmup", type=float, default=0, help="seconds of sends first, not counted")
    parser.add_argument("--batch", type=int, default=1, help="messages a send (send_batch when > 1)")
    parser.add_argument("--access-key", default=None, help="sign every request (ACL) as this user")
    parser.add_argument("--secret-key", default=None)
    args = parser.parse_args()
    if not 1 <= args.batch <= 1024:
        parser.error("--batch: 1 to 1024")
    if (args.access_key is None) != (args.secret_key is None):
        parser.error("--access-key and --secret-key go together")
    creds = Credentials(args.access_key, args.secret_key) if args.access_key else None
    result = run(
        _send(args.namesrv, args.topic, args.inflight, args.seconds, args.size, args.warmup, args.batch, creds)
    )
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main()
