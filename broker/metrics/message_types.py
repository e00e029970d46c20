"""The message type of a send, as RocketMQ's metrics label it (message_type), from its properties.

Apart from broker_meters so that the send processor reads it without loading the metrics' dependencies.
"""

from __future__ import annotations

from broker.protocol.properties import Prop

__all__ = ["TYPED_PROPERTIES", "message_type"]

_DELAY_KEYS = (Prop.DELAY, "__STARTDELIVERTIME", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
# A send with none of these properties is "normal"
TYPED_PROPERTIES = frozenset((Prop.TRAN_MSG, Prop.SHARDING_KEY, *_DELAY_KEYS))


def message_type(props: dict[str, str]) -> str:
    """RocketMQ's message_type label of a send, from its properties (the order BrokerMetricsManager tests
    them in): a transaction's half message, then a sharding key (FIFO), then any delay or delivery time."""
    if props.get(Prop.TRAN_MSG) == "true":
        return "transaction"
    if Prop.SHARDING_KEY in props:
        return "fifo"
    for key in _DELAY_KEYS:
        if props.get(key):
            return "delay"
    return "normal"
