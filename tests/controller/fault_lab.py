"""The failover fault suite's lab: real processes, each in its own network namespace (tests/ha/netns_harness.py's
NetLab: a bridge in a hub namespace, veth pairs, one /24): three `mqcontroller`s (c0..c2), two broker groups
(broker-a on a0..a2, broker-b on b0..b2) of three brokers started as RocketMQ's controller-mode quick start
does (brokerId=-1, brokerRole=SLAVE: the controller elects the master), SYNC with allAckInSyncStateSet=true.
The NameServer, the producer and the checks run in the root namespace.

`isolate(host)` drops every packet between a host and the other lab hosts (iptables inside its namespace);
the root namespace (clients, NameServer) still reaches it, so a deposed master keeps being offered writes:
the adversarial case for fencing. `cut(host, others)` drops only the links to `others`.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from broker.controller.client import ControllerClient
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.message import decode_records
from tests.ha.netns_harness import BIN, NetLab, Proc, broker_conf, free_port, request

GROUPS = ("broker-a", "broker-b")
CONTROLLERS = ("c0", "c1", "c2")
CONTROLLER_PORT = 9878  # every controller has its own address: one port for all, Raft on the next
BROKER_PORT = 10911
FILE_SIZE = 1 << 20
TOPIC = "FaultTopic"
QUEUES = 4

# Faster than the defaults so that a round takes seconds: a silent broker is dead after 4 s, a put waits
# 1 s for its replicas, a silent HA link is dropped after 3 s. docs/design/failover.md lists them.
BROKER_TIMINGS: dict[str, Any] = {
    "controllerHeartBeatTimeoutMills": 4000,
    "brokerHeartbeatInterval": 500,
    "checkSyncStateSetPeriod": 1000,
    "syncBrokerMetadataPeriod": 1000,
    "haSendHeartbeatInterval": 500,
    "haHousekeepingInterval": 3000,
    "syncFlushTimeout": 1000,
    "registerNameServerPeriod": 2000,
    # a slave copies its master's topics this often; one promoted before it copied a topic lacks it
    "slaveSyncInterval": 1000,
}


def hosts() -> list[str]:
    return [*CONTROLLERS, *(f"{g[-1]}{i}" for g in GROUPS for i in range(3))]


def group_hosts(group: str) -> list[str]:
    return [f"{group[-1]}{i}" for i in range(3)]


@dataclass
class FaultLab:
    net: NetLab
    root: Path
    namesrv_port: int = 0
    procs: dict[str, Proc] = field(default_factory=dict)
    cuts: set[tuple[str, str]] = field(default_factory=set)

    @property
    def namesrv_addr(self) -> str:
        return f"{self.net.root_ip}:{self.namesrv_port}"

    @property
    def controller_addrs(self) -> list[str]:
        return [f"{self.net.ips[c]}:{CONTROLLER_PORT}" for c in CONTROLLERS]

    def addr(self, host: str) -> str:
        return f"{self.net.ips[host]}:{BROKER_PORT}"

    def host_of(self, addr: str) -> str:
        return next(h for h in self.net.hosts if self.addr(h) == addr)

    def store(self, host: str) -> Path:
        return self.root / host / "store"

    def log(self, host: str) -> Path:
        return self.root / f"{host}.log"

    # -- processes ---------------------------------------------------------------------------------------

    def start_namesrv(self) -> None:
        self.namesrv_port = free_port()
        conf = broker_conf(
            self.root / "namesrv.conf",
            listenPort=self.namesrv_port,
            bindAddress=self.net.root_ip,
            kvConfigPath=self.root / "kv.json",
        )
        self._start("namesrv", [str(BIN / "mqnamesrv"), "-c", str(conf)], None)

    def start_controller(self, host: str) -> None:
        peers = ";".join(f"n{i}-{self.net.ips[c]}:{CONTROLLER_PORT}" for i, c in enumerate(CONTROLLERS))
        conf = broker_conf(
            self.root / f"{host}.conf",
            controllerDLegerGroup="faults",
            controllerRaftPassword="fault-lab-raft-key",  # required: the peers are not on loopback
            controllerDLegerPeers=peers,
            controllerDLegerSelfId=f"n{CONTROLLERS.index(host)}",
            controllerStorePath=self.root / host / "store",
            bindAddress=self.net.ips[host],
            scanNotActiveBrokerInterval=500,
            scanInactiveMasterInterval=1000,
        )
        self._start(host, [str(BIN / "mqcontroller"), "-c", str(conf)], self.net.netns(host))

    def start_broker(self, host: str) -> None:
        group = f"broker-{host[0]}"
        ip = self.net.ips[host]
        conf = broker_conf(
            self.root / f"{host}.conf",
            brokerClusterName="FaultCluster",
            brokerName=group,
            brokerId=-1,
            brokerRole="SLAVE",
            enableControllerMode="true",
            controllerAddr=";".join(self.controller_addrs),
            allAckInSyncStateSet="true",
            namesrvAddr=self.namesrv_addr,
            brokerIP1=ip,
            bindAddress=ip,
            listenPort=BROKER_PORT,
            haListenPort=BROKER_PORT + 1,
            storePathRootDir=self.store(host),
            mappedFileSizeCommitLog=FILE_SIZE,
            mappedFileSizeConsumeQueue=6000 * 20,
            maxIndexNum=20000,
            maxHashSlotNum=5000,
            autoCreateTopicEnable="true",
            diskMaxUsedSpaceRatio=95,
            **BROKER_TIMINGS,
        )
        self._start(host, [str(BIN / "mqbroker"), "-c", str(conf)], self.net.netns(host))

    def _start(self, name: str, argv: list[str], netns: str | None) -> None:
        (self.root / name).mkdir(exist_ok=True)
        proc = Proc(name, argv, self.log(name), netns)
        proc.start()
        self.procs[name] = proc

    def kill9(self, name: str) -> None:
        self.procs.pop(name).kill9()

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.kill9()
        self.procs.clear()

    # -- links -------------------------------------------------------------------------------------------

    def cut(self, host: str, others: list[str]) -> None:
        for other in others:
            if (host, other) not in self.cuts:
                self.net.cut(host, other)
                self.cuts.add((host, other))

    def isolate(self, host: str) -> None:
        self.cut(host, [h for h in self.net.hosts if h != host])

    def heal(self) -> None:
        for host, other in sorted(self.cuts):
            self.net.heal(host, other)
        self.cuts.clear()

    # -- what the controller and the brokers say ---------------------------------------------------------

    async def replica_info(self, client: ControllerClient, group: str) -> tuple[dict[str, str], set[int]]:
        cmd = RemotingCommand(code=RequestCode.CONTROLLER_GET_REPLICA_INFO, ext_fields={"brokerName": group})
        reply = await client.invoke_leader(cmd)
        if reply.code != ResponseCode.SUCCESS:
            return {}, set()
        return reply.ext_fields, set(orjson.loads(reply.body)["syncStateSet"])

    def logs(self, names: list[str] | None = None, chars: int = 3000) -> str:
        out = []
        for name in names or list(self.procs):
            path = self.log(name)
            if path.exists():
                out.append(f"--- {name}\n" + path.read_text(errors="replace")[-chars:])
        return "\n".join(out)


async def max_offset(addr: str) -> int:
    reply = await request(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    return int(orjson.loads(reply.body)["table"]["commitLogMaxOffset"])


_ENDS = ("NO_MATCHED_LOGIC_QUEUE", "OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_BADLY")


async def read_topic(addr: str) -> dict[str, list[int]]:
    """Every message of TOPIC on one broker: the writer's key (`k` property) -> body CRCs (one per copy)."""
    found: dict[str, list[int]] = {}
    for qid in range(16):  # a broker that auto-created the topic may give it defaultTopicQueueNums queues
        offset = 0
        while True:
            resp = await request(
                addr,
                RequestCode.PULL_MESSAGE,
                {
                    "consumerGroup": "FAULT_VERIFY",
                    "topic": TOPIC,
                    "queueId": qid,
                    "queueOffset": offset,
                    "maxMsgNums": 256,
                    "sysFlag": 0x4,
                    "commitOffset": 0,
                    "suspendTimeoutMillis": 0,
                    "subscription": "*",
                    "subVersion": 0,
                },
                timeout=10.0,
            )
            if resp.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED):
                break  # the end of this queue, or a queue that does not exist
            if resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY and (resp.remark or "") in _ENDS:
                break  # a queue nothing was written to yet, or its end on a slave
            if "is illegal" in (resp.remark or ""):
                return found  # past the topic's last read queue
            if resp.code != ResponseCode.SUCCESS:
                raise UnreadableTopic(f"{addr} queue {qid} offset {offset}: {resp.code} {resp.remark}")
            for m in decode_records(resp.body, verify_crc=True):
                found.setdefault(m.properties["KEYS"], []).append(zlib.crc32(m.body))
            offset = int(resp.ext_fields["nextBeginOffset"])
    return found


class UnreadableTopic(Exception):
    """A broker refused to serve TOPIC (not there yet, or busy): what it said."""


def commit_log(store: Path, end: int) -> bytes:
    """CommitLog bytes [0, end) from the files on disk (named by their start offset)."""
    out = bytearray()
    for path in sorted((store / "commitlog").iterdir()):
        if path.name.isdigit() and int(path.name) < end:
            out += path.read_bytes()[: end - int(path.name)]
    return bytes(out[:end])
