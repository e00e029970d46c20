"""QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue, over
the broker's POP service (`broker.server.pop.service.PopService`) and CONSUMER_SEND_MSG_BACK.

A receipt handle is the POP handle (`ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId
queueOffset`) plus the message's commit-log offset, as RocketMQ's proxy writes it; a handle whose invisibility is
over is refused (INVALID_RECEIPT_HANDLE). Receive pops from every read queue of the topic (the queue id of the
request is ignored, as the proxy does), FIFO when the group is `consumeMessageOrderly`.
With `auto_renew` (push consumers) and `handles`, each delivered message's handle is kept and renewed by the
endpoint (broker.grpc.receipts); the client's ack, change or forward of it acts on the newest handle.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from broker.grpc.conversions import grpc_code, to_grpc_message
from broker.grpc.local import LocalBroker
from broker.grpc.pb import definition, service
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.pop import ExtraInfo, parse_extra_info, real_topic
from broker.server.errors import RequestError
from broker.server.groups import SubscriptionGroupManager
from broker.server.pop.service import PopResult

if TYPE_CHECKING:
    from broker.grpc.receipts import ReceiptHandles

__all__ = ["Handle", "PopApi", "Receiver", "parse_handle"]

Code = definition.Code

MAX_BATCH = 32
MIN_INVISIBLE_MS = 10_000
MAX_INVISIBLE_MS = 12 * 3600 * 1000
#: The proxy's default (defaultInvisibleTimeMills): without `invisible_duration`, and the first invisible time of an
#: auto-renewed message.
DEFAULT_INVISIBLE_MS = 60_000
MAX_POLL_MS = 20_000
#: Kept back from the RPC's deadline so that the reply still reaches the client.
DEADLINE_MARGIN_S = 1.0
INIT_MODE_MAX = 1


class PopApi(Protocol):
    """What the endpoint calls of the broker's POP service."""

    async def pop(
        self,
        *,
        group: str,
        topic: str,
        queue_id: int = -1,
        max_nums: int = 32,
        invisible_ms: int = 60_000,
        poll_ms: int = 0,
        init_mode: int = 0,
        exp_type: str | None = "TAG",
        exp: str | None = "*",
        order: bool = False,
        attempt_id: str | None = None,
        born_ms: int | None = None,
    ) -> PopResult: ...

    async def ack(self, *, group: str, topic: str, queue_id: int, offset: int, extra_info: str) -> None: ...

    async def change_invisible(
        self, *, group: str, topic: str, queue_id: int, offset: int, extra_info: str, invisible_ms: int
    ) -> Any: ...


@dataclass(frozen=True, slots=True)
class Handle:
    """A parsed receipt handle."""

    info: ExtraInfo
    commit_log_offset: int

    @property
    def extra_info(self) -> str:
        return str(self.info)

    def expired(self, now_ms: int) -> bool:
        return self.info.pop_time + self.info.invisible_time <= now_ms


def parse_handle(text: str) -> Handle:
    """A receipt handle the client sent back; ValueError saying what is wrong."""
    parts = text.split(" ")
    if len(parts) != 9 or not parts[8].lstrip("-").isdigit():
        raise ValueError("receipt handle is not one this endpoint handed out")
    return Handle(parse_extra_info(" ".join(parts[:8])), int(parts[8]))


def _status(code: int, message: str) -> Any:
    status = definition.Status()
    status.code, status.message = code, message
    return status


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Receiver:
    """The consuming RPCs of one endpoint."""

    def __init__(
        self,
        pop: PopApi,
        local: LocalBroker,
        groups: SubscriptionGroupManager,
        handles: ReceiptHandles | None = None,
        default_invisible_ms: int = DEFAULT_INVISIBLE_MS,
    ) -> None:
        self.pop = pop
        self.local = local
        self.groups = groups
        #: None: auto-renew off (enableProxyAutoRenew=false), push consumers' messages keep their invisible time
        self.handles = handles
        self.default_invisible_ms = default_invisible_ms

    def fifo(self, group: str) -> bool:
        """Whether the group consumes in order (consumeMessageOrderly): FIFO receives and per-queue assignments."""
        cfg = self.groups.find(group)
        return bool(cfg is not None and cfg.consume_message_orderly)

    async def receive(self, request: Any, time_remaining: float | None, client_id: str = "") -> list[Any]:
        """The stream's replies: one status, then the messages, then the delivery timestamp."""
        group, topic = request.group.name, request.message_queue.topic.name
        if request.HasField("long_polling_timeout"):
            poll_ms = request.long_polling_timeout.ToMilliseconds()
        else:
            poll_ms = MAX_POLL_MS
        poll_ms = min(poll_ms, MAX_POLL_MS)
        if time_remaining is not None:
            poll_ms = min(poll_ms, int((time_remaining - DEADLINE_MARGIN_S) * 1000))
        if poll_ms < 0:
            return [self._only_status(Code.ILLEGAL_POLLING_TIME, "the deadline leaves no time to poll")]
        if request.auto_renew or not request.HasField("invisible_duration"):
            invisible_ms = self.default_invisible_ms
        else:
            invisible_ms = request.invisible_duration.ToMilliseconds()
            if not MIN_INVISIBLE_MS <= invisible_ms <= MAX_INVISIBLE_MS:
                return [
                    self._only_status(
                        Code.ILLEGAL_INVISIBLE_TIME,
                        f"invisible duration must be within [{MIN_INVISIBLE_MS}, {MAX_INVISIBLE_MS}] ms",
                    )
                ]
        batch = max(1, min(MAX_BATCH, request.batch_size or MAX_BATCH))
        expr = request.filter_expression
        exp_type = "SQL92" if expr.type == definition.FilterType.SQL else "TAG"
        try:
            result = await self.pop.pop(
                group=group,
                topic=topic,
                max_nums=batch,
                invisible_ms=invisible_ms,
                poll_ms=poll_ms,
                init_mode=INIT_MODE_MAX,
                exp_type=exp_type,
                exp=expr.expression or "*",
                order=self.fifo(group),
                attempt_id=request.attempt_id if request.HasField("attempt_id") else None,
            )
        except RequestError as exc:
            return [self._only_status(grpc_code(exc.code), exc.remark)]
        replies: list[Any] = []
        if result.status == "FOUND" and result.messages:
            replies.append(self._only_status(Code.OK, "OK"))
            for popped in result.messages:
                handle = f"{popped.extra_info} {popped.commit_log_offset}"
                reply = service.ReceiveMessageResponse()
                reply.message.CopyFrom(
                    to_grpc_message(popped.message, receipt_handle=handle, delivery_attempt=popped.reconsume_times + 1)
                )
                replies.append(reply)
                if request.auto_renew and self.handles is not None and client_id:
                    self.handles.keep(
                        client_id,
                        group,
                        topic,
                        reply.message.system_properties.message_id,
                        handle,
                        popped.reconsume_times,
                    )
        elif result.status == "POLLING_FULL":
            replies.append(self._only_status(Code.TOO_MANY_REQUESTS, "too many receive requests are waiting"))
        else:
            replies.append(self._only_status(Code.MESSAGE_NOT_FOUND, "no new message"))
        last = service.ReceiveMessageResponse()
        last.delivery_timestamp.FromMilliseconds(_now_ms())
        replies.append(last)
        return replies

    @staticmethod
    def _only_status(code: int, message: str) -> Any:
        reply = service.ReceiveMessageResponse()
        reply.status.CopyFrom(_status(code, message))
        return reply

    async def _newest(self, client_id: str, group: str, message_id: str, text: str) -> str:
        """The handle to act on: the endpoint's newest one when it renews this message for the client."""
        if self.handles is None or not client_id:
            return text
        return await self.handles.take(client_id, group, message_id, text)

    def _handle(self, text: str) -> Handle:
        handle = parse_handle(text)
        if handle.expired(_now_ms()):
            raise ValueError("receipt handle is expired")
        return handle

    async def ack(self, request: Any, client_id: str = "") -> Any:
        reply = service.AckMessageResponse()
        group, topic = request.group.name, request.topic.name
        for entry in request.entries:
            out = reply.entries.add()
            out.message_id, out.receipt_handle = entry.message_id, entry.receipt_handle
            try:
                handle = self._handle(await self._newest(client_id, group, entry.message_id, entry.receipt_handle))
                info = handle.info
                await self.pop.ack(
                    group=group,
                    topic=real_topic(topic, group, info.flag),
                    queue_id=info.queue_id,
                    offset=info.queue_offset,
                    extra_info=handle.extra_info,
                )
            except ValueError as exc:
                out.status.CopyFrom(_status(Code.INVALID_RECEIPT_HANDLE, str(exc)))
            except RequestError as exc:
                out.status.CopyFrom(_status(grpc_code(exc.code), exc.remark))
            else:
                out.status.CopyFrom(_status(Code.OK, "OK"))
        codes = {e.status.code for e in reply.entries}
        if not reply.entries:
            reply.status.CopyFrom(_status(Code.BAD_REQUEST, "no entry to ack"))
        elif len(reply.entries) == 1:
            reply.status.CopyFrom(reply.entries[0].status)
        elif codes == {Code.OK}:
            reply.status.CopyFrom(_status(Code.OK, "OK"))
        else:
            reply.status.CopyFrom(_status(Code.MULTIPLE_RESULTS, "the entries had different results"))
        return reply

    async def change_invisible(self, request: Any, client_id: str = "") -> Any:
        reply = service.ChangeInvisibleDurationResponse()
        group, topic = request.group.name, request.topic.name
        invisible_ms = request.invisible_duration.ToMilliseconds()
        if not 0 <= invisible_ms <= MAX_INVISIBLE_MS:
            reply.status.CopyFrom(
                _status(Code.ILLEGAL_INVISIBLE_TIME, f"invisible duration must be 0-{MAX_INVISIBLE_MS} ms")
            )
            return reply
        try:
            handle = self._handle(await self._newest(client_id, group, request.message_id, request.receipt_handle))
            info = handle.info
            result = await self.pop.change_invisible(
                group=group,
                topic=real_topic(topic, group, info.flag),
                queue_id=info.queue_id,
                offset=info.queue_offset,
                extra_info=handle.extra_info,
                invisible_ms=max(invisible_ms, 1),
            )
        except ValueError as exc:
            reply.status.CopyFrom(_status(Code.INVALID_RECEIPT_HANDLE, str(exc)))
            return reply
        except RequestError as exc:
            reply.status.CopyFrom(_status(grpc_code(exc.code), exc.remark))
            return reply
        reply.receipt_handle = f"{result.extra_info} {handle.commit_log_offset}"
        reply.status.CopyFrom(_status(Code.OK, "OK"))
        return reply

    async def forward_to_dlq(self, request: Any, client_id: str = "") -> Any:
        reply = service.ForwardMessageToDeadLetterQueueResponse()
        group, topic = request.group.name, request.topic.name
        try:
            handle = self._handle(await self._newest(client_id, group, request.message_id, request.receipt_handle))
        except ValueError as exc:
            reply.status.CopyFrom(_status(Code.INVALID_RECEIPT_HANDLE, str(exc)))
            return reply
        ext = {
            "offset": str(handle.commit_log_offset),
            "group": group,
            "delayLevel": "-1",  # straight to %DLQ%<group>
            "originMsgId": request.message_id,
            "originTopic": topic,
            "unitMode": "false",
            "maxReconsumeTimes": "0",
        }
        response = await self.local.invoke(RequestCode.CONSUMER_SEND_MSG_BACK, ext)
        if response.code != ResponseCode.SUCCESS:
            reply.status.CopyFrom(_status(grpc_code(response.code), response.remark or "forward failed"))
            return reply
        info = handle.info
        try:
            await self.pop.ack(
                group=group,
                topic=real_topic(topic, group, info.flag),
                queue_id=info.queue_id,
                offset=info.queue_offset,
                extra_info=handle.extra_info,
            )
        except RequestError as exc:
            reply.status.CopyFrom(_status(grpc_code(exc.code), exc.remark))
            return reply
        reply.status.CopyFrom(_status(Code.OK, "OK"))
        return reply
