"""Admin requests that report progress and lag: GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208),
GET_BROKER_CONSUME_STATS (317), QUERY_TOPIC_CONSUME_BY_WHO (300), QUERY_CONSUME_TIME_SPAN (303),
CLONE_GROUP_OFFSET (314), VIEW_BROKER_STATS_DATA (315) and GET_TOPIC_CONFIG (351).

mqadmin's topicStatus, consumerProgress, brokerConsumeStats, cloneGroupOffset, statsAll and the
"consumed by whom" part of queryMsgById* send these (DefaultMQAdminExt asks 351 before it trusts a
ConsumeStats, for static topics). All read the topic table, the offset table and the ConsumeQueues;
only 314 writes (consumer offsets). Registered by `BrokerController`.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import orjson

from broker.protocol.admin_bodies import (
    BrokerStatsData,
    BrokerStatsItem,
    ConsumeStatsList,
    GroupList,
    QueueTimeSpan,
    TopicOffset,
    TopicStatsTable,
)
from broker.protocol.admin_headers import (
    CloneGroupOffsetRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetTopicConfigRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from broker.protocol.bodies import ConsumeStats, MessageQueue, OffsetWrapper
from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import (
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from broker.server.errors import RequestError
from broker.server.group_pull_counters import DAY, HOUR, MINUTE

if TYPE_CHECKING:
    from broker.server.clients import ConsumerManager
    from broker.server.config import BrokerConfig
    from broker.server.group_pull_counters import GroupGetStats
    from broker.server.groups import SubscriptionGroupManager
    from broker.server.offsets import ConsumerOffsetManager
    from broker.server.topics import TopicConfig, TopicConfigManager
    from broker.store import MessageStore
    from broker.transport.connection import RemotingConnection

__all__ = ["AdminStatsProcessor"]

log = logging.getLogger(__name__)

# Stats names of BrokerStatsManager that we can answer from the store (statsAll asks these two).
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
_MINUTE, _HOUR, _DAY = 60_000, 3_600_000, 86_400_000


class AdminStatsProcessor:
    """Its parts, not the whole broker: the live config (brokerName, the address), the store, the topic,
    group and offset tables, the online consumers and the pull statistics."""

    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        consumers: ConsumerManager,
        get_stats: GroupGetStats,
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.consumers = consumers
        self.get_stats = get_stats

    # ------------------------------------------------------------------ store views

    def _store_time(self, topic: str, queue_id: int, offset: int) -> int:
        """Store timestamp of the message at `offset` of a queue; 0 when there is none."""
        if offset < 0:
            return 0
        store = self.store
        phy = store.get_commit_log_offset_in_queue(topic, queue_id, offset)
        if phy < 0:
            return 0
        msg = store.look_message_by_offset(phy)
        return msg.store_timestamp if msg is not None else 0

    def _topic(self, topic: str) -> TopicConfig:
        tc = self.topics.get(topic)
        if tc is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        return tc

    def _mq(self, topic: str, queue_id: int) -> MessageQueue:
        return MessageQueue(topic, self.config.broker_name, queue_id)

    def _group_known(self, group: str) -> bool:
        if group in self.groups.table or self.consumers.get(group) is not None:
            return True
        return bool(self.offsets.topics_of_group(group))

    def _subscribed(self, group: str, topic: str) -> bool:
        """RocketMQ's filter: an online group that subscribes to anything only counts its own topics."""
        g = self.consumers.get(group)
        return g is None or not g.subscriptions or topic in g.subscriptions

    def _offsets(self, group: str, topic: str, queue_nums: int) -> ConsumeStats:
        store, offsets, pulls = self.store, self.offsets, self.get_stats
        table: dict[MessageQueue, OffsetWrapper] = {}
        for queue_id in range(queue_nums):
            broker_offset = max(store.get_max_offset_in_queue(topic, queue_id), 0)
            consumer_offset = max(offsets.query(group, topic, queue_id), 0)
            table[self._mq(topic, queue_id)] = OffsetWrapper(
                broker_offset=broker_offset,
                consumer_offset=consumer_offset,
                # how far the group has read (since this broker started): pulled but not committed is in flight
                pull_offset=max(consumer_offset, pulls.pull_offset(group, topic, queue_id)),
                last_timestamp=self._store_time(topic, queue_id, consumer_offset - 1),
            )
        # consumeTps: what the group pulled from the topic per second over the last minute (GROUP_GET_NUMS)
        return ConsumeStats(table, pulls.tps(topic, group))

    def _count_since(self, topic: str, queue_nums: int, since_ms: int) -> int:
        """Messages stored in `topic` at or after `since_ms` (ConsumeQueue positions, no counters)."""
        store = self.store
        total = 0
        for queue_id in range(queue_nums):
            max_offset = store.get_max_offset_in_queue(topic, queue_id)
            if max_offset <= 0 or self._store_time(topic, queue_id, max_offset - 1) < since_ms:
                continue
            first = max(store.get_offset_in_queue_by_time(topic, queue_id, since_ms), 0)
            if self._store_time(topic, queue_id, first) < since_ms:
                first += 1  # the lookup answers the last message before `since_ms` when it falls between two
            total += max(max_offset - first, 0)
        return total

    # ------------------------------------------------------------------ 202

    def topic_stats(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetTopicStatsInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        tc = self._topic(h.topic)
        store = self.store
        table: dict[MessageQueue, TopicOffset] = {}
        for queue_id in range(max(tc.read_queue_nums, tc.write_queue_nums)):
            low = max(store.get_min_offset_in_queue(h.topic, queue_id), 0)
            high = max(store.get_max_offset_in_queue(h.topic, queue_id), 0)
            last = self._store_time(h.topic, queue_id, high - 1) if high > 0 else 0
            table[self._mq(h.topic, queue_id)] = TopicOffset(low, high, last)
        now = int(time.time() * 1000)
        tps = self._count_since(h.topic, tc.write_queue_nums, now - _MINUTE) / 60
        return cmd.response(ResponseCode.SUCCESS, None, body=TopicStatsTable(table, tps).to_json())

    # ------------------------------------------------------------------ 208

    def consume_stats(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumeStatsRequestHeader.from_ext_fields(cmd.ext_fields)
        group = h.consumer_group
        listed = [t for t in (h.topic_list or "").split(";") if t]
        if not self._group_known(group):
            raise RequestError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] not exist")
        if listed:
            topics = sorted(set(listed))  # an explicit list skips the subscription check, as in RocketMQ
        else:
            if h.topic:
                self._topic(h.topic)
                candidates = {h.topic}
            else:
                candidates = self.offsets.topics_of_group(group)
            topics = sorted(t for t in candidates if self._subscribed(group, t))
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for topic in topics:
            tc = self.topics.get(topic)
            if tc is not None:
                stats = self._offsets(group, topic, tc.read_queue_nums)
                table.update(stats.offset_table)
                tps += stats.consume_tps
        return cmd.response(ResponseCode.SUCCESS, None, body=ConsumeStats(table, tps).to_json())

    # ------------------------------------------------------------------ 317

    def broker_consume_stats(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumeStatsInBrokerHeader.from_ext_fields(cmd.ext_fields)
        groups: list[tuple[str, list[ConsumeStats]]] = []
        total_diff = total_inflight = 0
        for group in sorted(self.groups.table):
            per_topic: list[ConsumeStats] = []
            for topic in sorted(self.offsets.topics_of_group(group)):
                tc = self.topics.get(topic)
                if tc is None or (h.is_order and not tc.order) or not self._subscribed(group, topic):
                    continue
                stats = self._offsets(group, topic, tc.write_queue_nums)
                total_diff += sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values())
                total_inflight += sum(w.pull_offset - w.consumer_offset for w in stats.offset_table.values())
                per_topic.append(stats)
            groups.append((group, per_topic))
        body = ConsumeStatsList(self.config.broker_addr, groups, total_diff, total_inflight)
        return cmd.response(ResponseCode.SUCCESS, None, body=body.to_json())

    # ------------------------------------------------------------------ 300, 303

    def consume_by_who(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = QueryTopicConsumeByWhoRequestHeader.from_ext_fields(cmd.ext_fields)
        online = {name for name, g in self.consumers.groups.items() if h.topic in g.subscriptions}
        groups = frozenset(online | self.offsets.groups_of_topic(h.topic))
        return cmd.response(ResponseCode.SUCCESS, None, body=GroupList(groups).to_json())

    def consume_time_span(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = QueryConsumeTimeSpanRequestHeader.from_ext_fields(cmd.ext_fields)
        tc = self._topic(h.topic)
        store = self.store
        now = int(time.time() * 1000)
        spans = []
        for queue_id in range(tc.write_queue_nums):
            min_time = store.get_earliest_message_time(h.topic, queue_id)
            max_offset = store.get_max_offset_in_queue(h.topic, queue_id)
            consumed = self.offsets.query(h.group, h.topic, queue_id)
            consume_time = self._store_time(h.topic, queue_id, consumed - 1) if consumed > 0 else min_time
            delay = now - self._store_time(h.topic, queue_id, consumed) if 0 <= consumed < max_offset else 0
            spans.append(
                QueueTimeSpan(
                    self._mq(h.topic, queue_id),
                    min_time,
                    self._store_time(h.topic, queue_id, max_offset - 1),
                    consume_time,
                    delay,
                )
            )
        body = orjson.dumps({"consumeTimeSpanSet": [s.to_obj() for s in spans]})
        return cmd.response(ResponseCode.SUCCESS, None, body=body)

    # ------------------------------------------------------------------ 314

    def clone_group_offset(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = CloneGroupOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        topics = {h.topic} if h.topic else self.offsets.topics_of_group(h.src_group)
        cloned = []
        for topic in sorted(topics):
            if self.topics.get(topic) is None:
                log.warning("clone offsets of %s: topic %s does not exist here", h.src_group, topic)
                continue
            if not h.offline and not self._subscribed(h.src_group, topic):
                continue
            if self.offsets.clone(h.src_group, h.dest_group, topic):
                cloned.append(topic)
        log.info("cloned offsets of %s to %s on %s", h.src_group, h.dest_group, cloned)
        return cmd.response(ResponseCode.SUCCESS)

    # ------------------------------------------------------------------ 315

    def broker_stats_data(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        """TOPIC_PUT_NUMS: messages put into a topic over the last minute, hour and day, counted from the
        ConsumeQueues (they survive restarts, unlike RocketMQ's in-memory counters). GROUP_GET_NUMS and
        GROUP_GET_SIZE (key `topic@group`): messages and bytes the group pulled from the topic, from the
        always-on counters (since this broker started); avgpt is per pull, as RocketMQ's StatsItem has it."""
        h = ViewBrokerStatsDataRequestHeader.from_ext_fields(cmd.ext_fields)
        if h.stats_name in (GROUP_GET_NUMS, GROUP_GET_SIZE):
            return cmd.response(ResponseCode.SUCCESS, None, body=self._group_get(h.stats_name, h.stats_key).to_json())
        tc = self.topics.get(h.stats_key) if h.stats_name == TOPIC_PUT_NUMS else None
        if tc is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"The stats <{h.stats_name}> <{h.stats_key}> not exist")
        now = int(time.time() * 1000)
        items = []
        for window in (_MINUTE, _HOUR, _DAY):
            count = self._count_since(h.stats_key, tc.write_queue_nums, now - window)
            items.append(BrokerStatsItem(count, count * 1000 / window, 0.0))
        return cmd.response(ResponseCode.SUCCESS, None, body=BrokerStatsData(*items).to_json())

    def _group_get(self, name: str, key: str) -> BrokerStatsData:
        """A known topic and group that pulled nothing (yet) read as zeros; anything else does not exist."""
        topic, sep, group = key.rpartition("@")
        if not sep or self.topics.get(topic) is None or not self._group_known(group):
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        items = []
        for span in (MINUTE, HOUR, DAY):
            messages, nbytes, pulls, seconds = self.get_stats.window(key, span)
            value = messages if name == GROUP_GET_NUMS else nbytes
            items.append(
                BrokerStatsItem(value, value / seconds if seconds > 0 else 0.0, value / pulls if pulls else 0.0)
            )
        return BrokerStatsData(*items)

    # ------------------------------------------------------------------ 351

    def topic_config(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetTopicConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        tc = self.topics.get(h.topic)
        if tc is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {h.topic}")
        # TopicConfigAndQueueMapping: the topic's config; no mappingDetail (we have no static topics).
        return cmd.response(ResponseCode.SUCCESS, None, body=orjson.dumps(tc.to_json()))
