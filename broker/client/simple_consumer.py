"""The asyncio SimpleConsumer (RocketMQ 5's): the application receives, acks and extends invisibility itself.

Consumption goes through POP: the broker hands out messages and keeps them invisible to the group for
`invisible_duration`; a message that is not acked in that time comes back (from the group's pop-retry topic,
its `reconsume_times` one higher), and after the group's retry limit it goes to `%DLQ%<group>`. The broker
tracks what was handed out, so any number of consumers of a group share its queues without rebalancing and
nothing is committed by the client.

    consumer = SimpleConsumer("my-group", "127.0.0.1:9876", {"orders": "*"})
    await consumer.start()
    for msg in await consumer.receive(max_messages=16, invisible_duration=30):
        handle(msg)
        await consumer.ack(msg)
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Mapping

from broker.client.api import ConsumerData
from broker.client.config import ClientConfig, client_config_with
from broker.client.errors import IllegalStateError, NoRouteError
from broker.client.instance import ClientInstance
from broker.client.message import MessageExt
from broker.client.pop import POP_CK, Receipt, popped_messages, receipt
from broker.client.route import Perm
from broker.client.subscription import MessageSelector, SubscriptionData, parse_subscription
from broker.protocol.pop import ExtraInfo, parse_extra_info

__all__ = ["INIT_MODE_MAX", "INIT_MODE_MIN", "SimpleConsumer"]

log = logging.getLogger(__name__)

# Where a group with no offset on a queue starts (RocketMQ's ConsumeInitMode)
INIT_MODE_MIN = 0
INIT_MODE_MAX = 1
# The broker refuses more in one pop (reference A.3)
MAX_MESSAGES = 32


class SimpleConsumer:
    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        subscriptions: Mapping[str, str | MessageSelector | None] | None = None,
        *,
        await_duration: float = 20.0,
        init_mode: int = INIT_MODE_MAX,
        client_config: ClientConfig | None = None,
    ) -> None:
        """`subscriptions`: topic -> tag expression ("*", "a || b") or MessageSelector. `await_duration`: how
        long a receive waits on the broker for a message (long polling). `init_mode`: where a group new to a
        queue starts; MAX, as the 5.x SDKs do, starts at the end, or at 0 for a queue whose first message is
        still in the broker's memory."""
        if not group:
            raise ValueError("a SimpleConsumer needs a consumer group")
        self.group = group
        self.client_config = client_config_with(client_config, namesrv_addr)
        self.await_duration = await_duration
        self.init_mode = init_mode
        self.subscriptions: dict[str, SubscriptionData] = {
            topic: parse_subscription(topic, expr) for topic, expr in (subscriptions or {}).items()
        }
        self.instance = ClientInstance(
            self.client_config, topics=lambda: self.subscriptions, heartbeat=self._heartbeat_data
        )
        self._turn = itertools.count()
        self._started = False

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        self.subscriptions[topic] = parse_subscription(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)

    async def start(self) -> None:
        if self._started:
            return
        for topic in self.subscriptions:
            await self.instance.update_route(topic)
        await self.instance.start()
        await self.instance.send_heartbeat()
        self._started = True

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        try:
            await self.instance.unregister(consumer_group=self.group)
        finally:
            await self.instance.close()

    async def __aenter__(self) -> SimpleConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ------------------------------------------------------------------ consumption

    async def receive(self, max_messages: int = 16, invisible_duration: float = 30.0) -> list[MessageExt]:
        """Up to `max_messages` (1 to 32) from one broker of a subscribed topic, taken in turn; an empty list
        when none came within `await_duration`. Each stays invisible to the group for `invisible_duration`
        seconds unless acked, or changed by `change_invisible_duration`."""
        self._check_started()
        if not 1 <= max_messages <= MAX_MESSAGES:
            raise ValueError(f"max_messages must be 1 to {MAX_MESSAGES}, got {max_messages}")
        if invisible_duration <= 0:
            raise ValueError(f"invisible_duration must be positive, got {invisible_duration}")
        topic, broker_name, addr = await self._next_source()
        sub = self.subscriptions[topic]
        ext = {
            "consumerGroup": self.group,
            "topic": topic,
            "queueId": "-1",
            "maxMsgNums": str(max_messages),
            "invisibleTime": str(int(invisible_duration * 1000)),
            "pollTime": str(int(self.await_duration * 1000)),
            "bornTime": str(time.time_ns() // 1_000_000),
            "initMode": str(self.init_mode),
            "expType": sub.expression_type,
            "exp": sub.sub_string,
        }
        timeout = self.await_duration + self.client_config.request_timeout
        response = await self.instance.api.pop(addr, ext, timeout)
        return [] if response is None else popped_messages(response, broker_name, self.group)

    async def ack(self, msg: MessageExt) -> None:
        """Tell the broker `msg` was consumed: it will not come back. Refused once its invisible time ended."""
        self._check_started()
        target = receipt(msg, self.group)
        addr = await self.instance.find_master(parse_extra_info(target.extra_info).broker_name, msg.topic)
        await self.instance.api.ack_message(addr, self._handle_fields(target))

    async def change_invisible_duration(self, msg: MessageExt, invisible_duration: float) -> None:
        """Keep `msg` invisible for `invisible_duration` seconds from now; its handle is replaced by the new one."""
        self._check_started()
        target = receipt(msg, self.group)
        handle = parse_extra_info(target.extra_info)
        addr = await self.instance.find_master(handle.broker_name, msg.topic)
        ext = self._handle_fields(target)
        ext["invisibleTime"] = str(int(invisible_duration * 1000))
        reply = await self.instance.api.change_invisible_time(addr, ext)
        # the new checkpoint covers this message alone: its start offset is the message's own offset
        msg.properties[POP_CK] = str(
            ExtraInfo(
                handle.queue_offset,
                int(reply["popTime"]),
                int(reply["invisibleTime"]),
                int(reply["reviveQid"]),
                handle.flag,
                handle.broker_name,
                handle.queue_id,
                handle.queue_offset,
            )
        )

    # ------------------------------------------------------------------ internals

    def _check_started(self) -> None:
        if not self._started:
            raise IllegalStateError("the SimpleConsumer is not started")

    def _handle_fields(self, target: Receipt) -> dict[str, str]:
        return {
            "consumerGroup": self.group,
            "topic": target.topic,
            "queueId": str(target.queue_id),
            "extraInfo": target.extra_info,
            "offset": str(target.offset),
        }

    async def _next_source(self) -> tuple[str, str, str]:
        """(topic, broker name, master address) of the next readable broker of the subscribed topics."""
        sources: list[tuple[str, str, str]] = []
        for topic in sorted(self.subscriptions):
            route = await self.instance.get_route(topic)
            if route is None:
                continue
            for qd in route.queue_datas:
                addr = route.master_addr(qd.broker_name)
                if addr is not None and Perm.readable(qd.perm) and qd.read_queue_nums > 0:
                    sources.append((topic, qd.broker_name, addr))
        if not sources:
            raise NoRouteError(f"no readable master serves {', '.join(sorted(self.subscriptions)) or 'any topic'}")
        return sources[next(self._turn) % len(sources)]

    def _heartbeat_data(self) -> tuple[list[str], list[ConsumerData]]:
        data: ConsumerData = {
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "consumeType": "CONSUME_POP",
            "groupName": self.group,
            "messageModel": "CLUSTERING",
            "subscriptionDataSet": [s.to_json() for s in self.subscriptions.values()],
            "unitMode": False,
        }
        return [], [data]
