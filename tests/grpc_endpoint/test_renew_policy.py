"""The auto-renew policy (broker.grpc.renew_policy), by tables: when a kept handle is renewed, by which step, when
renewal stops and when the handle is given up."""

from __future__ import annotations

import pytest

from broker.grpc.renew_policy import (
    RENEW_STEPS_MS,
    Action,
    Decision,
    HandleState,
    RenewSettings,
    decide,
    retry_delay_ms,
)

S = RenewSettings(ahead_ms=10_000, max_time_ms=3 * 3600 * 1000, max_retry_times=3)
T0 = 1_700_000_000_000  # when the message was delivered


@pytest.mark.parametrize(
    ("state", "now", "expected"),
    [
        # far from expiry: wait until renewAhead before it
        (HandleState(T0 + 60_000, T0), T0, Decision(Action.WAIT, at_ms=T0 + 50_000)),
        (HandleState(T0 + 60_000, T0), T0 + 49_999, Decision(Action.WAIT, at_ms=T0 + 50_000)),
        # within renewAhead: the first step is one minute
        (HandleState(T0 + 60_000, T0), T0 + 50_000, Decision(Action.RENEW, invisible_ms=60_000)),
        (HandleState(T0 + 60_000, T0), T0 + 59_999, Decision(Action.RENEW, invisible_ms=60_000)),
        # the steps grow with the renewals before
        (HandleState(T0 + 10_000, T0, renew_times=1), T0 + 5_000, Decision(Action.RENEW, invisible_ms=180_000)),
        (HandleState(T0 + 10_000, T0, renew_times=2), T0 + 5_000, Decision(Action.RENEW, invisible_ms=300_000)),
        (HandleState(T0 + 10_000, T0, renew_times=3), T0 + 5_000, Decision(Action.RENEW, invisible_ms=600_000)),
        (HandleState(T0 + 10_000, T0, renew_times=4), T0 + 5_000, Decision(Action.RENEW, invisible_ms=1_800_000)),
        (HandleState(T0 + 10_000, T0, renew_times=5), T0 + 5_000, Decision(Action.RENEW, invisible_ms=3_600_000)),
        # and stay at an hour
        (HandleState(T0 + 10_000, T0, renew_times=40), T0 + 5_000, Decision(Action.RENEW, invisible_ms=3_600_000)),
        # already visible again (a renewal came too late): given up, never changed
        (HandleState(T0 + 60_000, T0), T0 + 60_000, Decision(Action.DROP)),
        (HandleState(T0 + 60_000, T0), T0 + 90_000, Decision(Action.DROP)),
        # too many failed renewals in a row
        (HandleState(T0 + 60_000, T0, retry_times=3), T0 + 55_000, Decision(Action.DROP)),
        (HandleState(T0 + 60_000, T0, retry_times=2), T0 + 55_000, Decision(Action.RENEW, invisible_ms=60_000)),
        # held for renewMaxTimeMillis: handed back with the retry delay of its attempt
        (
            HandleState(T0 + 3 * 3600 * 1000 + 5_000, T0, renew_times=9),
            T0 + 3 * 3600 * 1000,
            Decision(Action.STOP, invisible_ms=1_000),
        ),
        (
            HandleState(T0 + 3 * 3600 * 1000 + 5_000, T0, renew_times=9, reconsume_times=2),
            T0 + 3 * 3600 * 1000 + 1,
            Decision(Action.STOP, invisible_ms=10_000),
        ),
        # just under renewMaxTimeMillis: still renewed
        (
            HandleState(T0 + 3 * 3600 * 1000 + 5_000, T0, renew_times=9),
            T0 + 3 * 3600 * 1000 - 1,
            Decision(Action.RENEW, invisible_ms=3_600_000),
        ),
    ],
)
def test_decide(state: HandleState, now: int, expected: Decision) -> None:
    assert decide(state, now, S) == expected


@pytest.mark.parametrize(
    ("settings", "state", "now", "expected"),
    [
        # a short first invisible time with a short renewAhead (how the SDK tests run)
        (RenewSettings(ahead_ms=2_000), HandleState(T0 + 3_000, T0), T0 + 999, Decision(Action.WAIT, at_ms=T0 + 1_000)),
        (
            RenewSettings(ahead_ms=2_000),
            HandleState(T0 + 3_000, T0),
            T0 + 1_000,
            Decision(Action.RENEW, invisible_ms=60_000),
        ),
        # renewAhead of zero: renewed only in the last instant before expiry
        (RenewSettings(ahead_ms=0), HandleState(T0 + 3_000, T0), T0 + 2_999, Decision(Action.WAIT, at_ms=T0 + 3_000)),
        # renewAhead longer than the invisible time: renewed at once
        (
            RenewSettings(ahead_ms=120_000),
            HandleState(T0 + 60_000, T0),
            T0,
            Decision(Action.RENEW, invisible_ms=60_000),
        ),
        # a short renewMaxTimeMillis
        (
            RenewSettings(max_time_ms=30_000),
            HandleState(T0 + 35_000, T0, renew_times=1),
            T0 + 30_000,
            Decision(Action.STOP, invisible_ms=1_000),
        ),
        (RenewSettings(max_retry_times=1), HandleState(T0 + 5_000, T0, retry_times=1), T0, Decision(Action.DROP)),
    ],
)
def test_decide_with_other_settings(settings: RenewSettings, state: HandleState, now: int, expected: Decision) -> None:
    assert decide(state, now, settings) == expected


@pytest.mark.parametrize(
    ("reconsume_times", "ms"),
    [(-1, 1_000), (0, 1_000), (1, 5_000), (2, 10_000), (3, 30_000), (4, 60_000), (17, 7_200_000), (99, 7_200_000)],
)
def test_retry_delay(reconsume_times: int, ms: int) -> None:
    assert retry_delay_ms(reconsume_times) == ms


def test_steps_grow() -> None:
    assert list(RENEW_STEPS_MS) == sorted(RENEW_STEPS_MS)
    assert RENEW_STEPS_MS[0] == 60_000 and RENEW_STEPS_MS[-1] == 3_600_000
