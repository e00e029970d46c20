"""The admin client: what mqadmin needs from the cluster (topics, routes, clusters, progress, messages).

broker.cli's mqadmin (and tests) create `Admin(namesrv_addr)`, `await start()`, call the methods
and `await shutdown()`. Every method is one or a few remoting requests: UPDATE_AND_CREATE_TOPIC to
each master, GET_BROKER_CLUSTER_INFO / GET_ALL_TOPIC_LIST / GET_ROUTEINFO from the NameServer,
GET_BROKER_RUNTIME_INFO, GET_MAX_OFFSET + QUERY_CONSUMER_OFFSET for progress, VIEW_MESSAGE_BY_ID and
QUERY_MESSAGE for message lookups, INVOKE_BROKER_TO_RESET_OFFSET for resetOffsetByTime.

What the Kubernetes operator calls over the wire: `wipe_write_perm` / `add_write_perm` on every NameServer,
`copy_metadata` from one broker group to a new one, `consumer_lag` and `replication_lag` of a group, and
`runtime_info` of one broker (the requests and pure parts live beside this module: requests, changes, views,
auth, metadata_copy, lag and broker_runtime_info).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from broker.client.admin import changes, requests
from broker.client.admin.broker_runtime_info import BrokerRuntimeInfo
from broker.client.admin.lag import SCHEDULE_TOPIC, ConsumerLag, ReplicationLag, SlaveLag, consumer_lag, unread_queues
from broker.client.admin.metadata_copy import CopyResult, broker_made_topics, plan_copy
from broker.client.config import ClientConfig, client_config_with
from broker.client.errors import ClientError, QueryNotFound, RocketError
from broker.client.instance import ClientInstance
from broker.client.message import MessageExt, MessageQueue
from broker.client.route import (
    MASTER_ID,
    ClusterInfo,
    Perm,
    TopicRouteData,
    parse_cluster_info,
    subscribe_queues,
)
from broker.protocol.bodies import TopicConfig
from broker.protocol.headers import CreateTopicRequestHeader
from broker.protocol.message import decode_offset_msg_id
from broker.transport.errors import RemotingError

__all__ = ["Admin", "BrokerRow", "QueueProgress"]

# GET_MAX_OFFSET requests in flight at once while measuring a group's consumer lag
MAX_OFFSET_CONCURRENCY = 32

log = logging.getLogger(__name__)


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

    async def cluster_info_per_nameserver(self) -> dict[str, ClusterInfo]:
        """Each NameServer's own table, by address; those that do not answer are left out.

        Brokers register with every NameServer separately, so for a while after a broker or a NameServer starts
        the tables differ, and a client asks just one of them.
        """

        async def ask(addr: str) -> tuple[str, ClusterInfo | None]:
            try:
                return addr, parse_cluster_info(await self.instance.api.get_cluster_info(addr))
            except (RemotingError, RocketError) as exc:
                log.info("NameServer %s did not give its cluster table: %s", addr, exc)
                return addr, None

        answers = await asyncio.gather(*(ask(addr) for addr in self.instance.namesrvs))
        return {addr: info for addr, info in answers if info is not None}

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
        header = _create_header(
            TopicConfig(
                topic,
                read_queue_nums,
                write_queue_nums,
                perm,
                topic_filter_type="MULTI_TAG" if multi_tag else "SINGLE_TAG",
                order=order,
            )
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

    async def group_exists(self, group: str) -> bool:
        """Whether any master knows consumer group `group`: its subscription config (made when a consumer of
        the group first heartbeats) or committed offsets. Asking creates nothing (a pull or a reset would,
        where autoCreateSubscriptionGroup is on)."""
        for addr in (await self.cluster_info()).masters():
            if group in await requests.get_all_subscription_groups(self.instance.api, addr):
                return True
            if any(g == group for _topic, g in await requests.get_all_consumer_offsets(self.instance.api, addr)):
                return True
        return False

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

    # ------------------------------------------------------------------ operator: write permission

    async def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """Stop routing writes to `broker_name` on every NameServer (WIPE_WRITE_PERM_OF_BROKER).

        Returns {NameServer: topics changed}. Raises ClientError naming the NameServers that failed after
        trying all of them: one NameServer left writable still sends producers to the group.
        """
        api = self.instance.api
        return await self._on_every_namesrv(
            lambda addr: requests.wipe_write_perm(api, addr, broker_name), f"wipe write perm of {broker_name}"
        )

    async def add_write_perm(self, broker_name: str) -> dict[str, int]:
        """Route writes to `broker_name` again on every NameServer (ADD_WRITE_PERM_OF_BROKER)."""
        api = self.instance.api
        return await self._on_every_namesrv(
            lambda addr: requests.add_write_perm(api, addr, broker_name), f"add write perm of {broker_name}"
        )

    async def _on_every_namesrv(self, call: Callable[[str], Awaitable[int]], what: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        failures: dict[str, str] = {}
        for addr in self.instance.namesrvs:
            try:
                counts[addr] = await call(addr)
            except (RocketError, RemotingError) as exc:
                failures[addr] = f"{type(exc).__name__}: {exc}"
        if failures:
            raise ClientError(f"{what} failed on {failures} (done on {sorted(counts)})")
        return counts

    # ------------------------------------------------------------------ operator: broker state

    async def runtime_info(self, addr: str) -> BrokerRuntimeInfo:
        """GET_BROKER_RUNTIME_INFO of the broker at `addr`."""
        return BrokerRuntimeInfo(addr, await self.instance.api.get_broker_runtime_info(addr))

    async def broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG of the broker at `addr`: every effective key=value, as the broker holds it now."""
        return await requests.get_broker_config(self.instance.api, addr)

    async def update_broker_config(self, addr: str, props: Mapping[str, str]) -> None:
        """UPDATE_BROKER_CONFIG to the broker at `addr`; ClientError naming the key it refuses."""
        await changes.update_broker_config(self.instance.api, addr, props)

    async def master_addr(self, broker_name: str) -> str:
        """The master address the NameServer holds for `broker_name`; ClientError when it has none."""
        bd = (await self.cluster_info()).brokers.get(broker_name)
        addr = bd.broker_addrs.get(MASTER_ID) if bd else None
        if addr is None:
            raise ClientError(f"no master of broker group {broker_name} is registered with the NameServer")
        return addr

    async def copy_metadata(self, source_addr: str, target_addr: str) -> CopyResult:
        """Create on the target broker every topic and subscription group of the source broker that the
        target lacks or holds differently; what either broker makes itself is skipped (see metadata_copy).
        Idempotent: run again, it creates nothing."""
        api = self.instance.api
        src_topics, dst_topics, src_groups, dst_groups, src_conf, dst_conf = await asyncio.gather(
            requests.get_all_topic_configs(api, source_addr),
            requests.get_all_topic_configs(api, target_addr),
            requests.get_all_subscription_groups(api, source_addr),
            requests.get_all_subscription_groups(api, target_addr),
            requests.get_broker_config(api, source_addr),
            requests.get_broker_config(api, target_addr),
        )
        skip = broker_made_topics(src_conf) | broker_made_topics(dst_conf)
        plan = plan_copy(src_topics, dst_topics, src_groups, dst_groups, skip)
        result = CopyResult(
            source_addr,
            target_addr,
            unchanged_topics=plan.unchanged_topics,
            unchanged_groups=plan.unchanged_groups,
            skipped_topics=plan.skipped_topics,
            skipped_groups=plan.skipped_groups,
        )
        for tc in plan.topics:
            await api.create_topic(target_addr, _create_header(tc))
            result.created_topics.append(tc.topic_name)
        for group in plan.groups:
            await requests.create_subscription_group(api, target_addr, group)
            result.created_groups.append(str(group["groupName"]))
        log.info(
            "copied metadata %s -> %s: %d topic(s), %d group(s) created, %d + %d already there",
            source_addr,
            target_addr,
            len(result.created_topics),
            len(result.created_groups),
            len(plan.unchanged_topics),
            len(plan.unchanged_groups),
        )
        return result

    async def consumer_lag(self, broker_name: str, *, addr: str | None = None) -> ConsumerLag:
        """Messages not yet consumed on `broker_name`: per queue and group, every committed offset of its master
        (GET_ALL_CONSUMER_OFFSET) against its queue's max offset (GET_MAX_OFFSET); and the messages no group
        reads (`ConsumerLag.unread`): queues of the master's topics (GET_ALL_TOPIC_CONFIG, less the topics a
        broker makes itself) without any committed offset, between their min and max offsets
        (GET_MIN_OFFSET), and delayed messages not yet delivered (GET_ALL_DELAY_OFFSET). Our broker has no
        GET_CONSUME_STATS (208); these answer the same question. `addr` skips the NameServer lookup."""
        api = self.instance.api
        master = addr or await self.master_addr(broker_name)
        offsets, topics, config, delay_offsets = await asyncio.gather(
            requests.get_all_consumer_offsets(api, master),
            requests.get_all_topic_configs(api, master),
            requests.get_broker_config(api, master),
            requests.get_all_delay_offsets(api, master),
        )
        made = broker_made_topics(config) - {SCHEDULE_TOPIC}
        # the broker's own readers (pop revive, transaction checks) commit offsets on its own topics: not a lag
        offsets = {key: table for key, table in offsets.items() if key[0] not in made}
        held = sorted(
            (name, queue_id)
            for name, tc in topics.items()
            if name not in made
            for queue_id in range(max(tc.read_queue_nums, tc.write_queue_nums))
        )
        lagging = sorted({(topic, queue_id) for (topic, _group), table in offsets.items() for queue_id in table})
        limit = asyncio.Semaphore(MAX_OFFSET_CONCURRENCY)

        async def bound(topic: str, queue_id: int, lowest: bool) -> int:
            queue = MessageQueue(topic, broker_name, queue_id)
            async with limit:
                return await (api.get_min_offset if lowest else api.get_max_offset)(master, queue)

        every = sorted(set(lagging) | set(held))
        maxes = dict(zip(every, await asyncio.gather(*(bound(t, q, lowest=False) for t, q in every)), strict=True))
        nonempty = [q for q in held if maxes[q] > 0]
        mins = await asyncio.gather(*(bound(t, q, lowest=True) for t, q in nonempty))
        ranges = {q: (low, maxes[q]) for q, low in zip(nonempty, mins, strict=True)}
        unread = unread_queues(ranges, offsets, delay_offsets)
        return consumer_lag(broker_name, master, offsets, {q: maxes[q] for q in lagging}, unread)

    async def replication_lag(self, broker_name: str) -> ReplicationLag:
        """Bytes of CommitLog each registered slave of `broker_name` is behind its master (runtime info of
        each; the master is read first, so a slave that moves on meanwhile shows less lag, never more).
        A slave the NameServer does not list (stopped, not registered yet) is not in the result; one whose
        data diverged has no lag (None); `SlaveLag.attached` says whether this master serves the slave's host
        a replication connection now."""
        bd = (await self.cluster_info()).brokers.get(broker_name)
        master = bd.broker_addrs.get(MASTER_ID) if bd else None
        if bd is None or master is None:
            raise ClientError(f"no master of broker group {broker_name} is registered with the NameServer")
        master_info = await self.runtime_info(master)
        master_max = master_info.commit_log_max_offset
        if master_max is None:
            raise ClientError(f"master {master} of {broker_name} does not report commitLogMaxOffset")
        # a slave still attached to a master that is gone (its session not timed out yet) replicates nothing
        attached = master_info.ha_slave_hosts if "haSlaveAckOffsets" in master_info else None
        slaves = []
        for broker_id, addr in sorted(bd.broker_addrs.items()):
            if broker_id == MASTER_ID:
                continue
            diverged = None
            # the slave's connection comes from its HA address's host, its remoting address's when it has none
            hosts = {addr.rsplit(":", 1)[0]}
            try:
                info = await self.runtime_info(addr)
                offset, diverged = info.commit_log_max_offset, info.ha_diverged
                hosts |= {info.ha_server_host} if info.ha_server_host else set()
            except (RocketError, RemotingError) as exc:
                log.info("runtime info of slave %s failed: %s", addr, exc)
                offset = None
            lag = None if offset is None or diverged else max(0, master_max - offset)
            serving = None if attached is None else bool(hosts & attached)
            slaves.append(SlaveLag(broker_id, addr, offset, lag, diverged, serving))
        return ReplicationLag(broker_name, master, master_max, tuple(slaves))


def _create_header(tc: TopicConfig) -> CreateTopicRequestHeader:
    """UPDATE_AND_CREATE_TOPIC's header for a topic config (attributes as `+key=value,...`), checked as the
    broker will parse it."""
    ext = {
        "topic": tc.topic_name,
        "defaultTopic": "TBW102",
        "readQueueNums": str(tc.read_queue_nums),
        "writeQueueNums": str(tc.write_queue_nums),
        "perm": str(tc.perm),
        "topicFilterType": tc.topic_filter_type,
        "topicSysFlag": str(tc.topic_sys_flag),
        "order": "true" if tc.order else "false",
    }
    if tc.attributes:
        ext["attributes"] = ",".join(f"+{k}={v}" for k, v in sorted(tc.attributes.items()))
    return CreateTopicRequestHeader.from_ext_fields(ext)
