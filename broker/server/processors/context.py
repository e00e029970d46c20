"""Narrow views of the broker for the processors that cannot take their parts at construction.

Most processors get the parts they read as arguments (offsets, client_manage, admin_clients, admin_stats,
admin_store). The pull processor is built before two of its parts exist: the hold service is built from
its `rerun`, and the HA controller starts after the processors are registered. So it gets `PullContext`,
a Protocol naming exactly what it reads; `BrokerController` satisfies it, and the type checker keeps the
processor from reaching anything else of the broker. The send side does the same: the send processor,
the send-back processor and the reply processor read parts that exist only after them (the send
processor itself, the schedule service's wakeup), so each gets its own context.

The admin and admin_config processors still take the BrokerController: they administer the broker itself
(its registration, HA status, in-flight sends and config updates, `config_update.apply_updates`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.ha.controller import HAController
    from broker.metrics.broker_meters import BrokerMeters
    from broker.server.clients import ConsumerManager, ProducerManager
    from broker.server.config import BrokerConfig
    from broker.server.get_stats import GroupGetStats
    from broker.server.groups import SubscriptionGroupManager
    from broker.server.hold import PullHoldService
    from broker.server.locks import RebalanceLockManager
    from broker.server.offsets import ConsumerOffsetManager
    from broker.server.processors.send import SendProcessor
    from broker.server.stats import BrokerStats
    from broker.server.topics import TopicConfigManager
    from broker.store import MessageStore

__all__ = ["PullContext", "ReplyContext", "SendBackContext", "SendContext"]


class _MessageContext(Protocol):
    """The parts every processor that reads or stores messages uses: config, store, topics, groups, meters."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def store(self) -> MessageStore: ...
    @property
    def topics(self) -> TopicConfigManager: ...
    @property
    def groups(self) -> SubscriptionGroupManager: ...
    @property
    def meters(self) -> BrokerMeters | None: ...


class PullContext(_MessageContext, Protocol):
    """What PULL_MESSAGE reads of the broker (broker.server.processors.pull)."""

    @property
    def offsets(self) -> ConsumerOffsetManager: ...
    @property
    def consumers(self) -> ConsumerManager: ...
    @property
    def stats(self) -> BrokerStats: ...
    @property
    def get_stats(self) -> GroupGetStats: ...
    @property
    def hold(self) -> PullHoldService:
        """Exists once the broker started (built after the processor)."""
        ...

    @property
    def ha(self) -> HAController | None:
        """None until HA started, after the processors were registered."""
        ...


class SendContext(_MessageContext, Protocol):
    """What SEND_MESSAGE (and its batch and v2 forms) reads of the broker (processors.send)."""

    @property
    def locks(self) -> RebalanceLockManager: ...
    @property
    def stats(self) -> BrokerStats: ...


class SendBackContext(_MessageContext, Protocol):
    """What CONSUMER_SEND_MSG_BACK reads of the broker (processors.send_back)."""

    def schedule_wakeup(self) -> None:
        """Tell the schedule service a delayed message was stored (it exists once the broker started)."""
        ...


class ReplyContext(Protocol):
    """What SEND_REPLY_MESSAGE reads of the broker (processors.reply): the send processor's checks, and the
    connections a reply may be pushed over."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def store(self) -> MessageStore: ...
    @property
    def stats(self) -> BrokerStats: ...
    @property
    def send(self) -> SendProcessor: ...
    @property
    def producers(self) -> ProducerManager: ...
    @property
    def consumers(self) -> ConsumerManager: ...
