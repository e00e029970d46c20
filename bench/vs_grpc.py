"""Our broker's gRPC endpoint beside Apache RocketMQ's proxy, the same two 5.x SDKs driving both:

    .venv/bin/python -m bench.vs_grpc [--rounds 3] [--seconds 10] [--workloads G1,G2,G3] [--client both]
        [--senders 64] [--backlog 100000] [--drain-threads 4] [--version 5.3.3] [--json FILE]
        [--brokers both|ours|reference]

Ours is our NameServer and broker with `enableProxy=true` and `grpcServerPort`; the reference is Apache
RocketMQ's NameServer and its proxy in local mode (`ProxyStartup -pm local`: the broker runs inside the proxy's
JVM) from the jars `scripts/reference-rocketmq.sh VERSION grpc` fetches. The round structure is
bench/vs_rocketmq.py's (its Runner, Cluster and table): one broker at a time on a fresh store from the same
broker.conf keys, the order alternating from round to round. The clients, each a child process:

- java: bench/java/GrpcLoadGen.java on rocketmq-client-java 5.0.8 (the `java5grpc` peer of scripts/peers.sh),
  plaintext (`enableSsl(false)`: ours serves plaintext, Apache's proxy either on one port);
- python: the official Python SDK, rocketmq-python-client (the `grpc` extra), through bench/vs_grpc_sdk.py.

Workloads (1 KiB bodies, an 8-queue topic):

- G1: sync sends from --senders concurrent senders (threads on one Producer): msg/s, p50, p99;
- G2: sync sends from 1 sender: msg/s, p50, p99;
- G3: a SimpleConsumer (--drain-threads threads each receiving 32 and acking each) draining a backlog of
  --backlog messages, filled first through the remoting API with bench/java/LoadGen.java's batches of 32; each
  client drains it in its own consumer group. A new group starts at the queue's first message on Apache's broker
  only while that message counts as in memory (initPopOffsetByCheckMsgInMem, accessMessageInMemoryMaxRatio 40 % of
  RAM), so keep the backlog well under that (ours starts there whenever the queue begins at offset 0).

A benchmark to run on a quiet machine: never run by `make test` or CI.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

from bench.vs_brokers import KINDS, REPO, Cluster, ensure_reference
from bench.vs_clients import grpc_loadgen
from bench.vs_grpc_sdk import sdk
from bench.vs_rocketmq import Runner, report, run_rounds, store_root
from bench.vs_table import Sample

__all__ = ["main"]

WORKLOADS = ("G1", "G2", "G3")
CLIENTS = ("java", "python")
TOPIC, BACKLOG_TOPIC = "VsGrpc", "VsGrpcBacklog"
BODY = 1024
JAVA_GRPC_VERSION = "5.0.8"
JAVA_GRPC_DIR = Path(
    os.environ.get(
        "ROCKETCLUSTER_JAVA_GRPC_DIR",
        Path.home() / ".cache" / "rocketcluster" / f"java-grpc-client-{JAVA_GRPC_VERSION}",
    )
)


class GrpcRunner(Runner):
    """One round's gRPC session on one broker kind: G1/G2 per client, then G3's fill and each client's drain."""

    grpc = True

    def client(self, which: str, mode: str, timeout: float, **options: object) -> dict[str, Any]:
        if which == "java":
            return grpc_loadgen(self.reference, JAVA_GRPC_DIR / "lib", mode, timeout, **options)
        return sdk(mode, timeout, **options)

    def grpc_send(self, workload: str, cluster: Cluster, which: str, senders: int) -> None:
        a = self.args
        result = self.client(
            which, "send", a.seconds + a.warmup + 300, endpoint=cluster.grpc_endpoint, topic=TOPIC,
            threads=senders, seconds=a.seconds, size=BODY, warmup=a.warmup,
        )  # fmt: skip
        self.record(workload, result, "msgs_per_s", "p50_ms", "p99_ms")

    def drain(self, cluster: Cluster, which: str, count: int) -> None:
        a = self.args
        got = self.client(
            which, "consume", a.drain_wait + 300, endpoint=cluster.grpc_endpoint, topic=BACKLOG_TOPIC,
            group=f"vs-grpc-{which}", count=count, threads=a.drain_threads, batch=32, wait=a.drain_wait,
        )  # fmt: skip
        if not got["complete"]:
            self.note(f"G3 {which}: consumed {got['count']} of {count}")
        self.record(f"G3 drain {which}", got, "msgs_per_s")

    def session(self) -> None:
        with self.cluster("grpc") as (cluster, ready):
            self.samples.append(Sample(self.round, self.kind, "ready (gRPC port open)", "ready_s", ready))
            self.java("topic", namesrv=cluster.namesrv, topic=TOPIC)
            for which in self.args.clients:
                for workload, senders in (("G1", self.args.senders), ("G2", 1)):
                    if workload in self.selected:
                        name = f"{workload} {which}"
                        self.step(name, partial(self.grpc_send, name, cluster, which, senders))
            if "G3" in self.selected:
                self.step("G3", lambda: self.fill_and_drain(cluster))

    def fill_and_drain(self, cluster: Cluster) -> None:
        self.java("topic", namesrv=cluster.namesrv, topic=BACKLOG_TOPIC)
        fill = self.java(
            "fill", namesrv=cluster.namesrv, topic=BACKLOG_TOPIC, count=self.args.backlog, threads=8, batch=32,
            size=BODY,
        )  # fmt: skip
        for which in self.args.clients:
            self.step(f"G3 {which}", partial(self.drain, cluster, which, int(fill["count"])))


def ensure_java_grpc() -> None:
    """scripts/peers.sh java5grpc when rocketmq-client-java is not in JAVA_GRPC_DIR yet."""
    if (JAVA_GRPC_DIR / "lib" / ".ok").exists():
        return
    env = {**os.environ, "ROCKETCLUSTER_JAVA_GRPC_DIR": str(JAVA_GRPC_DIR)}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "peers.sh"), "java5grpc"], env=env, capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"scripts/peers.sh java5grpc failed:\n{proc.stderr.decode(errors='replace')[-2000:]}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10, help="per send workload (G1, G2)")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of each send run not counted")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help=f"some of {','.join(WORKLOADS)}")
    parser.add_argument("--client", choices=[*CLIENTS, "both"], default="both", help="which SDK drives the workloads")
    parser.add_argument("--senders", type=int, default=64, help="G1's concurrent senders")
    parser.add_argument("--backlog", type=int, default=100_000, help="G3's backlog, in messages")
    parser.add_argument("--drain-threads", type=int, default=4, help="G3's receiving threads")
    parser.add_argument("--drain-wait", type=int, default=600, help="seconds before a G3 drain gives up")
    parser.add_argument("--version", default="5.3.3", help="Apache RocketMQ release (scripts/reference-rocketmq.sh)")
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the stores and logs (in --dir or /tmp)")
    parser.add_argument("--json", type=Path, default=None, help="write samples, table and notes here")
    parser.add_argument("--brokers", choices=["both", "ours", "reference"], default="both", help="which to run")
    args = parser.parse_args(argv)
    args.kinds = KINDS if args.brokers == "both" else (args.brokers,)
    args.clients = CLIENTS if args.client == "both" else (args.client,)
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}; choose from {','.join(WORKLOADS)}")
    if args.rounds < 1 or args.seconds < 1 or args.warmup < 0 or args.senders < 1 or args.drain_threads < 1:
        parser.error("--rounds, --seconds, --senders and --drain-threads: at least 1; --warmup: at least 0")
    if args.backlog < 32:
        parser.error("--backlog: at least 32 (one batch)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    ensure_java_grpc()
    reference = ensure_reference(args.version, grpc=True)
    load_before = os.getloadavg()
    started = datetime.datetime.now(datetime.UTC)
    with store_root(args, "vs-grpc-") as tmp:
        runner = GrpcRunner(args, reference, tmp)
        run_rounds(args, runner, [("gRPC", runner.session)])
    title = f"gRPC: ours / Apache RocketMQ {args.version}'s proxy (local mode)"
    report(args, runner, started, load_before, title, {"java_grpc_client": JAVA_GRPC_VERSION})


if __name__ == "__main__":
    main()
