"""RocketCluster's Python client SDK: producer, push, pull and simple (POP) consumers, admin (asyncio, plus a
blocking facade in broker.client.blocking). Applications import from here."""

from __future__ import annotations

from broker.client.admin import Admin
from broker.client.allocate import allocate_averagely, allocate_averagely_by_circle
from broker.client.blocking import BlockingAdmin, BlockingProducer, BlockingPullConsumer, BlockingPushConsumer
from broker.client.config import ClientConfig, ConsumerConfig, ProducerConfig
from broker.client.errors import (
    BrokerResponseError,
    BrokerUnreachable,
    ClientError,
    NoNameServerError,
    NoRouteError,
    RocketError,
)
from broker.client.message import (
    ConsumeFromWhere,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from broker.client.producer import Producer
from broker.client.pull_consumer import PullConsumer
from broker.client.push_consumer import PushConsumer
from broker.client.selector import select_by_hash, select_by_random
from broker.client.simple_consumer import SimpleConsumer
from broker.client.subscription import MessageSelector
from broker.client.transaction import LocalTransactionState, TransactionProducer, TransactionSendResult
from broker.protocol.signature import Credentials

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
    "SimpleConsumer",
    "TransactionProducer",
    "TransactionSendResult",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "select_by_hash",
    "select_by_random",
]
