"""Time to a new master after a fault, ours beside Apache RocketMQ's controller mode, in the same run:

    python -m bench.failover [--rounds 20] [--fault kill,pause,handover] [--set key=value ...]
                             [--version 5.3.3] [--which both|ours|reference]

Each side runs RocketMQ's controller-mode quick start on loopback: one NameServer with the controller embedded
(`enableControllerInNamesrv=true`, one DLedger/Raft peer) and a group of three brokers started with
brokerId=-1 and brokerRole=SLAVE, SYNC with allAckInSyncStateSet=true, every other key at its default. Our SDK
producer sends continuously (four tasks, three client retries). A round waits for a master with all three
brokers in its SyncStateSet, injects the fault, polls the controller's replica info every 20 ms until it names
another master at a newer epoch (the time measured), lets the producer send to it for a second, then brings the
old master back (it rejoins as a slave). The faults:

- `kill`: SIGKILL of the master; the controller learns of it from the dropped connection. Back: restarted.
- `pause`: SIGSTOP of the master, which leaves its connections open and silent, as a partition does: the
  controller learns of it only when its heartbeats expire (`controllerHeartBeatTimeoutMills`, checked every
  `scanNotActiveBrokerInterval`). Back: killed and restarted (the fault suite, tests/controller, heals ours
  in place).
- `handover`: a planned move, `electMaster` (designateElect) of an in-sync slave sent to the controller, as
  `mqadmin electMaster` and the operator's rolls do. Back: stopped (SIGTERM) and restarted, as in a roll.

Besides the time to a new master, each round records the longest gap between two acknowledged sends from the
fault until a second after the first send acknowledged once the new master is named: the outage the producer
sees, route refresh included. At the end every
acknowledged message is looked up on the group's master. `--set` adds a key to every broker's and the
NameServer's config on both sides. The reference broker's jars come from scripts/reference-rocketmq.sh
(bench/vs_brokers.py).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.cluster import server_command
from bench.vs_brokers import BROKER_MAIN, NAMESRV_MAIN, ensure_reference, free_block
from bench.vs_table import conf_text
from broker.client import ClientConfig, Message, Producer, SendStatus
from broker.controller.client import ControllerClient
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.message import decode_records
from broker.transport.client import connect
from broker.transport.connection import RemotingConnection

TOPIC = "FailoverBench"
JVM = ["-Xms256m", "-Xmx512m"]  # four JVMs on a shared machine
FAULTS = ("kill", "pause", "handover")


@dataclass
class Side:
    kind: str  # "ours" or "reference"
    root: Path
    reference: Path | None
    extra: dict[str, str] = field(default_factory=dict)  # --set keys, for every process
    ports: dict[str, int] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.ports['namesrv']}"

    @property
    def controller(self) -> str:
        return f"127.0.0.1:{self.ports['controller']}"

    def addr(self, i: int) -> str:
        return f"127.0.0.1:{self.ports[f'b{i}']}"

    def _spawn(self, name: str, main: str, props: dict[str, object]) -> None:
        home = self.root / f"home-{name}"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        conf = self.root / f"{name}.conf"
        conf.write_text(conf_text({**props, **self.extra}))
        env = {**os.environ, "NAMESRV_ADDR": "", "HOME": str(home)}
        if self.kind == "reference":
            assert self.reference is not None
            env["ROCKETMQ_HOME"] = str(home)
            java = shutil.which("java") or "java"
            cmd = [java, *JVM, f"-Duser.home={home}", "-cp", f"{self.reference / 'lib'}/*", main, "-c", str(conf)]
        else:
            cmd = server_command("mqnamesrv" if main == NAMESRV_MAIN else "mqbroker", conf)
        log = (self.root / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=home)
        log.close()

    def start_namesrv(self) -> None:
        self.ports["namesrv"] = free_block(1)
        self.ports["controller"] = free_block(2)
        self._spawn(
            "namesrv",
            NAMESRV_MAIN,
            {
                "listenPort": self.ports["namesrv"],
                "kvConfigPath": self.root / "kv.json",
                "enableControllerInNamesrv": "true",
                "controllerDLegerGroup": "group1",
                "controllerDLegerPeers": f"n0-{self.controller}",
                "controllerDLegerSelfId": "n0",
                "controllerStorePath": self.root / "controller",
            },
        )

    def start_broker(self, i: int) -> None:
        if f"b{i}" not in self.ports:
            self.ports[f"b{i}"] = free_block(4) + 2  # listenPort - 2 (Java's fast channel) .. + 1 (HA)
        port = self.ports[f"b{i}"]
        self._spawn(
            f"b{i}",
            BROKER_MAIN,
            {
                "brokerClusterName": "DefaultCluster",
                "brokerName": "broker-a",
                "brokerId": -1,
                "brokerRole": "SLAVE",
                "enableControllerMode": "true",
                "controllerAddr": self.controller,
                "namesrvAddr": self.namesrv,
                "allAckInSyncStateSet": "true",
                "listenPort": port,
                "haListenPort": port + 1,
                "brokerIP1": "127.0.0.1",
                "storePathRootDir": self.root / f"b{i}",
                "storePathCommitLog": self.root / f"b{i}" / "commitlog",
                "autoCreateTopicEnable": "true",
                "maxHashSlotNum": 20000,
                "maxIndexNum": 80000,
            },
        )

    def kill9(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def signal(self, name: str, signum: int) -> None:
        self.procs[name].send_signal(signum)

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.kill9(name)

    def drop_stores(self) -> None:
        """Delete the stores (gigabytes after a long run), keeping the logs."""
        for path in self.root.iterdir():
            if path.is_dir() and not path.name.startswith("home-"):
                shutil.rmtree(path, ignore_errors=True)


_conns: dict[str, RemotingConnection] = {}


async def _request(addr: str, code: int, ext: dict[str, Any] | None = None) -> RemotingCommand:
    conn = _conns.get(addr)
    if conn is None or conn.closed.done():
        conn = _conns[addr] = await connect(addr, timeout=2.0)
    cmd = RemotingCommand(code=code, ext_fields={k: str(v) for k, v in (ext or {}).items()})
    try:
        return await conn.invoke(cmd, 5.0)
    except Exception:
        _conns.pop(addr, None)
        conn.close()
        raise


async def _replica_info(client: ControllerClient) -> tuple[dict[str, str], set[int]]:
    cmd = RemotingCommand(code=RequestCode.CONTROLLER_GET_REPLICA_INFO, ext_fields={"brokerName": "broker-a"})
    reply = await client.invoke_leader(cmd)
    if reply.code != ResponseCode.SUCCESS:
        return {}, set()
    return reply.ext_fields, set(orjson.loads(reply.body)["syncStateSet"])


async def _until(check: Any, timeout: float, what: str, period: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = await check()
            if value:
                return value
        except Exception as exc:  # not up yet
            last = exc
        await asyncio.sleep(period)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


async def _read_all(addr: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for qid in range(16):
        offset = 0
        while True:
            resp = await _request(
                addr,
                RequestCode.PULL_MESSAGE,
                {
                    "consumerGroup": "BENCH_VERIFY",
                    "topic": TOPIC,
                    "queueId": qid,
                    "queueOffset": offset,
                    "maxMsgNums": 32,
                    "sysFlag": 0x4,
                    "commitOffset": 0,
                    "suspendTimeoutMillis": 0,
                    "subscription": "*",
                    "subVersion": 0,
                },
            )
            if resp.code != ResponseCode.SUCCESS:
                break
            for m in decode_records(resp.body, verify_crc=True):
                found[m.properties["UNIQ_KEY"]] = zlib.crc32(m.body)
            offset = int(resp.ext_fields["nextBeginOffset"])
    return found


async def _inject(side: Side, client: ControllerClient, fault: str, fields: dict[str, str], members: set[int]) -> int:
    """Applies `fault` to the group's master (described by the replica info `fields` and its SyncStateSet
    `members`); returns the master's index among the side's brokers."""
    old = fields["masterAddress"]
    index = next(i for i in range(3) if side.addr(i) == old)
    if fault == "kill":
        side.kill9(f"b{index}")
    elif fault == "pause":
        side.signal(f"b{index}", signal.SIGSTOP)
    else:
        target = min(members - {int(fields["masterBrokerId"])})
        reply = await client.elect_master("DefaultCluster", "broker-a", target)
        assert reply.code == ResponseCode.SUCCESS, f"electMaster {target}: {reply.code} {reply.remark}"
    return index


def _restore(side: Side, fault: str, index: int) -> None:
    """Brings the old master back as a slave after `fault`, restarted as a roll would: killed when paused, stopped
    gracefully (SIGTERM) after a handover. Left running (resumed, or demoted by the handover), Apache RocketMQ
    5.3.3's old master may stay out of the SyncStateSet, and then no further round can start."""
    name = f"b{index}"
    if fault == "pause":
        side.kill9(name)
    elif fault == "handover":
        side.stop(name)
    side.start_broker(index)


def _longest_gap(acks: list[float], start: float, end: float) -> float:
    """The longest time in [start, end] with no acknowledged send, from the completion times `acks`."""
    inside = [t for t in acks if start < t <= end]
    edges = [start, *inside, end]
    return max(b - a for a, b in itertools.pairwise(edges))


async def run_side(side: Side, rounds: int, fault: str) -> dict[str, Any]:
    side.root.mkdir(parents=True, exist_ok=True)
    side.start_namesrv()
    client = ControllerClient([side.controller])
    times: list[float] = []
    gaps: list[float] = []
    acked: dict[str, int] = {}
    ack_times: list[float] = []
    failed = 0
    stalled: str | None = None
    try:
        await _until(lambda: _request(side.namesrv, RequestCode.GET_BROKER_CLUSTER_INFO), 120, "the NameServer")
        for i in range(3):
            side.start_broker(i)

        async def full_set() -> tuple[dict[str, str], set[int]] | None:
            fields, members = await _replica_info(client)
            return (fields, members) if len(members) == 3 and fields.get("masterAddress") else None

        fields, _ = await _until(full_set, 300, "a master with three brokers in its SyncStateSet")
        reply = await _request(
            fields["masterAddress"],
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {
                "topic": TOPIC,
                "defaultTopic": "TBW102",
                "readQueueNums": 4,
                "writeQueueNums": 4,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "order": "false",
            },
        )
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        await asyncio.sleep(6.0)  # the slaves copy the topic (a promoted slave without it lacks it)
        config = ClientConfig(
            namesrv_addr=side.namesrv, instance_name=f"bench-{side.kind}", poll_name_server_interval=1.0
        )
        stop = asyncio.Event()
        async with Producer("PG_BENCH_FAILOVER", client_config=config, send_msg_timeout=3.0) as producer:

            async def steady(worker: int) -> None:
                nonlocal failed
                i = 0
                while not stop.is_set():
                    body = os.urandom(100) + f"{worker}-{i}".encode()
                    i += 1
                    try:
                        result = await producer.send(Message(TOPIC, body))
                    except Exception:  # the master is gone until the route names the new one
                        failed += 1
                        await asyncio.sleep(0.05)
                        continue
                    if result.status is SendStatus.SEND_OK:
                        acked[result.msg_id] = zlib.crc32(body)
                        ack_times.append(time.monotonic())
                    else:
                        failed += 1

            workers = [asyncio.create_task(steady(w)) for w in range(4)]
            for r in range(rounds):
                try:
                    fields, members = await _until(full_set, 300, f"round {r}: the group whole again")
                except RuntimeError as exc:  # reported beside the rounds that ran
                    stalled = str(exc)
                    print(f"{side.kind} {fault}: {stalled}; no more rounds", flush=True)
                    break
                old, epoch = fields["masterAddress"], int(fields["masterEpoch"])
                await asyncio.sleep(1.0)  # traffic to the master
                began = time.monotonic()
                index = await _inject(side, client, fault, fields, members)

                async def moved(old: str = old, epoch: int = epoch) -> bool:
                    now, _ = await _replica_info(client)
                    addr = now.get("masterAddress")
                    return bool(addr) and addr != old and int(now["masterEpoch"]) > epoch

                await _until(moved, 120, f"round {r}: a new master", period=0.02)
                elected = time.monotonic()
                times.append(elected - began)

                async def writing(elected: float = elected) -> bool:
                    return bool(ack_times) and ack_times[-1] > elected

                await _until(writing, 120, f"round {r}: a send acknowledged by the new master", period=0.02)
                await asyncio.sleep(1.0)
                gaps.append(_longest_gap(ack_times, began, time.monotonic()))
                print(
                    f"{side.kind} {fault} round {r}: new master after {times[-1]:.2f} s, "
                    f"longest write gap {gaps[-1]:.2f} s",
                    flush=True,
                )
                _restore(side, fault, index)
            stop.set()
            await asyncio.gather(*workers)

        async def some_master() -> tuple[dict[str, str], set[int]] | None:
            fields, members = await _replica_info(client)
            return (fields, members) if fields.get("masterAddress") else None

        fields, _ = await _until(full_set if stalled is None else some_master, 300, "a master at the end")
        found = await _read_all(fields["masterAddress"])
        lost = sum(1 for mid, crc in acked.items() if found.get(mid) != crc)
        result = {"times": times, "gaps": gaps, "acked": len(acked), "lost": lost, "failed": failed}
        return {**result, "stalled": stalled}
    finally:
        await client.close()
        for conn in _conns.values():
            conn.close()
        _conns.clear()
        side.stop_all()
        side.drop_stores()


def _row(name: str, fault: str, result: dict[str, Any]) -> str:
    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} s | {max(values):.2f} s" if values else "- | -"

    return (
        f"| {name} | {fault} | {len(result['times'])} | {spread(result['times'])} | {spread(result['gaps'])} | "
        f"{result['acked']} | {result['lost']} | {result['failed']} |"
    )


def _setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value.strip()


def _faults(text: str) -> list[str]:
    faults = [f.strip() for f in text.split(",") if f.strip()]
    unknown = [f for f in faults if f not in FAULTS]
    if unknown or not faults:
        raise argparse.ArgumentTypeError(f"faults are {', '.join(FAULTS)}; got {text!r}")
    return faults


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--fault", type=_faults, default=["kill"], help="comma-separated: kill, pause, handover")
    parser.add_argument("--set", type=_setting, action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--version", default="5.3.3", help="Apache RocketMQ's version (its jars)")
    parser.add_argument("--which", choices=["both", "ours", "reference"], default="both")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    extra = dict(args.set)
    reference = ensure_reference(args.version) if args.which in ("both", "reference") else None
    rows: list[str] = []
    notes: list[str] = []
    for fault in args.fault:
        # the two sides alternate per fault, so that both meet the same load
        if args.which in ("both", "ours"):
            side = Side("ours", root / f"ours-{fault}", None, extra)
            result = asyncio.run(run_side(side, args.rounds, fault))
            rows.append(_row("ours", fault, result))
            if result["stalled"]:
                notes.append(f"ours, {fault}: {result['stalled']}")
        if reference is not None:
            side = Side("reference", root / f"reference-{fault}", reference, extra)
            result = asyncio.run(run_side(side, args.rounds, fault))
            rows.append(_row(f"RocketMQ {args.version}", fault, result))
            if result["stalled"]:
                notes.append(f"RocketMQ {args.version}, {fault}: {result['stalled']}")
    print(
        "| broker | fault | rounds | new master p50 | max | write gap p50 | max | acknowledged | lost | failed sends |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    for note in notes:
        print(note)
    print(f"logs in {root}")


if __name__ == "__main__":
    main()
