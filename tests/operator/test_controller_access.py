"""rocketcluster.controller_access against a real remoting server on loopback that plays the controller: the
leader is found by pod name and dialed by pod IP, electMaster carries RocketMQ's fields, and hostile or broken
replies (a leader outside the cluster, no leader, a port out of range, a refusal) end in ControllerRefused
without dialing anything the reply names."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport.connection import RemotingConnection
from broker.transport.server import RemotingServer
from rocketcluster import names
from rocketcluster.controller_access import ControllerRefused, elect_master, parse_sync_state_sets, sync_state_sets


class FakeController:
    def __init__(self) -> None:
        self.leader = ""
        self.elect_code = ResponseCode.SUCCESS
        self.elect_codes: list[int] = []  # codes of the first elections, before elect_code
        self.elections: list[dict[str, str]] = []
        self.server = RemotingServer("127.0.0.1", 0)
        self.server.register(RequestCode.CONTROLLER_GET_METADATA_INFO, self._metadata)
        self.server.register(RequestCode.CONTROLLER_ELECT_MASTER, self._elect)
        self.server.register(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, self._sync_state)
        self.sync_body = b""
        self.asked: list[bytes] = []

    def _metadata(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        reply = cmd.response(ResponseCode.SUCCESS)
        reply.ext_fields = {"controllerLeaderAddress": self.leader.replace("PORT", str(self.server.port))}
        return reply

    def _sync_state(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        self.asked.append(cmd.body or b"")
        reply = cmd.response(ResponseCode.SUCCESS)
        reply.body = self.sync_body
        return reply

    def _elect(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        self.elections.append(dict(cmd.ext_fields))
        code = self.elect_codes.pop(0) if self.elect_codes else self.elect_code
        return cmd.response(code, "refused" if code else None)


def _with_controller(leader: str, elect_code: int, body: Callable[[FakeController], Awaitable[None]]) -> FakeController:
    """Runs `body` against a started fake controller in a fresh event loop; returns the controller."""

    async def main() -> FakeController:
        fake = FakeController()
        fake.leader, fake.elect_code = leader, elect_code
        await fake.server.start()
        try:
            await body(fake)
        finally:
            await fake.server.shutdown()
        return fake

    return asyncio.run(main())


def _nameserver(ordinal: int, ip: str = "127.0.0.1", ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": names.nameserver_pod("rc", ordinal),
            "labels": {names.LABEL_COMPONENT: names.COMPONENT_NAMESERVER},
        },
        "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_the_leader_is_dialed_by_pod_ip_with_rocketmqs_fields() -> None:
    async def body(fake: FakeController) -> None:
        await elect_master([_nameserver(0)], "rc", "rc-0", 4, port=fake.server.port)

    controller = _with_controller("rc-nameserver-0.rc-nameserver-headless.ns.svc:PORT", ResponseCode.SUCCESS, body)
    assert controller.elections == [
        {"clusterName": "rc", "brokerName": "rc-0", "brokerId": "4", "designateElect": "true"}
    ]


@pytest.mark.parametrize(
    ("leader", "words"),
    [
        ("evil.example.com:PORT", "is no NameServer pod"),  # never dialed: not one of the cluster's pods
        ("", "no leader known"),
        ("rc-nameserver-0.x:99999", "is no NameServer pod"),
        ("rc-nameserver-0.x:notaport", "is no NameServer pod"),
        ("x" * 5000, "is no NameServer pod"),
    ],
)
def test_a_hostile_or_broken_leader_is_refused(leader: str, words: str) -> None:
    async def body(fake: FakeController) -> None:
        with pytest.raises(ControllerRefused, match=words) as caught:
            await elect_master([_nameserver(0)], "rc", "rc-0", 4, port=fake.server.port)
        assert len(str(caught.value)) < 1000

    assert _with_controller(leader, ResponseCode.SUCCESS, body).elections == []


def test_a_refusal_names_the_code() -> None:
    async def body(fake: FakeController) -> None:
        with pytest.raises(ControllerRefused, match="code 2004"):
            await elect_master([_nameserver(0)], "rc", "rc-0", 4, port=fake.server.port)

    _with_controller("rc-nameserver-0.h.ns.svc:PORT", 2004, body)


def test_no_ready_nameserver_or_none_answering() -> None:
    with pytest.raises(ControllerRefused, match="no NameServer pod is ready"):
        asyncio.run(elect_master([_nameserver(0, ready=False)], "rc", "rc-0", 1))
    # a pod IP where nothing listens on the port: the error names the pod asked
    with pytest.raises(ControllerRefused, match="rc-nameserver-1"):
        asyncio.run(elect_master([_nameserver(1)], "rc", "rc-0", 1, port=1))


def test_the_sync_state_sets_come_from_the_leader() -> None:
    body = (
        b'{"replicasInfoTable": {"rc-0": {"masterBrokerId": 1, "inSyncReplicas": [{"brokerId": 1}, {"brokerId": 3}],'
        b' "notInSyncReplicas": [{"brokerId": 2}]}, "rc-1": {"inSyncReplicas": []}}}'
    )
    found: dict[str, frozenset[int]] = {}

    async def body_of(fake: FakeController) -> None:
        fake.sync_body = body
        found.update(await sync_state_sets([_nameserver(0)], ["rc-0", "rc-1"], port=fake.server.port))

    controller = _with_controller("rc-nameserver-0.h.ns.svc:PORT", ResponseCode.SUCCESS, body_of)
    assert found == {"rc-0": frozenset({1, 3}), "rc-1": frozenset()}
    assert controller.asked == [b'["rc-0","rc-1"]']


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"replicasInfoTable": {"rc-0": {"inSyncReplicas": [{"id": 1}]}}}',
        b'{"replicasInfoTable": {"rc-0": {"inSyncReplicas": [{"brokerId": "x"}]}}}',
        b'{"replicasInfoTable": {"rc-0": "no"}}',
    ],
)
def test_a_reply_that_is_no_replicas_table_is_refused(body: bytes) -> None:
    with pytest.raises(ControllerRefused, match="no replicas table"):
        parse_sync_state_sets(body)


def test_a_leader_change_in_between_is_followed_once() -> None:
    async def body(fake: FakeController) -> None:
        fake.elect_codes = [ResponseCode.CONTROLLER_NOT_LEADER]
        await elect_master([_nameserver(0)], "rc", "rc-0", 4, port=fake.server.port)

    assert len(_with_controller("rc-nameserver-0.h.ns.svc:PORT", ResponseCode.SUCCESS, body).elections) == 2


def test_a_leader_whose_nameserver_is_not_ready_yet_is_dialed() -> None:
    async def body(fake: FakeController) -> None:
        pods = [_nameserver(0), _nameserver(1, ready=False)]
        await elect_master(pods, "rc", "rc-0", 4, port=fake.server.port)

    assert len(_with_controller("rc-nameserver-1.h.ns.svc:PORT", ResponseCode.SUCCESS, body).elections) == 1
