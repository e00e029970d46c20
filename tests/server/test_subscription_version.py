"""A group's stored subscription follows the newest subVersion heartbeated.

The Java push consumer bumps its subscription's subVersion after a rebalance, heartbeats, then pulls
with the new version and no subscription in the pull (sysFlag bit 2 clear). The broker answers such a
pull SUBSCRIPTION_NOT_LATEST while what it stored is older than the request, so it must take the
newer version from the heartbeat even when the expression is the same.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from broker.protocol.codes import RequestCode, ResponseCode
from broker.server.clients import SubscriptionData, merge_subscriptions
from tests.server.server_harness import TestClient, cluster


def sub(topic: str, version: int, expression: str = "*", kind: str = "TAG") -> SubscriptionData:
    return SubscriptionData(topic, sub_string=expression, sub_version=version, expression_type=kind)


# (stored, heartbeat, versions and expressions kept per topic, the group is notified)
MERGES = [
    pytest.param([], [sub("T", 5)], {"T": (5, "*")}, True, id="new topic"),
    pytest.param([sub("T", 5)], [sub("T", 9)], {"T": (9, "*")}, False, id="newer version, same expression"),
    pytest.param([sub("T", 9)], [sub("T", 5)], {"T": (9, "*")}, False, id="older version is ignored"),
    pytest.param([sub("T", 5)], [sub("T", 5)], {"T": (5, "*")}, False, id="same heartbeat again"),
    pytest.param([sub("T", 5)], [sub("T", 9, "a || b")], {"T": (9, "a || b")}, True, id="newer with new expression"),
    pytest.param([sub("T", 9)], [sub("T", 5, "a")], {"T": (9, "*")}, False, id="older with new expression"),
    pytest.param([sub("T", 0)], [sub("T", 0, "a")], {"T": (0, "a")}, True, id="fixed version, new expression"),
    pytest.param([sub("T", 0, "a > 1", "SQL92")], [sub("T", 0, "a > 1")], {"T": (0, "a > 1")}, True, id="new type"),
    pytest.param([sub("T", 5), sub("U", 5)], [sub("T", 9)], {"T": (9, "*")}, True, id="topic dropped"),
    pytest.param([sub("T", 5)], [sub("T", 9), sub("U", 1)], {"T": (9, "*"), "U": (1, "*")}, True, id="topic added"),
]


@pytest.mark.parametrize(("stored", "heartbeat", "kept", "notify"), MERGES)
def test_merge_subscriptions(
    stored: list[SubscriptionData], heartbeat: list[SubscriptionData], kept: dict[str, tuple[int, str]], notify: bool
) -> None:
    merged, changed = merge_subscriptions({s.topic: s for s in stored}, heartbeat)
    assert {t: (s.sub_version, s.sub_string) for t, s in merged.items()} == kept
    assert changed is notify


async def heartbeat(client: TestClient, group: str, topic: str, version: int) -> None:
    consumer = {
        "groupName": group,
        "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "unitMode": False,
        "subscriptionDataSet": [
            {"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": version}
        ],
    }
    body = orjson.dumps({"clientID": "cid-java", "producerDataSet": [], "consumerDataSet": [consumer]})
    assert (await client.request(RequestCode.HEART_BEAT, body=body)).code == ResponseCode.SUCCESS


async def pull_code(client: TestClient, group: str, topic: str, version: int) -> int:
    """A Java-style pull: no subscription in the request (sysFlag 0), only the subVersion it holds."""
    ext = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": 0,
        "queueOffset": 0,
        "maxMsgNums": 32,
        "sysFlag": 0,
        "commitOffset": 0,
        "suspendTimeoutMillis": 0,
        "subVersion": version,
    }
    return (await client.request(RequestCode.PULL_MESSAGE, ext)).code


async def test_pull_follows_the_newest_heartbeated_sub_version(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        cli = await c.client()
        assert (await cli.send("SubVer", b"one")).code == ResponseCode.SUCCESS
        await heartbeat(cli, "CG-subver", "SubVer", 100)
        assert await pull_code(cli, "CG-subver", "SubVer", 100) == ResponseCode.SUCCESS
        # The client rebalanced and bumped its version; until its heartbeat lands, it is ahead.
        assert await pull_code(cli, "CG-subver", "SubVer", 200) == ResponseCode.SUBSCRIPTION_NOT_LATEST
        await heartbeat(cli, "CG-subver", "SubVer", 200)
        assert await pull_code(cli, "CG-subver", "SubVer", 200) == ResponseCode.SUCCESS
        # A member still on the old version pulls fine; its heartbeat does not roll the group back.
        assert await pull_code(cli, "CG-subver", "SubVer", 100) == ResponseCode.SUCCESS
        await heartbeat(cli, "CG-subver", "SubVer", 100)
        assert await pull_code(cli, "CG-subver", "SubVer", 200) == ResponseCode.SUCCESS
