"""SubscriptionGroupConfig keeps RocketMQ 5's groupRetryPolicy as it was sent (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
and gives it back (GET_ALL_SUBSCRIPTIONGROUP_CONFIG, subscriptionGroup.json); without one it writes none."""

from __future__ import annotations

from pathlib import Path

from broker.server.groups import SubscriptionGroupConfig, SubscriptionGroupManager

POLICY = {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 2}}


def test_the_policy_round_trips_and_persists(tmp_path: Path) -> None:
    cfg = SubscriptionGroupConfig.from_json({"groupName": "g", "retryMaxTimes": 3, "groupRetryPolicy": POLICY})
    assert cfg.to_json()["groupRetryPolicy"] == POLICY
    manager = SubscriptionGroupManager(tmp_path)
    manager.load()
    manager.update(cfg)
    again = SubscriptionGroupManager(tmp_path)
    again.load()
    assert again.table["g"].group_retry_policy == POLICY and again.table["g"].retry_max_times == 3


def test_without_a_policy_none_is_written() -> None:
    assert "groupRetryPolicy" not in SubscriptionGroupConfig("g").to_json()
    cfg = SubscriptionGroupConfig.from_json({"groupName": "g", "groupRetryPolicy": "not an object"})
    assert cfg.group_retry_policy is None
