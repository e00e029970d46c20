"""The settings a gRPC client gets back on its telemetry stream, and its registration as remoting heartbeat data.

Pure functions. The reply follows RocketMQ's proxy (GrpcClientSettingsManager): a producer learns the largest body
(`maxMessageSize`), whether message types are checked, and a 3-attempt exponential backoff (10 ms .. 1 s, x2); a
consumer learns the receive batch size (32), the long-polling timeout (20 s), whether its group is FIFO
(`consumeMessageOrderly`) and its retry steps (`retryMaxTimes + 1` attempts, 1 s 5 s 10 s 30 s 1 m .. 2 h).
"""

from __future__ import annotations

from typing import Any

import orjson

from broker.grpc.pb import definition, service

__all__ = ["CONSUMER_DELAYS_S", "ClientKind", "heartbeat_body", "kind_of", "settings_reply"]

#: RocketMQ's delay levels 3..18 (1 s .. 2 h): a consumer's retry steps after a failed attempt.
CONSUMER_DELAYS_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)

ClientType = definition.ClientType


class ClientKind:
    """What a client registered as: a producer of topics, or a consumer group with its subscriptions."""

    __slots__ = ("client_type", "group", "subscriptions", "topics")

    def __init__(
        self, client_type: int, topics: list[str], group: str | None, subscriptions: list[tuple[str, str, str]]
    ) -> None:
        self.client_type = client_type
        self.topics = topics  # a producer's
        self.group = group  # a consumer's
        self.subscriptions = subscriptions  # (topic, expression type TAG|SQL92, expression)

    @property
    def is_producer(self) -> bool:
        return self.client_type == int(ClientType.PRODUCER)

    @property
    def is_consumer(self) -> bool:
        return self.client_type in (ClientType.PUSH_CONSUMER, ClientType.SIMPLE_CONSUMER)


def kind_of(settings: Any) -> ClientKind:
    """The registration of a client's `Settings`; ValueError when it names neither publishing nor subscription."""
    if settings.HasField("publishing"):
        topics = [t.name for t in settings.publishing.topics]
        return ClientKind(int(ClientType.PRODUCER), topics, None, [])
    if settings.HasField("subscription"):
        sub = settings.subscription
        if not sub.group.name:
            raise ValueError("subscription settings without a group")
        entries = []
        for entry in sub.subscriptions:
            sql = entry.expression.type == definition.FilterType.SQL
            entries.append((entry.topic.name, "SQL92" if sql else "TAG", entry.expression.expression or "*"))
        client_type = settings.client_type or ClientType.SIMPLE_CONSUMER
        return ClientKind(int(client_type), [], sub.group.name, entries)
    raise ValueError("settings carry neither publishing nor subscription")


def heartbeat_body(client_id: str, kind: ClientKind) -> bytes:
    """The HEART_BEAT body that registers this client in the broker's producer or consumer table."""
    producers = [{"groupName": topic} for topic in kind.topics]
    consumers = []
    if kind.is_consumer and kind.group:
        consumers.append(
            {
                "groupName": kind.group,
                # SIMPLE consumers pull when they like (CONSUME_ACTIVELY), PUSH ones are driven (CONSUME_PASSIVELY)
                "consumeType": "CONSUME_PASSIVELY"
                if kind.client_type == ClientType.PUSH_CONSUMER
                else "CONSUME_ACTIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [
                    {"topic": topic, "subString": expr, "expressionType": expr_type, "subVersion": 0}
                    for topic, expr_type, expr in kind.subscriptions
                ],
                "unitMode": False,
            }
        )
    return orjson.dumps({"clientID": client_id, "producerDataSet": producers, "consumerDataSet": consumers})


def settings_reply(
    settings: Any,
    *,
    max_body_size: int,
    validate_message_type: bool = True,
    fifo: bool = False,
    max_attempts: int = 17,
    receive_batch_size: int = 32,
    long_polling_timeout_s: int = 20,
) -> Any:
    """The TelemetryCommand answering `settings`: status OK and the client's settings merged with the server's."""
    out = definition.Settings()
    out.CopyFrom(settings)
    out.metric.on = False
    if settings.HasField("publishing"):
        out.publishing.max_body_size = max_body_size
        out.publishing.validate_message_type = validate_message_type
        policy = out.backoff_policy
        policy.Clear()
        policy.max_attempts = 3
        policy.exponential_backoff.initial.FromMilliseconds(10)
        policy.exponential_backoff.max.FromMilliseconds(1000)
        policy.exponential_backoff.multiplier = 2.0
    elif settings.HasField("subscription"):
        sub = out.subscription
        sub.fifo = fifo
        sub.receive_batch_size = receive_batch_size
        sub.long_polling_timeout.FromSeconds(long_polling_timeout_s)
        policy = out.backoff_policy
        policy.Clear()
        policy.max_attempts = max_attempts
        for delay in CONSUMER_DELAYS_S[: max(1, max_attempts - 1)]:
            policy.customized_backoff.next.add().FromSeconds(delay)
    command = service.TelemetryCommand()
    command.status.code = definition.Code.OK
    command.status.message = "OK"
    command.settings.CopyFrom(out)
    return command
