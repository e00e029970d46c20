"""`rocketcluster-probe` as a real process against real NameServers and brokers on loopback.

The NameServer, master and slave run in this test's event loop (tests/local_cluster.py); the probe is
the installed console script, run the way the kubelet runs an exec probe, and judged by its exit code
and its one line of output.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

from broker.client import Message, Producer, SendStatus
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.server.broker import BrokerController
from broker.server.config import load_broker_config
from tests.local_cluster import LocalCluster, local_cluster

PROBE = str(Path(sys.executable).with_name("rocketcluster-probe"))
# the broker registers every second, so a NameServer that went away shows within a few seconds
FAST_REGISTRATION = {"registerNameServerPeriod": "1000", "registerBrokerTimeoutMills": "1000"}
HA_FAST = {"haSendHeartbeatInterval": "300", "haHousekeepingInterval": "2000"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def probe(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(PROBE, *args, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def probe_until(args: list[str], want: int, timeout: float = 30.0) -> str:
    """Run the probe until it exits with `want`; returns that run's output line."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        code, out = await probe(*args)
        if code == want:
            return out
        if loop.time() > deadline:
            raise AssertionError(f"the probe {args} still exits {code} after {timeout} s: {out!r}")
        await asyncio.sleep(0.3)


async def test_broker_probe_before_start_after_start_and_without_its_nameserver(tmp_path: Path) -> None:
    port = _free_port()
    addr = f"127.0.0.1:{port}"
    code, out = await probe("broker", "--addr", addr, "--timeout", "2")
    assert code == 1 and out.startswith("not ready:") and "refused the connection" in out
    assert out.count("\n") == 1

    async with local_cluster(tmp_path, listenPort=port, **FAST_REGISTRATION) as cluster:
        code, out = await probe("broker", "--addr", addr)
        assert code == 0, out
        assert out == f"ready: ASYNC_MASTER registered with {cluster.namesrv_addr}\n"
        assert await probe("namesrv", "--addr", cluster.namesrv_addr) == (
            0,
            f"ready: NameServer {cluster.namesrv_addr} answers\n",
        )

        namesrv = cluster.namesrv
        assert namesrv is not None
        ns_port = namesrv.port
        await namesrv.shutdown()
        code, out = await probe("namesrv", "--addr", cluster.namesrv_addr)
        assert code == 1 and "refused the connection" in out
        out = await probe_until(["broker", "--addr", addr], 1)
        assert out.startswith(f"not ready: not registered with any NameServer: {cluster.namesrv_addr} (")

        # the NameServer back on its address: the broker's next round registers it again
        cluster.namesrv = NamesrvController(
            NamesrvConfig.model_validate({"listenPort": ns_port, "kvConfigPath": str(tmp_path / "kv.json")})
        )
        await cluster.namesrv.start()
        out = await probe_until(["broker", "--addr", addr], 0)
        assert out.startswith("ready: ASYNC_MASTER registered with")


async def test_a_registration_older_than_the_window_is_not_ready(tmp_path: Path) -> None:
    async with local_cluster(tmp_path, registerNameServerPeriod="60000") as cluster:
        addr = cluster.running_broker.addr
        assert (await probe("broker", "--addr", addr))[0] == 0
        await asyncio.sleep(1.2)
        code, out = await probe("broker", "--addr", addr, "--registration-window", "1")
        assert code == 1 and "last successful registration" in out and "(window 1.0 s)" in out


class MasterSlave(LocalCluster):
    """The local cluster's broker as the master of a group, plus one slave with its own store."""

    slave: BrokerController | None = None

    async def start_slave(self) -> BrokerController:
        props = self.broker_properties(0)
        props.update(brokerId="1", brokerRole="SLAVE", storePathRootDir=str(self.root / "slave"))
        self.slave = BrokerController(load_broker_config(props))
        await self.slave.start()
        return self.slave

    async def stop(self) -> None:
        if self.slave is not None:
            await self.slave.shutdown()
        await super().stop()


async def test_slave_probe_follows_replication_and_the_master(tmp_path: Path) -> None:
    async with local_cluster(tmp_path, MasterSlave, **FAST_REGISTRATION, **HA_FAST) as cluster:
        await cluster.create_topic("ProbeTopic", queues=2)
        async with Producer("probe-pg", cluster.namesrv_addr) as producer:
            for i in range(20):
                result = await producer.send(Message("ProbeTopic", b"x" * 512, keys=f"k{i}"))
                assert result.status is SendStatus.SEND_OK
        slave = await cluster.start_slave()
        master = cluster.running_broker
        out = await probe_until(["broker", "--addr", slave.addr], 0)
        assert out.startswith(f"ready: SLAVE registered with {cluster.namesrv_addr}, replicating from {master.addr}")
        assert slave.store.max_phy_offset == master.store.max_phy_offset > 0

        # more data on the master: with no lag allowed the slave is ready once it has all of it
        async with Producer("probe-pg", cluster.namesrv_addr) as producer:
            await producer.send(Message("ProbeTopic", b"y" * 512))
        out = await probe_until(["broker", "--addr", slave.addr, "--max-lag-bytes", "0"], 0)
        assert out.endswith(", lag 0 bytes\n")
        assert slave.store.max_phy_offset == master.store.max_phy_offset

        master_ha = f"127.0.0.1:{master.config.ha_listen_port}"
        await master.shutdown()
        cluster.broker = None  # stopped here, not by the cluster
        # the master closes its HA connections as it stops: the slave's session ends with them
        out = await probe_until(["broker", "--addr", slave.addr], 1)
        assert out.startswith(f"not ready: HA connection to master {master_ha} is down (last contact"), out
