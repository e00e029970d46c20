"""One method per remoting request the SDK sends (Java's MQClientAPIImpl), over a RemotingClient.

The client instance, producer, consumers and admin call these; each builds the typed header,
invokes the broker or NameServer, maps a failure code to a broker.client.errors exception and
parses the reply. Body builders and reply parsers are module functions so tests check them by
table without a socket.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

import orjson

from broker.client.errors import for_code
from broker.client.message import (
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from broker.client.route import TopicRouteData, parse_route
from broker.client.subscription import SubscriptionJson
from broker.protocol.bodies import ResetOffsetBody
from broker.protocol.bodies import fastjson_loads as loads
from broker.protocol.codes import LanguageCode, RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from broker.protocol.message import SysFlag, decode_records
from broker.protocol.reply import is_reply
from broker.transport.client import RemotingClient

__all__ = [
    "SEND_STATUS_BY_CODE",
    "ClientAPI",
    "ConsumerData",
    "PullSysFlag",
    "consumer_id_list",
    "decode_pulled",
    "heartbeat_body",
    "lock_body",
    "pull_result",
    "send_code",
    "send_result",
]

log = logging.getLogger(__name__)

SEND_STATUS_BY_CODE = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
_PULL_STATUS_BY_CODE = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


class PullSysFlag:
    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8
    LITE_PULL = 0x10


def _request(code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code=code, ext_fields=ext or {}, body=body, language=LanguageCode.PYTHON)


def _check(response: RemotingCommand, addr: str, ok: Iterable[int] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
    if response.code not in ok:
        raise for_code(response.code, response.remark, addr)
    return response


# ---------------------------------------------------------------------------------------- pure parts


def send_code(header: SendMessageRequestHeader) -> int:
    """The request code of a send: batch, reply (MSG_TYPE=reply, which the broker pushes to its
    requester) or an ordinary SEND_MESSAGE_V2."""
    if header.batch:
        return RequestCode.SEND_BATCH_MESSAGE
    if is_reply(header.properties):
        return RequestCode.SEND_REPLY_MESSAGE_V2
    return RequestCode.SEND_MESSAGE_V2


def send_result(response: RemotingCommand, mq: MessageQueue, uniq_keys: Sequence[str], addr: str) -> SendResult:
    """SendResult from a send reply; codes other than 0/10/11/12 raise their exception."""
    status = SEND_STATUS_BY_CODE.get(response.code)  # type: ignore[call-overload]
    if status is None:
        raise for_code(response.code, response.remark, addr)
    header = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
    return SendResult(
        status=status,
        msg_id=",".join(uniq_keys) if uniq_keys else header.msg_id,
        offset_msg_id=header.msg_id,
        message_queue=MessageQueue(mq.topic, mq.broker_name, header.queue_id),
        queue_offset=header.queue_offset,
        transaction_id=header.transaction_id,
        region_id=header.msg_region,
    )


def decode_pulled(body: bytes) -> list[MessageExt]:
    """Records of a pull/query body with bodies inflated, so listeners see what was sent."""
    msgs = list(decode_records(body))
    for msg in msgs:
        if msg.sys_flag & SysFlag.COMPRESSED:
            try:
                msg.body = zlib.decompress(msg.body)
                msg.sys_flag &= ~(SysFlag.COMPRESSED | SysFlag.COMPRESSION_TYPE_MASK)
            except zlib.error as exc:
                log.warning("message %s has a compressed flag but does not inflate: %s", msg.msg_id, exc)
    return msgs


def pull_result(response: RemotingCommand, addr: str) -> PullResult:
    status = _PULL_STATUS_BY_CODE.get(response.code)  # type: ignore[call-overload]
    if status is None:
        raise for_code(response.code, response.remark, addr)
    header = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
    msgs = decode_pulled(response.body) if status is PullStatus.FOUND and response.body else []
    return PullResult(
        status=status,
        next_begin_offset=header.next_begin_offset,
        min_offset=header.min_offset,
        max_offset=header.max_offset,
        messages=msgs,
        suggest_which_broker_id=header.suggest_which_broker_id,
    )


class ConsumerData(TypedDict):
    """One consumer group's entry in the heartbeat (Java's ConsumerData), enums as their names."""

    consumeFromWhere: str
    consumeType: str
    groupName: str
    messageModel: str
    subscriptionDataSet: list[SubscriptionJson]
    unitMode: bool


def heartbeat_body(client_id: str, producer_groups: Iterable[str], consumers: Iterable[ConsumerData]) -> bytes:
    """HeartbeatData JSON with Java's string enums."""
    return orjson.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": list(consumers),
            "producerDataSet": [{"groupName": g} for g in producer_groups],
        }
    )


def lock_body(group: str, client_id: str, mqs: Iterable[MessageQueue]) -> bytes:
    return orjson.dumps(
        {
            "clientId": client_id,
            "consumerGroup": group,
            "mqSet": [mq.to_json() for mq in mqs],
            "onlyThisBroker": False,
        }
    )


def consumer_id_list(body: bytes) -> list[str]:
    data = loads(body) if body else {}
    return [str(c) for c in data.get("consumerIdList") or []]


# ---------------------------------------------------------------------------------------- requests


class ClientAPI:
    """Typed requests over one RemotingClient (one connection per address)."""

    def __init__(self, remoting: RemotingClient, timeout: float = 3.0) -> None:
        self.remoting = remoting
        self.timeout = timeout

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        return await self.remoting.invoke(addr, cmd, self.timeout if timeout is None else timeout)

    # --- NameServer

    async def get_route(self, addr: str, topic: str) -> TopicRouteData:
        header = GetRouteInfoRequestHeader(topic=topic, accept_standard_json_only=True)
        resp = _check(
            await self.invoke(addr, _request(RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields())), addr
        )
        return parse_route(resp.body)

    async def get_cluster_info(self, addr: str) -> dict[str, Any]:
        resp = _check(await self.invoke(addr, _request(RequestCode.GET_BROKER_CLUSTER_INFO)), addr)
        data: dict[str, Any] = loads(resp.body) if resp.body else {}
        return data

    async def get_topic_list(self, addr: str) -> list[str]:
        resp = _check(await self.invoke(addr, _request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)), addr)
        data = loads(resp.body) if resp.body else {}
        return sorted(str(t) for t in data.get("topicList") or [])

    # --- producer

    async def send(
        self,
        addr: str,
        mq: MessageQueue,
        header: SendMessageRequestHeader,
        body: bytes,
        uniq_keys: Sequence[str],
        timeout: float,
    ) -> SendResult:
        resp = await self.invoke(addr, _request(send_code(header), header.to_v2_ext_fields(), body), timeout)
        return send_result(resp, mq, uniq_keys, addr)

    async def send_oneway(self, addr: str, header: SendMessageRequestHeader, body: bytes) -> None:
        await self.remoting.invoke_oneway(addr, _request(send_code(header), header.to_v2_ext_fields(), body))

    async def heartbeat(self, addr: str, body: bytes) -> RemotingCommand:
        return _check(await self.invoke(addr, _request(RequestCode.HEART_BEAT, body=body)), addr)

    async def check_client_config(self, addr: str, client_id: str, group: str, subscription: SubscriptionJson) -> None:
        body = orjson.dumps({"clientId": client_id, "group": group, "subscriptionData": subscription})
        _check(await self.invoke(addr, _request(RequestCode.CHECK_CLIENT_CONFIG, body=body)), addr)

    async def unregister_client(
        self, addr: str, client_id: str, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        header = UnregisterClientRequestHeader(
            client_id=client_id, producer_group=producer_group, consumer_group=consumer_group
        )
        _check(await self.invoke(addr, _request(RequestCode.UNREGISTER_CLIENT, header.to_ext_fields())), addr)

    # --- consumer

    async def pull(self, addr: str, request: RemotingCommand, timeout: float) -> PullResult:
        """Send a PULL_MESSAGE request (broker.client.pull_request builds it) and decode the answer."""
        resp = await self.invoke(addr, request, timeout)
        return pull_result(resp, addr)

    async def query_consumer_offset(
        self, addr: str, group: str, mq: MessageQueue, set_zero_if_not_found: bool | None = None
    ) -> int:
        """Committed offset; QueryNotFound when the group has none for this queue. Brokers answer 0
        instead for a young queue unless `set_zero_if_not_found=False` (reference 8.2)."""
        header = QueryConsumerOffsetRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, set_zero_if_not_found=set_zero_if_not_found
        )
        resp = _check(
            await self.invoke(addr, _request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields())), addr
        )
        return int(resp.ext_fields["offset"])

    async def update_consumer_offset_oneway(self, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        header = UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, commit_offset=offset
        )
        await self.remoting.invoke_oneway(addr, _request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields()))

    async def update_consumer_offset(self, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        header = UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, commit_offset=offset
        )
        _check(await self.invoke(addr, _request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())), addr)

    # --- POP (broker.client.pop parses the replies)

    async def pop(self, addr: str, ext: dict[str, str], timeout: float) -> RemotingCommand | None:
        """POP_MESSAGE: the reply when it found messages, None when the long poll ended with none."""
        resp = await self.invoke(addr, _request(RequestCode.POP_MESSAGE, ext), timeout)
        if resp.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.NO_MESSAGE, ResponseCode.PULL_NOT_FOUND):
            return None
        return _check(resp, addr)

    async def ack_message(self, addr: str, ext: dict[str, str]) -> None:
        _check(await self.invoke(addr, _request(RequestCode.ACK_MESSAGE, ext)), addr)

    async def change_invisible_time(self, addr: str, ext: dict[str, str]) -> dict[str, str]:
        """CHANGE_MESSAGE_INVISIBLETIME: the reply's popTime, invisibleTime and reviveQid."""
        resp = _check(await self.invoke(addr, _request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ext)), addr)
        return resp.ext_fields

    async def get_max_offset(self, addr: str, mq: MessageQueue) -> int:
        header = GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        resp = _check(await self.invoke(addr, _request(RequestCode.GET_MAX_OFFSET, header.to_ext_fields())), addr)
        return int(resp.ext_fields["offset"])

    async def get_min_offset(self, addr: str, mq: MessageQueue) -> int:
        header = GetMinOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        resp = _check(await self.invoke(addr, _request(RequestCode.GET_MIN_OFFSET, header.to_ext_fields())), addr)
        return int(resp.ext_fields["offset"])

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int) -> int:
        header = SearchOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp_ms)
        resp = _check(
            await self.invoke(addr, _request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext_fields())), addr
        )
        return int(resp.ext_fields["offset"])

    async def get_earliest_msg_storetime(self, addr: str, mq: MessageQueue) -> int:
        header = GetEarliestMsgStoretimeRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        cmd = _request(RequestCode.GET_EARLIEST_MSG_STORETIME, header.to_ext_fields())
        resp = _check(await self.invoke(addr, cmd), addr)
        return int(resp.ext_fields["timestamp"])

    async def get_consumer_list(self, addr: str, group: str) -> list[str]:
        header = GetConsumerListByGroupRequestHeader(consumer_group=group)
        cmd = _request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, header.to_ext_fields())
        resp = _check(await self.invoke(addr, cmd), addr)
        return consumer_id_list(resp.body)

    async def lock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> set[MessageQueue]:
        cmd = _request(RequestCode.LOCK_BATCH_MQ, body=lock_body(group, client_id, mqs))
        resp = _check(await self.invoke(addr, cmd), addr)
        data = loads(resp.body) if resp.body else {}
        return {MessageQueue.from_json(m) for m in data.get("lockOKMQSet") or []}

    async def unlock_batch_mq(self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> None:
        cmd = _request(RequestCode.UNLOCK_BATCH_MQ, body=lock_body(group, client_id, mqs))
        await self.remoting.invoke_oneway(addr, cmd)

    async def consumer_send_msg_back(
        self, addr: str, msg: MessageExt, group: str, delay_level: int, max_reconsume_times: int
    ) -> None:
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.topic,
            max_reconsume_times=max_reconsume_times,
        )
        cmd = _request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())
        _check(await self.invoke(addr, cmd), addr)

    # --- admin

    async def create_topic(self, addr: str, header: CreateTopicRequestHeader) -> None:
        cmd = _request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
        _check(await self.invoke(addr, cmd, max(self.timeout, 5.0)), addr)

    async def reset_offset(
        self, addr: str, topic: str, group: str, timestamp_ms: int, force: bool = True
    ) -> dict[MessageQueue, int] | None:
        """INVOKE_BROKER_TO_RESET_OFFSET (222): the offsets the broker moved the group to, or None
        when it answers CONSUMER_NOT_ONLINE without them (a Java broker; the caller moves them)."""
        header = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp_ms, is_force=force)
        cmd = _request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header.to_ext_fields())
        resp = _check(await self.invoke(addr, cmd), addr, (ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
        if not resp.body:
            return None
        body = ResetOffsetBody.from_json(resp.body)
        return {MessageQueue(mq.topic, mq.broker_name, mq.queue_id): off for mq, off in body.offset_table.items()}

    async def get_broker_runtime_info(self, addr: str) -> dict[str, str]:
        resp = _check(await self.invoke(addr, _request(RequestCode.GET_BROKER_RUNTIME_INFO)), addr)
        data = loads(resp.body) if resp.body else {}
        return {str(k): str(v) for k, v in (data.get("table") or {}).items()}

    async def view_message(self, addr: str, commit_log_offset: int) -> MessageExt:
        header = ViewMessageRequestHeader(offset=commit_log_offset)
        resp = _check(await self.invoke(addr, _request(RequestCode.VIEW_MESSAGE_BY_ID, header.to_ext_fields())), addr)
        msgs = decode_pulled(resp.body)
        if not msgs:
            raise for_code(ResponseCode.SYSTEM_ERROR, f"no message at offset {commit_log_offset}", addr)
        return msgs[0]

    async def query_message(
        self, addr: str, topic: str, key: str, max_num: int, begin: int, end: int, unique: bool = False
    ) -> list[MessageExt]:
        header = QueryMessageRequestHeader(
            topic=topic, key=key, max_num=max_num, begin_timestamp=begin, end_timestamp=end, unique_key_query=unique
        )
        cmd = _request(RequestCode.QUERY_MESSAGE, header.to_ext_fields())
        resp = await self.invoke(addr, cmd, max(self.timeout, 10.0))
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return []
        _check(resp, addr)
        return decode_pulled(resp.body)
