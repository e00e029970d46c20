"""find_property (the store's dispatch path) and find_property_bytes (the index helper's) agree with
decode_properties on any properties text."""

from __future__ import annotations

import random

import pytest

from broker.protocol.properties import decode_properties, find_property, find_property_bytes

_PIECES = ["TAGS", "KEYS", "UNIQ_KEY", "A", "x", "\x01", "\x02", "", "TAGSX", "XTAGS", "é"]


@pytest.mark.parametrize("seed", range(5))
def test_find_property_matches_the_dict(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(20_000):
        text = "".join(rnd.choice(_PIECES) for _ in range(rnd.randint(0, 14)))
        decoded = decode_properties(text)
        for name in ("TAGS", "KEYS", "UNIQ_KEY", "A"):
            assert find_property(text, name) == decoded.get(name), (text, name)
            expected = decoded.get(name)
            assert find_property_bytes(text.encode(), name) == (expected.encode() if expected else None), (text, name)


def test_last_valid_segment_wins() -> None:
    assert find_property("TAGS\x01a\x02TAGS\x01b\x02", "TAGS") == "b"
    assert find_property("TAGS\x01a\x02TAGS\x01\x02", "TAGS") == "a"  # an empty value is skipped, as Java does
    assert find_property("X\x01TAGS\x01v\x02", "TAGS") is None  # inside another property's value
