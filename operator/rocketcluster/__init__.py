"""RocketCluster: the Python client SDK users import, and (in submodules) the Kubernetes operator.

`from rocketcluster import Producer, PushConsumer, PullConsumer, TransactionProducer, Admin, Message` is the
SDK's documented API; `from rocketcluster.spark import RocketMQDataSource` is the PySpark data source. The
SDK lives in `broker.client` (it shares the protocol and transport packages with the broker); the names are
resolved on first use so that `import rocketcluster.model` (the operator) does not load the client, and
`import rocketcluster` never loads kopf, kubernetes, aiohttp or pyspark. See docs/design/packages.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.client import (
        Admin,
        BlockingAdmin,
        BlockingProducer,
        BlockingPullConsumer,
        BlockingPushConsumer,
        BrokerResponseError,
        BrokerUnreachable,
        ClientConfig,
        ClientError,
        ConsumeFromWhere,
        ConsumerConfig,
        ConsumeStatus,
        Credentials,
        LocalTransactionState,
        Message,
        MessageExt,
        MessageModel,
        MessageQueue,
        MessageSelector,
        NoNameServerError,
        NoRouteError,
        Producer,
        ProducerConfig,
        PullConsumer,
        PullResult,
        PullStatus,
        PushConsumer,
        RocketError,
        SendResult,
        SendStatus,
        TransactionProducer,
        TransactionSendResult,
        allocate_averagely,
        allocate_averagely_by_circle,
        select_by_hash,
        select_by_random,
    )

__all__ = [
    "Admin",
    "BlockingAdmin",
    "BlockingProducer",
    "BlockingPullConsumer",
    "BlockingPushConsumer",
    "BrokerResponseError",
    "BrokerUnreachable",
    "ClientConfig",
    "ClientError",
    "ConsumeFromWhere",
    "ConsumeStatus",
    "ConsumerConfig",
    "Credentials",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageSelector",
    "NoNameServerError",
    "NoRouteError",
    "Producer",
    "ProducerConfig",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "RocketError",
    "SendResult",
    "SendStatus",
    "TransactionProducer",
    "TransactionSendResult",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "select_by_hash",
    "select_by_random",
]

_SDK_NAMES = frozenset(__all__)


def __getattr__(name: str) -> Any:
    # Only the SDK's names: anything else must raise AttributeError so that `from rocketcluster import model`
    # falls back to importing the submodule.
    if name not in _SDK_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("broker.client"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SDK_NAMES)
