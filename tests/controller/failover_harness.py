"""Real processes for the failover tests: controllers (tests/controller/controller_procs.py), one mqnamesrv and
one broker group whose brokers start with brokerId=-1 and brokerRole=SLAVE in controller mode, as RocketMQ's
quick-start broker-n0.conf; the controller elects the master and assigns the ids."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from broker.controller.client import ControllerClient
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport import connect
from broker.transport.connection import RemotingConnection
from tests.controller.controller_procs import Controllers, free_ports

BIN = Path(sys.executable).parent


@dataclass
class Group:
    root: Path
    controllers: Controllers
    brokers: int = 3
    namesrv_port: int = 0
    broker_ports: list[int] = field(default_factory=list)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _conns: dict[str, RemotingConnection] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ports = free_ports(self.brokers + 1)
        self.namesrv_port, self.broker_ports = ports[0], ports[1:]

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    def broker_addr(self, index: int) -> str:
        return f"127.0.0.1:{self.broker_ports[index]}"

    def index_of(self, addr: str) -> int:
        """The index of the broker listening at `addr`."""
        return self.broker_ports.index(int(addr.rsplit(":", 1)[1]))

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - the process owns it
        env = {**os.environ, "HOME": str(self.root / name)}
        (self.root / name).mkdir(exist_ok=True)
        self.procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()

    def start_namesrv(self) -> None:
        conf = self.root / "namesrv.properties"
        conf.write_text(
            f"listenPort={self.namesrv_port}\nbindAddress=127.0.0.1\nkvConfigPath={self.root / 'kv.json'}\n"
        )
        self._spawn("namesrv", [str(BIN / "mqnamesrv"), "-c", str(conf)])

    def broker_conf(self, index: int, **extra: Any) -> Path:
        port = self.broker_ports[index]
        values = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": "broker-a",
            "brokerId": -1,
            "brokerRole": "SLAVE",
            "enableControllerMode": "true",
            "controllerAddr": ";".join(self.controllers.addresses),
            "namesrvAddr": self.namesrv_addr,
            "allAckInSyncStateSet": "true",
            "listenPort": port,
            "haListenPort": port + 1,
            "brokerIP1": "127.0.0.1",
            "bindAddress": "127.0.0.1",
            "storePathRootDir": self.root / f"n{index}",
            "checkSyncStateSetPeriod": 1000,
            "syncBrokerMetadataPeriod": 1000,
            "haSendHeartbeatInterval": 1000,
            "haHousekeepingInterval": 5000,
            "registerNameServerPeriod": 2000,
            "autoCreateTopicEnable": "true",
            **extra,
        }
        conf = self.root / f"broker-n{index}.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        return conf

    def start_broker(self, index: int, **extra: Any) -> None:
        self._spawn(f"broker-n{index}", [str(BIN / "mqbroker"), "-c", str(self.broker_conf(index, **extra))])

    def start_all(self, **extra: Any) -> None:
        """The controllers, the NameServer and every broker (each with the `extra` keys)."""
        self.controllers.start_all()
        self.start_namesrv()
        for i in range(self.brokers):
            self.start_broker(i, **extra)

    async def whole(self, client: ControllerClient) -> dict[str, str] | None:
        """The group's replica info once its master has every broker in its SyncStateSet, else None."""
        fields, members = await self.replica_info(client)
        return fields if len(members) == self.brokers and fields.get("masterAddress") else None

    def kill9(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.kill()
        proc.wait(10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.kill()
        for proc in self.procs.values():
            proc.wait(10)
        self.procs.clear()
        self.controllers.stop_all()
        for conn in self._conns.values():
            conn.close()

    def logs(self) -> str:
        parts = []
        for path in sorted(self.root.glob("*.log")):
            parts.append(f"--- {path.name}\n" + path.read_text(errors="replace")[-4000:])
        return "\n".join(parts)

    async def request(
        self, addr: str, code: int, ext: dict[str, Any] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        conn = self._conns.get(addr)
        if conn is None or conn.closed.done():
            conn = self._conns[addr] = await connect(addr, timeout=2.0)
        cmd = RemotingCommand(code=code, ext_fields={k: str(v) for k, v in (ext or {}).items()}, body=body)
        try:
            return await conn.invoke(cmd, 5.0)
        except Exception:
            self._conns.pop(addr, None)
            conn.close()
            raise

    async def replica_info(self, client: ControllerClient) -> tuple[dict[str, str], set[int]]:
        cmd = RemotingCommand(code=RequestCode.CONTROLLER_GET_REPLICA_INFO, ext_fields={"brokerName": "broker-a"})
        reply = await client.invoke_leader(cmd)
        if reply.code != ResponseCode.SUCCESS:
            return {}, set()
        return reply.ext_fields, set(orjson.loads(reply.body)["syncStateSet"])


def topic_fields(topic: str, queues: int) -> dict[str, Any]:
    """UPDATE_AND_CREATE_TOPIC's fields for a plain read-write topic of `queues` queues."""
    return {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": queues,
        "writeQueueNums": queues,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "order": "false",
    }


async def wait_for(check: Any, timeout: float, what: str, group: Group) -> Any:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = await check()
            if value:
                return value
        except Exception as exc:
            last = exc
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last error: {last!r})\n{group.logs()}")
