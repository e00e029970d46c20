"""How each broker's cost grows with the work: ours beside Apache RocketMQ's, with the same Java client:

    .venv/bin/python -m bench.cost_growth [sweep] [--parts size,topics,groups] [--sizes 128,1k,4k,16k,64k]
        [--topics 1,10,100,1000] [--groups 1,2,4,8,16] [--seconds 10] [--warmup 3] [--threads 64]
        [--backlog 200000] [--brokers both|ours|reference] [--version 5.3.3] [--out DIR] [--markdown]
    .venv/bin/python -m bench.cost_growth soak [--minutes 30] [--every 10] [--rate 0] [...]

`sweep` measures throughput and the broker's CPU per message (utime + stime of the broker process, and of
our helper processes, from /proc/<pid>/stat, read before and after each run) against
- size: the body size of W1's sync sends (--threads senders, one 8-queue topic);
- topics: the number of 8-queue topics the same sends spread over (all created first, routes fetched before
  the clock);
- groups: the number of consumer groups push-consuming one topic's --backlog messages from the start
  (msg/s counts every group's deliveries).
`soak` sends W1's way, paced at half the W1 rate of the slower broker (measured first; --rate sets it), for
--minutes on each broker, and samples NameServer + broker memory (VmRSS, own: RssAnon + RssShmem, PSS) every
--every seconds.

Each part runs on one broker at a time, on a fresh store (the brokers of bench/vs_brokers.py), the first
broker alternating from part to part. The Java client is bench/java/LoadGen.java (scripts/reference-rocketmq.sh
compiles it). It prints a table (ours / reference per point) and writes PNG plots, the table as markdown and
every point as JSON into --out (default .data/bench/cost-growth-<time>), whose paths it prints. A benchmark for
a quiet machine: never run by `make test`.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, TaskID
from rich.table import Table

from bench.cost_plots import plot_soak, plot_sweeps
from bench.cost_table import (
    PARTS,
    MemorySample,
    Point,
    cpu_us_per_msg,
    markdown,
    parse_counts,
    rows,
    soak_markdown,
    soak_rate,
    table_cells,
)
from bench.proc import cpu_s
from bench.vs_brokers import KINDS, Cluster, ensure_reference
from bench.vs_clients import ClientError, loadgen

__all__ = ["main"]

REPO = Path(__file__).resolve().parent.parent
W1_THREADS = 64
FILL_THREADS, FILL_BATCH = 8, 32
BODY = 1024  # of the topics, groups and soak runs


@dataclass
class Session:
    """The runs of one command: options, the Java client's directory, where stores go, and what was found."""

    args: argparse.Namespace
    reference: Path
    root: Path
    progress: Progress
    task: TaskID
    points: list[Point] = field(default_factory=list)
    memory: list[MemorySample] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def java(self, mode: str, **options: object) -> dict[str, Any]:
        seconds = sum(float(str(options.get(key, 0))) for key in ("seconds", "wait"))
        return loadgen(self.reference, mode, seconds + 600, **options)

    def step(self, text: str) -> None:
        self.progress.update(self.task, description=text)

    def advance(self) -> None:
        self.progress.advance(self.task)

    @contextlib.contextmanager
    def cluster(self, kind: str, name: str) -> Iterator[Cluster]:
        cluster = Cluster(kind, self.root / f"{name}-{kind}", self.reference)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()

    def measured(self, cluster: Cluster, part: str, x: int, mode: str, **options: object) -> None:
        """One run of the Java client (`mode` with `options`), the broker's CPU read around it."""
        pid = cluster.servers["master"].proc.pid
        before = cpu_s(pid)
        try:
            result = self.java(mode, namesrv=cluster.namesrv, **options)
        except ClientError as exc:
            self.notes.append(f"{cluster.kind} {part}={x} failed: " + " / ".join(str(exc).splitlines()[:2]))
            return
        messages = int(result["count"])
        cpu = cpu_us_per_msg(before, cpu_s(pid), messages)
        self.points.append(Point(part, x, cluster.kind, float(result["msgs_per_s"]), round(cpu, 2), messages))
        if result.get("failures"):
            self.notes.append(f"{cluster.kind} {part}={x}: {result['failures']} failed sends")
        if result.get("complete") is False:
            self.notes.append(f"{cluster.kind} {part}={x}: consumed {messages} of what was asked")

    def send(self, cluster: Cluster, topic: str, seconds: int, **options: object) -> dict[str, Any]:
        return self.java("send", namesrv=cluster.namesrv, topic=topic, threads=self.args.threads, seconds=seconds,
                         **options)  # fmt: skip

    def warm_up(self, cluster: Cluster, topic: str, **options: object) -> None:
        """Sends not measured, before a part's first point: the reference's JIT, both brokers' page cache."""
        if self.args.warmup > 0:
            with contextlib.suppress(ClientError):
                self.send(cluster, topic, self.args.warmup, **options)

    def sizes(self, kind: str) -> None:
        with self.cluster(kind, "size") as cluster:
            self.java("topic", namesrv=cluster.namesrv, topic="CostSize")
            self.warm_up(cluster, "CostSize", size=BODY)
            for size in self.args.sizes:
                self.step(f"{kind}: body size {size} B")
                self.measured(
                    cluster, "size", size, "send", topic="CostSize", threads=self.args.threads,
                    seconds=self.args.seconds, size=size,
                )  # fmt: skip
                self.advance()

    def topics(self, kind: str) -> None:
        with self.cluster(kind, "topics") as cluster:
            for count in self.args.topics:
                self.step(f"{kind}: creating {count} topics")
                name = f"CostTopics{count}"
                self.java("topic", namesrv=cluster.namesrv, topic=name, topics=count)
                if count == self.args.topics[0]:
                    self.warm_up(cluster, name, size=BODY, topics=count)
                self.step(f"{kind}: sends over {count} topics")
                self.measured(
                    cluster, "topics", count, "send", topic=name, threads=self.args.threads,
                    seconds=self.args.seconds, size=BODY, topics=count,
                )  # fmt: skip
                self.advance()

    def groups(self, kind: str) -> None:
        with self.cluster(kind, "groups") as cluster:
            self.java("topic", namesrv=cluster.namesrv, topic="CostGroups")
            self.step(f"{kind}: filling {self.args.backlog} messages")
            fill = self.java(
                "fill", namesrv=cluster.namesrv, topic="CostGroups", count=self.args.backlog, threads=FILL_THREADS,
                batch=FILL_BATCH, size=BODY,
            )  # fmt: skip
            for count in self.args.groups:
                self.step(f"{kind}: {count} consumer groups draining {fill['count']}")
                self.measured(
                    cluster, "groups", count, "consume", topic="CostGroups", count=fill["count"], groups=count,
                    wait=self.args.consume_wait,
                )  # fmt: skip
                self.advance()

    def w1_rate(self, kind: str) -> float:
        with self.cluster(kind, "soak-probe") as cluster:
            self.java("topic", namesrv=cluster.namesrv, topic="CostSoak")
            self.step(f"{kind}: W1 rate for the soak's pace")
            self.warm_up(cluster, "CostSoak", size=BODY)
            rate = float(self.send(cluster, "CostSoak", self.args.seconds, size=BODY)["msgs_per_s"])
            self.advance()
            return rate

    def soak(self, kind: str, rate: float) -> None:
        with self.cluster(kind, "soak") as cluster:
            self.java("topic", namesrv=cluster.namesrv, topic="CostSoak")
            seconds = max(1, round(self.args.minutes * 60))
            outcome: dict[str, Any] = {}

            def load() -> None:
                try:
                    outcome.update(self.send(cluster, "CostSoak", seconds, size=BODY, rate=round(rate, 1)))
                except ClientError as exc:
                    outcome["error"] = " / ".join(str(exc).splitlines()[:2])

            sender = threading.Thread(target=load, daemon=True)
            started = time.monotonic()
            sender.start()
            while sender.is_alive():
                elapsed = time.monotonic() - started
                vm, own, pss = cluster.rss()
                self.memory.append(MemorySample(kind, round(elapsed, 1), round(vm, 1), round(own, 1), round(pss, 1)))
                self.step(f"{kind}: soak at {rate:,.0f} msg/s, {elapsed / 60:.1f} of {self.args.minutes} min, "
                          f"VmRSS {vm:.0f} MiB")  # fmt: skip
                sender.join(self.args.every)
            if "error" in outcome:
                self.notes.append(f"{kind} soak: {outcome['error']}")
            else:
                self.notes.append(
                    f"{kind} soak: {outcome.get('count', 0)} messages at {outcome.get('msgs_per_s', 0)} msg/s"
                )
            self.advance()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("mode", nargs="?", choices=["sweep", "soak"], default="sweep")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"sweep: some of {','.join(PARTS)}")
    parser.add_argument("--sizes", default="128,1k,4k,16k,64k", help="body sizes, bytes (128 to 4m)")
    parser.add_argument("--topics", default="1,10,100,1000", help="topic counts (8 queues each)")
    parser.add_argument("--groups", default="1,2,4,8,16", help="consumer group counts")
    parser.add_argument("--seconds", type=int, default=10, help="per measured send run")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of sends before a part, not measured")
    parser.add_argument("--threads", type=int, default=W1_THREADS, help="sending threads (W1: 64)")
    parser.add_argument("--backlog", default="200k", help="groups: messages each group reads")
    parser.add_argument("--consume-wait", type=int, default=900, help="groups: give up after this many s")
    parser.add_argument("--minutes", type=float, default=30, help="soak: minutes on each broker")
    parser.add_argument("--every", type=float, default=10, help="soak: seconds between memory samples")
    parser.add_argument("--rate", type=float, default=0, help="soak: msg/s (0: half the slower W1 rate)")
    parser.add_argument("--brokers", choices=["both", "ours", "reference"], default="both")
    parser.add_argument("--version", default="5.3.3", help="Apache RocketMQ release (scripts/reference-rocketmq.sh)")
    parser.add_argument("--out", type=Path, default=None, help="where plots, table and JSON go")
    parser.add_argument("--markdown", action="store_true", help="print the tables as markdown too")
    args = parser.parse_args(argv)
    try:
        args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
        unknown = set(args.parts) - set(PARTS)
        if unknown or not args.parts:
            raise ValueError(f"--parts: {sorted(unknown) or 'none'}; choose from {','.join(PARTS)}")
        args.sizes = parse_counts(args.sizes, 1, 4 << 20)
        args.topics = parse_counts(args.topics, 1, 10_000)
        args.groups = parse_counts(args.groups, 1, 64)
        (args.backlog,) = parse_counts(args.backlog, 1, 100_000_000)
    except ValueError as exc:
        parser.error(str(exc))
    if args.seconds <= 0 or args.threads < 1 or args.minutes <= 0 or args.every <= 0 or args.rate < 0:
        parser.error("--seconds, --threads, --minutes and --every must be positive, --rate not negative")
    args.kinds = KINDS if args.brokers == "both" else (args.brokers,)
    return args


_PARTS: dict[str, Callable[[Session, str], None]] = {
    "size": Session.sizes,
    "topics": Session.topics,
    "groups": Session.groups,
}


def _plan(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The sweep's (part, broker) steps; each part alternates which broker goes first."""
    steps: list[tuple[str, str]] = []
    for index, part in enumerate(args.parts):
        kinds = args.kinds if index % 2 == 0 else tuple(reversed(args.kinds))
        steps += [(part, kind) for kind in kinds]
    return steps


def _total(args: argparse.Namespace) -> int:
    if args.mode == "soak":
        return 2 * len(args.kinds) if not args.rate else len(args.kinds)
    per = {"size": len(args.sizes), "topics": len(args.topics), "groups": len(args.groups)}
    return sum(per[p] for p in args.parts) * len(args.kinds)


def _print_table(session: Session, out: Console) -> None:
    found = rows(session.points)
    if found:
        cells = table_cells(found)
        table = Table(title="broker cost against the work (ours / reference)")
        for header in cells[0]:
            table.add_column(header, justify="left" if header == "part" else "right")
        for line in cells[1:]:
            table.add_row(*map(escape, line))
        out.print(table)
    if session.memory:
        out.print(soak_markdown(session.memory), markup=False, highlight=False)
    for note in session.notes:
        out.print(f"note: {note}", markup=False, highlight=False)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    reference = ensure_reference(args.version)  # the Java load generator drives both brokers
    started = datetime.datetime.now(datetime.UTC)
    out_dir = args.out or REPO / ".data" / "bench" / f"cost-growth-{started:%Y%m%d-%H%M%S}"
    out_dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="cost-growth-"))
    err = Console(stderr=True)
    with Progress(console=err, disable=not sys.stderr.isatty(), transient=True) as progress:
        task = progress.add_task("cost growth", total=_total(args))
        session = Session(args, reference, tmp, progress, task)
        try:
            if args.mode == "sweep":
                for part, kind in _plan(args):
                    try:
                        _PARTS[part](session, kind)
                    except (ClientError, RuntimeError) as exc:  # a broker or a client run failed: the next part
                        session.notes.append(f"{kind} {part} stopped: " + " / ".join(str(exc).splitlines()[:2]))
            else:
                rate = args.rate or soak_rate(session.w1_rate(kind) for kind in args.kinds)
                for kind in args.kinds:
                    session.soak(kind, rate)
                session.notes.append(f"soak rate {rate:,.0f} msg/s" + ("" if args.rate else " (half the slower W1)"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    out = Console(width=None if sys.stdout.isatty() else 160)
    _print_table(session, out)
    found = rows(session.points)
    written = []
    if found:
        (out_dir / "cost-growth.md").write_text(markdown(found) + "\n")
        written += [out_dir / "cost-growth.md", plot_sweeps(session.points, out_dir / "cost-growth.png")]
    if session.memory:
        (out_dir / "soak.md").write_text(soak_markdown(session.memory) + "\n")
        written += [out_dir / "soak.md", plot_soak(session.memory, out_dir / "soak.png")]
    doc = {
        "started": started.isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "reference_version": args.version,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "points": [p.as_dict() for p in session.points],
        "memory": [m.as_dict() for m in session.memory],
        "notes": session.notes,
    }
    (out_dir / "cost-growth.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    written.append(out_dir / "cost-growth.json")
    if args.markdown:
        print(markdown(found) if found else "", soak_markdown(session.memory) if session.memory else "", sep="\n\n")
    for path in written:
        if path is not None:
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
