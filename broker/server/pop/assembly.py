"""PopParts: the POP parts of one broker (service, revive, order state, consume modes) and their routes.

`BrokerController` builds it once the store and the timer exist, registers `routes()`, adds `waiters.notify`
as a store arrival listener, starts the revive service on a master and closes it at shutdown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.server.errors import RequestError
from broker.server.pop.mode import MessageRequestModeManager, assign_queues
from broker.server.pop.order import OrderInfoManager
from broker.server.pop.processors import PopProcessors
from broker.server.pop.revive import ReviveService
from broker.server.pop.service import PopContext, PopService
from broker.server.topics import PERM_READ, PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX, TopicConfig

if TYPE_CHECKING:
    from broker.server.clients import ConsumerManager
    from broker.server.timer import TimerService
    from broker.transport.connection import RemotingConnection
    from broker.transport.dispatcher import Handler

__all__ = ["PopBrokerContext", "PopParts"]

MAX_MODE_BODY = 64 * 1024


class PopBrokerContext(PopContext, Protocol):
    """What the POP parts read of the broker: PopContext and the registered consumers (assignments)."""

    @property
    def consumers(self) -> ConsumerManager: ...


class PopParts:
    def __init__(self, broker: PopBrokerContext, timer: TimerService, config_dir: Path) -> None:
        self.broker = broker
        self.order = OrderInfoManager(config_dir)
        self.modes = MessageRequestModeManager(config_dir)
        self.service = PopService(broker, self.order)
        self.revive = ReviveService(broker, timer, self.service.revive_topic)
        self.processors = PopProcessors(self.service)
        self.service.assigner = lambda topic, group, client_id, strategy, model: self.query_assignment(
            topic=topic, group=group, client_id=client_id, strategy=strategy, message_model=model
        )

    def load(self) -> None:
        self.order.load()
        self.modes.load()
        c = self.broker.config
        topics = self.broker.topics
        existing = topics.get(self.service.revive_topic)
        if existing is None or existing.read_queue_nums < c.revive_queue_num:
            n = c.revive_queue_num
            topics.update(TopicConfig(self.service.revive_topic, n, n, PERM_READ | PERM_WRITE))

    def start(self) -> None:
        self.revive.start()

    async def close(self) -> None:
        await self.service.close()
        await self.revive.close()
        self.order.persist()

    def routes(self) -> dict[int, Handler]:
        p = self.processors
        rc = RequestCode
        return {
            rc.POP_MESSAGE: p.pop,
            rc.ACK_MESSAGE: p.ack,
            rc.BATCH_ACK_MESSAGE: p.batch_ack,
            rc.PEEK_MESSAGE: p.peek,
            rc.CHANGE_MESSAGE_INVISIBLETIME: p.change_invisible,
            rc.NOTIFICATION: p.notification,
            rc.POLLING_INFO: p.polling_info,
            rc.QUERY_ASSIGNMENT: self.query_assignment_handler,
            rc.SET_MESSAGE_REQUEST_MODE: self.set_mode_handler,
            rc.GET_ALL_MESSAGE_REQUEST_MODE: self.get_modes_handler,
        }

    # ------------------------------------------------------------------ consume modes and assignment

    def query_assignment(
        self, *, topic: str, group: str, client_id: str, strategy: str, message_model: str
    ) -> list[tuple[int, str]] | None:
        """[(queueId or -1, PULL|POP)] for the client, None while the group has no registered client."""
        b = self.broker
        c = b.config
        tc = b.topics.get(topic)
        if tc is None:
            return None
        stored = self.modes.get(topic, group)
        if stored is not None:
            mode, share = str(stored.get("mode") or "PULL"), int(stored.get("popShareQueueNum") or 0)
        elif topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            mode, share = "PULL", 0
        else:
            mode, share = c.default_message_request_mode, c.default_pop_share_queue_num
        queue_ids = list(range(tc.read_queue_nums))
        if message_model == "BROADCASTING" or not c.server_load_balancer_enable:
            return [(q, mode) for q in queue_ids]
        info = b.consumers.get(group)
        clients = info.client_ids() if info is not None else []
        if not clients:
            return None
        return [(q, mode) for q in assign_queues(queue_ids, clients, client_id, mode, share)]

    def query_assignment_handler(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        body = _json_body(cmd)
        topic, group = str(body.get("topic") or ""), str(body.get("consumerGroup") or "")
        if not topic or not group:
            raise RequestError(ResponseCode.INVALID_PARAMETER, "topic and consumerGroup are required")
        got = self.query_assignment(
            topic=topic,
            group=group,
            client_id=str(body.get("clientId") or ""),
            strategy=str(body.get("strategyName") or ""),
            message_model=str(body.get("messageModel") or "CLUSTERING"),
        )
        name = self.broker.config.broker_name
        assignments = (
            None
            if got is None
            else [
                {"messageQueue": {"topic": topic, "brokerName": name, "queueId": q}, "mode": mode, "attachments": {}}
                for q, mode in got
            ]
        )
        out = json.dumps({"messageQueueAssignments": assignments}).encode()
        return cmd.response(ResponseCode.SUCCESS, None, None, out)

    def set_mode_handler(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        body = _json_body(cmd)
        topic, group = str(body.get("topic") or ""), str(body.get("consumerGroup") or "")
        mode = str(body.get("mode") or "")
        if mode not in ("PULL", "POP"):
            raise RequestError(ResponseCode.INVALID_PARAMETER, f"mode {mode[:20]!r} is not PULL or POP")
        try:
            share = int(body.get("popShareQueueNum") or 0)
        except (TypeError, ValueError):
            raise RequestError(ResponseCode.INVALID_PARAMETER, "popShareQueueNum is not a number") from None
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise RequestError(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if self.broker.topics.get(topic) is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        if self.broker.groups.table.get(group) is None:
            raise RequestError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"consumer group[{group}] not exist")
        self.modes.set(topic, group, mode, share)
        return cmd.response(ResponseCode.SUCCESS)

    def get_modes_handler(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, None, None, json.dumps(self.modes.snapshot()).encode())


def _json_body(cmd: RemotingCommand) -> dict[str, Any]:
    raw = cmd.body or b""
    if len(raw) > MAX_MODE_BODY:
        raise RequestError(ResponseCode.INVALID_PARAMETER, f"body of {len(raw)} bytes is too large")
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        raise RequestError(ResponseCode.INVALID_PARAMETER, "body is not JSON") from None
    if not isinstance(data, dict):
        raise RequestError(ResponseCode.INVALID_PARAMETER, "body is not a JSON object")
    return data
