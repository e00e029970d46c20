"""UNIQ_KEY generation and parsing (broker.protocol.uniq_key)."""

from __future__ import annotations

import time

import pytest

from broker.protocol.uniq_key import (
    InvalidUniqKey,
    UniqKeyGenerator,
    month_start_ms,
    new_uniq_key,
    parse_uniq_key,
    uniq_key_time,
)

# A key written by the C++ 1.x client (rocketmq 0.4.4). It stores 127.0.0.1 byte-swapped
# (0100007F), but the layout is still 16 bytes / 32 hex characters and must parse.
CPP_KEY = "0100007F000099AC00007E2BB3730100"


def test_ipv4_layout_and_parse() -> None:
    now = int(time.time() * 1000)
    gen = UniqKeyGenerator(ip="10.1.2.3", pid=0x12345, seed=0xCAFEBABE)
    key = gen.next(now)
    assert len(key) == 32 and key == key.upper()
    assert key.startswith("0A010203" + "2345" + "CAFEBABE")
    info = parse_uniq_key(key)
    assert (info.ip, info.pid, info.seed) == ("10.1.2.3", 0x2345, 0xCAFEBABE)
    assert info.span_ms == now - month_start_ms(now)
    assert uniq_key_time(key, now_ms=now + 5000) == now


def test_ipv6_keys_are_56_characters() -> None:
    key = UniqKeyGenerator(ip="::1", pid=1, seed=2).next()
    assert len(key) == 56 and parse_uniq_key(key).ip == "::1"


def test_counter_makes_keys_unique_and_wraps_at_16_bits() -> None:
    gen = UniqKeyGenerator(seed=1)
    now = int(time.time() * 1000)
    keys = [gen.next(now) for _ in range(70000)]
    assert len(set(keys)) == 65536
    counters = [parse_uniq_key(k).counter for k in keys[:3]]
    assert counters[1] == (counters[0] + 1) & 0xFFFF


def test_month_rollover_restarts_the_span() -> None:
    gen = UniqKeyGenerator(seed=1)
    start = month_start_ms(int(time.time() * 1000))
    before = parse_uniq_key(gen.next(start - 1)).span_ms
    after = parse_uniq_key(gen.next(start + 10)).span_ms
    assert before > 27 * 86_400_000 and after == 10


def test_time_from_last_month_when_span_would_be_in_the_future() -> None:
    now = month_start_ms(int(time.time() * 1000)) + 60_000  # one minute into this month
    made = now - 3_600_000  # an hour ago: last month
    key = UniqKeyGenerator(seed=1).next(made)
    assert uniq_key_time(key, now_ms=now) == made


def test_real_client_key_parses() -> None:
    info = parse_uniq_key(CPP_KEY)
    assert info.counter == 0x0100 and len(info.ip.split(".")) == 4
    assert len(new_uniq_key()) == 32


@pytest.mark.parametrize("bad", ["", "XYZ", "0" * 31, "G" * 32, "0" * 40])
def test_invalid_keys(bad: str) -> None:
    with pytest.raises(InvalidUniqKey):
        parse_uniq_key(bad)
