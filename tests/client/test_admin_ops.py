"""The admin operations the operator calls: write permission, metadata copy, consumer and replication lag,
runtime info. Pure parts by table; the operations against a real NameServer and brokers on loopback."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from broker.client import Admin, Message, MessageQueue, Producer, SendStatus
from broker.client.admin.broker_runtime_info import BrokerRuntimeInfo
from broker.client.admin.lag import (
    ConsumerLag,
    QueueLag,
    ReplicationLag,
    SlaveLag,
    UnreadQueue,
    consumer_lag,
    unread_queues,
)
from broker.client.admin.metadata_copy import broker_made_topics, plan_copy
from broker.client.admin.requests import (
    create_subscription_group,
    get_all_subscription_groups,
    get_all_topic_configs,
    parse_consumer_offsets,
    parse_properties_text,
)
from broker.client.errors import ClientError
from broker.client.route import Perm
from broker.protocol.bodies import TopicConfig
from broker.server.broker import BrokerController
from broker.server.config import load_broker_config
from tests.local_cluster import LocalCluster, local_cluster, wait_for

# ---------------------------------------------------------------------------------------- pure parts


def test_parse_consumer_offsets_and_properties() -> None:
    data = {"offsetTable": {"T@G": {0: 5, "1": "7"}, "%RETRY%G@G": {0: 0}, "no-separator": {0: 1}, "T@H": "bad"}}
    assert parse_consumer_offsets(data) == {("T", "G"): {0: 5, 1: 7}, ("%RETRY%G", "G"): {0: 0}}
    text = "brokerName=b-0\n# a comment\nbrokerClusterName = rc\nempty=\nnot a pair\n"
    assert parse_properties_text(text) == {"brokerName": "b-0", "brokerClusterName": "rc", "empty": ""}


def test_broker_made_topics() -> None:
    made = broker_made_topics({"brokerName": "rc-1", "brokerClusterName": "rc", "msgTraceTopicName": "TRACE"})
    assert {"rc-1", "rc", "rc_REPLY_TOPIC", "TRACE", "TBW102", "SCHEDULE_TOPIC_XXXX"} <= made
    assert "rc-0" not in made and "%RETRY%G" not in made


def _tc(name: str, queues: int = 4, **kw: Any) -> TopicConfig:
    return TopicConfig(name, queues, queues, **kw)


@pytest.mark.parametrize(
    ("source", "target", "create", "unchanged", "skipped"),
    [
        ({"A": _tc("A")}, {}, ["A"], [], []),
        ({"A": _tc("A")}, {"A": _tc("A")}, [], ["A"], []),
        ({"A": _tc("A", 8)}, {"A": _tc("A", 4)}, ["A"], [], []),  # different queues: updated
        ({"A": _tc("A", order=True)}, {"A": _tc("A")}, ["A"], [], []),
        ({"A": _tc("A", attributes={"k": "v"})}, {"A": _tc("A")}, ["A"], [], []),
        (
            {"rc-0": _tc("rc-0", 1), "TBW102": _tc("TBW102", 8), "%RETRY%G": _tc("%RETRY%G", 1)},
            {},
            ["%RETRY%G"],
            [],
            ["TBW102", "rc-0"],
        ),
    ],
)
def test_plan_copy_topics(
    source: dict[str, TopicConfig],
    target: dict[str, TopicConfig],
    create: list[str],
    unchanged: list[str],
    skipped: list[str],
) -> None:
    plan = plan_copy(source, target, {}, {}, {"rc-0", "TBW102"})
    assert [t.topic_name for t in plan.topics] == create
    assert plan.unchanged_topics == unchanged and plan.skipped_topics == skipped


def test_plan_copy_groups() -> None:
    group = {"groupName": "G", "retryMaxTimes": 3, "consumeEnable": True}
    source = {"G": group, "TOOLS_CONSUMER": {"groupName": "TOOLS_CONSUMER"}, "H": {"retryMaxTimes": 16}}
    target = {"G": {**group, "extraField": 1}, "H": {"groupName": "H", "retryMaxTimes": 5}}
    plan = plan_copy({}, {}, source, target, set())
    assert plan.groups == [{"groupName": "H", "retryMaxTimes": 16}]  # groupName filled from the table key
    assert plan.unchanged_groups == ["G"] and plan.skipped_groups == ["TOOLS_CONSUMER"]


def test_consumer_lag_sums_per_group_and_total() -> None:
    offsets = {("T", "G1"): {0: 2, 1: 10}, ("%RETRY%G1", "G1"): {0: 0}, ("T", "G2"): {0: 5}, ("Gone", "G2"): {0: 3}}
    maxes = {("T", 0): 5, ("T", 1): 9, ("%RETRY%G1", 0): 4}
    lag = consumer_lag("b", "addr", offsets, maxes)
    # G1: T q0 5-2=3, T q1 9-10 -> 0 (past the end), retry 4; G2: T q0 0, Gone (no such queue) 0
    assert lag.per_group == {"G1": 7, "G2": 0} and lag.total == 7
    assert QueueLag("T", "G1", 1, 9, 10).lag == 0


@pytest.mark.parametrize(
    ("ranges", "offsets", "delays", "unread"),
    [
        # a topic nobody consumes: everything between the min and max offsets
        ({("T", 0): (0, 5), ("T", 1): (2, 9)}, {}, {}, [("T", 0, 5), ("T", 1, 7)]),
        # a queue some group committed on is that group's lag, not unread; an empty queue is nothing
        ({("T", 0): (0, 5), ("T", 1): (3, 3)}, {("T", "G"): {0: 1}}, {}, []),
        # one queue read, the other never committed on: only the other counts
        ({("T", 0): (0, 5), ("T", 1): (0, 4)}, {("T", "G"): {0: 5}}, {}, [("T", 1, 4)]),
        # delayed messages past their level's offset (queue id = level - 1); a delivered level is nothing
        (
            {("SCHEDULE_TOPIC_XXXX", 2): (0, 10), ("SCHEDULE_TOPIC_XXXX", 0): (0, 4)},
            {},
            {3: 7, 1: 4},
            [("SCHEDULE_TOPIC_XXXX", 2, 3)],
        ),
        # a level the schedule service never recorded counts from the queue's min offset
        ({("SCHEDULE_TOPIC_XXXX", 4): (2, 6)}, {}, {}, [("SCHEDULE_TOPIC_XXXX", 4, 4)]),
    ],
)
def test_unread_queues(
    ranges: dict[tuple[str, int], tuple[int, int]],
    offsets: dict[tuple[str, str], dict[int, int]],
    delays: dict[int, int],
    unread: list[tuple[str, int, int]],
) -> None:
    assert unread_queues(ranges, offsets, delays) == tuple(UnreadQueue(*u) for u in unread)


def test_replication_lag_max() -> None:
    both = ReplicationLag("b", "m", 100, (SlaveLag(1, "s1", 90, 10), SlaveLag(2, "s2", 100, 0)))
    assert both.max_lag_bytes == 10
    assert ReplicationLag("b", "m", 100, (SlaveLag(1, "s1", None, None),)).max_lag_bytes is None
    assert ReplicationLag("b", "m", 100, ()).max_lag_bytes is None


def test_runtime_info_typed_views() -> None:
    info = BrokerRuntimeInfo(
        "a:1",
        {
            "commitLogMaxOffset": "123",
            "haRole": "SLAVE",
            "haConnected": "false",
            "masterAddr": "m:1",
            "registeredNameServers": "n1:9876;n2:9876",
            "lastRegisterTimestamp": "77",
            "bootTimestamp": "x",
        },
    )
    assert info.commit_log_max_offset == 123 and info.is_slave and info.ha_connected is False
    assert info.master_addr == "m:1" and info.registered_name_servers == ["n1:9876", "n2:9876"]
    assert info.last_register_timestamp == 77 and info.boot_timestamp is None  # unparsable: None, not 0
    assert info.commit_log_min_offset is None and info["haRole"] == "SLAVE" and len(info) == 7
    served = BrokerRuntimeInfo("a:1", {"haSlaveAckOffsets": "10.0.0.2:40112=99,[::1]:5=7,bad"})
    assert served.ha_slave_hosts == {"10.0.0.2", "[::1]"}  # the hosts a master serves replication to
    master = BrokerRuntimeInfo("a:1", {"haRole": "SYNC_MASTER", "haConnectedSlaves": "1"})
    assert not master.is_slave and master.ha_connected is None and master.connected_slaves == 1
    assert master.registered_name_servers == []


# ---------------------------------------------------------------------------------------- live


class TwoGroups(LocalCluster):
    """The local cluster's broker plus more brokers on the same NameServer: other groups, or slaves."""

    extra: list[BrokerController]

    async def start_more(self, broker_name: str, store: str, **props: str) -> BrokerController:
        conf = self.broker_properties(0)
        conf.update(brokerName=broker_name, storePathRootDir=str(self.root / store), **props)
        broker = BrokerController(load_broker_config(conf))
        await broker.start()
        self.extra = [*getattr(self, "extra", []), broker]
        return broker

    async def stop(self) -> None:
        for broker in getattr(self, "extra", []):
            await broker.shutdown()
        await super().stop()


def _dead_addr() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


async def test_wipe_and_add_write_perm_on_every_nameserver(tmp_path: Path) -> None:
    async with local_cluster(tmp_path, broker_name="rc-0") as cluster:
        await cluster.create_topic("PermTopic", queues=2)
        async with Admin(cluster.namesrv_addr) as admin:

            async def perm() -> int:
                route = await admin.topic_route("PermTopic")
                return next(q.perm for q in route.queue_datas if q.broker_name == "rc-0")

            assert await perm() == Perm.READ | Perm.WRITE
            wiped = await admin.wipe_write_perm("rc-0")
            assert list(wiped) == [cluster.namesrv_addr] and wiped[cluster.namesrv_addr] >= 1
            assert await perm() == Perm.READ
            assert await admin.wipe_write_perm("rc-0") == wiped  # idempotent: the same topics, still wiped
            assert await perm() == Perm.READ
            added = await admin.add_write_perm("rc-0")
            assert added == wiped
            assert await perm() == Perm.READ | Perm.WRITE

        dead = _dead_addr()
        async with Admin(f"{cluster.namesrv_addr};{dead}") as admin:
            with pytest.raises(ClientError) as err:
                await admin.wipe_write_perm("rc-0")
            assert dead in str(err.value) and f"done on ['{cluster.namesrv_addr}']" in str(err.value)
            assert await perm_of(admin, "PermTopic", "rc-0") == Perm.READ  # the live NameServer did it
            with pytest.raises(ClientError):
                await admin.add_write_perm("rc-0")
            assert await perm_of(admin, "PermTopic", "rc-0") == Perm.READ | Perm.WRITE


async def perm_of(admin: Admin, topic: str, broker_name: str) -> int:
    route = await admin.topic_route(topic)
    return next(q.perm for q in route.queue_datas if q.broker_name == broker_name)


async def test_copy_metadata_to_a_new_group_is_complete_and_idempotent(tmp_path: Path) -> None:
    async with local_cluster(tmp_path, TwoGroups, cluster_name="rc", broker_name="rc-0") as cluster:
        source = cluster.running_broker
        await cluster.create_topic("Orders", queues=8)
        await cluster.create_topic("Audit", queues=2, order=True, perm=Perm.READ, multi_tag=True)
        async with Admin(cluster.namesrv_addr) as admin:
            api = admin.instance.api
            await create_subscription_group(api, source.addr, {"groupName": "billing", "retryMaxTimes": 3})
            target = await cluster.start_more("rc-1", "store-1")
            await admin.create_topic("Orders", broker_addr=target.addr, read_queue_nums=2, write_queue_nums=2)

            result = await admin.copy_metadata(source.addr, target.addr)
            assert result.created_topics == ["Audit", "Orders"]  # Orders differed (2 queues), now updated
            assert result.created_groups == ["billing"]
            assert {"rc-0", "rc", "rc_REPLY_TOPIC", "TBW102", "SCHEDULE_TOPIC_XXXX"} <= set(result.skipped_topics)
            assert "TOOLS_CONSUMER" in result.skipped_groups

            src_topics = await get_all_topic_configs(api, source.addr)
            dst_topics = await get_all_topic_configs(api, target.addr)
            for name in ("Orders", "Audit"):
                assert dst_topics[name] == src_topics[name]
            assert dst_topics["Audit"].order and dst_topics["Audit"].perm == Perm.READ
            assert dst_topics["rc-1"].read_queue_nums == 1 and "rc-0" not in dst_topics
            groups = await get_all_subscription_groups(api, target.addr)
            assert groups["billing"]["retryMaxTimes"] == 3

            again = await admin.copy_metadata(source.addr, target.addr)
            assert again.created_topics == [] and again.created_groups == []
            assert {"Audit", "Orders"} <= set(again.unchanged_topics) and "billing" in again.unchanged_groups

            # the new group registers the copied topics: clients route to it
            for _ in range(100):
                route = await admin.topic_route("Audit")
                if {q.broker_name for q in route.queue_datas} == {"rc-0", "rc-1"}:
                    break
                await asyncio.sleep(0.05)
            assert {q.broker_name for q in route.queue_datas} == {"rc-0", "rc-1"}


async def test_consumer_lag_of_a_broker_group(tmp_path: Path) -> None:
    async with local_cluster(tmp_path, broker_name="rc-0") as cluster:
        broker = cluster.running_broker
        await cluster.create_topic("LagTopic", queues=2)
        async with Producer("lag-pg", cluster.namesrv_addr) as producer:
            for i in range(12):
                result = await producer.send(Message("LagTopic", f"m{i}".encode()))
                assert result.status is SendStatus.SEND_OK
        top = [broker.store.get_max_offset_in_queue("LagTopic", q) for q in (0, 1)]
        assert sum(top) == 12
        async with Admin(cluster.namesrv_addr) as admin:
            nobody = await admin.consumer_lag("rc-0")
            assert nobody.total == 0  # nobody committed anything yet: no lag, but every message is unread
            assert nobody.unread_per_topic == {"LagTopic": 12}
            api = admin.instance.api
            commits = {("g1", 0): 1, ("g1", 1): 0, ("g2", 0): top[0]}
            for (group, queue_id), offset in commits.items():
                await api.update_consumer_offset(broker.addr, group, MessageQueue("LagTopic", "rc-0", queue_id), offset)

            lag = await admin.consumer_lag("rc-0")
            assert isinstance(lag, ConsumerLag) and lag.addr == broker.addr
            assert lag.per_group == {"g1": top[0] - 1 + top[1], "g2": 0}
            assert lag.total == 11
            assert lag.unread == ()  # g1 committed on both queues: what is left is its lag

            async with Producer("lag-pg", cluster.namesrv_addr) as producer:  # level 5: delivered in a minute
                await producer.send(Message("LagTopic", b"later", delay_time_level=5))
            assert (await admin.consumer_lag("rc-0")).unread == (UnreadQueue("SCHEDULE_TOPIC_XXXX", 4, 1),)
            assert {(q.group, q.queue_id): q.max_offset for q in lag.queues} == {
                ("g1", 0): top[0],
                ("g1", 1): top[1],
                ("g2", 0): top[0],
            }
            assert (await admin.consumer_lag("rc-0", addr=broker.addr)).total == 11
            with pytest.raises(ClientError):
                await admin.consumer_lag("no-such-group")


async def test_replication_lag_and_runtime_info_of_a_master_slave_pair(tmp_path: Path) -> None:
    ha = {"haSendHeartbeatInterval": "300", "haHousekeepingInterval": "3000"}
    async with local_cluster(tmp_path, TwoGroups, broker_name="rc-0", **ha) as cluster:
        master = cluster.running_broker
        slave = await cluster.start_more("rc-0", "slave", brokerId="1", brokerRole="SLAVE")
        await cluster.create_topic("RepTopic", queues=2)
        async with Producer("rep-pg", cluster.namesrv_addr) as producer:
            for _ in range(20):
                await producer.send(Message("RepTopic", b"r" * 300))
        await wait_for(lambda: slave.store.max_phy_offset == master.store.max_phy_offset, 20, "the slave")
        async with Admin(cluster.namesrv_addr) as admin:
            await wait_for_listed(admin, "rc-0", 2)
            lag = await admin.replication_lag("rc-0")
            assert lag.master_addr == master.addr and lag.master_max_offset == master.store.max_phy_offset
            assert lag.slaves == (SlaveLag(1, slave.addr, master.store.max_phy_offset, 0, attached=True),)
            assert lag.max_lag_bytes == 0 and lag.slaves[0].attached is True

            info = await admin.runtime_info(slave.addr)
            assert info.is_slave and info.ha_connected is True and info.master_addr == master.addr
            assert info.registered_name_servers == [cluster.namesrv_addr]
            assert info.commit_log_max_offset == slave.store.max_phy_offset
            minfo = await admin.runtime_info(master.addr)
            assert minfo.ha_role == "ASYNC_MASTER" and minfo.connected_slaves == 1

            # replication stopped (the slave's HA client closed) while the master takes more writes
            assert slave.ha is not None and slave.ha.client is not None
            await slave.ha.client.close()
            frozen = slave.store.max_phy_offset
            async with Producer("rep-pg", cluster.namesrv_addr) as producer:
                for _ in range(5):
                    await producer.send(Message("RepTopic", b"s" * 300))
            lag = await admin.replication_lag("rc-0")
            assert lag.slaves[0].max_offset == frozen
            assert lag.max_lag_bytes == master.store.max_phy_offset - frozen > 5 * 300
            assert lag.slaves[0].attached is False  # the master serves it no replication connection


async def wait_for_listed(admin: Admin, broker_name: str, count: int) -> None:
    for _ in range(200):
        bd = (await admin.cluster_info()).brokers.get(broker_name)
        if bd is not None and len(bd.broker_addrs) == count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{broker_name} never had {count} registered addresses")


async def test_a_slave_advertising_another_address_counts_as_attached_by_its_ha_address(tmp_path: Path) -> None:
    # as with the operator's external access: clients get brokerIP1 (a node's IP in Kubernetes), while the slave
    # replicates from its brokerIP2 (its pod's IP), so the master sees the connection come from brokerIP2's host
    ha = {"haSendHeartbeatInterval": "300", "haHousekeepingInterval": "3000"}
    async with local_cluster(tmp_path, TwoGroups, broker_name="rc-0", **ha) as cluster:
        master = cluster.running_broker
        slave = await cluster.start_more(
            "rc-0", "slave", brokerId="1", brokerRole="SLAVE", brokerIP1="127.0.0.2", brokerIP2="127.0.0.1"
        )
        await cluster.create_topic("RepTopic", queues=2)
        async with Producer("rep-pg", cluster.namesrv_addr) as producer:
            await producer.send(Message("RepTopic", b"r" * 300))
        await wait_for(lambda: slave.store.max_phy_offset == master.store.max_phy_offset, 20, "the slave")
        async with Admin(cluster.namesrv_addr) as admin:
            await wait_for_listed(admin, "rc-0", 2)
            lag = await admin.replication_lag("rc-0")
            assert lag.slaves[0].addr.startswith("127.0.0.2:")
            assert (await admin.runtime_info(lag.slaves[0].addr)).ha_server_host == "127.0.0.1"
            assert lag.slaves[0].lag_bytes == 0 and lag.slaves[0].attached is True
