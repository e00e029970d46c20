"""Admin requests about connected clients: GET_CONSUMER_CONNECTION_LIST (203),
GET_PRODUCER_CONNECTION_LIST (204), GET_CONSUMER_RUNNING_INFO (307) and
INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223).

203/204 answer from the broker's client tables (mqadmin consumerConnection, producerConnection, and
consumerProgress, which shows a group as online when 203 lists a connection). 307 and 223 are asked
of the consumers themselves: the broker forwards them over the consumer's own connection (307
unchanged, 223 as GET_CONSUMER_STATUS_FROM_CLIENT, 221) and relays what the clients answer, as
RocketMQ's Broker2Client does. Registered by `BrokerController`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING

from broker.protocol.admin_bodies import (
    ConsumerConnection,
    GetConsumerStatusBody,
    ProducerConnection,
    connection,
)
from broker.protocol.admin_headers import GetProducerConnectionListRequestHeader
from broker.protocol.bodies import MessageQueue, fastjson_loads
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
)
from broker.server.errors import RequestError

if TYPE_CHECKING:
    from broker.server.clients import ClientChannelInfo, ConsumerGroupInfo, ConsumerManager, ProducerManager
    from broker.transport.connection import RemotingConnection

__all__ = ["AdminClientsProcessor"]

log = logging.getLogger(__name__)

CLIENT_CALL_TIMEOUT = 5.0  # what RocketMQ's broker allows a client to answer 307 / 221
V3_1_8_SNAPSHOT = 62  # clients older than this cannot answer GET_CONSUMER_RUNNING_INFO (MQVersion ordinal)


class AdminClientsProcessor:
    def __init__(self, consumers: ConsumerManager, producers: ProducerManager) -> None:
        self.consumers = consumers
        self.producers = producers

    def _online(self, group: str) -> ConsumerGroupInfo:
        g = self.consumers.get(group)
        if g is None or not g.channels:
            raise RequestError(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        return g

    def consumer_connection(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumerConnectionListRequestHeader.from_ext_fields(cmd.ext_fields)
        g = self._online(h.consumer_group)
        body = ConsumerConnection(
            connections=[_connection(info) for info in g.channels.values()],
            subscriptions={topic: sub.to_json() for topic, sub in sorted(g.subscriptions.items())},
            consume_type=g.consume_type,
            message_model=g.message_model,
            consume_from_where=g.consume_from_where,
        )
        return cmd.response(ResponseCode.SUCCESS, None, body=body.to_json())

    def producer_connection(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetProducerConnectionListRequestHeader.from_ext_fields(cmd.ext_fields)
        channels = self.producers.groups.get(h.producer_group)
        if not channels:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"the producer group[{h.producer_group}] not exist")
        body = ProducerConnection([_connection(info) for info in channels.values()])
        return cmd.response(ResponseCode.SUCCESS, None, body=body.to_json())

    async def consumer_running_info(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        """307: ask the named client of the group for its ConsumerRunningInfo and relay the answer."""
        h = GetConsumerRunningInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        g = self._online(h.consumer_group)
        info = next((i for i in g.channels.values() if i.client_id == h.client_id), None)
        if info is None:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, f"The Consumer <{h.client_id}> <{h.consumer_group}> not online"
            )
        if info.version < V3_1_8_SNAPSHOT:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, f"The Consumer <{h.client_id}> Version <{info.version}> too low to finish"
            )
        forward = RemotingCommand(code=RequestCode.GET_CONSUMER_RUNNING_INFO, ext_fields=dict(cmd.ext_fields))
        try:
            answer = await info.conn.invoke(forward, CLIENT_CALL_TIMEOUT)
        except Exception as exc:  # timeout or a closed channel: the admin gets the reason, not a hang
            raise RequestError(
                ResponseCode.SYSTEM_ERROR, f"invoke consumer <{h.client_id}> <{h.consumer_group}> Exception: {exc}"
            ) from None
        return cmd.response(answer.code, answer.remark, body=answer.body)

    async def consumer_status(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        """223: every client of the group (or the one named by clientAddr) reports its offsets on a topic."""
        h = GetConsumerStatusRequestHeader.from_ext_fields(cmd.ext_fields)
        g = self.consumers.get(h.group)
        if g is None or not g.channels:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{h.group}]")
        wanted = [i for i in g.channels.values() if not h.client_addr or i.client_id == h.client_addr]
        ask = RemotingCommand(
            code=RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ext_fields={"topic": h.topic, "group": h.group}
        )
        answers = await asyncio.gather(
            *(
                i.conn.invoke(dataclasses.replace(ask, ext_fields=dict(ask.ext_fields)), CLIENT_CALL_TIMEOUT)
                for i in wanted
            ),
            return_exceptions=True,
        )
        table: dict[str, dict[MessageQueue, int]] = {}
        for info, answer in zip(wanted, answers, strict=True):
            if isinstance(answer, BaseException):
                log.info("consumer status of %s in %s: %s", info.client_id, h.group, answer)
                continue
            if answer.code != ResponseCode.SUCCESS or not answer.body:
                continue
            try:
                table[info.client_id] = _queue_offsets(answer.body)
            except Exception as exc:  # one client's bad answer must not cost the others theirs
                log.info("consumer %s answered 221 with an unreadable body: %s", info.client_id, exc)
        return cmd.response(ResponseCode.SUCCESS, None, body=GetConsumerStatusBody(consumer_table=table).to_json())


def _connection(info: ClientChannelInfo) -> dict[str, object]:
    return connection(info.client_id, info.conn.peer, info.language, info.version)


def _queue_offsets(body: bytes) -> dict[MessageQueue, int]:
    data = fastjson_loads(body)
    table = data.get("messageQueueTable") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise ValueError("no messageQueueTable")
    return {mq: int(offset) for mq, offset in table.items() if isinstance(mq, MessageQueue)}
