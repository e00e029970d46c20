"""Narrow views of the broker for the transaction service and the END_TRANSACTION processor.

The service is built after the store opens and the processor before the service exists, so each gets the
broker as a Protocol naming exactly what it reads; `BrokerController` satisfies both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.protocol.message import MessageExt
    from broker.server.clients import ProducerManager
    from broker.server.config import BrokerConfig
    from broker.server.offsets import ConsumerOffsetManager
    from broker.store import MessageStore
    from broker.store.results import PutStatus

__all__ = ["EndTransactionContext", "TransactionContext", "TransactionEnd"]


class TransactionContext(Protocol):
    """What the transaction service reads (transaction.service): the store, its progress in the offset
    table, the producers it asks CHECK_TRANSACTION_STATE, and the schedule service's wakeup for a committed
    delayed message."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def store(self) -> MessageStore: ...
    @property
    def offsets(self) -> ConsumerOffsetManager: ...
    @property
    def producers(self) -> ProducerManager: ...
    def schedule_wakeup(self) -> None: ...


class TransactionEnd(Protocol):
    """The part of the transaction service END_TRANSACTION calls (service.TransactionService.end)."""

    async def end(self, half: MessageExt, commit: bool, from_check: bool) -> PutStatus:
        """Commit or roll back the half message `half`; the status of the put that settled it."""
        ...


class EndTransactionContext(Protocol):
    """What END_TRANSACTION reads (transaction.processor); `transactions` exists once the broker started."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def store(self) -> MessageStore: ...
    @property
    def transactions(self) -> TransactionEnd: ...
