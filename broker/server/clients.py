"""Who is connected: consumer groups (channels, clientIds, subscriptions) and producer groups.

The heartbeat and unregister processors update these tables; the pull processor reads a group's
subscription; `BrokerController` feeds connection closes in and runs `scan_expired()` periodically.
When a consumer group's membership or subscriptions change, every channel of the group gets a
one-way NOTIFY_CONSUMER_IDS_CHANGED so clients rebalance at once instead of within 20 s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.protocol.codes import RequestCode
from broker.protocol.command import RemotingCommand
from broker.protocol.javahash import java_string_hash

if TYPE_CHECKING:
    from broker.transport.connection import RemotingConnection

__all__ = [
    "ClientChannelInfo",
    "ConsumerGroupInfo",
    "ConsumerManager",
    "ProducerManager",
    "SubscriptionData",
    "merge_subscriptions",
    "parse_sub_string",
]

log = logging.getLogger(__name__)

SUB_ALL = "*"


def parse_sub_string(sub_string: str | None) -> tuple[set[str], set[int]]:
    """`tagA || tagB` -> (tags, Java hash codes); `*` or empty -> (empty, empty) meaning everything."""
    if sub_string is None or not sub_string.strip() or sub_string.strip() == SUB_ALL:
        return set(), set()
    tags = {t.strip() for t in sub_string.split("||") if t.strip()}
    return tags, {java_string_hash(t) for t in tags}


@dataclass(slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: set[str] = field(default_factory=set)
    code_set: set[int] = field(default_factory=set)
    sub_version: int = 0
    expression_type: str = "TAG"

    def to_json(self) -> dict[str, object]:
        return {
            "classFilterMode": False,
            "codeSet": sorted(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": sorted(self.tags_set),
            "topic": self.topic,
        }


@dataclass(slots=True)
class ClientChannelInfo:
    conn: RemotingConnection
    client_id: str
    language: int
    version: int
    last_update: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class ConsumerGroupInfo:
    group_name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[RemotingConnection, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return [info.client_id for info in self.channels.values()]


class ConsumerManager:
    """Consumer groups keyed by name; `notify` sends NOTIFY_CONSUMER_IDS_CHANGED when enabled."""

    def __init__(self, *, notify_enabled: bool = True, channel_expired_timeout_ms: int = 120_000) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self.notify_enabled = notify_enabled
        self.channel_expired_timeout = channel_expired_timeout_ms / 1000
        self._tasks: set[asyncio.Task[None]] = set()
        # Per-group override of notifications (SubscriptionGroupConfig.notifyConsumerIdsChangedEnable).
        self.group_notify_enabled: Callable[[str], bool] = lambda _group: True

    def register(
        self,
        group: str,
        info: ClientChannelInfo,
        *,
        consume_type: str,
        message_model: str,
        consume_from_where: str,
        subscriptions: list[SubscriptionData],
    ) -> bool:
        """Record a heartbeat; True (and clients notified) when a channel joined or subscriptions changed."""
        g = self.groups.get(group)
        if g is None:
            g = self.groups[group] = ConsumerGroupInfo(group)
        g.consume_type, g.message_model, g.consume_from_where = consume_type, message_model, consume_from_where
        existing = g.channels.get(info.conn)
        channel_added = existing is None or existing.client_id != info.client_id
        if existing is not None and not channel_added:
            existing.last_update = info.last_update
        else:
            g.channels[info.conn] = info
            log.info("new consumer connected, group: %s %s %s", group, info.client_id, info.conn.peer)
        g.subscriptions, subs_changed = merge_subscriptions(g.subscriptions, subscriptions)
        changed = channel_added or subs_changed
        if changed:
            self.notify(group)
        return changed

    def unregister(self, group: str, conn: RemotingConnection) -> bool:
        g = self.groups.get(group)
        if g is None or g.channels.pop(conn, None) is None:
            return False
        log.info("unregister consumer ok, group: %s %s", group, conn.peer)
        if not g.channels:
            del self.groups[group]
        else:
            self.notify(group)
        return True

    def connection_closed(self, conn: RemotingConnection) -> list[str]:
        """Drop `conn` from every group; returns the groups it was in."""
        left = [name for name, g in self.groups.items() if conn in g.channels]
        for name in left:
            self.unregister(name, conn)
        return left

    def scan_expired(self, now: float | None = None) -> int:
        """Remove channels with no heartbeat for channelExpiredTimeout; returns how many."""
        now = time.monotonic() if now is None else now
        removed = 0
        for name, g in list(self.groups.items()):
            for conn, info in list(g.channels.items()):
                if now - info.last_update > self.channel_expired_timeout:
                    log.warning("consumer channel of %s in group %s expired; closing it", info.client_id, name)
                    self.unregister(name, conn)
                    conn.close()
                    removed += 1
        return removed

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        g = self.groups.get(group)
        return g.subscriptions.get(topic) if g is not None else None

    def notify(self, group: str) -> None:
        """One-way NOTIFY_CONSUMER_IDS_CHANGED to every channel of `group`."""
        if not self.notify_enabled or not self.group_notify_enabled(group):
            return
        g = self.groups.get(group)
        if g is None:
            return
        for conn in list(g.channels):
            if conn.is_closing:
                continue
            cmd = RemotingCommand(code=RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ext_fields={"consumerGroup": group})
            task = asyncio.get_running_loop().create_task(self._send_notify(conn, cmd))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _send_notify(conn: RemotingConnection, cmd: RemotingCommand) -> None:
        try:
            await conn.invoke_oneway(cmd)
        except Exception as exc:  # a closing channel: nothing to tell it any more
            log.debug("notify %s of consumer change failed: %s", conn.peer, exc)


def merge_subscriptions(
    stored: dict[str, SubscriptionData], heartbeat: list[SubscriptionData]
) -> tuple[dict[str, SubscriptionData], bool]:
    """A group's subscriptions after one member's heartbeat, and whether the group must be told.

    Per topic, as RocketMQ's broker does: a new topic is added; a subscription with a newer
    subVersion replaces the stored one, even with the same expression (the Java client bumps
    subVersion after every rebalance that changed its queues, then pulls with it; a broker that kept
    the old version would answer each pull SUBSCRIPTION_NOT_LATEST); an older one (a member that has
    not caught up) leaves it alone. Unlike RocketMQ, an equal subVersion with another expression
    also replaces it, so a client that never changes its subVersion can still change its expression.
    Topics the heartbeat lacks are dropped. Only added, dropped or re-expressed topics notify the
    group: a version bump alone changes no one's queues.
    """
    merged: dict[str, SubscriptionData] = {}
    changed = stored.keys() != {sub.topic for sub in heartbeat}
    for sub in heartbeat:
        old = stored.get(sub.topic)
        if old is None:
            merged[sub.topic] = sub
            continue
        reexpressed = old.sub_string != sub.sub_string or old.expression_type != sub.expression_type
        if sub.sub_version > old.sub_version or (sub.sub_version == old.sub_version and reexpressed):
            merged[sub.topic] = sub
            changed = changed or reexpressed
        else:
            merged[sub.topic] = old
    return merged, changed


class ProducerManager:
    """Producer groups -> channels (used for transaction check-backs and connection lists)."""

    def __init__(self, channel_expired_timeout_ms: int = 120_000) -> None:
        self.groups: dict[str, dict[RemotingConnection, ClientChannelInfo]] = {}
        self.channel_expired_timeout = channel_expired_timeout_ms / 1000

    def register(self, group: str, info: ClientChannelInfo) -> None:
        channels = self.groups.setdefault(group, {})
        existing = channels.get(info.conn)
        if existing is None:
            channels[info.conn] = info
            log.info("new producer connected, group: %s %s %s", group, info.client_id, info.conn.peer)
        else:
            existing.last_update = info.last_update

    def unregister(self, group: str, conn: RemotingConnection) -> None:
        channels = self.groups.get(group)
        if channels is not None and channels.pop(conn, None) is not None and not channels:
            del self.groups[group]

    def connection_closed(self, conn: RemotingConnection) -> None:
        for group in [g for g, channels in self.groups.items() if conn in channels]:
            self.unregister(group, conn)

    def scan_expired(self, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        removed = 0
        for group, channels in list(self.groups.items()):
            for conn, info in list(channels.items()):
                if now - info.last_update > self.channel_expired_timeout:
                    self.unregister(group, conn)
                    removed += 1
        return removed

    def any_channel(self, group: str) -> RemotingConnection | None:
        for conn in self.groups.get(group, {}):
            if not conn.is_closing:
                return conn
        return None
