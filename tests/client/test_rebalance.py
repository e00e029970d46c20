"""Rebalance decisions: ownership per model and where a new queue starts."""

from __future__ import annotations

import pytest

from broker.client.message import ConsumeFromWhere, MessageModel, MessageQueue
from broker.client.rebalance import StartAction, assign, diff, start_action

MQS = [MessageQueue("T", b, i) for b in ("a", "b") for i in range(4)]


def test_clustering_splits_and_broadcasting_takes_all() -> None:
    cids = ["c2", "c1"]  # any order: both sides sort
    mine = assign(MessageModel.CLUSTERING, "c1", MQS, cids)
    theirs = assign(MessageModel.CLUSTERING, "c2", list(reversed(MQS)), cids)
    assert mine | theirs == set(MQS) and not mine & theirs
    assert assign(MessageModel.BROADCASTING, "c1", MQS, cids) == set(MQS)
    assert assign(MessageModel.CLUSTERING, "c1", MQS, []) == set()


def test_diff() -> None:
    drop, add = diff(MQS[:4], set(MQS[2:6]))
    assert drop == set(MQS[:2]) and add == set(MQS[4:6])


@pytest.mark.parametrize(
    ("stored", "where", "retry", "action"),
    [
        (0, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, False, StartAction.STORED),
        (17, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, False, StartAction.STORED),
        (-1, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, False, StartAction.MAX),
        (-1, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, False, StartAction.ZERO),
        (-1, ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, False, StartAction.TIMESTAMP),
        (-1, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, True, StartAction.ZERO),
        (-1, ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, True, StartAction.ZERO),
    ],
)
def test_start_action(stored: int, where: ConsumeFromWhere, retry: bool, action: StartAction) -> None:
    assert start_action(stored, where, retry) is action
