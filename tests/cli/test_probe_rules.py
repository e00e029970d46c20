"""The readiness rules of `rocketcluster-probe broker`, by table: registration age, the HA link, replication lag."""

from __future__ import annotations

import pytest

from broker.cli.probe import registration_problem, registration_window_ms, slave_lag_problem, slave_link_problem
from broker.server.registration import register_period_ms

NOW = 1_700_000_000_000
REGISTERED = {
    "registerNameServerPeriod": "30000",
    "registerBrokerTimeoutMills": "6000",
    "registeredNameServers": "10.0.0.1:9876",
    "registerFailedNameServers": "",
    "lastRegisterTimestamp": str(NOW - 1_000),
}


def test_window_is_two_periods_and_the_timeout() -> None:
    assert registration_window_ms(REGISTERED) == 66_000
    assert registration_window_ms({**REGISTERED, "registerNameServerPeriod": "1000"}) == 8_000
    assert registration_window_ms({}) == 66_000  # RocketMQ's defaults when the broker says nothing


@pytest.mark.parametrize(
    ("change", "window", "expected"),
    [
        ({}, None, None),
        ({"lastRegisterTimestamp": str(NOW - 65_000)}, None, None),
        ({"lastRegisterTimestamp": str(NOW - 67_000)}, None, "was 67.0 s ago (window 66.0 s)"),
        ({"lastRegisterTimestamp": str(NOW - 3_000)}, 2_000, "was 3.0 s ago (window 2.0 s)"),
        ({"registeredNameServers": ""}, None, "not registered with any NameServer yet"),
        (
            {"registeredNameServers": "", "registerFailedNameServers": "10.0.0.1:9876 (ConnectError: refused)"},
            None,
            "not registered with any NameServer: 10.0.0.1:9876 (ConnectError: refused)",
        ),
        # one of two NameServers down: still registered
        (
            {"registeredNameServers": "10.0.0.2:9876", "registerFailedNameServers": "10.0.0.1:9876 (timeout)"},
            None,
            None,
        ),
    ],
)
def test_registration(change: dict[str, str], window: int | None, expected: str | None) -> None:
    problem = registration_problem({**REGISTERED, **change}, NOW, window)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and expected in problem


def test_a_broker_without_the_registration_fields_is_not_ready() -> None:
    problem = registration_problem({"brokerVersionDesc": "V4_9_4"}, NOW)
    assert problem is not None and "does not report" in problem


LINK_UP = {"haConnected": "true", "haDiverged": "", "haMasterAddress": "10.0.0.5:10912", "haLastMasterContactMs": "40"}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, None),
        (
            {"haConnected": "false", "haLastMasterContactMs": "25300"},
            "master 10.0.0.5:10912 is down (last contact 25.3 s",
        ),
        ({"haConnected": "false", "haLastMasterContactMs": "-1000"}, "(never connected)"),
        ({"haConnected": "false", "haMasterAddress": ""}, "master (master not known yet) is down"),
        ({"haDiverged": "the slave's CommitLog ends at 9, AHEAD"}, "replication stopped: the slave's CommitLog ends"),
    ],
)
def test_slave_link(change: dict[str, str], expected: str | None) -> None:
    problem = slave_link_problem({**LINK_UP, **change})
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and expected in problem


MIB = 1 << 20


@pytest.mark.parametrize(
    ("slave_max", "master_max", "bound", "max_lag", "expected"),
    [
        (0, 0, 256 * MIB, None, None),  # both empty: nothing to replicate
        (5000, 5000, 256 * MIB, None, None),
        (5000, 5000 + 256 * MIB, 256 * MIB, None, None),
        (5000, 5001 + 256 * MIB, 256 * MIB, None, "replication lag 268435457 bytes > 268435456"),
        (5000, 9000, 256 * MIB, 1000, "replication lag 4000 bytes > 1000"),  # --max-lag-bytes wins
        (5000, 5000, 256 * MIB, 0, None),  # --max-lag-bytes 0: fully caught up
        (0, 4000, 256 * MIB, None, "nothing replicated yet (master at 4000)"),
        (9000, 4000, 256 * MIB, None, "ahead of its master's 4000"),
    ],
)
def test_slave_lag(slave_max: int, master_max: int, bound: int, max_lag: int | None, expected: str | None) -> None:
    slave = {"commitLogMaxOffset": str(slave_max), "haSlaveFallbehindMax": str(bound)}
    problem = slave_lag_problem(slave, {"commitLogMaxOffset": str(master_max)}, max_lag)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and expected in problem


def test_slave_lag_needs_both_offsets() -> None:
    problem = slave_lag_problem({"commitLogMaxOffset": "10"}, {})
    assert problem is not None and "commitLogMaxOffset" in problem


@pytest.mark.parametrize(
    ("configured", "effective"), [(30_000, 30_000), (1_000, 1_000), (200, 1_000), (90_000, 60_000)]
)
def test_register_period_is_clamped_to_1_to_60_seconds(configured: int, effective: int) -> None:
    assert register_period_ms(configured) == effective
