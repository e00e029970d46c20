"""Three real mqcontroller processes on loopback: one leader, state replicated by Raft, kill -9 of the leader.

The controllers are separate processes speaking the remoting protocol; the test drives them as a broker
and mqadmin would (broker.controller.client), and kills the leader with SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import socket
import struct
import subprocess
import time
import zlib
from pathlib import Path

import orjson
import pytest
from pysyncobj.encryptor import getEncryptor

from broker.controller.client import ControllerClient, ControllerUnavailable
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport.errors import RemotingError
from tests.controller.controller_procs import Controllers, free_ports

pytestmark = pytest.mark.timeout(180)


def test_free_ports_never_hands_out_a_port_or_its_successor_twice() -> None:
    """The controllers' ports and the brokers' come from separate calls; each port p also means p+1 (Raft, HA)."""
    taken = [q for p in free_ports(100) + free_ports(100) for q in (p, p + 1)]
    assert len(taken) == len(set(taken))


async def _leader(client: ControllerClient, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            leader = await client.find_leader()
            reply = await client.client.invoke(
                leader, RemotingCommand(code=RequestCode.CONTROLLER_GET_METADATA_INFO), 3
            )
            if reply.ext_fields.get("isLeader") == "true":
                return leader
        except (ControllerUnavailable, RemotingError, OSError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError("no controller leader")
        await asyncio.sleep(0.2)


async def _apply(client: ControllerClient, broker_id: int, address: str) -> RemotingCommand:
    fields = {
        "clusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "appliedBrokerId": str(broker_id),
        "registerCheckCode": f"{address};{broker_id}",
    }
    return await client.invoke_leader(RemotingCommand(code=RequestCode.CONTROLLER_APPLY_BROKER_ID, ext_fields=fields))


async def _replica_info(client: ControllerClient) -> RemotingCommand:
    cmd = RemotingCommand(code=RequestCode.CONTROLLER_GET_REPLICA_INFO, ext_fields={"brokerName": "broker-a"})
    return await client.invoke_leader(cmd)


async def test_three_controllers_survive_the_leader_killed(tmp_path) -> None:
    controllers = Controllers(tmp_path)
    controllers.start_all()
    client = ControllerClient(controllers.addresses)
    try:
        first = await _leader(client)
        assert (await _apply(client, 1, "127.0.0.1:30911")).code == ResponseCode.SUCCESS
        elect = RemotingCommand(
            code=RequestCode.CONTROLLER_ELECT_MASTER,
            ext_fields={"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "1"},
        )
        reply = await client.invoke_leader(elect)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        assert reply.ext_fields["masterBrokerId"] == "1" and reply.ext_fields["masterEpoch"] == "1"
        # a follower refuses leader-only requests, naming the code brokers look for
        follower = next(a for a in controllers.addresses if a != first)
        refused = await client.client.invoke(
            follower, RemotingCommand(code=RequestCode.CONTROLLER_GET_REPLICA_INFO, ext_fields={"brokerName": "x"}), 3
        )
        assert refused.code == ResponseCode.CONTROLLER_NOT_LEADER

        controllers.kill9(controllers.addresses.index(first))
        killed = time.monotonic()
        second = await _leader(client)
        print(f"\nnew controller leader {second} {time.monotonic() - killed:.2f} s after kill -9 of {first}")
        assert second != first
        # the state the dead leader committed is on the new one, and it takes new writes
        info = await _replica_info(client)
        assert info.code == ResponseCode.SUCCESS
        assert info.ext_fields["masterBrokerId"] == "1" and info.ext_fields["masterEpoch"] == "1"
        assert orjson.loads(info.body) == {"syncStateSet": [1], "syncStateSetEpoch": 1}
        assert (await _apply(client, 2, "127.0.0.1:30921")).code == ResponseCode.SUCCESS

        # the killed controller comes back from its Raft log and catches up as a follower
        controllers.start(controllers.addresses.index(first))
        back = ControllerClient([first])
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    meta = await back.metadata(first)
                    if meta.ext_fields.get("controllerLeaderAddress") == second:
                        break
                except (RemotingError, OSError, TimeoutError):
                    pass
                assert time.monotonic() < deadline, controllers.logs()
                await asyncio.sleep(0.2)
        finally:
            await back.close()
    finally:
        await client.close()
        controllers.stop_all()


async def test_hostile_input_on_both_ports(tmp_path) -> None:
    controllers = Controllers(tmp_path, count=1)
    controllers.start_all()
    client = ControllerClient(controllers.addresses)
    try:
        leader = await _leader(client)
        host, port = leader.split(":")
        # garbage, a truncated frame and an oversized length on the request port and on the Raft port
        for target in (int(port), int(port) + 1):
            for payload in (
                b"\x00\x00\x00\x10garbage-garbage!!",
                b"\x00\x00",
                b"\x7f\xff\xff\xff" + b"x" * 64,
                b"\xff" * 256,
            ):
                with socket.create_connection((host, target), timeout=5) as sock:
                    sock.sendall(payload)
        # malformed headers and bodies are answered with an error, not a crash
        bad = [
            RemotingCommand(code=RequestCode.CONTROLLER_APPLY_BROKER_ID, ext_fields={"brokerName": "b"}),
            RemotingCommand(
                code=RequestCode.CONTROLLER_APPLY_BROKER_ID,
                ext_fields={"clusterName": "c", "brokerName": "b", "appliedBrokerId": "x1", "registerCheckCode": "a"},
            ),
            RemotingCommand(
                code=RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                ext_fields={"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "1"},
                body=b'{"syncStateSet": "no"}',
            ),
            RemotingCommand(
                code=RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                ext_fields={"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "99999999999999999999999"},
                body=b"{}",
            ),
            RemotingCommand(code=RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=b"[1, 2"),
            RemotingCommand(code=RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=orjson.dumps(["x" * 10] * 20000)),
            RemotingCommand(
                code=RequestCode.CLEAN_BROKER_DATA, ext_fields={"brokerName": "b", "brokerControllerIdsToClean": "1;x"}
            ),
            RemotingCommand(code=RequestCode.CONTROLLER_GET_REPLICA_INFO, ext_fields={"brokerName": "b" * 1000}),
        ]
        for cmd in bad:
            reply = await client.client.invoke(leader, cmd, 5)
            assert reply.code == ResponseCode.SYSTEM_ERROR, (cmd.code, reply.code, reply.remark)
        beat = RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, ext_fields={"brokerName": "b"})
        assert (await client.client.invoke(leader, beat, 5)).code == ResponseCode.CONTROLLER_INVALID_REQUEST
        # and it still serves
        assert (await _apply(client, 1, "127.0.0.1:30911")).code == ResponseCode.SUCCESS
        assert (await _replica_info(client)).code == ResponseCode.SUCCESS
    finally:
        await client.close()
        controllers.stop_all()


class _MakesADirectory:
    """Unpickling this creates `path`: the mark that a Raft frame was decoded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.mkdir, (str(self.path),)


def _raft_frame(payload: object, password: str | None = None) -> bytes:
    """A frame as pysyncobj lays them out: length, then the zlib-compressed pickle, encrypted with the key
    derived from `password` when one is given."""
    data = zlib.compress(pickle.dumps(payload), 3)
    if password is not None:
        data = getEncryptor(password).encrypt_at_time(data, int(time.monotonic()))
    return struct.pack("i", len(data)) + data


def _non_loopback_address() -> str | None:
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "scope", "global"], capture_output=True, text=True)
    words = out.stdout.split()
    return words[words.index("inet") + 1].split("/")[0] if "inet" in words else None


async def test_the_raft_port_never_decodes_a_frame_without_the_key(tmp_path) -> None:
    marker = tmp_path / "unpickled"
    controllers = Controllers(tmp_path, count=1, extra="controllerRaftPassword=a-real-secret\n")
    controllers.start_all()
    client = ControllerClient(controllers.addresses)
    try:
        leader = await _leader(client)
        host, port = leader.split(":")
        # no key, and the key a controller without controllerRaftPassword would use (derived from the group)
        for password in (None, "rocketcluster-controller:group1"):
            with socket.create_connection((host, int(port) + 1), timeout=5) as sock:
                sock.sendall(_raft_frame(_MakesADirectory(marker), password))
                sock.settimeout(5)
                with contextlib.suppress(ConnectionResetError):
                    while sock.recv(1024):  # until the controller hangs up
                        pass
            assert not marker.exists()
        assert (await _apply(client, 1, "127.0.0.1:30911")).code == ResponseCode.SUCCESS
    finally:
        await client.close()
        controllers.stop_all()


async def test_without_a_password_the_raft_port_listens_on_loopback_only(tmp_path) -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to try the Raft port on")
    controllers = Controllers(tmp_path, count=1, extra="bindAddress=0.0.0.0\n")
    controllers.start_all()
    client = ControllerClient(controllers.addresses)
    try:
        leader = await _leader(client)
        raft_port = int(leader.split(":")[1]) + 1
        socket.create_connection(("127.0.0.1", raft_port), timeout=5).close()
        with pytest.raises(OSError):
            socket.create_connection((address, raft_port), timeout=5).close()
        socket.create_connection((address, raft_port - 1), timeout=5).close()  # the request port is open
    finally:
        await client.close()
        controllers.stop_all()
