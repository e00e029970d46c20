"""The failover fault suite, in the spirit of Jepsen: real processes in network namespaces (fault_lab.py), a
producer sending continuously to both groups and recording every acknowledged message, and five faults,
each aimed at one group's master in turn:

- `kill9`: kill -9 of the master;
- `isolate`: the master cut from every controller and broker (clients still reach it), then healed: it is
  deposed while it runs, cuts its unreplicated tail in place and follows the new master;
- `split`: the master cut from its two slaves only (the controllers still reach it), then healed;
- `leader`: kill -9 of the master, then of the controller leader while the election is under way;
- `tail`: the master isolated, killed while isolated, then restarted after the heal: it comes back with an
  unreplicated tail and cuts it at start.

After each round the traffic stops and every group must settle (a master, all three brokers in its
SyncStateSet, equal CommitLog ends); then every message acknowledged so far must be readable exactly once
from the group's current master, and the three CommitLogs must agree byte for byte up to that end.

`run_suite` is what the tests call; `python -m tests.controller.fault_suite --rounds N` runs N rounds of
every scenario (root, network namespaces) and prints the totals.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import signal
import socket
import statistics
import tempfile
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import orjson

from broker.client import ClientConfig, Message, Producer, SendStatus
from broker.controller.client import ControllerClient
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from tests.controller.failover_harness import topic_fields
from tests.controller.fault_lab import (
    CONTROLLERS,
    GROUPS,
    QUEUES,
    TOPIC,
    FaultLab,
    commit_log,
    group_hosts,
    hosts,
    max_offset,
    read_topic,
)
from tests.ha.netns_harness import NetLab, close_connections, request

T = TypeVar("T")
PACE_S = 0.01  # between one producer task's sends
SCENARIOS = ("kill9", "isolate", "split", "leader", "tail")


@dataclass
class Ack:
    group: str
    crc: int
    store_ip: str
    at: float


@dataclass
class Tally:
    rounds: dict[str, int] = field(default_factory=dict)
    acked: dict[str, Ack] = field(default_factory=dict)
    failed_sends: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    new_master_s: dict[str, list[float]] = field(default_factory=dict)
    # acknowledgements a deposed master gave after it was cut off, and how many of them its group lacks
    late: set[str] = field(default_factory=set)
    tails_cut_running: int = 0
    tails_cut_at_start: int = 0
    masters_during_split: int = 0

    def summary(self) -> str:
        lines = [
            f"rounds: {dict(self.rounds)}",
            f"acknowledged {len(self.acked)}, lost {len(self.lost)}, duplicated {len(self.duplicated)}, "
            f"failed or refused sends {self.failed_sends}",
        ]
        for scenario, times in sorted(self.new_master_s.items()):
            if times:
                lines.append(
                    f"time to a new master after {scenario}: p50 {statistics.median(times):.2f} s, "
                    f"max {max(times):.2f} s over {len(times)} rounds"
                )
        lines.append(
            f"acknowledged by a master after it was cut off: {len(self.late)}, missing from the new master: "
            f"{len(self.late.intersection(self.lost))}; unreplicated tails cut while running "
            f"{self.tails_cut_running}, at start {self.tails_cut_at_start}; new masters elected during a "
            f"master/slave split {self.masters_during_split}"
        )
        return "\n".join(lines)


def _store_ip(offset_msg_id: str) -> str:
    """The store host's IPv4 in an offset message id (8 hex digits of address, 8 of port, 16 of offset)."""
    try:
        return socket.inet_ntoa(bytes.fromhex(offset_msg_id[:8]))
    except ValueError:
        return ""


class Traffic:
    """Four producer tasks sending to TOPIC (both groups) with no retry: each message is stored at most
    once per acknowledgement, so a duplicate on a broker is a fault of the brokers, not of the client."""

    def __init__(self, lab: FaultLab, tally: Tally) -> None:
        self.lab = lab
        self.tally = tally
        self.stop = asyncio.Event()
        self.sent = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._producer: Producer | None = None

    async def __aenter__(self) -> Traffic:
        config = ClientConfig(
            namesrv_addr=self.lab.namesrv_addr,
            instance_name=f"faults{time.monotonic_ns()}",
            poll_name_server_interval=1.0,
        )
        self._producer = Producer(
            "PG_FAULTS", client_config=config, retry_times_when_send_failed=0, send_msg_timeout=3.0
        )
        await self._producer.start()
        self._tasks = [asyncio.create_task(self._send(w)) for w in range(4)]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        await asyncio.gather(*self._tasks)
        if self._producer is not None:
            await self._producer.shutdown()

    async def _send(self, worker: int) -> None:
        assert self._producer is not None
        tally = self.tally
        while not self.stop.is_set():
            key = f"{os.getpid()}-{worker}-{self.sent}-{time.monotonic_ns()}"
            self.sent += 1
            body = os.urandom(64) + key.encode()
            try:
                result = await self._producer.send(Message(TOPIC, body, keys=key))
            except Exception:  # no master reachable for the queue picked: the next send tries another
                tally.failed_sends += 1
                await asyncio.sleep(0.02)
                continue
            if result.status is SendStatus.SEND_OK:
                group = result.message_queue.broker_name
                tally.acked[key] = Ack(group, zlib.crc32(body), _store_ip(result.offset_msg_id), time.monotonic())
            else:
                tally.failed_sends += 1
            # paced: the checks after each round read back every message acknowledged so far
            await asyncio.sleep(PACE_S)

    async def until(self, count: int, timeout: float = 60.0) -> None:
        target = len(self.tally.acked) + count
        deadline = time.monotonic() + timeout
        while len(self.tally.acked) < target:
            if time.monotonic() > deadline:
                raise AssertionError(f"fewer than {count} sends acknowledged in {timeout:.0f} s")
            await asyncio.sleep(0.05)


async def _poll(check: Callable[[], Awaitable[T | None]], timeout: float, what: str, lab: FaultLab) -> T:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = await check()
            if value:
                return value
        except Exception as exc:  # not up yet, a connection refused...
            last = exc
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})\n{lab.logs()}")


async def _readable(addr: str) -> tuple[dict[str, list[int]]]:
    """read_topic's answer in a tuple: true for _poll even when the topic is empty."""
    return (await read_topic(addr),)


class Suite:
    def __init__(self, lab: FaultLab, client: ControllerClient, tally: Tally) -> None:
        self.lab = lab
        self.client = client
        self.tally = tally

    async def master(self, group: str) -> tuple[str, int]:
        fields, _ = await self.lab.replica_info(self.client, group)
        return fields["masterAddress"], int(fields["masterEpoch"])

    async def settled(self, group: str) -> tuple[str, int]:
        """Wait for a master with all three brokers in its set and equal CommitLog ends; its address and end."""

        async def check() -> tuple[str, int] | None:
            fields, members = await self.lab.replica_info(self.client, group)
            master = fields.get("masterAddress")
            if not master or len(members) != 3:
                return None
            ends = {await max_offset(self.lab.addr(h)) for h in group_hosts(group)}
            return (master, ends.pop()) if len(ends) == 1 else None

        settled: tuple[str, int] = await _poll(check, 120, f"{group} to settle", self.lab)
        return settled

    async def new_master(self, group: str, old: str, epoch: int, since: float) -> float:
        async def moved() -> bool:
            fields, _ = await self.lab.replica_info(self.client, group)
            addr = fields.get("masterAddress")
            return bool(addr) and addr != old and int(fields["masterEpoch"]) > epoch

        await _poll(moved, 90, f"a new master of {group}", self.lab)
        return time.monotonic() - since

    async def controller_leader(self) -> str:
        cmd = RemotingCommand(code=RequestCode.CONTROLLER_GET_METADATA_INFO)
        reply = await self.client.invoke_leader(cmd)
        addr = reply.ext_fields.get("controllerLeaderAddress", "")
        return next(c for c in CONTROLLERS if addr.startswith(self.lab.net.ips[c] + ":"))

    def _count_late_acks(self, group: str, ip: str, since: float) -> list[str]:
        return [k for k, a in self.tally.acked.items() if a.group == group and a.store_ip == ip and a.at > since]

    async def round(self, scenario: str, group: str) -> None:
        lab, tally = self.lab, self.tally
        old, epoch = await self.master(group)
        old_host = lab.host_of(old)
        slaves = [h for h in group_hosts(group) if h != old_host]
        late: list[str] = []
        async with Traffic(lab, tally) as traffic:
            await traffic.until(200)
            t0 = time.monotonic()
            if scenario == "kill9":
                lab.kill9(old_host)
                tally.new_master_s.setdefault(scenario, []).append(await self.new_master(group, old, epoch, t0))
                await traffic.until(100)
                lab.start_broker(old_host)
            elif scenario == "leader":
                leader = await self.controller_leader()
                lab.kill9(old_host)
                await asyncio.sleep(0.05)  # the controllers saw the connection close and are electing
                lab.kill9(leader)
                tally.new_master_s.setdefault(scenario, []).append(await self.new_master(group, old, epoch, t0))
                await traffic.until(100)
                lab.start_controller(leader)
                lab.start_broker(old_host)
            elif scenario in ("isolate", "tail"):
                lab.isolate(old_host)
                tally.new_master_s.setdefault(scenario, []).append(await self.new_master(group, old, epoch, t0))
                await traffic.until(100)
                await asyncio.sleep(1.0)  # producers that still route to the old master keep offering it writes
                late = self._count_late_acks(group, lab.net.ips[old_host], t0)
                if scenario == "tail":
                    lab.kill9(old_host)
                    lab.heal()
                    lab.start_broker(old_host)
                else:
                    lab.heal()
            elif scenario == "split":
                lab.cut(old_host, slaves)
                await asyncio.sleep(6.0)  # the master drops its silent slaves (3 s) and shrinks its set
                now, _ = await self.master(group)
                tally.masters_during_split += now != old
                lab.heal()
            else:
                raise ValueError(scenario)
        close_connections()  # connections to a killed or cut broker
        for g in GROUPS:
            await self.verify(g)
        tally.late.update(late)
        tally.rounds[scenario] = tally.rounds.get(scenario, 0) + 1
        elected = tally.new_master_s.get(scenario)
        took = f", new master after {elected[-1]:.2f} s" if elected else ""
        print(
            f"round {sum(tally.rounds.values())}: {scenario} on {group}, acknowledged {len(tally.acked)}, "
            f"lost {len(tally.lost)}{took}",
            flush=True,
        )

    async def verify(self, group: str) -> None:
        """Every message acknowledged for `group` is on its master exactly once, and the replicas' CommitLogs
        are the same bytes up to their common end."""
        master, end = await self.settled(group)
        found = (await _poll(lambda: _readable(master), 30, f"{group}'s topic readable on {master}", self.lab))[0]
        tally = self.tally
        for key, ack in tally.acked.items():
            if ack.group != group:
                continue
            copies = found.get(key, [])
            if ack.crc not in copies and key not in tally.lost:
                tally.lost.append(key)
            elif len(copies) > 1 and key not in tally.duplicated:
                tally.duplicated.append(key)
        stores = [commit_log(self.lab.store(h), end) for h in group_hosts(group)]
        assert all(s == stores[0] for s in stores), f"{group}: CommitLogs differ below {end}"


def _tails(lab: FaultLab) -> tuple[int, int]:
    """(cuts while running, cuts at start) over every broker's log."""
    running = start = 0
    for g in GROUPS:
        for h in group_hosts(g):
            path = lab.log(h)
            text = path.read_text(errors="replace") if path.exists() else ""
            running += text.count("cutting the rest while running")
            start += text.count("cutting the rest\n")
    return running, start


async def run_suite(root: Path, rounds: int, scenarios: tuple[str, ...] = SCENARIOS) -> Tally:
    """`rounds` rounds of each scenario (alternating the group attacked); the lab is built and removed here."""
    net = NetLab(hosts=hosts())
    net.setup()
    lab = FaultLab(net, root)
    tally = Tally()
    client = ControllerClient(lab.controller_addrs)
    try:
        for c in CONTROLLERS:
            lab.start_controller(c)
        lab.start_namesrv()
        for g in GROUPS:
            for h in group_hosts(g):
                lab.start_broker(h)
        suite = Suite(lab, client, tally)
        for g in GROUPS:
            master, _ = await suite.settled(g)
            reply = await request(master, RequestCode.UPDATE_AND_CREATE_TOPIC, topic_fields(TOPIC, QUEUES))
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            for h in group_hosts(g):  # every slave has the topic before a fault can promote it
                await _poll(functools.partial(_readable, lab.addr(h)), 30, f"{TOPIC} on {h}", lab)
        n = 0
        for _ in range(rounds):
            for scenario in scenarios:
                await suite.round(scenario, GROUPS[n % 2])
                n += 1
        tally.tails_cut_running, tally.tails_cut_at_start = _tails(lab)
        return tally
    finally:
        await client.close()
        close_connections()
        lab.stop_all()
        with contextlib.suppress(Exception):
            lab.heal()
        net.teardown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="rounds of every scenario")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="only these (repeatable)")
    args = parser.parse_args()
    why = NetLab.available()
    if why is not None:
        raise SystemExit(f"the fault suite needs network namespaces: {why}")
    root = Path(tempfile.mkdtemp(prefix="faults-"))
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a kill still removes the lab (finally)
    started = time.monotonic()
    tally = asyncio.run(run_suite(root, args.rounds, tuple(args.scenario or SCENARIOS)))
    print(tally.summary())
    print(f"wall time {time.monotonic() - started:.0f} s; logs and stores in {root}")
    print(orjson.dumps({"lost": tally.lost[:20], "duplicated": tally.duplicated[:20]}).decode())


if __name__ == "__main__":
    main()
