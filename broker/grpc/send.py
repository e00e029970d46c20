"""SendMessage and EndTransaction over the broker's SEND_MESSAGE and END_TRANSACTION processors.

The proxy's checks run first (`conversions.to_send_request`, the topic's message type); the queue is chosen here
as RocketMQ's proxy does (a FIFO message group always on one write queue, other messages round robin) and the
broker's send processor does the rest. A transactional send records where its half message is
(`TransactionData`), which EndTransaction needs, as does the recovery command of an orphaned transaction.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from broker.grpc.conversions import SendLimits, SendRefused, grpc_code, peer_address, to_send_request
from broker.grpc.local import LocalBroker
from broker.grpc.pb import definition, service
from broker.grpc.route import accept_types
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.message import decode_offset_msg_id

__all__ = ["Sender", "TransactionData", "Transactions"]

Code = definition.Code

#: How long a transaction's half-message position is remembered for EndTransaction, and how many at most.
TRANSACTION_DATA_TTL_S = 3600.0
TRANSACTION_DATA_MAX = 100_000


@dataclass(frozen=True, slots=True)
class TransactionData:
    """Where a half message is: what END_TRANSACTION names."""

    producer_group: str
    commit_log_offset: int
    queue_offset: int
    message_id: str
    recorded: float


class Transactions:
    """transaction id -> TransactionData, bounded in size and age."""

    def __init__(self) -> None:
        self._data: OrderedDict[str, TransactionData] = OrderedDict()

    def record(
        self, transaction_id: str, producer_group: str, commit_log_offset: int, queue_offset: int, msg_id: str
    ) -> None:
        self._data.pop(transaction_id, None)
        self._data[transaction_id] = TransactionData(
            producer_group, commit_log_offset, queue_offset, msg_id, time.monotonic()
        )
        while len(self._data) > TRANSACTION_DATA_MAX:
            self._data.popitem(last=False)

    def get(self, transaction_id: str) -> TransactionData | None:
        data = self._data.get(transaction_id)
        if data is not None and time.monotonic() - data.recorded > TRANSACTION_DATA_TTL_S:
            del self._data[transaction_id]
            return None
        return data

    def forget(self, transaction_id: str) -> None:
        self._data.pop(transaction_id, None)


def _status(code: int, message: str) -> Any:
    status = definition.Status()
    status.code, status.message = code, message
    return status


class Sender:
    """SendMessage and EndTransaction for one endpoint. `topic_config(name)` is the broker's topic (or None)."""

    def __init__(self, local: LocalBroker, topic_config: Any, limits: SendLimits, validate_type: bool = True) -> None:
        self.local = local
        self.topic_config = topic_config
        self.limits = limits
        self.validate_type = validate_type
        self.transactions = Transactions()
        self._round_robin = itertools.count()

    def _queue_id(self, msg: Any) -> int:
        tc = self.topic_config(msg.topic.name)
        queues = tc.write_queue_nums if tc is not None and tc.write_queue_nums > 0 else 0
        if not queues:
            return -1  # the broker decides (auto-created topic)
        sp = msg.system_properties
        if sp.HasField("message_group"):
            digest = hashlib.sha256(sp.message_group.encode()).digest()
            return int.from_bytes(digest[:8], "big") % queues
        return next(self._round_robin) % queues

    def _check_type(self, msg: Any) -> None:
        tc = self.topic_config(msg.topic.name)
        if tc is None or not self.validate_type:
            return
        msg_type = msg.system_properties.message_type or definition.MessageType.NORMAL
        if int(msg_type) not in accept_types(tc.attributes):
            name = definition.MessageType.Name(msg_type)
            raise SendRefused(
                Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                f"topic {msg.topic.name} does not accept {name} messages (message.type "
                f"{tc.attributes.get('message.type', 'NORMAL')})",
            )

    async def _send_one(self, msg: Any, peer: str) -> Any:
        entry = service.SendResultEntry()
        try:
            self._check_type(msg)
            request = to_send_request(msg, limits=self.limits)
        except SendRefused as exc:
            entry.status.CopyFrom(_status(exc.code, exc.message))
            return entry
        request.ext_fields["queueId"] = str(self._queue_id(msg))
        # without an IP from the message, the connection's address (the send processor cannot parse gRPC's form)
        born_host = request.born_host or peer_address(peer) or ("127.0.0.1", 0)
        response = await self.local.invoke(
            RequestCode.SEND_MESSAGE, request.ext_fields, request.body, peer=peer, born_host=born_host
        )
        if response.code != ResponseCode.SUCCESS:
            entry.status.CopyFrom(_status(grpc_code(response.code), response.remark or "send failed"))
            return entry
        ext = response.ext_fields
        entry.status.CopyFrom(_status(Code.OK, "OK"))
        entry.message_id = request.message_id
        entry.offset = int(ext.get("queueOffset", "0") or 0)
        if request.transactional:
            transaction_id = ext.get("transactionId") or request.message_id
            entry.transaction_id = transaction_id
            _host, _port, commit_log_offset = decode_offset_msg_id(ext["msgId"])
            self.transactions.record(
                transaction_id, msg.topic.name, commit_log_offset, entry.offset, request.message_id
            )
        return entry

    async def send(self, request: Any, peer: str) -> Any:
        reply = service.SendMessageResponse()
        if not request.messages:
            reply.status.CopyFrom(_status(Code.BAD_REQUEST, "no message to send"))
            return reply
        topics = {m.topic.name for m in request.messages}
        if len(topics) > 1:
            reply.status.CopyFrom(_status(Code.BAD_REQUEST, "the messages of one request must share a topic"))
            return reply
        for msg in request.messages:
            reply.entries.append(await self._send_one(msg, peer))
        codes = {e.status.code for e in reply.entries}
        if len(reply.entries) == 1:
            reply.status.CopyFrom(reply.entries[0].status)
        elif codes == {Code.OK}:
            reply.status.CopyFrom(_status(Code.OK, "OK"))
        else:
            reply.status.CopyFrom(_status(Code.MULTIPLE_RESULTS, "the messages had different results"))
        return reply

    async def end_transaction(self, request: Any, peer: str) -> Any:
        reply = service.EndTransactionResponse()
        resolution = request.resolution
        if resolution not in (definition.TransactionResolution.COMMIT, definition.TransactionResolution.ROLLBACK):
            reply.status.CopyFrom(_status(Code.BAD_REQUEST, "resolution must be COMMIT or ROLLBACK"))
            return reply
        data = self.transactions.get(request.transaction_id)
        if data is None:
            reply.status.CopyFrom(
                _status(Code.INVALID_TRANSACTION_ID, f"no transaction {request.transaction_id!r} known here")
            )
            return reply
        commit = resolution == definition.TransactionResolution.COMMIT
        ext = {
            "producerGroup": data.producer_group,
            "tranStateTableOffset": str(data.queue_offset),
            "commitLogOffset": str(data.commit_log_offset),
            "commitOrRollback": "8" if commit else "12",
            "fromTransactionCheck": str(request.source == definition.TransactionSource.SOURCE_SERVER_CHECK).lower(),
            "msgId": request.message_id or data.message_id,
            "transactionId": request.transaction_id,
            "topic": request.topic.name,
        }
        response = await self.local.invoke(RequestCode.END_TRANSACTION, ext, peer=peer)
        if response.code != ResponseCode.SUCCESS:
            reply.status.CopyFrom(_status(grpc_code(response.code), response.remark or "end transaction failed"))
            return reply
        self.transactions.forget(request.transaction_id)
        reply.status.CopyFrom(_status(Code.OK, "OK"))
        return reply
