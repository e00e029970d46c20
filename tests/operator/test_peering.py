"""rocketcluster.peering: which replica is active, by kopf's rule over the peering objects' keep-alives, the
priority a replica picks, and the flags it reads. e2e/test_operator_peering.py runs two operators against a
real API server and kills the active one mid-roll."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from rocketcluster.peering import choose_priority, is_active, live_peers, peering_arguments

NOW = datetime.datetime(2026, 11, 28, 21, 0, 0, tzinfo=datetime.UTC)


def _seen(seconds_ago: float) -> str:
    return (NOW - datetime.timedelta(seconds=seconds_ago)).isoformat()


def _peer(priority: int, seconds_ago: float = 1, lifetime: int = 30) -> dict[str, Any]:
    return {"priority": priority, "lifetime": lifetime, "lastseen": _seen(seconds_ago)}


@pytest.mark.parametrize(
    ("status", "priority", "active"),
    [
        (None, 5, True),  # no peering object yet: nobody else
        ({}, 5, True),
        ({"me": _peer(5)}, 5, True),  # only ourselves
        ({"me": _peer(5), "b": _peer(3)}, 5, True),  # the other is lower
        ({"me": _peer(5), "b": _peer(9)}, 5, False),  # the other is higher: stand by
        ({"me": _peer(5), "b": _peer(5)}, 5, False),  # a tie pauses both, as kopf does
        ({"me": _peer(5), "b": _peer(9, seconds_ago=31)}, 5, True),  # the higher one's keep-alive expired
        ({"me": _peer(5), "b": _peer(9, seconds_ago=29)}, 5, False),  # ... not yet
        ({"me": _peer(5), "b": _peer(9, seconds_ago=100, lifetime=0)}, 5, True),  # it said goodbye
        ({"b": _peer(9)}, 5, False),  # our own entry is not needed to be outranked
    ],
)
def test_is_active(status: Any, priority: int, active: bool) -> None:
    assert is_active(status, "me", priority, NOW) is active


@pytest.mark.parametrize(
    "entry",
    [
        "not an object",
        ["a", "list"],
        {"priority": "high", "lifetime": 30, "lastseen": _seen(1)},
        {"priority": 9, "lifetime": 30},  # no lastseen
        {"priority": 9, "lifetime": 30, "lastseen": "yesterday"},
        {"priority": 9, "lifetime": 10**30, "lastseen": _seen(1)},  # overflows a timedelta
        {"priority": 9, "lifetime": None, "lastseen": _seen(1)},
    ],
)
def test_hostile_entries_are_skipped(entry: Any) -> None:
    status = {"me": _peer(5), "bad": entry}
    assert [p.identity for p in live_peers(status, NOW)] == ["me"]
    assert is_active(status, "me", 5, NOW)


def test_a_naive_lastseen_is_utc() -> None:
    naive = (NOW - datetime.timedelta(seconds=1)).replace(tzinfo=None).isoformat()
    [peer] = live_peers({"b": {"priority": 1, "lifetime": 30, "lastseen": naive}}, NOW)
    assert peer.deadline == NOW + datetime.timedelta(seconds=29)


def test_a_newcomer_picks_a_priority_below_every_live_peer() -> None:
    statuses = [{"a": _peer(100), "b": _peer(40), "dead": _peer(-50, seconds_ago=99)}]
    for _ in range(200):
        priority = choose_priority(statuses, "me", NOW)
        assert priority < 40
        assert not is_active({**statuses[0], "me": _peer(priority)}, "me", priority, NOW)


def test_a_replica_that_restarts_does_not_outrank_itself_or_the_others() -> None:
    """Its own old entry (same identity) does not count; the other replica's does."""
    priority = choose_priority([{"me": _peer(10), "b": _peer(7)}], "me", NOW)
    assert priority < 7


def test_alone_the_priority_is_random_and_positive() -> None:
    picked = {choose_priority([None, {}], "me", NOW) for _ in range(50)}
    assert len(picked) > 40 and min(picked) > 0


def test_namespaced_peerings_are_all_read() -> None:
    """With several namespaces, the newcomer stands below the lowest live peer of any of them."""
    priority = choose_priority([{"a": _peer(50)}, {"b": _peer(20)}, None], "me", NOW)
    assert priority < 20


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], (None, None)),
        (["--standalone"], (None, None)),
        (["--peering=rocketcluster"], ("rocketcluster", None)),
        (["--peering", "rocketcluster", "--priority", "7"], ("rocketcluster", 7)),
        (["--peering=x", "--priority=-3", "-A"], ("x", -3)),
        (["--peering="], (None, None)),
        (["--peering=x", "--standalone"], (None, None)),  # --standalone turns peering off, as in kopf
        (["--standalone", "--peering=x"], (None, None)),
    ],
)
def test_peering_arguments(argv: list[str], expected: tuple[str | None, int | None]) -> None:
    assert peering_arguments(argv) == expected
