"""Timed messages: which delivery time a message asks for, and how it is parked and released.

A producer asks for a delivery time with one of RocketMQ 5's properties, TIMER_DELAY_SEC (seconds
from now), TIMER_DELAY_MS (milliseconds from now) or TIMER_DELIVER_MS (an epoch time in ms), or
with `__STARTDELIVERTIME` (an epoch time in ms, as RocketMQ 4 commercial clients set it). The send
path (processors/send.py, and a committed transaction) then rewrites the message onto the single put
path: topic `rmq_sys_wheel_timer` queue 0 with TIMER_OUT_MS = the delivery time and REAL_TOPIC /
REAL_QID = where it goes, as delay levels do with SCHEDULE_TOPIC_XXXX. The timer service (timer.py)
puts it back to its real topic at that millisecond.

A time now or in the past means now: the message is stored as an ordinary one. A delay level wins
over the timer properties (as in RocketMQ). Past `timerMaxDelaySec`, or with an unreadable value, or
with timerWheelEnable=false, the send is refused with MESSAGE_ILLEGAL / SYSTEM_ERROR and a remark
that says why; nothing is stored.
"""

from __future__ import annotations

from broker.protocol.codes import ResponseCode
from broker.protocol.message import MessageExt
from broker.protocol.properties import Prop
from broker.server.errors import RequestError
from broker.store.results import MessageToStore

__all__ = [
    "START_DELIVER_TIME",
    "TIMER_DELAY_MS",
    "TIMER_DELAY_SEC",
    "TIMER_DELIVER_MS",
    "TIMER_DEQUEUE_MS",
    "TIMER_ENQUEUE_MS",
    "TIMER_OUT_MS",
    "TIMER_PROPERTIES",
    "TIMER_TOPIC",
    "may_be_timed",
    "park_for_timer",
    "release_from_timer",
    "requested_delivery",
    "timer_delivery",
]

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
START_DELIVER_TIME = "__STARTDELIVERTIME"
#: On a parked message: when it is due (ms). On a released one, when it was parked and released.
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
#: Relative ones first: RocketMQ reads TIMER_DELAY_SEC, then TIMER_DELAY_MS, then TIMER_DELIVER_MS.
TIMER_PROPERTIES = (TIMER_DELAY_SEC, TIMER_DELAY_MS, TIMER_DELIVER_MS, START_DELIVER_TIME)


def may_be_timed(properties_text: str) -> bool:
    """A cheap pre-check on a send's raw properties (one substring search in the common case)."""
    return "TIMER_DE" in properties_text or START_DELIVER_TIME in properties_text


def requested_delivery(props: dict[str, str], now_ms: int) -> int | None:
    """The absolute delivery time (ms) a message asks for, or None when it asks for none.
    ValueError naming the property when its value is not a whole number."""
    for name in TIMER_PROPERTIES:
        raw = props.get(name)
        if raw is None:
            continue
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(f"the {name} property is not a whole number: {raw[:40]!r}") from None
        if name == TIMER_DELAY_SEC:
            return now_ms + value * 1000
        if name == TIMER_DELAY_MS:
            return now_ms + value
        return value
    return None


def timer_delivery(props: dict[str, str], now_ms: int, *, enabled: bool, max_delay_sec: int) -> int | None:
    """When a sent message must be parked until: its delivery time, or None to store it as it is (no
    timer property, a delay level, or a time not in the future). RequestError when it is refused."""
    if props.get(Prop.DELAY, "0") not in ("", "0"):
        return None
    try:
        deliver_ms = requested_delivery(props, now_ms)
    except ValueError as exc:
        raise RequestError(ResponseCode.MESSAGE_ILLEGAL, f"timer message illegal: {exc}") from None
    if deliver_ms is None or deliver_ms <= now_ms:
        return None
    if not enabled:
        raise RequestError(
            ResponseCode.SYSTEM_ERROR, "accurate timer message is not enabled, timerWheelEnable is false"
        )
    if deliver_ms - now_ms > max_delay_sec * 1000:
        raise RequestError(
            ResponseCode.MESSAGE_ILLEGAL,
            f"timer message illegal, the delay time should not be bigger than the max delay {max_delay_sec * 1000}ms "
            f"(timerMaxDelaySec={max_delay_sec}); it asked for {deliver_ms - now_ms}ms",
        )
    return deliver_ms


def park_for_timer(msg: MessageToStore, props: dict[str, str], deliver_ms: int) -> None:
    """Rewrite `msg` (whose full properties are `props`) onto the timer topic until `deliver_ms`."""
    props[TIMER_OUT_MS] = str(deliver_ms)
    props[Prop.REAL_TOPIC] = msg.topic
    props[Prop.REAL_QID] = str(msg.queue_id)
    msg.topic = TIMER_TOPIC
    msg.queue_id = 0
    msg.properties = props
    msg.properties_bytes = None
    msg.dispatch_keys = None  # its stored properties changed


def release_from_timer(parked: MessageExt, now_ms: int) -> MessageToStore:
    """The message to put when a parked one is due: its real topic and queue, the timer's bookkeeping
    replaced by when it was parked (its store time) and released. The user's own properties stay."""
    props = dict(parked.properties)
    topic = props.pop(Prop.REAL_TOPIC)
    queue_id = int(props.pop(Prop.REAL_QID, "0") or 0)
    props.pop(TIMER_OUT_MS, None)
    props[TIMER_ENQUEUE_MS] = str(parked.store_timestamp)
    props[TIMER_DEQUEUE_MS] = str(now_ms)
    return MessageToStore.from_stored(parked, topic=topic, queue_id=queue_id, properties=props)
