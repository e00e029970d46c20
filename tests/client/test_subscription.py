"""Subscription expressions and the exact client-side tag filter."""

from __future__ import annotations

import pytest

from broker.client.subscription import parse_subscription
from broker.protocol.bodies import SubscriptionData as WireSubscription
from broker.protocol.javahash import java_string_hash


@pytest.mark.parametrize(
    ("expr", "tags"),
    [
        ("*", ()),
        ("", ()),
        (None, ()),
        ("  *  ", ()),
        ("tagA", ("tagA",)),
        ("tagA || tagB", ("tagA", "tagB")),
        ("tagA||tagB||tagA", ("tagA", "tagB")),
        (" a ||  || b ", ("a", "b")),
    ],
)
def test_parse(expr: str | None, tags: tuple[str, ...]) -> None:
    sub = parse_subscription("T", expr)
    assert sub.tags_set == tags
    assert sub.code_set == tuple(java_string_hash(t) for t in tags)
    assert sub.sub_all is (not tags)


def test_expression_without_tags_is_an_error() -> None:
    with pytest.raises(ValueError):
        parse_subscription("T", "||")


@pytest.mark.parametrize(
    ("expr", "tag", "matches"),
    [
        ("*", None, True),
        ("*", "x", True),
        ("a || b", "a", True),
        ("a || b", "b", True),
        ("a || b", "c", False),
        ("a || b", None, False),
        ("a", "A", False),
        ("a", "a ", False),
    ],
)
def test_exact_filter(expr: str, tag: str | None, matches: bool) -> None:
    assert parse_subscription("T", expr).matches(tag) is matches


def test_heartbeat_json_is_readable_by_the_broker_parser() -> None:
    sub = parse_subscription("T", "a || b")
    wire = WireSubscription.from_obj(sub.to_json())
    assert wire.topic == "T"
    assert set(wire.tags_set) == {"a", "b"}
