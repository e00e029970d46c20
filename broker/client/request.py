"""Request/Reply in the SDK: the requester's table of waiting requests, and the responder's reply message.

`Producer.request()` registers a future under a fresh CORRELATION_ID in the `RequestTable` of its
client instance, sends the request as an ordinary message, and waits. The broker holding the reply
pushes it to this client's connection as PUSH_REPLY_MESSAGE_TO_CLIENT (326); `RequestTable.on_push`
decodes it and completes the future with that correlation id. A reply nobody waits for any more (its
requester timed out) is acknowledged and dropped with a log line, as the Java client does.

A responder (any consumer of the request) builds its answer with `create_reply_message(request,
body)` and sends it with an ordinary producer: the client API sends MSG_TYPE=reply messages with
SEND_REPLY_MESSAGE_V2 (325), which the broker routes back to the requester.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
import zlib

from broker.client.errors import ClientError
from broker.client.instance import ClientInstance
from broker.client.message import Message
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.message import MessageExt, SysFlag
from broker.protocol.properties import Prop, decode_properties
from broker.protocol.reply import (
    ARRIVE_TIME,
    CORRELATION_ID,
    MSG_TYPE,
    REPLY_FLAG,
    REPLY_TO_CLIENT,
    TTL,
    ReplyMessageRequestHeader,
    parse_host,
    reply_topic,
)
from broker.transport.connection import RemotingConnection

__all__ = [
    "RequestSendFailed",
    "RequestTable",
    "RequestTimeoutError",
    "create_reply_message",
    "new_correlation_id",
    "request_table",
]

log = logging.getLogger(__name__)


class RequestTimeoutError(ClientError):
    """The request was sent, but no reply came within the timeout (Java's RequestTimeoutException)."""


class RequestSendFailed(ClientError):
    """The request itself could not be sent; the cause is chained."""


def new_correlation_id() -> str:
    return str(uuid.uuid4())


def create_reply_message(request: MessageExt, body: bytes | str) -> Message:
    """The reply to `request`: to `<cluster>_REPLY_TOPIC` of the cluster that stored the request, with
    its correlation id, requester and TTL, marked MSG_TYPE=reply."""
    cluster = request.properties.get(Prop.CLUSTER)
    if not cluster:
        raise ClientError(f"cannot reply to a message without the {Prop.CLUSTER} property (was it a request?)")
    reply_to = request.properties.get(REPLY_TO_CLIENT)
    correlation = request.properties.get(CORRELATION_ID)
    if not reply_to or not correlation:
        raise ClientError(f"cannot reply to a message without {REPLY_TO_CLIENT} and {CORRELATION_ID}: not a request")
    props = {MSG_TYPE: REPLY_FLAG, CORRELATION_ID: correlation, REPLY_TO_CLIENT: reply_to}
    ttl = request.properties.get(TTL)
    if ttl:
        props[TTL] = ttl
    return Message(reply_topic(cluster), body, properties=props)


def reply_from_push(cmd: RemotingCommand, received_ms: int) -> MessageExt:
    """The reply a broker pushed, as a received message (body uncompressed, ARRIVE_TIME added)."""
    header = ReplyMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    body = bytes(cmd.body)
    sys_flag = header.sys_flag
    if sys_flag & SysFlag.COMPRESSED:
        body = zlib.decompress(body)
        sys_flag &= ~SysFlag.COMPRESSED
    props = decode_properties(header.properties)
    props[ARRIVE_TIME] = str(received_ms)
    return MessageExt(
        topic=header.topic,
        body=body,
        properties=props,
        flag=header.flag,
        queue_id=header.queue_id,
        sys_flag=sys_flag,
        born_timestamp=header.born_timestamp,
        born_host=parse_host(header.born_host),
        store_timestamp=header.store_timestamp,
        store_host=parse_host(header.store_host),
        reconsume_times=header.reconsume_times,
    )


class RequestTable:
    """Requests waiting for their reply, by correlation id (Java's RequestFutureHolder)."""

    def __init__(self) -> None:
        self.waiting: dict[str, asyncio.Future[MessageExt]] = {}

    def expect(self, correlation_id: str) -> asyncio.Future[MessageExt]:
        future: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self.waiting[correlation_id] = future
        return future

    def forget(self, correlation_id: str) -> None:
        self.waiting.pop(correlation_id, None)

    def on_push(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        """PUSH_REPLY_MESSAGE_TO_CLIENT: complete the matching request; SUCCESS unless it is unreadable."""
        try:
            reply = reply_from_push(cmd, int(time.time() * 1000))
        except Exception as exc:
            log.warning("unreadable reply pushed by %s: %s", conn.peer, exc)
            return None if cmd.is_oneway else cmd.response(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        correlation = reply.properties.get(CORRELATION_ID, "")
        future = self.waiting.pop(correlation, None)
        if future is None or future.done():
            log.warning(
                "receive reply message, but not matched any request, CorrelationId: %s, reply from host: %s",
                correlation,
                conn.peer,
            )
        else:
            future.set_result(reply)
        return None if cmd.is_oneway else cmd.response(ResponseCode.SUCCESS)


_TABLES: weakref.WeakKeyDictionary[ClientInstance, RequestTable] = weakref.WeakKeyDictionary()


def request_table(instance: ClientInstance) -> RequestTable:
    """The one table of a client instance, answering its connections' reply pushes."""
    table = _TABLES.get(instance)
    if table is None:
        table = _TABLES[instance] = RequestTable()
        instance.remoting.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, table.on_push)
    return table
