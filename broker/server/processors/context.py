"""Narrow views of the broker for the processors that cannot take their parts at construction.

Most processors get the parts they read as arguments (offsets, client_manage, admin_clients, admin_progress,
admin_store). The pull processor is built before two of its parts exist: the hold service is built from
its `rerun`, and the HA controller starts after the processors are registered. So it gets `PullContext`,
a Protocol naming exactly what it reads; `BrokerController` satisfies it, and the type checker keeps the
processor from reaching anything else of the broker. The send side does the same: the send processor,
the send-back processor and the reply processor read parts that exist only after them (the send
processor itself, the schedule service's wakeup), so each gets its own context; the reply processor sees
the send processor as `SendChecks`, so this module names no processor.

The admin processors administer the broker itself: `AdminContext` is what the admin processor reads (its
tables, counters, registration, HA status and in-flight sends), `AdminRoutesContext` what the table of the
other admin processors hands them, config updates included (`config_update.ConfigUpdateContext`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from broker.server.config_update import ConfigUpdateContext

if TYPE_CHECKING:
    from broker.ha.controller import HAController
    from broker.metrics.broker_meters import BrokerMeters
    from broker.protocol.command import RemotingCommand
    from broker.protocol.headers import SendMessageRequestHeader
    from broker.server.clients import ConsumerManager, ProducerManager
    from broker.server.config import BrokerConfig, LoadedConfig
    from broker.server.group_pull_counters import GroupGetStats
    from broker.server.groups import SubscriptionGroupManager
    from broker.server.hold import PullHoldService
    from broker.server.locks import RebalanceLockManager
    from broker.server.message_counters import BrokerStats
    from broker.server.offsets import ConsumerOffsetManager
    from broker.server.registration import Registrar
    from broker.server.schedule import ScheduleService
    from broker.server.topics import TopicConfig, TopicConfigManager
    from broker.store import MessageStore
    from broker.transport.connection import RemotingConnection

__all__ = [
    "AdminContext",
    "AdminRoutesContext",
    "PullContext",
    "ReplyContext",
    "SendBackContext",
    "SendChecks",
    "SendContext",
]


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


class SendChecks(Protocol):
    """What the reply processor uses of the send processor: the checks every send passes, and the
    connections requests came over (a reply may be pushed back over one)."""

    @property
    def requesters(self) -> Mapping[str, RemotingConnection]:
        """client id -> the connection its last request came over."""
        ...

    def check_topic(self, header: SendMessageRequestHeader, cmd: RemotingCommand) -> TopicConfig:
        """The topic's config, or a RequestError saying why the send is refused."""
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
    def send(self) -> SendChecks: ...
    @property
    def producers(self) -> ProducerManager: ...
    @property
    def consumers(self) -> ConsumerManager: ...


class AdminContext(Protocol):
    """What the admin processor reads of the broker (processors.admin): its tables and counters for mqadmin,
    its registration and HA status for GET_BROKER_RUNTIME_INFO, and the topic re-registration it triggers."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def store(self) -> MessageStore: ...
    @property
    def topics(self) -> TopicConfigManager: ...
    @property
    def groups(self) -> SubscriptionGroupManager: ...
    @property
    def loaded(self) -> LoadedConfig: ...
    @property
    def offsets(self) -> ConsumerOffsetManager: ...
    @property
    def consumers(self) -> ConsumerManager: ...
    @property
    def stats(self) -> BrokerStats: ...
    @property
    def schedule(self) -> ScheduleService: ...
    @property
    def hold(self) -> PullHoldService: ...
    @property
    def registrar(self) -> Registrar: ...
    @property
    def ha(self) -> HAController | None: ...
    @property
    def sends_in_flight(self) -> int: ...
    def trigger_register(self) -> None: ...


class AdminRoutesContext(ConfigUpdateContext, Protocol):
    """What the table of the other admin processors (processors.admin_routes) hands them: the parts the
    progress, clients and store processors read, and what UPDATE_BROKER_CONFIG and DELETE_SUBSCRIPTIONGROUP
    change."""

    @property
    def store(self) -> MessageStore: ...
    @property
    def offsets(self) -> ConsumerOffsetManager: ...
    @property
    def get_stats(self) -> GroupGetStats: ...
