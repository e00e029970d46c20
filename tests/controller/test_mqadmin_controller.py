"""The admin requests of controller mode through our mqadmin and Apache RocketMQ's mqadmin 5.3.3 (its tools jar,
unchanged): getControllerMetaData, getSyncStateSet, getBrokerEpoch, electMaster and cleanBrokerMetadata against
a real controller, NameServer and a group of two brokers in controller mode."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.client import ClientConfig, Message, Producer, SendStatus
from broker.controller.client import ControllerClient
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport import connect
from broker.transport.loop import run
from tests.controller.controller_procs import Controllers
from tests.controller.failover_harness import Group, wait_for
from tests.interop.java_harness import JAVA_DIR
from tests.interop.java_harness import java_mqadmin as java_mqadmin_of

pytestmark = pytest.mark.timeout(300)

MQADMIN = str(Path(sys.executable).with_name("mqadmin"))


def _full(group: Group):  # type: ignore[no-untyped-def]
    async def check() -> tuple[dict[str, str], set[int]] | None:
        client = ControllerClient(group.controllers.addresses)
        try:
            fields, members = await group.replica_info(client)
        finally:
            await client.close()
        return (fields, members) if len(members) == group.brokers and fields.get("masterAddress") else None

    return check


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    root = tmp_path_factory.mktemp("controller-mqadmin")
    g = Group(root, Controllers(root, count=1), brokers=2)
    g.controllers.start_all()
    g.start_namesrv()
    for i in range(g.brokers):
        g.start_broker(i)
    try:
        run(wait_for(_full(g), 90, "both brokers in the SyncStateSet", g))
        yield g
    finally:
        g.stop_all()


def ours(group: Group, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NAMESRV_ADDR": group.namesrv_addr}
    return subprocess.run([MQADMIN, *args], capture_output=True, text=True, timeout=60, env=env)


def ok(group: Group, *args: str) -> str:
    done = ours(group, *args)
    assert done.returncode == 0, f"mqadmin {' '.join(args)} ({done.returncode}):\n{done.stderr}{done.stdout}"
    return done.stdout


def java_mqadmin(group: Group, *args: str) -> str:
    if not (JAVA_DIR / "lib").is_dir() or shutil.which("java") is None:
        pytest.skip("the Java RocketMQ 5.3.3 tools are not installed here")
    home = group.root / "java-mqadmin"
    home.mkdir(exist_ok=True)
    out = java_mqadmin_of(group.namesrv_addr, home, *args)
    assert "SubCommandException" not in out and "Caused by:" not in out, f"java mqadmin {' '.join(args)}:\n{out}"
    return out


def _controller(group: Group) -> str:
    return group.controllers.addresses[0]


def test_get_controller_metadata(group: Group) -> None:
    for out in (ok(group, "getControllerMetaData", "-a", _controller(group)),
                java_mqadmin(group, "getControllerMetaData", "-a", _controller(group))):  # fmt: skip
        assert re.search(r"#ControllerGroup\s+group1", out), out
        assert re.search(rf"#ControllerLeaderAddress\s+{re.escape(_controller(group))}", out), out
        assert f"#Peer:\tn0:{_controller(group)}" in out


def test_get_sync_state_set(group: Group) -> None:
    for out in (ok(group, "getSyncStateSet", "-a", _controller(group), "-b", "broker-a"),
                java_mqadmin(group, "getSyncStateSet", "-a", _controller(group), "-b", "broker-a")):  # fmt: skip
        assert re.search(r"#SyncStateSetNums\s+2", out), out
        assert len(re.findall(r"InSyncReplica:\s+ReplicaIdentity\{brokerName='broker-a', brokerId=\d", out)) == 2, out
        assert "alive=true" in out


def test_get_broker_epoch(group: Group) -> None:
    for out in (ok(group, "getBrokerEpoch", "-b", "broker-a"), java_mqadmin(group, "getBrokerEpoch", "-b", "broker-a")):
        # both brokers hold the history of epoch 1, which the master started at offset 0
        assert len(re.findall(r"#Epoch: EpochEntry\{epoch=1, startOffset=0, endOffset=\d+\}", out)) == 2, out


def test_clean_broker_metadata_is_refused_while_in_use(group: Group) -> None:
    done = ours(group, "cleanBrokerMetadata", "-a", _controller(group), "-bn", "broker-a", "-c", "DefaultCluster")
    assert done.returncode == 1 and "CODE: 2009" in done.stderr, done.stderr
    done = ours(group, "cleanBrokerMetadata", "-a", _controller(group), "-bn", "broker-a", "-b", "1;x", "-c", "C")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    done = ours(group, "cleanBrokerMetadata", "-a", "127.0.0.1:1", "-bn", "broker-a", "-c", "DefaultCluster")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr


def test_forged_notification_and_hostile_ha_peers_change_nothing(group: Group) -> None:
    """NOTIFY_BROKER_ROLE_CHANGED is only a hint (the broker asks the controller), and the master's HA port
    takes truncated or lying replica ids without harm: the master still acknowledges sends afterwards."""
    fields, members = run(wait_for(_full(group), 60, "both brokers in the SyncStateSet", group))
    master = fields["masterAddress"]
    other = next(i for i in members if str(i) != fields["masterBrokerId"])
    forged = {"masterBrokerId": str(other), "masterAddress": "127.0.0.1:1", "masterEpoch": "999999999"}

    async def notify(body: bytes) -> int:
        conn = await connect(master, timeout=2.0)
        try:
            cmd = RemotingCommand(code=RequestCode.NOTIFY_BROKER_ROLE_CHANGED, ext_fields=forged, body=body)
            return (await conn.invoke(cmd, 5.0)).code
        finally:
            conn.close()

    for body in (b'{"syncStateSet":[' + str(other).encode() + b'],"syncStateSetEpoch":999}', b"not json", b"[null]"):
        assert run(notify(body)) == ResponseCode.SUCCESS
    host, port = master.split(":")
    for payload in (b"\x00\x00\x00", (2**62).to_bytes(8, "big") + b"\xff" * 12, b"\x16\x03\x01" + b"x" * 100):
        with socket.create_connection((host, int(port) + 1), timeout=5) as sock:
            sock.sendall(payload)
    time.sleep(2.0)
    after, after_members = run(wait_for(_full(group), 60, "both brokers still in the SyncStateSet", group))
    assert (after["masterAddress"], after["masterEpoch"], after_members) == (master, fields["masterEpoch"], members)

    async def send_ok() -> bool:
        config = ClientConfig(namesrv_addr=group.namesrv_addr, instance_name="forged")
        async with Producer("PG_FORGED", client_config=config, send_msg_timeout=5.0) as producer:
            result = await producer.send(Message("ForgedTopic", b"still the master"))
        return result.status is SendStatus.SEND_OK

    assert run(wait_for(send_ok, 60, "a send acknowledged by the master", group))


@pytest.mark.parametrize("tool", ["ours", "java"])
def test_elect_master_moves_mastership(group: Group, tool: str) -> None:
    fields, members = run(wait_for(_full(group), 60, "both brokers in the SyncStateSet", group))
    old = int(fields["masterBrokerId"])
    target = next(i for i in members if i != old)
    args = ("electMaster", "-a", _controller(group), "-b", str(target), "-bn", "broker-a", "-c", "DefaultCluster")
    out = ok(group, *args) if tool == "ours" else java_mqadmin(group, *args)
    assert re.search(r"#MasterEpoch\s+\d+", out), out

    async def moved() -> bool:
        client = ControllerClient(group.controllers.addresses)
        try:
            now, now_members = await group.replica_info(client)
        finally:
            await client.close()
        return now.get("masterBrokerId") == str(target) and len(now_members) == 2

    # the old master turned slave and rejoined the new master's SyncStateSet
    run(wait_for(moved, 60, f"broker {target} master with both brokers in sync", group))
    assert asyncio.iscoroutinefunction(moved)
