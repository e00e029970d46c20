"""Our broker beside Apache RocketMQ's, on the same machine, with the same Java client:

    .venv/bin/python -m bench.vs_rocketmq [--rounds 3] [--seconds 10] [--workloads W1,W2,...]
        [--backlog 1000000] [--recovery-mib 1024] [--client java|python|both] [--version 5.3.3] [--json FILE]
        [--brokers both|ours|reference]
    .venv/bin/python -m bench.vs_rocketmq --auth [--brokers ours|reference|both] [--client java|python|both]
        [--workloads W1,W3] [--set K=V] [--auth-signed]

scripts/reference-rocketmq.sh fetches the reference (jars from Maven Central) and compiles the load generator,
bench/java/LoadGen.java (rocketmq-client's DefaultMQProducer and DefaultMQPushConsumer). Each round runs every
selected workload against one broker, then the other (the order alternates from round to round), each time on
a fresh store in a temp dir, never both brokers at once. Workloads (1 KiB bodies, an 8-queue topic):

- W1: sync sends from 64 threads; W2: sync sends from 1 thread (p50/p99); W3: batches of 32 from 8 threads;
- W4: a push consumer draining a backlog of --backlog messages, filled first with W3-style batches;
- W5: W1 and W3 under SYNC_FLUSH, and under SYNC_MASTER with a slave;
- rss: resident memory of NameServer + broker (and our broker's helper processes) after start and 5 s idle,
  and at the end of W1: VmRSS, which counts mapped store pages and, once per process, the shared libraries;
  `own`, RssAnon + RssShmem; `pss`, proportional set size (smaps_rollup: a page shared by n processes counts
  1/n); ready: start to ready (the broker answers and its NameServer lists it); recovery: --recovery-mib of
  CommitLog written, kill -9, start to ready again.

Every send and drain also gives `client_cpu_us`, the client process's CPU time a message over the measured
seconds, and the report turns ours into a bound: the client alone, sharing the host's CPUs, allows at most
CPUs / client_cpu_us messages a second, however little the broker costs; as a multiple of the reference's
msg/s, the highest ratio this host can show for that workload.

`--client python` drives W1/W2/W3 with our Python SDK instead (`both`: the Java client and ours). The table gives
per broker the median over the rounds and the range, and the ratio ours / reference (of the medians, and the
range of the per-round ratios). `--brokers ours` runs only our broker (the reference column stays empty): to
compare two source trees of ours in alternating runs, each started with PYTHONPATH=<tree>. This is a benchmark
to run on a quiet machine: never run by `make test`.

`--auth` measures something else with the same clients: a broker's send throughput with authentication on
against off, in the same run (bench/vs_auth.py): ours by default, Apache RocketMQ's with `--brokers reference`
or `both`.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from bench.vs_auth import SHAPES, run_auth
from bench.vs_brokers import KINDS, Cluster, ensure_reference, runtime_info
from bench.vs_clients import ClientError, loadgen, pyclient
from bench.vs_table import CLIENT_CPU, Sample, client_bounds, disk_shortfall, render, summarize
from broker.store.retention import disk_space

__all__ = ["Runner", "main", "report", "run_rounds"]

WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "rss", "ready", "recovery")
AUTH_WORKLOADS, AUTH_DEFAULT = tuple(SHAPES), ("W1", "W3")
TOPIC, BACKLOG_TOPIC, RECOVERY_TOPIC = "VsBench", "VsBacklog", "VsRecovery"
BODY = 1024
#: A 1 KiB message's CommitLog record (body, topic, properties, fixed part): to size --recovery-mib.
RECORD_BYTES = 1024 + 200


class Runner:
    """Runs the sessions of one round on one broker kind and collects Samples and notes; with `grpc` its
    clusters' masters serve the gRPC API too (bench/vs_grpc.py)."""

    grpc = False

    def __init__(self, args: argparse.Namespace, reference: Path, root: Path) -> None:
        self.args, self.reference, self.root = args, reference, root
        self.selected = set(args.workloads)
        self.samples: list[Sample] = []
        self.notes: list[str] = []
        self.round, self.kind = 0, ""

    def record(self, workload: str, result: dict[str, Any], *metrics: str) -> None:
        for metric in metrics:
            self.samples.append(Sample(self.round, self.kind, workload, metric, float(result[metric])))
        if result.get("count") and result.get("client_cpu_s") is not None:
            client_us = 1e6 * float(result["client_cpu_s"]) / float(result["count"])
            self.samples.append(Sample(self.round, self.kind, workload, CLIENT_CPU, client_us))
        if result.get("failures"):
            self.note(f"{workload}: {result['failures']} failed sends")

    def note(self, text: str) -> None:
        self.notes.append(f"round {self.round} {self.kind}: {text}")

    def java(self, mode: str, **options: object) -> dict[str, Any]:
        seconds = sum(float(str(options.get(key, 0))) for key in ("seconds", "warmup", "wait"))
        return loadgen(self.reference, mode, seconds + 600, **options)

    @contextlib.contextmanager
    def cluster(
        self, name: str, flush: str = "ASYNC_FLUSH", role: str = "ASYNC_MASTER"
    ) -> Iterator[tuple[Cluster, float]]:
        root = self.root / f"r{self.round}-{self.kind}-{name}"
        cluster = Cluster(self.kind, root, self.reference, flush=flush, role=role, grpc=self.grpc)
        try:
            ready = cluster.start()
            yield cluster, ready
        finally:
            cluster.stop()

    def step(self, workload: str, run: Callable[[], object]) -> None:
        """One workload; a failure is noted and the session goes on."""
        try:
            run()
        except (ClientError, RuntimeError) as exc:
            self.note(f"{workload} failed: {exc}")

    def send(self, workload: str, cluster: Cluster, threads: int, batch: int = 1) -> dict[str, Any]:
        result = self.java(
            "send", namesrv=cluster.namesrv, topic=TOPIC, threads=threads, seconds=self.args.seconds,
            size=BODY, batch=batch, warmup=self.args.warmup,
        )  # fmt: skip
        self.record(workload, result, "msgs_per_s", "p50_ms", "p99_ms")
        return result

    def python_send(self, workload: str, cluster: Cluster, inflight: int, batch: int = 1) -> None:
        result = pyclient(cluster.namesrv, TOPIC, inflight, self.args.seconds, BODY, self.args.warmup, batch)
        self.record(workload, result, "msgs_per_s", "p50_ms", "p99_ms")

    def memory(self, workload: str, cluster: Cluster) -> None:
        vm, own, pss = cluster.rss()
        self.samples.append(Sample(self.round, self.kind, workload, "rss_mib", vm))
        self.samples.append(Sample(self.round, self.kind, workload, "own_mib", own))
        self.samples.append(Sample(self.round, self.kind, workload, "pss_mib", pss))

    def base(self) -> None:
        """W1-W4, idle and W1 memory, start to ready: one ASYNC_FLUSH broker."""
        with self.cluster("base") as (cluster, ready):
            if "ready" in self.selected:
                self.samples.append(Sample(self.round, self.kind, "ready", "ready_s", ready))
            if "rss" in self.selected:
                time.sleep(5)
                self.memory("rss idle", cluster)
            self.java("topic", namesrv=cluster.namesrv, topic=TOPIC)
            java, python = self.args.client in ("java", "both"), self.args.client in ("python", "both")
            if "W1" in self.selected or "rss" in self.selected:
                if java:
                    self.step("W1", lambda: self.send("W1", cluster, 64))
                if python:
                    self.step("W1 python", lambda: self.python_send("W1 python", cluster, 64))
                if "rss" in self.selected:
                    self.memory("rss end of W1", cluster)
            if "W2" in self.selected:
                if java:
                    self.step("W2", lambda: self.send("W2", cluster, 1))
                if python:
                    self.step("W2 python", lambda: self.python_send("W2 python", cluster, 1))
            if "W3" in self.selected:
                if java:
                    self.step("W3", lambda: self.send("W3", cluster, 8, batch=32))
                if python:
                    self.step("W3 python", lambda: self.python_send("W3 python", cluster, 8, batch=32))
            if "W4" in self.selected:
                self.step("W4", lambda: self.backlog(cluster))

    def backlog(self, cluster: Cluster) -> None:
        self.java("topic", namesrv=cluster.namesrv, topic=BACKLOG_TOPIC)
        fill = self.java(
            "fill", namesrv=cluster.namesrv, topic=BACKLOG_TOPIC, count=self.args.backlog, threads=8, batch=32,
            size=BODY,
        )  # fmt: skip
        self.samples.append(Sample(self.round, self.kind, "W4 fill (W3-style)", "msgs_per_s", fill["msgs_per_s"]))
        got = self.java("consume", namesrv=cluster.namesrv, topic=BACKLOG_TOPIC, count=fill["count"], wait=900)
        if not got["complete"]:
            self.note(f"W4 consumed {got['count']} of {fill['count']}")
        self.record("W4 drain", got, "msgs_per_s")

    def w5(self, name: str, flush: str = "ASYNC_FLUSH", role: str = "ASYNC_MASTER") -> None:
        with self.cluster(name, flush, role) as (cluster, _):
            self.java("topic", namesrv=cluster.namesrv, topic=TOPIC)
            if role == "SYNC_MASTER":
                self.until_replicating(cluster)
            self.step(f"W5 W1 {name}", lambda: self.send(f"W5 W1 {name}", cluster, 64))
            self.step(f"W5 W3 {name}", lambda: self.send(f"W5 W3 {name}", cluster, 8, batch=32))

    def until_replicating(self, cluster: Cluster) -> None:
        """Sends to a SYNC_MASTER fail (SLAVE_NOT_AVAILABLE) until its slave has connected."""
        for _ in range(30):
            probe = self.java("send", namesrv=cluster.namesrv, topic=TOPIC, threads=1, seconds=1, size=BODY)
            if probe["count"] > 0 and not probe["failures"]:
                return
        self.note("the slave never acknowledged a send within 30 probes")

    def recovery(self) -> None:
        with self.cluster("recovery") as (cluster, _):
            self.java("topic", namesrv=cluster.namesrv, topic=RECOVERY_TOPIC)
            count = max(32, (self.args.recovery_mib << 20) // RECORD_BYTES)
            self.java(
                "fill", namesrv=cluster.namesrv, topic=RECOVERY_TOPIC, count=count, threads=8, batch=32, size=BODY
            )
            written = int(runtime_info(cluster.addr()).get("commitLogMaxOffset", "0")) / (1 << 20)
            ready = cluster.kill_and_restart()
            self.samples.append(Sample(self.round, self.kind, "recovery after kill -9", "ready_s", ready))
            if written:
                self.note(f"recovery: {written:.0f} MiB of CommitLog")

    def sessions(self) -> list[tuple[str, Callable[[], None]]]:
        chosen: list[tuple[str, Callable[[], None]]] = []
        if self.selected & {"W1", "W2", "W3", "W4", "rss", "ready"}:
            chosen.append(("W1-W4", self.base))
        if "W5" in self.selected:
            chosen.append(("W5 SYNC_FLUSH", lambda: self.w5("SYNC_FLUSH", flush="SYNC_FLUSH")))
            chosen.append(("W5 SYNC_MASTER", lambda: self.w5("SYNC_MASTER", role="SYNC_MASTER")))
        if "recovery" in self.selected:
            chosen.append(("recovery", self.recovery))
        return chosen


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10, help="per send workload (W1, W2, W3, W5)")
    parser.add_argument("--workloads", default=None, help=f"some of {','.join(WORKLOADS)} (--auth: W1,W2,W3)")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of each send run not counted")
    parser.add_argument("--backlog", type=int, default=1_000_000, help="W4's backlog, in messages")
    parser.add_argument("--recovery-mib", type=int, default=1024, help="CommitLog written before the kill -9")
    parser.add_argument("--client", choices=["java", "python", "both"], default="java", help="who drives W1/W2/W3")
    parser.add_argument("--version", default="5.3.3", help="Apache RocketMQ release (scripts/reference-rocketmq.sh)")
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the stores and logs (in --dir or /tmp)")
    parser.add_argument("--json", type=Path, default=None, help="write samples, table and notes here")
    parser.add_argument(
        "--brokers",
        choices=["both", "ours", "reference"],
        default=None,
        help="which to run (default: both; --auth: ours)",
    )
    parser.add_argument("--auth", action="store_true", help="send throughput, authentication on against off (vs_auth)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="--auth: a broker.conf key for both sides"
    )
    parser.add_argument(
        "--auth-signed", action="store_true", help="--auth: also a side with auth off and the clients signing"
    )
    args = parser.parse_args(argv)
    args.brokers = args.brokers or ("ours" if args.auth else "both")
    args.kinds = KINDS if args.brokers == "both" else (args.brokers,)
    known = AUTH_WORKLOADS if args.auth else WORKLOADS
    chosen = args.workloads or ",".join(AUTH_DEFAULT if args.auth else WORKLOADS)
    args.workloads = [w.strip() for w in chosen.split(",") if w.strip()]
    if (args.set or args.auth_signed) and not args.auth:
        parser.error("--set and --auth-signed go with --auth")
    if any("=" not in item for item in args.set):
        parser.error("--set takes KEY=VALUE")
    unknown = set(args.workloads) - set(known)
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}; choose from {','.join(known)}")
    return args


def _java_version() -> str:
    proc = subprocess.run(["java", "-version"], capture_output=True, text=True)
    return (proc.stderr.splitlines() or ["?"])[0]


def run_rounds(args: argparse.Namespace, runner: Runner, sessions: list[tuple[str, Callable[[], None]]]) -> None:
    """Every session of every round on each broker kind of args.kinds; a failed session is a note."""
    err = Console(stderr=True)
    with Progress(console=err, disable=not sys.stderr.isatty(), transient=True) as progress:
        task = progress.add_task("vs Apache RocketMQ", total=args.rounds * len(args.kinds) * len(sessions))
        for rnd in range(args.rounds):
            for name, session in sessions:
                # Alternate which broker goes first, so a slow minute of the host falls on both alike.
                for kind in args.kinds if rnd % 2 == 0 else reversed(args.kinds):
                    runner.round, runner.kind = rnd, kind
                    progress.update(task, description=f"round {rnd + 1}/{args.rounds} {kind}: {name}")
                    try:
                        session()
                    except (ClientError, RuntimeError) as exc:
                        runner.note(f"{name} failed: {exc}")
                    progress.advance(task)


def largest_store(args: argparse.Namespace) -> int:
    """Bytes the run's largest session may write: the drain's backlog or the recovery run's CommitLog
    (bench.vs_grpc has none), whichever is bigger, and 2 GiB for the send workloads (a SYNC_MASTER session
    keeps two stores) and the next CommitLog file being prepared."""
    backlog: int = args.backlog
    recovery_mib: int = getattr(args, "recovery_mib", 0)
    return max(backlog * RECORD_BYTES, recovery_mib << 20) + (2 << 30)


@contextlib.contextmanager
def store_root(args: argparse.Namespace, prefix: str) -> Iterator[Path]:
    """A temp dir for the stores and logs (in --dir), removed at the end unless --keep."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=args.dir))
    try:
        problem = disk_shortfall(*disk_space(tmp), largest_store(args))
        if problem:
            raise SystemExit(f"{tmp}: {problem}")
        yield tmp
    finally:
        if args.keep:
            print(f"stores and logs kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    reference = ensure_reference(args.version)  # the Java load generator drives both brokers
    if args.auth:
        with store_root(args, "vs-auth-") as tmp:
            run_auth(args, reference, tmp)
        return
    load_before = os.getloadavg()
    started = datetime.datetime.now(datetime.UTC)
    with store_root(args, "vs-rocketmq-") as tmp:
        runner = Runner(args, reference, tmp)
        run_rounds(args, runner, runner.sessions())
    report(args, runner, started, load_before, f"ours / Apache RocketMQ {args.version}")


def report(
    args: argparse.Namespace,
    runner: Runner,
    started: datetime.datetime,
    load_before: tuple[float, float, float],
    title: str,
    extra: dict[str, object] | None = None,
) -> None:
    """The table (median [min-max] a broker, ours / reference) and the notes on stdout; with --json, every
    sample, the rows, the notes, the host and its load before and after, and `extra`, into that file."""
    rows = summarize(runner.samples)
    cells = render(rows)
    table = Table(title=escape(f"{title}: median [min-max] over {args.rounds} round(s)"))
    for header in cells[0]:
        table.add_column(header, justify="left" if header in ("workload", "metric") else "right")
    for line in cells[1:]:
        table.add_row(*map(escape, line))
    out = Console(width=None if sys.stdout.isatty() else 160)
    out.print(table)
    for bound in client_bounds(rows, os.cpu_count() or 1):
        out.print(f"client bound: {bound}", markup=False, highlight=False)
    for note in runner.notes:
        out.print(f"note: {note}", markup=False, highlight=False)
    if args.json:
        doc = {
            "started": started.isoformat(timespec="seconds"),
            "host": {"machine": platform.node(), "cpus": os.cpu_count(), "java": _java_version()},
            "load_before": load_before,
            "load_after": os.getloadavg(),
            "reference_version": args.version,
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "samples": [vars(s) for s in runner.samples],
            "rows": [row.as_dict() for row in rows],
            "notes": runner.notes,
            **(extra or {}),
        }
        args.json.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
