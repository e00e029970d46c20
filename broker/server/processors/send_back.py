"""CONSUMER_SEND_MSG_BACK (36): a consumer gives a message back for a later retry.

Registered by `BrokerController`. The original is read at its commit-log offset and re-stored to
`%RETRY%<group>` with delay level `3 + reconsumeTimes` (through SCHEDULE_TOPIC_XXXX, so the schedule
service delivers it when due), or to `%DLQ%<group>` once it has been retried maxReconsumeTimes
times or the client asks for delayLevel < 0 (reference 8.5).
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING

from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import ConsumerSendMsgBackRequestHeader
from broker.protocol.message import MessageExt
from broker.protocol.properties import Prop
from broker.server.errors import RequestError
from broker.server.put_rules import PUT_STATUS_CODES, rewrite_for_delay
from broker.server.topics import DLQ_GROUP_TOPIC_PREFIX, PERM_READ, PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX
from broker.store.results import MessageToStore

if TYPE_CHECKING:
    from broker.server.processors.context import SendBackContext
    from broker.transport.connection import RemotingConnection

__all__ = ["SendBackProcessor", "build_send_back"]

log = logging.getLogger(__name__)

MIN_RETRY_VERSION = 121  # clients below V3_4_9 do not send a meaningful maxReconsumeTimes


def build_send_back(
    original: MessageExt, group: str, delay_level: int, max_reconsume_times: int, retry_queue: int
) -> tuple[MessageToStore, bool]:
    """The message to store for a send-back and whether it goes to the DLQ (pure: no I/O)."""
    props = dict(original.properties)
    props.setdefault(Prop.RETRY_TOPIC, original.topic)
    props.setdefault(Prop.ORIGIN_MESSAGE_ID, original.msg_id)
    props[Prop.WAIT] = "false"
    props.pop(Prop.DELAY, None)
    to_dlq = original.reconsume_times >= max_reconsume_times or delay_level < 0
    if to_dlq:
        topic, queue_id = DLQ_GROUP_TOPIC_PREFIX + group, 0
        props.setdefault(Prop.DLQ_ORIGIN_TOPIC, props[Prop.RETRY_TOPIC])
        props.setdefault(Prop.DLQ_ORIGIN_MESSAGE_ID, props[Prop.ORIGIN_MESSAGE_ID])
    else:
        topic, queue_id = RETRY_GROUP_TOPIC_PREFIX + group, retry_queue
        props[Prop.DELAY] = str(delay_level if delay_level > 0 else 3 + original.reconsume_times)
    msg = MessageToStore.from_stored(
        original, topic=topic, queue_id=queue_id, properties=props, reconsume_times=original.reconsume_times + 1
    )
    return msg, to_dlq


class SendBackProcessor:
    def __init__(self, broker: SendBackContext) -> None:
        self.broker = broker

    async def handle(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        b = self.broker
        h = ConsumerSendMsgBackRequestHeader.from_ext_fields(cmd.ext_fields)
        cfg = b.groups.find(h.group)
        if cfg is None:
            raise RequestError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {h.group}")
        if not b.config.is_master:
            raise RequestError(ResponseCode.SERVICE_NOT_AVAILABLE, "a slave does not accept messages sent back")
        if cfg.retry_queue_nums <= 0:
            return cmd.response(ResponseCode.SUCCESS)  # retries disabled for this group: Java drops it too
        original = b.store.look_message_by_offset(h.offset)
        if original is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        max_times = cfg.retry_max_times
        if cmd.version >= MIN_RETRY_VERSION and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        msg, to_dlq = build_send_back(
            original, h.group, h.delay_level, max_times, random.randrange(cfg.retry_queue_nums)
        )
        perm = PERM_READ | PERM_WRITE
        if to_dlq:
            # Write-only for consumers (perm 2), as RocketMQ creates it: dead letters are not consumed
            # by accident; an operator grants read with updateTopic to replay them.
            b.topics.create_in_send_back(msg.topic, 1, PERM_WRITE)
            log.info(
                "message %s of group %s moved to %s after %d retries",
                original.msg_id,
                h.group,
                msg.topic,
                original.reconsume_times,
            )
        else:
            b.topics.create_in_send_back(msg.topic, cfg.retry_queue_nums, perm)
            rewrite_for_delay(msg, msg.properties, len(b.config.delay_levels_ms))
        result = await b.store.put(msg, report=True)  # a retry, not a send (metrics)
        code = PUT_STATUS_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
        if not result.ok:
            return cmd.response(code, f"storing the message sent back failed: {result.status.name}")
        if to_dlq and b.meters is not None:
            b.meters.dead_lettered(msg.properties.get(Prop.DLQ_ORIGIN_TOPIC) or original.topic, h.group)
        b.schedule_wakeup()
        return cmd.response(ResponseCode.SUCCESS)
