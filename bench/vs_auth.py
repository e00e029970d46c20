"""Send throughput with authentication on against off, in one run: `python -m bench.vs_rocketmq --auth`.

    .venv/bin/python -m bench.vs_rocketmq --auth [--rounds 5] [--seconds 10] [--warmup 3]
        [--brokers ours|reference|both] [--client java|python|both] [--workloads W1,W2,W3] [--set KEY=VALUE ...]
        [--auth-signed] [--json FILE]

Each round starts, for each broker measured (ours by default; `--brokers reference` or `both` adds Apache
RocketMQ's, the peer whose own cost of the same check the figures are read against), two clusters
(bench.vs_brokers.Cluster: a NameServer and an ASYNC_FLUSH master on loopback, a fresh store each), both up at
once, one idle while the other is driven: one with authentication and
authorization off, driven by clients that do not sign, and one with both on (ACL 2.0, `authenticationEnabled`
and `authorizationEnabled`), driven by a NORMAL user whose ACL allows Pub on the topic and whose every request
is signed: the Java client 5.3.3 with AclClientRPCHook (bench/java/LoadGen.java `--accessKey/--secretKey`) and
our SDK with credentials (bench/vs_clients.py). Each workload runs on one side, then the other, the order
flipping from workload to workload, so that a swing of the shared host's load falls on both sides. Before
the secured side's workloads an unsigned send is checked to be refused, so the "on" figures are of a broker
that authenticates. `--set` adds broker.conf keys to both sides (e.g.
`authenticationStrategy=org.apache.rocketmq.auth.authentication.strategy.StatefulAuthenticationStrategy`, a name
both brokers take). `--auth-signed` adds a third side: authentication
off, the clients signing all the same, to part the clients' cost of signing from the broker's of checking.

Workloads, 1 KiB bodies on an 8-queue topic, as bench.vs_rocketmq's: W1 single sync sends from 64 senders,
W2 from 1, W3 batches of 32 from 8. The clients run on the same host as the broker, so a client's signing
counts too, as it does for an application beside its broker. The report gives msg/s off and on (median and
range over the rounds), the per-round ratio on / off (median and range) and the host's 1-minute load average
when each pair ran: the figures of a shared machine, to read beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.vs_brokers import Cluster
from bench.vs_clients import ClientError, loadgen, pyclient
from broker.client import Admin, ClientConfig, Credentials, Message, Producer
from broker.client.admin import auth as admin_auth
from broker.client.errors import NoPermission

__all__ = ["ROOT", "USER", "run_auth", "summarize"]

TOPIC = "VsAuth"
BODY = 1024
ROOT = Credentials("bench-root", "bench-root-secret")
USER = Credentials("bench-user", "bench-user-secret")
#: workload -> (senders, messages a send)
SHAPES = {"W1": (64, 1), "W2": (1, 1), "W3": (8, 32)}
SIDES = ("off", "on")
BROKER_NAMES = {"ours": "ours", "reference": "Apache RocketMQ"}
#: --auth-signed: a third side, authentication off but the clients signing, which parts the clients' signing
#: from the broker's check
SIGNED_SIDES = ("off", "signed", "on")


#: what Apache RocketMQ 5.3 needs besides the switches: without a metadata provider it refuses every request
_PROVIDERS = "org.apache.rocketmq.auth.{}.provider.Local{}MetadataProvider"
REFERENCE_PROVIDERS = {
    "authenticationMetadataProvider": _PROVIDERS.format("authentication", "Authentication"),
    "authorizationMetadataProvider": _PROVIDERS.format("authorization", "Authorization"),
}


def auth_keys(kind: str = "ours") -> dict[str, object]:
    """broker.conf of the secured side: ACL 2.0 on, `ROOT` as initAuthenticationUser (a SUPER user)."""
    root = orjson.dumps({"username": ROOT.access_key, "password": ROOT.secret_key}).decode()
    keys: dict[str, object] = {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "initAuthenticationUser": root,
    }
    return keys | REFERENCE_PROVIDERS if kind == "reference" else keys


@dataclass(frozen=True)
class AuthSample:
    round: int
    broker: str  # "ours" | "reference"
    side: str  # "off" | "on" | "signed" (auth off, the clients signing)
    workload: str
    client: str  # "java" | "python"
    msgs_per_s: float
    p50_ms: float
    p99_ms: float
    failures: int
    load1: float  # the 1-minute load average just before the workload ran


async def _secure(namesrv: str, broker: str) -> None:
    """The bench user (NORMAL, Pub on TOPIC) made by ROOT; then an unsigned send must be refused."""
    async with Admin(client_config=ClientConfig(namesrv_addr=namesrv, credentials=ROOT)) as admin:
        api = admin.instance.api
        await admin_auth.create_user(api, broker, USER.access_key, USER.secret_key)
        acl = admin_auth.acl_info(f"User:{USER.access_key}", [f"Topic:{TOPIC}"], ["Pub"], None, "Allow")
        await admin_auth.create_acl(api, broker, acl)
    async with Producer("vs-auth-unsigned", namesrv, retry_times_when_send_failed=0) as producer:
        try:
            await producer.send(Message(TOPIC, b"unsigned"))
        except NoPermission:
            return
    raise RuntimeError("an unsigned send to the secured broker was accepted: authentication is not on")


class AuthRunner:
    """Runs the rounds and collects AuthSamples and notes."""

    def __init__(self, args: argparse.Namespace, reference: Path, root: Path) -> None:
        self.args, self.reference, self.root = args, reference, root
        self.clients = ("java", "python") if args.client == "both" else (args.client,)
        self.samples: list[AuthSample] = []
        self.notes: list[str] = []
        self.extra: dict[str, object] = dict(item.split("=", 1) for item in args.set)

    def start(self, rnd: int, kind: str, side: str) -> Cluster:
        """One side's cluster of `kind`, started, with the topic (and on the secured side the bench user)."""
        on = side == "on"
        extra = {**self.extra, **(auth_keys(kind) if on else {})}
        root = self.root / f"r{rnd}-{kind}-auth-{side}"
        cluster = Cluster(kind, root, self.reference, extra=extra, credentials=ROOT if on else None)
        try:
            cluster.start()
            admin_creds = {"accessKey": ROOT.access_key, "secretKey": ROOT.secret_key} if on else {}
            loadgen(self.reference, "topic", 600, namesrv=cluster.namesrv, topic=TOPIC, **admin_creds)
            if on:
                asyncio.run(_secure(cluster.namesrv, cluster.addr()))
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def workload(self, rnd: int, side: str, workload: str, client: str, cluster: Cluster) -> None:
        kind = cluster.kind
        senders, batch = SHAPES[workload]
        args, on = self.args, side in ("on", "signed")
        load1 = os.getloadavg()[0]
        if client == "java":
            creds = {"accessKey": USER.access_key, "secretKey": USER.secret_key} if on else {}
            result = loadgen(
                self.reference, "send", args.seconds + args.warmup + 600, namesrv=cluster.namesrv, topic=TOPIC,
                threads=senders, seconds=args.seconds, size=BODY, batch=batch, warmup=args.warmup, **creds,
            )  # fmt: skip
        else:
            result = pyclient(
                cluster.namesrv, TOPIC, senders, args.seconds, BODY, args.warmup, batch, USER if on else None
            )
        sample = AuthSample(
            rnd, kind, side, workload, client, float(result["msgs_per_s"]), float(result["p50_ms"]),
            float(result["p99_ms"]), int(result.get("failures") or 0), load1,
        )  # fmt: skip
        self.samples.append(sample)
        if sample.failures:
            self.notes.append(f"round {rnd} {kind} auth {side} {workload} {client}: {sample.failures} failed sends")

    def run(self) -> None:
        """Each round starts every side's cluster, then runs each workload on the sides in turn, the order
        flipping from one workload to the next and from round to round: a swing of the shared host's load
        falls on both sides within seconds, not on one side's whole session."""
        turn = 0
        for rnd in range(self.args.rounds):
            # the brokers take turns going first, as in bench.vs_rocketmq's rounds
            for kind in self.args.kinds if rnd % 2 == 0 else reversed(self.args.kinds):
                turn = self.round_of(rnd, kind, turn)

    def round_of(self, rnd: int, kind: str, turn: int) -> int:
        """One round of one broker: its sides' clusters up at once, each workload on each side in turn.
        Returns the turn counter, which flips the sides' order from one workload to the next."""
        sides = SIGNED_SIDES if self.args.auth_signed else SIDES
        clusters: dict[str, Cluster] = {}
        try:
            for side in sides:
                clusters[side] = self.start(rnd, kind, side)
            for workload in self.args.workloads:
                for client in self.clients:
                    order = sides if turn % 2 == 0 else tuple(reversed(sides))
                    turn += 1
                    for side in order:
                        print(
                            f"round {rnd + 1}/{self.args.rounds}: {kind} {workload} {client} auth {side}",
                            file=sys.stderr,
                        )
                        try:
                            self.workload(rnd, side, workload, client, clusters[side])
                        except ClientError as exc:
                            self.notes.append(f"round {rnd} {kind} auth {side} {workload} {client} failed: {exc}")
        except (ClientError, RuntimeError) as exc:
            self.notes.append(f"round {rnd} {kind} failed: {exc}")
        finally:
            for cluster in clusters.values():
                cluster.stop()
        return turn


@dataclass(frozen=True)
class AuthRow:
    broker: str
    workload: str
    client: str
    off: tuple[float, float, float]  # msg/s median, min, max
    on: tuple[float, float, float]
    ratio: tuple[float, float, float]  # per-round on / off: median, min, max
    load: tuple[float, float]  # 1-minute load average, min and max over the row's runs
    rounds: int
    #: per-round signed / off (auth off, the clients signing), when that side ran
    signed_ratio: tuple[float, float, float] | None = None


def _spread(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def summarize(samples: list[AuthSample]) -> list[AuthRow]:
    """One row per (broker, workload, client) with both sides measured in at least one round."""
    rows = []
    keys = sorted({(s.broker, s.workload, s.client) for s in samples})
    for broker, workload, client in keys:
        mine = [s for s in samples if (s.broker, s.workload, s.client) == (broker, workload, client)]
        by_round: dict[int, dict[str, float]] = {}
        for s in mine:
            by_round.setdefault(s.round, {})[s.side] = s.msgs_per_s
        paired = [r for r in by_round.values() if r.get("off") and "on" in r]
        if not paired:
            continue
        signed = [r["signed"] / r["off"] for r in paired if "signed" in r]
        rows.append(
            AuthRow(
                broker,
                workload,
                client,
                _spread([r["off"] for r in paired]),
                _spread([r["on"] for r in paired]),
                _spread([r["on"] / r["off"] for r in paired]),
                (min(s.load1 for s in mine), max(s.load1 for s in mine)),
                len(paired),
                _spread(signed) if signed else None,
            )
        )
    return rows


def render(rows: list[AuthRow]) -> str:
    """A Markdown table: msg/s off and on, on / off, cost, load."""
    lines = [
        "| broker | workload | client | rounds | auth off msg/s | auth on msg/s | on / off (per round) | cost "
        "| load (1 min) |",
        "|---|---|---|---:|---|---|---|---:|---|",
    ]
    signed = any(r.signed_ratio for r in rows)
    if signed:
        lines[0] += " auth off, clients signing / off |"
        lines[1] += "---|"
    for r in rows:
        senders, batch = SHAPES[r.workload]
        what = (
            f"{r.workload} ({senders} sender{'s' if senders > 1 else ''}{f', batches of {batch}' if batch > 1 else ''})"
        )
        lines.append(
            f"| {BROKER_NAMES[r.broker]} | {what} | {r.client} | {r.rounds} "
            f"| {r.off[0]:,.0f} [{r.off[1]:,.0f}-{r.off[2]:,.0f}] "
            f"| {r.on[0]:,.0f} [{r.on[1]:,.0f}-{r.on[2]:,.0f}] | {r.ratio[0]:.3f} [{r.ratio[1]:.3f}-{r.ratio[2]:.3f}] "
            f"| {(1 - r.ratio[0]) * 100:.1f}% | {r.load[0]:.1f}-{r.load[1]:.1f} |"
        )
        if signed:
            q = r.signed_ratio
            lines[-1] += f" {q[0]:.3f} [{q[1]:.3f}-{q[2]:.3f}] |" if q else " |"
    return "\n".join(lines)


def run_auth(args: argparse.Namespace, reference: Path, root: Path) -> None:
    """The rounds, then the table and notes on stdout (and with --json, everything into that file)."""
    started = datetime.datetime.now(datetime.UTC)
    load_before = os.getloadavg()
    runner = AuthRunner(args, reference, root)
    t0 = time.monotonic()
    runner.run()
    rows = summarize(runner.samples)
    print(
        f"send throughput, authentication on against off, {args.rounds} round(s) x {args.seconds} s "
        f"(+{args.warmup} s warm-up), {platform.node()} {os.cpu_count()} CPUs, started {started:%Y-%m-%d %H:%M} UTC, "
        f"{time.monotonic() - t0:.0f} s; cost = 1 - median(on / off)"
    )
    print(render(rows))
    for note in runner.notes:
        print(f"note: {note}")
    if args.json:
        doc: dict[str, Any] = {
            "started": started.isoformat(timespec="seconds"),
            "host": {"machine": platform.node(), "cpus": os.cpu_count()},
            "load_before": load_before,
            "load_after": os.getloadavg(),
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "samples": [asdict(s) for s in runner.samples],
            "rows": [asdict(r) for r in rows],
            "notes": runner.notes,
        }
        args.json.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
