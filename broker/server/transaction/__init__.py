"""Transactional messages on the broker (reference 8.6): half messages, END_TRANSACTION and the
check service. `BrokerController` builds `service.TransactionService` and
`processor.EndTransactionProcessor`; the send processor uses `messages.is_half` and
`messages.rewrite_to_half`. Import the submodules directly (the send processor and these modules
import each other's pieces, so this package module stays empty to avoid an import cycle)."""

from __future__ import annotations

__all__: list[str] = []
