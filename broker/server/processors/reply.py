"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): a responder's reply to a request.

Registered by `BrokerController`. The reply carries the requester's client id in REPLY_TO_CLIENT; the
broker finds that client's connection among the producers (then consumers) that heartbeat to it, and
pushes the reply there as PUSH_REPLY_MESSAGE_TO_CLIENT (326), waiting for the client's answer. Then,
when storeReplyMessageEnable is on (the default), the reply is also stored in its topic
(`<cluster>_REPLY_TOPIC`) through the ordinary put.

As in RocketMQ, the responder's answer says whether the *push* worked: SUCCESS, or SYSTEM_ERROR with
a remark naming the client ("channel of <id> not found" when it is not connected here, or the push
failed or timed out). The message id and offsets are the stored reply's when it was stored, else
msgId "0" and offset 0. The requester's own timeout is the client's business: a reply arriving after
it gave up is answered SUCCESS by the client and dropped.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import SendMessageRequestHeader, parse_send_request_header
from broker.protocol.properties import encode_properties
from broker.protocol.reply import PUSH_REPLY_TIME, REPLY_TO_CLIENT, ReplyMessageRequestHeader, format_host
from broker.server.errors import RequestError
from broker.server.put_rules import PUT_STATUS_CODES, checked_properties
from broker.store.results import MessageToStore, PutResult

if TYPE_CHECKING:
    from broker.server.processors.context import ReplyContext
    from broker.transport.connection import RemotingConnection

__all__ = ["PUSH_TIMEOUT", "ReplyProcessor", "find_client"]

log = logging.getLogger(__name__)

#: How long the broker waits for the requester to acknowledge a pushed reply (RocketMQ's callClient).
PUSH_TIMEOUT = 10.0
_MSG_REGION = "DefaultRegion"


def find_client(broker: ReplyContext, client_id: str) -> RemotingConnection | None:
    """The open connection of the client with this id: a producer's first (RocketMQ looks only there),
    then a consumer's, since one client instance shares its connection between both roles, then the
    one its last request came over. The last is ours: the Go client sends its first request before
    its first heartbeat (it asks the NameServer, not its own routes, whether it knows the topic), so
    RocketMQ's broker cannot push that reply."""
    for channels in broker.producers.groups.values():
        for conn, info in channels.items():
            if info.client_id == client_id and not conn.is_closing:
                return conn
    for group in broker.consumers.groups.values():
        for conn, info in group.channels.items():
            if info.client_id == client_id and not conn.is_closing:
                return conn
    last = broker.send.requesters.get(client_id)
    return last if last is not None and not last.is_closing else None


class ReplyProcessor:
    def __init__(self, broker: ReplyContext) -> None:
        self.broker = broker
        self.config = broker.config

    async def handle(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            return await self._process(conn, cmd)
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)

    async def _process(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            header = parse_send_request_header(cmd.code, cmd.ext_fields)
        except Exception as exc:  # a HeaderFieldError names the field
            raise RequestError(getattr(exc, "response_code", ResponseCode.SYSTEM_ERROR), str(exc)) from None
        tc = self.broker.send.check_topic(header, cmd)
        if len(cmd.body) > self.config.max_message_size:
            raise RequestError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message body size {len(cmd.body)} exceeds the maximum {self.config.max_message_size}",
            )
        props = checked_properties(header.properties or "")
        queue_id = header.queue_id if header.queue_id >= 0 else random.randrange(max(tc.write_queue_nums, 1))
        born_host = _peer_host(conn)

        pushed, remark = await self._push(cmd, header, props, born_host)
        ext = {"msgId": "0", "queueId": str(queue_id), "queueOffset": "0"}
        if self.config.store_reply_message_enable:
            msg = MessageToStore(
                topic=header.topic,
                queue_id=queue_id,
                body=cmd.body,
                flag=header.flag,
                properties=props,
                sys_flag=header.sys_flag,
                born_timestamp=header.born_timestamp,
                born_host=born_host,
                reconsume_times=header.reconsume_times or 0,
            )
            put = self.broker.store.append(msg)
            result = put if isinstance(put, PutResult) else await put
            if result.ok:
                self.broker.stats.put(1)
                ext.update(msgId=result.msg_ids[0], queueOffset=str(result.queue_offset))
            else:
                code = PUT_STATUS_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
                log.warning("storing a reply to %s failed: %s (code %d)", header.topic, result.status.name, code)
        ext.update(MSG_REGION=_MSG_REGION, TRACE_ON="true")
        if not pushed:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark, ext)
        return cmd.response(ResponseCode.SUCCESS, None, ext)

    async def _push(
        self, cmd: RemotingCommand, header: SendMessageRequestHeader, props: dict[str, str], born_host: tuple[str, int]
    ) -> tuple[bool, str]:
        """Push the reply to its requester: (True, "") once the client answered SUCCESS, else why not."""
        client_id = props.get(REPLY_TO_CLIENT)
        if not client_id:
            return False, f"reply message properties[{REPLY_TO_CLIENT}] is null"
        target = find_client(self.broker, client_id)
        if target is None:
            log.warning("push reply message fail, channel of <%s> not found", client_id)
            return False, f"push reply message fail, channel of <{client_id}> not found."
        now = int(time.time() * 1000)
        pushed_props = {**props, PUSH_REPLY_TIME: str(now)}
        push_header = ReplyMessageRequestHeader(
            producer_group=header.producer_group,
            topic=header.topic,
            default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums,
            queue_id=header.queue_id,
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            flag=header.flag,
            properties=encode_properties(pushed_props),
            reconsume_times=header.reconsume_times or 0,
            unit_mode=bool(header.unit_mode),
            born_host=format_host(born_host),
            store_host=format_host((self.config.broker_ip1, self.config.listen_port)),
            store_timestamp=now,
        )
        request = RemotingCommand(
            code=RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, ext_fields=push_header.to_ext_fields(), body=cmd.body
        )
        try:
            answer = await target.invoke(request, PUSH_TIMEOUT)
        except Exception as exc:  # closed meanwhile, or no answer in time
            log.warning("push reply message to <%s> (%s) failed: %s", client_id, target.peer, exc)
            return False, f"push reply message to {client_id} fail: {type(exc).__name__}"
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> answered %d: %s", client_id, answer.code, answer.remark)
            return False, f"push reply message to {client_id} fail: the client answered {answer.code} {answer.remark}"
        return True, ""


def _peer_host(conn: RemotingConnection) -> tuple[str, int]:
    host, _, port = conn.peer.rpartition(":")
    host = host.strip("[]")
    if host.startswith("::ffff:"):
        host = host[7:]
    return host or "127.0.0.1", int(port) if port.isdigit() else 0
