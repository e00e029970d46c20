"""Offset requests: QUERY/UPDATE_CONSUMER_OFFSET (14/15), GET_MAX/MIN_OFFSET (30/31),
SEARCH_OFFSET_BY_TIMESTAMP (29) and GET_EARLIEST_MSG_STORETIME (32).

Registered by `BrokerController`, which hands it the two parts it reads (the offset table and the store);
all synchronous (in-memory tables and ConsumeQueue lookups).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

if TYPE_CHECKING:
    from broker.server.offsets import ConsumerOffsetManager
    from broker.store import MessageStore
    from broker.transport.connection import RemotingConnection

__all__ = ["OffsetProcessor", "query_offset_decision"]

log = logging.getLogger(__name__)


def query_offset_decision(stored: int, min_offset: int, set_zero_if_not_found: bool | None) -> int | None:
    """QUERY_CONSUMER_OFFSET's answer (reference 8.2): an offset, or None for QUERY_NOT_FOUND (22).

    With nothing stored, a young queue (minOffset <= 0: unit 0 still present) answers 0 unless the
    client asked setZeroIfNotFound=false. This is why a new LAST_OFFSET group starts at 0 on a young
    queue with a Java broker, and clients depend on it.
    """
    if stored >= 0:
        return stored
    if set_zero_if_not_found is False:
        return None
    if min_offset <= 0:
        return 0
    return None


class OffsetProcessor:
    def __init__(self, offsets: ConsumerOffsetManager, store: MessageStore) -> None:
        self.offsets = offsets
        self.store = store

    def query_consumer_offset(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        stored = self.offsets.query(h.consumer_group, h.topic, h.queue_id)
        min_offset = self.store.get_min_offset_in_queue(h.topic, h.queue_id) if stored < 0 else 0
        offset = query_offset_decision(stored, min_offset, h.set_zero_if_not_found)
        if offset is None:
            return cmd.response(
                ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
            )
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def update_consumer_offset(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        self.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        return cmd.response(ResponseCode.SUCCESS)

    def get_max_offset(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetMaxOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        offset = self.store.get_max_offset_in_queue(h.topic, h.queue_id)
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def get_min_offset(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetMinOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        offset = self.store.get_min_offset_in_queue(h.topic, h.queue_id)
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def search_offset(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        offset = self.store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp)
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def earliest_msg_storetime(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetEarliestMsgStoretimeRequestHeader.from_ext_fields(cmd.ext_fields)
        ts = self.store.get_earliest_message_time(h.topic, h.queue_id)
        return cmd.response(ResponseCode.SUCCESS, None, {"timestamp": str(ts)})
