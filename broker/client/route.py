"""Topic routes from the NameServer, and the queue views producers and consumers derive from them.

`ClientInstance` (instance.py) fetches GET_ROUTEINFO_BY_TOPIC bodies and calls `parse_route()`;
the producer uses `TopicPublishInfo` (writable queues on masters only), consumers use
`subscribe_queues()` (readable queues), and everyone resolves broker addresses with
`TopicRouteData.master_addr()` / `.broker_addr()`. `parse_cluster_info()` reads GET_BROKER_CLUSTER_INFO's
body (the producer names the brokers that left with it, the admin client lists masters). Pure: no I/O here.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.client.message import MessageQueue
from broker.protocol.bodies import fastjson_loads as loads

__all__ = [
    "MASTER_ID",
    "BrokerData",
    "ClusterInfo",
    "Perm",
    "QueueData",
    "TopicPublishInfo",
    "TopicRouteData",
    "parse_cluster_info",
    "parse_route",
    "subscribe_queues",
]

log = logging.getLogger(__name__)

MASTER_ID = 0


class Perm:
    """PermName.java bits."""

    PRIORITY = 8
    READ = 4
    WRITE = 2
    INHERIT = 1

    @staticmethod
    def readable(perm: int) -> bool:
        return bool(perm & Perm.READ)

    @staticmethod
    def writeable(perm: int) -> bool:
        return bool(perm & Perm.WRITE)


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(frozen=True, slots=True)
class BrokerData:
    broker_name: str
    cluster: str
    #: brokerId -> "ip:port"; 0 is the master.
    broker_addrs: dict[int, str]

    def select_addr(self) -> str | None:
        """The master if known, else any slave (Java's BrokerData.selectBrokerAddr, for reads)."""
        return self.broker_addrs.get(MASTER_ID) or next(iter(self.broker_addrs.values()), None)


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    order_topic_conf: str | None = None

    def broker(self, broker_name: str) -> BrokerData | None:
        for bd in self.broker_datas:
            if bd.broker_name == broker_name:
                return bd
        return None

    def master_addr(self, broker_name: str) -> str | None:
        bd = self.broker(broker_name)
        return bd.broker_addrs.get(MASTER_ID) if bd else None

    def broker_addr(self, broker_name: str, broker_id: int = MASTER_ID) -> str | None:
        """The address of `broker_id` in the group, falling back to any address (pull from a slave)."""
        bd = self.broker(broker_name)
        if bd is None:
            return None
        return bd.broker_addrs.get(broker_id) or bd.select_addr()

    def all_addrs(self) -> set[str]:
        return {addr for bd in self.broker_datas for addr in bd.broker_addrs.values()}

    def master_addrs(self) -> set[str]:
        return {addr for bd in self.broker_datas if (addr := bd.broker_addrs.get(MASTER_ID))}


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def parse_route(body: bytes | str | Mapping[str, Any]) -> TopicRouteData:
    """TopicRouteData from a 105 response body (quoted or unquoted brokerAddrs keys)."""
    data = body if isinstance(body, Mapping) else loads(body)
    queues = []
    for qd in data.get("queueDatas") or ():
        queues.append(
            QueueData(
                broker_name=str(qd["brokerName"]),
                read_queue_nums=_int(qd.get("readQueueNums")),
                write_queue_nums=_int(qd.get("writeQueueNums")),
                perm=_int(qd.get("perm"), 6),
                # Renamed from the misspelt topicSynFlag around 4.9; accept either.
                topic_sys_flag=_int(qd.get("topicSysFlag", qd.get("topicSynFlag"))),
            )
        )
    brokers = []
    for bd in data.get("brokerDatas") or ():
        addrs = {int(k): str(v) for k, v in (bd.get("brokerAddrs") or {}).items() if v}
        brokers.append(BrokerData(str(bd["brokerName"]), str(bd.get("cluster", "")), addrs))
    queues.sort(key=lambda q: q.broker_name)
    brokers.sort(key=lambda b: b.broker_name)
    conf = data.get("orderTopicConf")
    return TopicRouteData(tuple(queues), tuple(brokers), conf if isinstance(conf, str) and conf else None)


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """Readable queues of a topic, sorted (the input of queue allocation)."""
    result = [
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if Perm.readable(qd.perm)
        for i in range(qd.read_queue_nums)
    ]
    result.sort()
    return result


@dataclass(slots=True)
class TopicPublishInfo:
    """Writable queues of a topic on brokers with a live master, plus the round-robin counter."""

    topic: str
    queues: list[MessageQueue]
    route: TopicRouteData
    order_topic: bool = False
    _counter: itertools.count[int] = field(default_factory=lambda: itertools.count(random.randrange(1 << 16)))

    @classmethod
    def from_route(cls, topic: str, route: TopicRouteData) -> TopicPublishInfo:
        queues: list[MessageQueue] = []
        if route.order_topic_conf:
            # "brokerA:4;brokerB:4": ordered topics pin the queue layout explicitly.
            for item in route.order_topic_conf.split(";"):
                name, _, nums = item.partition(":")
                queues += [MessageQueue(topic, name, i) for i in range(_int(nums))]
            return cls(topic, queues, route, order_topic=True)
        for qd in route.queue_datas:
            if not Perm.writeable(qd.perm):
                continue
            if route.master_addr(qd.broker_name) is None:
                continue  # producing goes to masters only
            queues += [MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)]
        return cls(topic, queues, route)

    @property
    def ok(self) -> bool:
        return bool(self.queues)

    def next_index(self) -> int:
        return next(self._counter)

    def select_one(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round robin, skipping the broker of the previous failed attempt when another exists."""
        n = len(self.queues)
        if n == 0:
            raise IndexError(f"topic {self.topic} has no writable queue")
        if last_broker_name is not None:
            for _ in range(n):
                mq = self.queues[self.next_index() % n]
                if mq.broker_name != last_broker_name:
                    return mq
        return self.queues[self.next_index() % n]

    def write_queue_nums(self, broker_name: str) -> int:
        for qd in self.route.queue_datas:
            if qd.broker_name == broker_name:
                return qd.write_queue_nums
        return 0


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """A NameServer's GET_BROKER_CLUSTER_INFO: each broker group's addresses, each cluster's group names."""

    brokers: dict[str, BrokerData]
    clusters: dict[str, list[str]]

    def masters(self, cluster: str | None = None) -> list[str]:
        names = self.clusters.get(cluster, []) if cluster else list(self.brokers)
        return sorted(a for n in names if (bd := self.brokers.get(n)) and (a := bd.broker_addrs.get(MASTER_ID)))


def parse_cluster_info(data: dict[str, Any]) -> ClusterInfo:
    """A ClusterInfo body (brokerAddrTable, clusterAddrTable) as ClusterInfo."""
    brokers = {}
    for name, bd in (data.get("brokerAddrTable") or {}).items():
        addrs = {int(k): str(v) for k, v in (bd.get("brokerAddrs") or {}).items()}
        brokers[str(name)] = BrokerData(str(name), str(bd.get("cluster", "")), addrs)
    clusters = {str(c): sorted(str(n) for n in names) for c, names in (data.get("clusterAddrTable") or {}).items()}
    return ClusterInfo(brokers, clusters)
