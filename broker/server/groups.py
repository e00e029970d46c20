"""Subscription group configs (retry queues, max retries, ...), persisted to subscriptionGroup.json.

The heartbeat processor finds or auto-creates a group's config; CONSUMER_SEND_MSG_BACK reads its
retryQueueNums/retryMaxTimes; the pull processor checks consumeEnable.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.protocol.bodies import DataVersion
from broker.protocol.system_groups import SYSTEM_GROUPS
from broker.server.persist import JsonFile

__all__ = ["SubscriptionGroupConfig", "SubscriptionGroupManager"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    # RocketMQ 5's groupRetryPolicy ({type: CUSTOMIZED|EXPONENTIAL, customizedRetryPolicy|exponentialRetryPolicy}),
    # kept as sent and given back (GET_ALL_SUBSCRIPTIONGROUP_CONFIG, subscriptionGroup.json); None: never set
    group_retry_policy: dict[str, Any] | None = None

    _KEYS = (
        ("group_name", "groupName"),
        ("consume_enable", "consumeEnable"),
        ("consume_from_min_enable", "consumeFromMinEnable"),
        ("consume_broadcast_enable", "consumeBroadcastEnable"),
        ("consume_message_orderly", "consumeMessageOrderly"),
        ("retry_queue_nums", "retryQueueNums"),
        ("retry_max_times", "retryMaxTimes"),
        ("broker_id", "brokerId"),
        ("which_broker_when_consume_slowly", "whichBrokerWhenConsumeSlowly"),
        ("notify_consumer_ids_changed_enable", "notifyConsumerIdsChangedEnable"),
        ("group_sys_flag", "groupSysFlag"),
        ("consume_timeout_minute", "consumeTimeoutMinute"),
    )

    def to_json(self) -> dict[str, Any]:
        out = {wire: getattr(self, name) for name, wire in self._KEYS}
        if self.group_retry_policy is not None:
            out["groupRetryPolicy"] = self.group_retry_policy
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SubscriptionGroupConfig:
        cfg = cls(group_name=str(data["groupName"]))
        for name, wire in cls._KEYS[1:]:
            if wire in data:
                current = getattr(cfg, name)
                value = data[wire]
                setattr(cfg, name, bool(value) if isinstance(current, bool) else int(value))
        policy = data.get("groupRetryPolicy")
        if isinstance(policy, dict):
            cfg.group_retry_policy = policy
        return cfg


class SubscriptionGroupManager:
    def __init__(self, config_dir: Path, *, auto_create: bool = True) -> None:
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.auto_create = auto_create
        self.data_version = DataVersion()
        self._file = JsonFile(config_dir / "subscriptionGroup.json")

    def load(self) -> None:
        for name in SYSTEM_GROUPS:
            self.table[name] = SubscriptionGroupConfig(name)
        data = self._file.load() or {}
        for name, raw in (data.get("subscriptionGroupTable") or {}).items():
            try:
                self.table[name] = SubscriptionGroupConfig.from_json(raw)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("skipping unreadable subscription group %r: %s", name, exc)
        self.data_version = DataVersion.from_json(data.get("dataVersion"))

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config; auto-created (and persisted) when autoCreateSubscriptionGroup is on."""
        cfg = self.table.get(group)
        if cfg is None and self.auto_create:
            cfg = self.table[group] = SubscriptionGroupConfig(group)
            log.info("auto-created subscription group %s", group)
            self.data_version.next_version()
            self.persist()
        return cfg

    def update(self, cfg: SubscriptionGroupConfig) -> None:
        self.table[cfg.group_name] = cfg
        self.data_version.next_version()
        self.persist()

    def delete(self, group: str) -> bool:
        """Remove a group's config (DELETE_SUBSCRIPTIONGROUP); False when there was none."""
        if self.table.pop(group, None) is None:
            return False
        self.data_version.next_version()
        self.persist()
        return True

    def snapshot(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json(),
            "forbiddenTable": {},
            "subscriptionGroupTable": {name: cfg.to_json() for name, cfg in self.table.items()},
        }

    def persist(self) -> None:
        self._file.save(self.snapshot())
