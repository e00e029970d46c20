"""Narrow views of the broker for the processors that cannot take their parts at construction.

Most processors get the parts they read as arguments (offsets, client_manage, admin_clients, admin_stats,
admin_store). The pull processor is built before two of its parts exist: the hold service is built from
its `rerun`, and the HA controller starts after the processors are registered. So it gets `PullContext`,
a Protocol naming exactly what it reads; `BrokerController` satisfies it, and the type checker keeps the
processor from reaching anything else of the broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.ha.controller import HAController
    from broker.metrics.broker_meters import BrokerMeters
    from broker.server.clients import ConsumerManager
    from broker.server.config import BrokerConfig
    from broker.server.get_stats import GroupGetStats
    from broker.server.groups import SubscriptionGroupManager
    from broker.server.hold import PullHoldService
    from broker.server.offsets import ConsumerOffsetManager
    from broker.server.stats import BrokerStats
    from broker.server.topics import TopicConfigManager
    from broker.store import MessageStore

__all__ = ["PullContext"]


class PullContext(Protocol):
    """What PULL_MESSAGE reads of the broker (broker.server.processors.pull)."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def store(self) -> MessageStore: ...
    @property
    def topics(self) -> TopicConfigManager: ...
    @property
    def groups(self) -> SubscriptionGroupManager: ...
    @property
    def offsets(self) -> ConsumerOffsetManager: ...
    @property
    def consumers(self) -> ConsumerManager: ...
    @property
    def stats(self) -> BrokerStats: ...
    @property
    def get_stats(self) -> GroupGetStats: ...
    @property
    def meters(self) -> BrokerMeters | None: ...
    @property
    def hold(self) -> PullHoldService:
        """Exists once the broker started (built after the processor)."""
        ...

    @property
    def ha(self) -> HAController | None:
        """None until HA started, after the processors were registered."""
        ...
