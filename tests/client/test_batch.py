"""Batch validation and the 4 MiB split; bodies decode with the broker's batch decoder."""

from __future__ import annotations

import pytest

from broker.client.batch import batch_record_size, check_batch, encode_batch_body, split_batches
from broker.client.errors import ClientError, MessageTooLarge
from broker.client.message import Message
from broker.protocol.batch import decode_batch
from broker.protocol.properties import decode_properties

MiB = 1024 * 1024


def test_record_size_matches_the_encoding() -> None:
    msgs = [Message("T", b"x" * n, tags="t", keys=["k1", "k2"], properties={"u": "v"}) for n in (1, 100, 5000)]
    assert sum(batch_record_size(m) for m in msgs) == len(encode_batch_body(msgs))


def test_round_trip_through_the_broker_decoder() -> None:
    msgs = [Message("T", f"body-{i}".encode(), tags=f"tag{i % 3}", keys=f"key-{i}", flag=i) for i in range(5)]
    decoded = decode_batch(encode_batch_body(msgs))
    assert [d.body for d in decoded] == [m.body for m in msgs]
    assert [d.flag for d in decoded] == list(range(5))
    assert [decode_properties(d.properties)["KEYS"] for d in decoded] == [f"key-{i}" for i in range(5)]


@pytest.mark.parametrize(
    ("sizes", "limit", "expected_parts"),
    [
        ([10] * 10, 1000, [10]),
        ([100] * 10, 3 * (100 + 22 + 0), [3, 3, 3, 1]),
        ([MiB] * 10, 4 * MiB, [3, 3, 3, 1]),  # 4 x (1 MiB + 22) does not fit 4 MiB
        ([4 * MiB - 22], 4 * MiB, [1]),
    ],
)
def test_split_respects_the_limit(sizes: list[int], limit: int, expected_parts: list[int]) -> None:
    msgs = [Message("T", b"x" * n) for n in sizes]
    parts = split_batches(msgs, limit)
    assert [len(p) for p in parts] == expected_parts
    assert [m for p in parts for m in p] == msgs
    assert all(len(encode_batch_body(p)) <= limit for p in parts)


def test_a_message_larger_than_the_limit_cannot_be_batched() -> None:
    with pytest.raises(MessageTooLarge):
        split_batches([Message("T", b"x" * (4 * MiB))], 4 * MiB)


@pytest.mark.parametrize(
    ("msgs", "error"),
    [
        ([], "at least one"),
        ([Message("A", b"1"), Message("B", b"2")], "one topic"),
        ([Message("%RETRY%g", b"1")], "retry"),
        ([Message("T", b"1", delay_time_level=3)], "delayed"),
        ([Message("T", b"1"), Message("T", b"2", wait_store_msg_ok=False)], "waitStoreMsgOK"),
    ],
)
def test_check_batch_rejects(msgs: list[Message], error: str) -> None:
    with pytest.raises(ClientError, match=error):
        check_batch(msgs)
