"""What the collectors read of the node they publish: Protocols naming exactly those parts.

`broker.metrics` sits below the broker and the NameServer (they build the exporter), so it cannot name
their classes. A collector is given the node itself and sees it through these Protocols: the broker's
tables by their shape (what a scrape counts of them), and the parts below this package (store,
transport, HA) by their own types. `BrokerController` and `NamesrvController` satisfy them, and mypy
checks that they do where the collectors are built.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.ha.controller import HAController
    from broker.store import MessageStore
    from broker.transport.connection import RemotingConnection
    from broker.transport.server import RemotingServer

__all__ = ["BrokerView", "NamesrvView"]


class _NodeConfig(Protocol):
    @property
    def broker_cluster_name(self) -> str: ...
    @property
    def broker_name(self) -> str: ...
    @property
    def broker_permission(self) -> int: ...


class _PullCounts(Protocol):
    """The broker's pull counters per topic@group and where each group's pulls of a queue reached."""

    @property
    def counts(self) -> Mapping[str, Sequence[int]]:
        """topic@group -> (messages, bytes, pulls)."""
        ...

    @property
    def pulled_to(self) -> Mapping[tuple[str, str, int], int]:
        """(group, topic, queue id) -> the next offset a pull asks for."""
        ...


class _Table(Protocol):
    @property
    def table(self) -> Mapping[str, object]: ...


class _TopicTable(_Table, Protocol):
    @property
    def system_topics(self) -> Container[str]: ...


class _OffsetTable(Protocol):
    @property
    def table(self) -> Mapping[str, Mapping[int, int]]:
        """topic@group -> queue id -> committed offset."""
        ...


class _Channel(Protocol):
    @property
    def language(self) -> int: ...
    @property
    def version(self) -> int: ...


class _ProducerChannels(Protocol):
    @property
    def groups(self) -> Mapping[str, Mapping[RemotingConnection, _Channel]]: ...


class _ConsumerGroup(Protocol):
    @property
    def consume_type(self) -> str: ...
    @property
    def channels(self) -> Mapping[RemotingConnection, _Channel]: ...


class _ConsumerChannels(Protocol):
    @property
    def groups(self) -> Mapping[str, _ConsumerGroup]: ...


class BrokerView(Protocol):
    """What a scrape of a broker reads (broker.metrics.broker_collector)."""

    @property
    def config(self) -> _NodeConfig: ...
    @property
    def get_stats(self) -> _PullCounts: ...
    @property
    def topics(self) -> _TopicTable: ...
    @property
    def groups(self) -> _Table: ...
    @property
    def offsets(self) -> _OffsetTable: ...
    @property
    def producers(self) -> _ProducerChannels: ...
    @property
    def consumers(self) -> _ConsumerChannels: ...
    @property
    def server(self) -> RemotingServer | None:
        """None until the remoting port is bound."""
        ...

    @property
    def sends_in_flight(self) -> int:
        """Puts waiting for the group commit or a slave (0 before the processors exist)."""
        ...

    @property
    def started_store(self) -> MessageStore | None:
        """None until the store is open: the metrics port opens first, so a scrape can come before it."""
        ...

    @property
    def ha(self) -> HAController | None: ...


class _Routes(Protocol):
    def live_brokers(self) -> Mapping[tuple[str, str], object]:
        """(cluster, broker address) -> what the NameServer knows of that live broker."""
        ...

    def topics_by_cluster(self, cluster: str) -> Sequence[str]: ...
    def all_topics(self) -> Sequence[str]: ...


class NamesrvView(Protocol):
    """What a scrape of a NameServer reads (broker.metrics.namesrv_collector)."""

    @property
    def server(self) -> RemotingServer: ...
    @property
    def port(self) -> int: ...
    @property
    def routes(self) -> _Routes: ...
