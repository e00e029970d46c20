"""Topic configuration: the broker's topic table, its system topics and topics.json.

`BrokerController` creates the manager and loads it at start; the send processor auto-creates topics
through it (8.7 of the protocol reference), the heartbeat creates `%RETRY%<group>`, admin requests
create and list topics, and the NameServer registration serialises `wrapper()`. Every change bumps
`data_version` and calls the `on_change` hook, which makes the broker re-register at once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.protocol.bodies import DataVersion, TopicConfig
from broker.server.config import BrokerConfig
from broker.server.persist import JsonFile

__all__ = [
    "DLQ_GROUP_TOPIC_PREFIX",
    "PERM_INHERIT",
    "PERM_READ",
    "PERM_WRITE",
    "RETRY_GROUP_TOPIC_PREFIX",
    "SCHEDULE_TOPIC",
    "TRANS_HALF_TOPIC",
    "TRANS_OP_HALF_TOPIC",
    "TopicConfig",
    "TopicConfigManager",
    "validate_topic",
]

log = logging.getLogger(__name__)

PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1

AUTO_CREATE_TOPIC = "TBW102"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
SCHEDULE_QUEUE_NUMS = 18

TOPIC_MAX_LENGTH = 127
_TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def validate_topic(topic: str) -> str | None:
    """Why `topic` is not a valid topic name, or None when it is (TopicValidator.java)."""
    if not topic:
        return "the specified topic is blank"
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"the specified topic is longer than topic max length {TOPIC_MAX_LENGTH}"
    if not _TOPIC_PATTERN.match(topic):
        return f"the specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return None


class TopicConfigManager:
    """The topic table. Not thread-safe: everything runs on the broker's event loop."""

    def __init__(self, config: BrokerConfig, config_dir: Path) -> None:
        self.config = config
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self._file = JsonFile(config_dir / "topics.json")
        self.system_topics: set[str] = set()
        # Called with the changed TopicConfig (broker re-registers with the NameServers).
        self.on_change: Callable[[TopicConfig], None] | None = None

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> None:
        data = self._file.load()
        if data:
            for name, raw in (data.get("topicConfigTable") or {}).items():
                try:
                    self.table[name] = TopicConfig.from_json(raw)
                except (KeyError, TypeError, ValueError) as exc:
                    log.warning("skipping unreadable topic %r in %s: %s", name, self._file.path, exc)
            self.data_version = DataVersion.from_json(data.get("dataVersion"))
        self._add_system_topics()
        self.data_version.next_version()
        self.persist()
        log.info("loaded %d topics (%d system)", len(self.table), len(self.system_topics))

    def _add_system_topics(self) -> None:
        c = self.config
        rw = PERM_READ | PERM_WRITE
        system: list[TopicConfig] = [
            TopicConfig(SELF_TEST_TOPIC, 1, 1),
            TopicConfig(BENCHMARK_TOPIC, 1024, 1024),
            TopicConfig(c.broker_cluster_name, 16, 16, PERM_INHERIT | (rw if c.cluster_topic_enable else 0)),
            TopicConfig(c.broker_name, 1, 1, PERM_INHERIT | (rw if c.broker_topic_enable else 0)),
            TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
            TopicConfig(SCHEDULE_TOPIC, SCHEDULE_QUEUE_NUMS, SCHEDULE_QUEUE_NUMS),
            TopicConfig(f"{c.broker_cluster_name}_{REPLY_TOPIC_POSTFIX}", 1, 1),
            TopicConfig(TRANS_HALF_TOPIC, 1, 1),
            TopicConfig(TRANS_OP_HALF_TOPIC, 1, 1),
        ]
        if c.auto_create_topic_enable:
            n = c.default_topic_queue_nums
            system.append(TopicConfig(AUTO_CREATE_TOPIC, n, n, PERM_INHERIT | rw))
        if c.trace_topic_enable:
            system.append(TopicConfig(c.msg_trace_topic_name, 1, 1))
        for topic in system:
            self.system_topics.add(topic.topic_name)
            # System topics are always what this configuration says (like the Java broker, which
            # overwrites them at every start), so a changed brokerName or queue count takes effect.
            self.table[topic.topic_name] = topic

    def persist(self) -> None:
        self._file.save(self.wrapper())

    # ------------------------------------------------------------------ queries

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def wrapper(self) -> dict[str, Any]:
        """TopicConfigSerializeWrapper: the topics.json shape, GET_ALL_TOPIC_CONFIG and registration body."""
        return {
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": {name: tc.to_json() for name, tc in self.table.items()},
        }

    # ------------------------------------------------------------------ changes

    def update(self, tc: TopicConfig) -> TopicConfig:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC); persists and notifies."""
        old = self.table.get(tc.topic_name)
        self.table[tc.topic_name] = tc
        if old != tc:
            log.info("topic %s %s: %s", tc.topic_name, "updated" if old else "created", tc.to_json())
            self._changed(tc)
        return tc

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        log.info("topic %s deleted", topic)
        self.data_version.next_version()
        self.persist()
        return True

    def create_in_send(
        self, topic: str, default_topic: str, queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """Auto-create `topic` from `default_topic` (normally TBW102) as a send does; None when not allowed."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        default = self.table.get(default_topic)
        if default is None:
            return None
        if default_topic == AUTO_CREATE_TOPIC and not self.config.auto_create_topic_enable:
            return None
        if not default.perm & PERM_INHERIT:
            log.warning("cannot auto-create %s: default topic %s has no INHERIT permission", topic, default_topic)
            return None
        queues = max(1, min(queue_nums, default.write_queue_nums))
        tc = TopicConfig(topic, queues, queues, default.perm & ~PERM_INHERIT, topic_sys_flag=topic_sys_flag)
        log.info("auto-created topic %s from %s with %d queues", topic, default_topic, queues)
        self.table[topic] = tc
        self._changed(tc)
        return tc

    def create_in_send_back(self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0) -> TopicConfig:
        """Create a %RETRY%/%DLQ% topic if missing (heartbeat, CONSUMER_SEND_MSG_BACK)."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        tc = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag)
        log.info("created topic %s with %d queues", topic, queue_nums)
        self.table[topic] = tc
        self._changed(tc)
        return tc

    def _changed(self, tc: TopicConfig) -> None:
        self.data_version.next_version()
        self.persist()
        if self.on_change is not None:
            self.on_change(tc)
