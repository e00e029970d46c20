"""What the gRPC endpoint reads of the broker: `BrokerController` satisfies it (mqbroker hands it over)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.auth.service import ServerAuth
    from broker.server.clients import ConsumerManager, ProducerManager
    from broker.server.config import BrokerConfig
    from broker.server.groups import SubscriptionGroupManager
    from broker.server.pop.service import PopService
    from broker.server.topics import TopicConfigManager
    from broker.transport.client import RemotingClient
    from broker.transport.server import RemotingServer

__all__ = ["BrokerView"]


class BrokerView(Protocol):
    """The running broker: its configuration, tables, remoting server (whose processors answer every RPC), and
    its own client (NameServer route lookups), its POP service and its auth (users, ACLs, plain_acl.yml)."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def server(self) -> RemotingServer | None: ...
    @property
    def topics(self) -> TopicConfigManager: ...
    @property
    def groups(self) -> SubscriptionGroupManager: ...
    @property
    def producers(self) -> ProducerManager: ...
    @property
    def consumers(self) -> ConsumerManager: ...
    @property
    def client(self) -> RemotingClient: ...
    @property
    def auth(self) -> ServerAuth: ...
    @property
    def pop(self) -> PopService:
        """The POP service (exists once the broker started)."""
        ...
