"""When and by how much a kept receipt handle is renewed: a pure function of the handle's state and the time.

RocketMQ's proxy renews the handles of push consumers (ReceiveMessage with `auto_renew`) itself: once a handle is
within `renewAheadTimeMillis` of becoming visible again, its invisible time is changed to the next step of a
growing ladder (1 min, 3 min, 5 min, 10 min, 30 min, then 1 h each time), until the message has been held for
`renewMaxTimeMillis`; then it is handed back with the group's retry delay for its delivery attempt and no longer
renewed. A renewal that fails for a passing reason is tried again, up to `maxRenewRetryTimes` in a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from broker.grpc.settings import CONSUMER_DELAYS_S

__all__ = ["RENEW_STEPS_MS", "Action", "Decision", "HandleState", "RenewSettings", "decide", "retry_delay_ms"]

#: The invisible time each renewal sets, by how many renewals came before it (the last repeats).
RENEW_STEPS_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)


@dataclass(frozen=True, slots=True)
class RenewSettings:
    """The proxy keys the policy reads (broker config, RocketMQ's names)."""

    ahead_ms: int = 10_000
    max_time_ms: int = 3 * 3600 * 1000
    max_retry_times: int = 3


@dataclass(frozen=True, slots=True)
class HandleState:
    """What the policy needs of one kept handle: when its current handle makes the message visible again, when
    it was first delivered to this client, how often it was renewed, how many renewals failed in a row, and the
    message's reconsume times (delivery attempt - 1)."""

    visible_at_ms: int
    received_at_ms: int
    renew_times: int = 0
    retry_times: int = 0
    reconsume_times: int = 0


class Action(Enum):
    WAIT = "wait"  # nothing yet; look again at `at_ms`
    RENEW = "renew"  # change the invisible time to `invisible_ms`, keep renewing
    STOP = "stop"  # held for renewMaxTimeMillis: change to `invisible_ms` (the retry delay), then forget it
    DROP = "drop"  # forget it: already visible again, or too many failed renewals


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    at_ms: int = 0
    invisible_ms: int = 0


def retry_delay_ms(reconsume_times: int) -> int:
    """The group's retry delay for a message consumed `reconsume_times` times before (the backoff the endpoint
    announces to consumers in its settings)."""
    return CONSUMER_DELAYS_S[min(max(reconsume_times, 0), len(CONSUMER_DELAYS_S) - 1)] * 1000


def decide(state: HandleState, now_ms: int, settings: RenewSettings) -> Decision:
    """What to do with one kept handle at `now_ms`."""
    if state.retry_times >= settings.max_retry_times:
        return Decision(Action.DROP)
    if state.visible_at_ms <= now_ms:
        # the broker already hands it out again: a change would be refused, and another consumer may have it
        return Decision(Action.DROP)
    renew_at = state.visible_at_ms - settings.ahead_ms
    if now_ms < renew_at:
        return Decision(Action.WAIT, at_ms=renew_at)
    if now_ms - state.received_at_ms >= settings.max_time_ms:
        return Decision(Action.STOP, invisible_ms=retry_delay_ms(state.reconsume_times))
    step = RENEW_STEPS_MS[min(state.renew_times, len(RENEW_STEPS_MS) - 1)]
    return Decision(Action.RENEW, invisible_ms=step)
