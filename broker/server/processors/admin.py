"""Admin requests (mqadmin and slave sync): UPDATE_AND_CREATE_TOPIC (17), GET_ALL_TOPIC_CONFIG (21),
GET_BROKER_RUNTIME_INFO (28), VIEW_MESSAGE_BY_ID (33), QUERY_MESSAGE (12), DELETE_TOPIC_IN_BROKER
(215), GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_BROKER_CONFIG (26), INVOKE_BROKER_TO_RESET_OFFSET (222).

Registered by `BrokerController`, which it sees as `AdminContext` (processors/context.py); all synchronous
except topic creation side effects (the re-registration with the NameServers runs in the background).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

import orjson

from broker.protocol.bodies import MessageQueue, ResetOffsetBody, fastjson_dumps
from broker.protocol.codes import CURRENT_VERSION, RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from broker.protocol.message import decode_record
from broker.protocol.properties import Prop
from broker.server.config import effective_properties
from broker.server.errors import RequestError
from broker.server.groups import SubscriptionGroupConfig
from broker.server.store_runtime_figures import runtime_figures
from broker.server.topics import TopicConfig, validate_topic

if TYPE_CHECKING:
    from broker.server.processors.context import AdminContext
    from broker.transport.connection import RemotingConnection

__all__ = ["AdminProcessor"]

log = logging.getLogger(__name__)

BROKER_VERSION_DESC = "V5_3_3"
UNIQUE_QUERY_MAX_NUM = 32  # messageStoreConfig.defaultQueryMaxNum


def _parse_attributes(text: str | None) -> dict[str, str]:
    """`+key=value,+k2=v2` (the attributes header of UPDATE_AND_CREATE_TOPIC) -> {key: value}."""
    attrs: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if item[0] in "+-":
            item = item[1:]
        key, _, value = item.partition("=")
        if key:
            attrs[key] = value
    return attrs


class AdminProcessor:
    def __init__(self, broker: AdminContext) -> None:
        self.broker = broker
        self.store = broker.store
        self._tasks: set[asyncio.Task[None]] = set()

    def update_and_create_topic(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = CreateTopicRequestHeader.from_ext_fields(cmd.ext_fields)
        reason = validate_topic(h.topic)
        if reason is not None:
            raise RequestError(ResponseCode.INVALID_PARAMETER, reason)
        if h.topic == h.default_topic and h.topic != "TBW102":
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, f"the topic[{h.topic}] is conflict with system reserved words"
            )
        if not 0 < h.read_queue_nums <= 1024 or not 0 < h.write_queue_nums <= 1024:
            raise RequestError(ResponseCode.INVALID_PARAMETER, "readQueueNums and writeQueueNums must be in 1..1024")
        tc = TopicConfig(
            topic_name=h.topic,
            read_queue_nums=h.read_queue_nums,
            write_queue_nums=h.write_queue_nums,
            perm=h.perm,
            topic_filter_type=h.topic_filter_type,
            topic_sys_flag=h.topic_sys_flag or 0,
            order=h.order,
            attributes=_parse_attributes(h.attributes),
        )
        self.broker.topics.update(tc)
        return cmd.response(ResponseCode.SUCCESS)

    def delete_topic(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = DeleteTopicRequestHeader.from_ext_fields(cmd.ext_fields)
        if h.topic in self.broker.topics.system_topics:
            raise RequestError(
                ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] is a system topic and cannot be deleted"
            )
        self.broker.topics.delete(h.topic)
        self.broker.offsets.remove_topic(h.topic)
        self.store.delete_topics({h.topic})
        self.broker.trigger_register()
        return cmd.response(ResponseCode.SUCCESS)

    def get_all_topic_config(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, None, body=orjson.dumps(self.broker.topics.wrapper()))

    def get_all_consumer_offset(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, None, body=fastjson_dumps(self.broker.offsets.snapshot()))

    def get_all_delay_offset(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, None, body=fastjson_dumps(self.broker.schedule.snapshot()))

    def get_all_subscription_groups(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, None, body=orjson.dumps(self.broker.groups.snapshot()))

    def update_subscription_group(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            cfg = SubscriptionGroupConfig.from_json(orjson.loads(cmd.body))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"malformed SubscriptionGroupConfig body: {exc}") from None
        self.broker.groups.update(cfg)
        return cmd.response(ResponseCode.SUCCESS)

    def get_broker_config(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        text = "\n".join(f"{k}={v}" for k, v in effective_properties(self.broker.loaded).items()) + "\n"
        version = orjson.dumps(self.broker.topics.data_version.to_json()).decode()
        return cmd.response(ResponseCode.SUCCESS, None, {"version": version}, text.encode())

    def runtime_info(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        b = self.broker
        put_tps, get_tps = b.stats.tps()
        table = {
            "brokerVersionDesc": BROKER_VERSION_DESC,
            "brokerVersion": str(CURRENT_VERSION),
            "bootTimestamp": str(b.stats.start_time),
            "putTps": put_tps,
            "getTransferredTps": get_tps,
            "getFoundTps": get_tps,
            "msgPutTotalTodayNow": str(b.stats.put_total),
            "msgGetTotalTodayNow": str(b.stats.get_total),
            "msgPutTotalTodayMorning": str(b.stats.put_today_morning),
            "msgGetTotalTodayMorning": str(b.stats.get_today_morning),
            "msgPutTotalYesterdayMorning": str(b.stats.put_yesterday_morning),
            "msgGetTotalYesterdayMorning": str(b.stats.get_yesterday_morning),
            "sendThreadPoolQueueSize": str(b.sends_in_flight),
            "sendThreadPoolQueueCapacity": "10000",
            "pullThreadPoolQueueSize": "0",
            "pullThreadPoolQueueCapacity": "100000",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "pageCacheLockTimeMills": "0",
            "earliestMessageTimeStamp": str(self._earliest_message_time()),
            "brokerActive": "true",
            "runtime": f"[ {int((time.time() * 1000 - b.stats.start_time) / 1000)} seconds ]",
            "commitLogMaxOffset": str(self.store.max_phy_offset),
            "commitLogMinOffset": str(self.store.min_phy_offset),
            "pullLongPollingCount": str(b.hold.held_count),
        }
        try:
            table.update({k: str(v) for k, v in self.store.runtime_info().items() if k not in table})
        except Exception:  # runtime figures from the store are best-effort
            log.debug("store runtime_info failed", exc_info=True)
        # disk, flush backlog, delay levels (broker/server/store_runtime_figures.py)
        for key, value in runtime_figures(self.store, b.schedule).items():
            table.setdefault(key, value)
        table.update(b.registrar.runtime_info())  # NameServer registration: readiness (broker/cli/probe.py)
        if b.ha is not None:
            table.update(b.ha.runtime_info())  # replication status (broker/ha/status.py)
        return cmd.response(ResponseCode.SUCCESS, None, body=orjson.dumps({"table": table}))

    def _earliest_message_time(self) -> int:
        if self.store.max_phy_offset <= self.store.min_phy_offset:
            return 0
        msg = self.store.look_message_by_offset(self.store.min_phy_offset)
        return msg.store_timestamp if msg is not None else 0

    def view_message_by_id(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = ViewMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        raw = self.store.select_one_message_by_offset(h.offset)
        if raw is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
        return cmd.response(ResponseCode.SUCCESS, None, body=bytes(raw))

    def query_message(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        # A uniq-key lookup asks for every copy (retries keep the key); Java uses defaultQueryMaxNum.
        max_num = max(h.max_num, UNIQUE_QUERY_MAX_NUM) if h.unique_key_query else h.max_num
        result = self.store.query_message(h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp)
        ext = {
            "indexLastUpdateTimestamp": str(result.index_last_update_timestamp),
            "indexLastUpdatePhyoffset": str(result.index_last_update_phy_offset),
        }
        # The index matches 32-bit hashes of "topic#key" only, and keeps times in whole seconds: keep
        # the records that really carry the key and were stored within the range.
        span = (h.begin_timestamp, h.end_timestamp)
        kept = [v for v in result.buffers if record_matches_key(v, h.topic, h.key, h.unique_key_query, span)]
        body = b"".join(kept)
        result.release()
        if not kept:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", ext)
        return cmd.response(ResponseCode.SUCCESS, None, ext, body)

    def reset_offset(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET (222): move a group's offsets on a topic to a timestamp."""
        h = ResetOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        b = self.broker
        tc = b.topics.get(h.topic)
        if tc is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        if b.groups.find(h.group) is None:
            raise RequestError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{h.group}] not exist")
        queues = [h.queue_id] if h.queue_id >= 0 else list(range(tc.read_queue_nums))
        table: dict[MessageQueue, int] = {}
        for queue_id in queues:
            if h.offset is not None and h.offset >= 0 and h.queue_id >= 0:
                target = h.offset
            else:
                target = self._offset_for_time(h.topic, queue_id, h.timestamp)
            committed = b.offsets.query(h.group, h.topic, queue_id)
            # Without isForce a reset only moves a group back (Java: only when timestamp offset < consumed).
            if h.is_force or committed < 0 or target < committed:
                b.offsets.commit(h.group, h.topic, queue_id, target)
            else:
                target = committed
            table[MessageQueue(h.topic, b.config.broker_name, queue_id)] = target
        body = ResetOffsetBody(table)
        group = b.consumers.get(h.group)
        if group is None or not group.channels:
            # Offsets are moved anyway: consumers that start later read them (mqadmin falls back on 206).
            log.info("reset offsets of %s on %s to %d with no consumer online", h.group, h.topic, h.timestamp)
            remark = f"Consumer not online, so can not reset offset, Group: {h.group} Topic: {h.topic}"
            return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE, remark, body=body.to_json())
        for channel in list(group.channels):
            notify = RemotingCommand(
                code=RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext_fields=dict(cmd.ext_fields), body=body.to_json()
            )
            task = asyncio.get_running_loop().create_task(_tell_consumer(channel, notify))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        log.info("reset offsets of %s on %s to %s; told %d consumer(s)", h.group, h.topic, table, len(group.channels))
        return cmd.response(ResponseCode.SUCCESS, None, body=body.to_json())

    def _offset_for_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """The first offset stored at or after `timestamp`; the end when every message is older."""
        max_offset = self.store.get_max_offset_in_queue(topic, queue_id)
        if max_offset <= 0:
            return 0
        last_phy = self.store.get_commit_log_offset_in_queue(topic, queue_id, max_offset - 1)
        last = self.store.look_message_by_offset(last_phy) if last_phy >= 0 else None
        if last is not None and last.store_timestamp < timestamp:
            return max_offset
        return self.store.get_offset_in_queue_by_time(topic, queue_id, timestamp)


async def _tell_consumer(conn: RemotingConnection, cmd: RemotingCommand) -> None:
    """RESET_CONSUMER_CLIENT_OFFSET (220), one-way as Java sends it; a closing channel is skipped."""
    try:
        await conn.invoke_oneway(cmd)
    except Exception as exc:
        log.info("telling %s to reset its offsets failed: %s", conn.peer, exc)


def record_matches_key(record: memoryview, topic: str, key: str, unique: bool, span: tuple[int, int]) -> bool:
    """Whether a stored record is in `topic`, was stored within `span` (ms, inclusive) and carries
    `key` (its UNIQ_KEY, or one of its KEYS)."""
    msg = decode_record(record)
    if msg.topic != topic or not span[0] <= msg.store_timestamp <= span[1]:
        return False
    if unique:
        return msg.properties.get(Prop.UNIQ_KEY) == key
    return key in msg.keys
