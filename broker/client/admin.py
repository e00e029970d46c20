"""The admin client: what mqadmin needs from the cluster (topics, routes, clusters, progress, messages).

broker.cli's mqadmin (and tests) create `Admin(namesrv_addr)`, `await start()`, call the methods
and `await shutdown()`. Every method is one or a few remoting requests: UPDATE_AND_CREATE_TOPIC to
each master, GET_BROKER_CLUSTER_INFO / GET_ALL_TOPIC_LIST / GET_ROUTEINFO from the NameServer,
GET_BROKER_RUNTIME_INFO, GET_MAX_OFFSET + QUERY_CONSUMER_OFFSET for progress, VIEW_MESSAGE_BY_ID and
QUERY_MESSAGE for message lookups, INVOKE_BROKER_TO_RESET_OFFSET for resetOffsetByTime.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from broker.client.config import ClientConfig, client_config_with
from broker.client.errors import ClientError, QueryNotFound
from broker.client.instance import ClientInstance
from broker.client.message import MessageExt, MessageQueue
from broker.client.route import MASTER_ID, BrokerData, Perm, TopicRouteData, subscribe_queues
from broker.protocol.headers import CreateTopicRequestHeader
from broker.protocol.message import decode_offset_msg_id

__all__ = ["Admin", "BrokerRow", "ClusterInfo", "QueueProgress", "parse_cluster_info"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    brokers: dict[str, BrokerData]
    clusters: dict[str, list[str]]

    def masters(self, cluster: str | None = None) -> list[str]:
        names = self.clusters.get(cluster, []) if cluster else list(self.brokers)
        return sorted(a for n in names if (bd := self.brokers.get(n)) and (a := bd.broker_addrs.get(MASTER_ID)))


def parse_cluster_info(data: dict[str, Any]) -> ClusterInfo:
    brokers = {}
    for name, bd in (data.get("brokerAddrTable") or {}).items():
        addrs = {int(k): str(v) for k, v in (bd.get("brokerAddrs") or {}).items()}
        brokers[str(name)] = BrokerData(str(name), str(bd.get("cluster", "")), addrs)
    clusters = {str(c): sorted(str(n) for n in names) for c, names in (data.get("clusterAddrTable") or {}).items()}
    return ClusterInfo(brokers, clusters)


@dataclass(frozen=True, slots=True)
class BrokerRow:
    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    runtime: dict[str, str]


@dataclass(frozen=True, slots=True)
class QueueProgress:
    mq: MessageQueue
    broker_offset: int
    consumer_offset: int  # -1 when the group never committed on this queue

    @property
    def lag(self) -> int:
        return self.broker_offset - max(self.consumer_offset, 0)


class Admin:
    def __init__(self, namesrv_addr: str | None = None, *, client_config: ClientConfig | None = None) -> None:
        cc = client_config_with(client_config, namesrv_addr, instance_name=f"admin-{time.monotonic_ns()}")
        self.instance = ClientInstance(cc)

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def start(self) -> None:
        # No periodic jobs: an admin session is short; routes are fetched fresh on every call.
        return None

    async def shutdown(self) -> None:
        await self.instance.close()

    close = shutdown

    # ------------------------------------------------------------------ NameServer views

    async def cluster_info(self) -> ClusterInfo:
        data = await self.instance.namesrv_call(self.instance.api.get_cluster_info)
        return parse_cluster_info(data)

    async def topic_list(self) -> list[str]:
        topics: list[str] = await self.instance.namesrv_call(self.instance.api.get_topic_list)
        return topics

    async def topic_route(self, topic: str) -> TopicRouteData:
        return await self.instance.fetch_route(topic)

    async def cluster_list(self) -> list[BrokerRow]:
        """Every broker with its GET_BROKER_RUNTIME_INFO table ({} when it does not answer)."""
        info = await self.cluster_info()
        rows = []
        for cluster, names in sorted(info.clusters.items()):
            for name in names:
                bd = info.brokers.get(name)
                for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                    try:
                        runtime = await self.instance.api.get_broker_runtime_info(addr)
                    except Exception as exc:
                        log.info("runtime info of %s failed: %s", addr, exc)
                        runtime = {}
                    rows.append(BrokerRow(cluster, name, bid, addr, runtime))
        return rows

    # ------------------------------------------------------------------ topics

    async def create_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = Perm.READ | Perm.WRITE,
        order: bool = False,
        multi_tag: bool = False,
    ) -> list[str]:
        """Create or update `topic` on one broker, on every master of `cluster`, or on every master."""
        targets = [broker_addr] if broker_addr is not None else (await self.cluster_info()).masters(cluster)
        if not targets:
            raise ClientError(f"no master broker found{f' in cluster {cluster}' if cluster else ''}")
        header = CreateTopicRequestHeader(
            topic=topic,
            default_topic="TBW102",
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            topic_filter_type="MULTI_TAG" if multi_tag else "SINGLE_TAG",
            topic_sys_flag=0,
            order=order,
        )
        for addr in targets:
            await self.instance.api.create_topic(addr, header)
        return targets

    # ------------------------------------------------------------------ consumers

    async def consumer_progress(self, group: str, topic: str) -> list[QueueProgress]:
        """Per queue: the broker's max offset and the group's committed offset."""
        route = await self.instance.fetch_route(topic)
        await self.instance.update_route(topic)
        rows = []
        for mq in subscribe_queues(topic, route):
            addr = route.master_addr(mq.broker_name) or route.broker_addr(mq.broker_name)
            if addr is None:
                continue
            broker_offset = await self.instance.api.get_max_offset(addr, mq)
            try:
                consumer_offset = await self.instance.api.query_consumer_offset(addr, group, mq, False)
            except QueryNotFound:
                consumer_offset = -1
            rows.append(QueueProgress(mq, broker_offset, consumer_offset))
        return rows

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move `group`'s offsets on `topic` to the first message stored at or after `timestamp_ms`
        on every master (INVOKE_BROKER_TO_RESET_OFFSET); running consumers reposition at once.
        A broker that only answers CONSUMER_NOT_ONLINE gets the offsets set one by one instead."""
        route = await self.instance.fetch_route(topic)
        await self.instance.update_route(topic)
        result: dict[MessageQueue, int] = {}
        for addr in sorted(route.master_addrs()):
            moved = await self.instance.api.reset_offset(addr, topic, group, timestamp_ms, force)
            if moved is None:
                moved = {}
                for mq in subscribe_queues(topic, route):
                    if route.master_addr(mq.broker_name) != addr:
                        continue
                    moved[mq] = await self.instance.api.search_offset(addr, mq, timestamp_ms)
                    await self.instance.api.update_consumer_offset(addr, group, mq, moved[mq])
            result.update(moved)
        return result

    # ------------------------------------------------------------------ messages

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message behind an offsetMsgId (storeHost + commit-log offset): VIEW_MESSAGE_BY_ID."""
        host, port, offset = decode_offset_msg_id(offset_msg_id)
        return await self.instance.api.view_message(f"{host}:{port}", offset)

    async def query_message_by_key(
        self, topic: str, key: str, *, max_num: int = 64, begin: int = 0, end: int | None = None, unique: bool = False
    ) -> list[MessageExt]:
        """Messages of `topic` with KEYS containing `key` (or UNIQ_KEY == key when `unique`), from every master."""
        route = await self.instance.fetch_route(topic)
        end_ms = end if end is not None else int(time.time() * 1000) + 60_000
        found: dict[str, MessageExt] = {}
        for addr in sorted(route.master_addrs()):
            for msg in await self.instance.api.query_message(addr, topic, key, max_num, begin, end_ms, unique):
                found.setdefault(msg.offset_msg_id, msg)
        # The index matches hashes; keep exact matches only.
        if unique:
            result = [m for m in found.values() if m.msg_id == key]
        else:
            result = [m for m in found.values() if key in m.keys]
        return sorted(result, key=lambda m: m.store_timestamp)[:max_num]

    async def query_message_by_uniq_key(self, topic: str, uniq_key: str) -> list[MessageExt]:
        return await self.query_message_by_key(topic, uniq_key, unique=True)
