"""The store: CommitLog, ConsumeQueue, IndexFile, flush, recovery and retention (RocketMQ's layout).

The broker (broker.server) and the HA service (broker.ha) import from here; the contract is
docs/design/store-api.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.store.config import StoreConfig
    from broker.store.dispatch_request import DispatchRequest
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

# Imported on first use (PEP 562), so that a helper process importing one module of the package (the
# index helper: broker.store.index_helper) does not load the whole store and its configuration model.
_HOMES = {
    "StoreConfig": "broker.store.config",
    "DispatchRequest": "broker.store.dispatch_request",
    "MessageStore": "broker.store.message_store",
    **dict.fromkeys(
        ("GetResult", "GetStatus", "MessageToStore", "PutResult", "PutStatus", "QueryResult", "StoreError"),
        "broker.store.results",
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'broker.store' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


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
