"""The store: CommitLog, ConsumeQueue, IndexFile, flush, recovery and retention (RocketMQ's layout).

The broker (broker.server) and the HA service (broker.ha) import from here; the contract is
docs/design/store-api.md.
"""

from __future__ import annotations

from broker.store.config import StoreConfig
from broker.store.dispatch import DispatchRequest
from broker.store.message_store import MessageStore
from broker.store.results import (
    GetResult,
    GetStatus,
    MessageToStore,
    PutResult,
    PutStatus,
    QueryResult,
    StoreError,
)

__all__ = [
    "DispatchRequest",
    "GetResult",
    "GetStatus",
    "MessageStore",
    "MessageToStore",
    "PutResult",
    "PutStatus",
    "QueryResult",
    "StoreConfig",
    "StoreError",
]
