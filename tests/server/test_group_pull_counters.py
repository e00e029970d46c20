"""Pulls counted per topic and group (broker.server.group_pull_counters), always on: VIEW_BROKER_STATS_DATA (315)
GROUP_GET_NUMS / GROUP_GET_SIZE, the consume TPS and pull offsets of GET_CONSUME_STATS (208) and
GET_BROKER_CONSUME_STATS (317), over a real connection to a real broker; the windows with a fake clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.protocol.bodies import MessageQueue, fastjson_loads
from broker.protocol.codes import RequestCode as RC
from broker.protocol.codes import ResponseCode as R
from broker.server.group_pull_counters import DAY, HOUR, MINUTE, GroupGetStats
from tests.server.server_harness import cluster


class Clock:
    def __init__(self) -> None:
        self.t = 500.0

    def __call__(self) -> float:
        return self.t


def test_windows_follow_the_snapshots() -> None:
    clock = Clock()
    stats = GroupGetStats(clock)
    stats.pulled("G", "T", 0, 10, 1000, 10)
    for _ in range(30):  # a minute and a half of sampling, nothing more pulled
        clock.t += 3
        stats.sample()
    stats.pulled("G", "T", 1, 4, 400, 4)
    # the minute starts at the newest snapshot at least 60 s old: after the first 10 messages
    messages, nbytes, pulls, seconds = stats.window("T@G", MINUTE)
    assert (messages, nbytes, pulls) == (4, 400, 1) and 60 <= seconds < 70
    # the hour and the day have no snapshot that old yet: they count from the start
    assert stats.window("T@G", HOUR)[:4] == (14, 1400, 2, 90) and stats.window("T@G", DAY)[:3] == (14, 1400, 2)
    assert stats.tps("T", "G") == pytest.approx(4 / seconds)
    assert (stats.pull_offset("G", "T", 0), stats.pull_offset("G", "T", 1), stats.pull_offset("G", "T", 2)) == (
        10,
        4,
        -1,
    )
    assert stats.window("T@Nobody", MINUTE)[:3] == (0, 0, 0)


async def test_pulls_are_counted_per_group(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        cli = await c.client()
        for i in range(5):
            assert (await cli.send("Out", b"m%d" % i, queue_id=0)).code == R.SUCCESS
        assert (await cli.heartbeat("cid-1", "Readers", ["Out"])).code == R.SUCCESS
        pulled = await cli.pull("Out", 0, group="Readers", max_nums=3)
        assert pulled.code == R.SUCCESS
        assert (await cli.pull("Out", 3, group="Readers")).code == R.SUCCESS
        # committed 3 of the 5 it has read: 2 in flight
        await cli.request(
            RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "Readers", "topic": "Out", "queueId": 0, "commitOffset": 3}
        )

        data = fastjson_loads(
            (
                await cli.request(RC.VIEW_BROKER_STATS_DATA, {"statsName": "GROUP_GET_NUMS", "statsKey": "Out@Readers"})
            ).body
        )
        for span in ("statsMinute", "statsHour", "statsDay"):
            assert data[span]["sum"] == 5 and data[span]["tps"] > 0, data
            assert data[span]["avgpt"] == 2.5  # messages per pull
        size = fastjson_loads(
            (
                await cli.request(RC.VIEW_BROKER_STATS_DATA, {"statsName": "GROUP_GET_SIZE", "statsKey": "Out@Readers"})
            ).body
        )
        assert size["statsDay"]["sum"] > 5 * 2  # the stored records' bytes

        stats = fastjson_loads((await cli.request(RC.GET_CONSUME_STATS, {"consumerGroup": "Readers"})).body)
        q0 = stats["offsetTable"][MessageQueue("Out", "broker-t", 0)]
        assert (q0["brokerOffset"], q0["consumerOffset"], q0["pullOffset"]) == (5, 3, 5)
        assert stats["consumeTps"] > 0
        # updateSubGroup makes the group one that 317 lists
        body = b'{"groupName":"Readers","consumeEnable":true}'
        assert (await cli.request(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)).code == R.SUCCESS
        listed = fastjson_loads((await cli.request(RC.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})).body)
        assert listed["totalInflightDiff"] == 2 and listed["totalDiff"] == 2, listed

        # a known topic and group that pulled nothing read as zeros
        assert (await cli.request(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"Idle"}')).code == 0
        idle = fastjson_loads(
            (await cli.request(RC.VIEW_BROKER_STATS_DATA, {"statsName": "GROUP_GET_NUMS", "statsKey": "Out@Idle"})).body
        )
        assert idle["statsMinute"] == {"avgpt": 0.0, "sum": 0, "tps": 0.0}

        for ext, says in [
            ({"statsName": "GROUP_GET_NUMS", "statsKey": "Out"}, "not exist"),  # no @group
            ({"statsName": "GROUP_GET_NUMS", "statsKey": "Nope@Readers"}, "not exist"),
            ({"statsName": "GROUP_GET_NUMS", "statsKey": "Out@NoSuchGroup"}, "not exist"),
            ({"statsName": "GROUP_GET_SIZE", "statsKey": "@"}, "not exist"),
            ({"statsName": "GROUP_GET_NUMS"}, "statsKey"),
            ({"statsKey": "Out@Readers"}, "statsName"),
        ]:
            r = await cli.request(RC.VIEW_BROKER_STATS_DATA, ext)
            assert r.code == R.SYSTEM_ERROR and says in (r.remark or ""), (ext, r.code, r.remark)
        # still answering
        r = await cli.request(RC.VIEW_BROKER_STATS_DATA, {"statsName": "GROUP_GET_NUMS", "statsKey": "Out@Readers"})
        assert r.code == R.SUCCESS
