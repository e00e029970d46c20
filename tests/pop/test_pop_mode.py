"""SET_MESSAGE_REQUEST_MODE, GET_ALL_MESSAGE_REQUEST_MODE and QUERY_ASSIGNMENT over real TCP, and the pure
parts of POP's wire strings."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from broker.protocol.pop import ExtraInfo, normal_topic, parse_extra_info, retry_flag, retry_topic
from broker.server.pop.mode import assign_queues
from broker.server.pop.processors import bitset_positions
from tests.server.server_harness import cluster

QUERY_ASSIGNMENT, SET_MODE, GET_MODES = 400, 401, 402


async def test_mode_switch_and_assignment(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.create_topic("MT", queues=4)
        cli = await c.client()
        assert (await cli.request(200, body=json.dumps({"groupName": "MG"}).encode())).code == 0
        body = {"topic": "MT", "consumerGroup": "MG", "mode": "POP", "popShareQueueNum": 0}
        assert (await cli.request(SET_MODE, body=json.dumps(body).encode())).code == 0
        for bad, code in (
            ({**body, "topic": "%RETRY%MG"}, 16),  # NO_PERMISSION
            ({**body, "topic": "NOPE"}, 17),  # TOPIC_NOT_EXIST
            ({**body, "consumerGroup": "NOGROUP"}, 26),  # SUBSCRIPTION_GROUP_NOT_EXIST
            ({**body, "mode": "PUSH"}, 29),
        ):
            assert (await cli.request(SET_MODE, body=json.dumps(bad).encode())).code == code, bad
        assert (await cli.request(SET_MODE, body=b"[1,2")).code == 29
        modes = json.loads((await cli.request(GET_MODES)).body)
        assert modes["messageRequestModeMap"]["MT"]["MG"]["mode"] == "POP"
        query = {
            "topic": "MT",
            "consumerGroup": "MG",
            "clientId": "c1",
            "strategyName": "AVG",
            "messageModel": "CLUSTERING",
        }
        none_yet = json.loads((await cli.request(QUERY_ASSIGNMENT, body=json.dumps(query).encode())).body)
        assert none_yet["messageQueueAssignments"] is None  # no registered client yet
        assert (await cli.heartbeat("c1", "MG", ["MT"])).code == 0
        got = json.loads((await cli.request(QUERY_ASSIGNMENT, body=json.dumps(query).encode())).body)
        assert [(a["messageQueue"]["queueId"], a["mode"]) for a in got["messageQueueAssignments"]] == [(-1, "POP")]
        # survives a restart (config/messageRequestMode.json)
        await c.restart_broker()
        cli = await c.client()
        modes = json.loads((await cli.request(GET_MODES)).body)
        assert modes["messageRequestModeMap"]["MT"]["MG"]["popShareQueueNum"] == 0


def test_assignment_shares() -> None:
    clients = ["a", "b", "c"]
    assert assign_queues([0, 1, 2, 3], clients, "a", "POP", 0) == [-1]
    # AllocateMessageQueueAveragely: a gets [0, 1], b [2], c [3]
    assert [assign_queues([0, 1, 2, 3], clients, cid, "PULL", 0) for cid in clients] == [[0, 1], [2], [3]]
    # POP sharing with the next client: a's share and b's
    assert assign_queues([0, 1, 2, 3, 4, 5, 6, 7], [*clients, "d"], "a", "POP", 1) == [0, 1, 2, 3]
    assert assign_queues([0, 1], clients, "zz", "PULL", 0) == []


def test_extra_info_and_retry_names() -> None:
    info = ExtraInfo(5, 1000, 60000, 3, 1, "broker-a", 0, 7)
    assert str(info) == "5 1000 60000 3 1 broker-a 0 7"
    assert parse_extra_info(str(info)) == info
    assert parse_extra_info("5 1000 60000 3 0 broker-a 2").queue_offset == 5  # 7 fields: the CK offset
    assert parse_extra_info(str(info) + " 12345") == info  # the proxy's commit-log offset is ignored
    for bad in ("", "1 2 3", "x 1 1 1 0 b 0 0", "1 1 1 1 9 b 0 0"):
        with pytest.raises(ValueError):
            parse_extra_info(bad)
    assert retry_topic("G", "T") == "%RETRY%G_T" and retry_topic("G", "T", v2=True) == "%RETRY%G+T"
    assert retry_flag("%RETRY%G_T", "G") == 1 and retry_flag("%RETRY%G+T", "G") == 2 and retry_flag("T", "G") == 0
    assert normal_topic("%RETRY%G_T_x", "G") == "T_x"


def test_bitset_positions() -> None:
    assert bitset_positions(base64.b64encode(bytes([0b101, 0b1])).decode()) == [0, 2, 8]
    assert bitset_positions([3]) == [0, 1]
    for bad in ("%%", 5, [1.5]):
        with pytest.raises(ValueError):
            bitset_positions(bad)
