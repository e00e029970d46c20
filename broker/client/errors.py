"""Exceptions of the client SDK, one hierarchy mapped from RocketMQ response codes.

Raised by the producer, consumers and admin client (broker.client.*) to application code. Retry
logic inside the SDK reads only the class flags (`retriable`, `refresh_route`), never the codes, in
the way aiokafka's sender reads its errors. Transport failures keep their own classes from
broker.transport.errors (`RemotingError` and subclasses); `is_retriable()` covers both families.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from broker.protocol.codes import ResponseCode
from broker.transport.errors import RemotingError

__all__ = [
    "BrokerResponseError",
    "BrokerSystemError",
    "BrokerUnreachable",
    "ClientError",
    "ConsumerNotOnline",
    "FlowControl",
    "FlushDiskTimeout",
    "FlushSlaveTimeout",
    "IllegalOperation",
    "IllegalStateError",
    "InvalidParameter",
    "MessageIllegal",
    "MessageTooLarge",
    "NameServerUnreachable",
    "NoNameServerError",
    "NoPermission",
    "NoRouteError",
    "NotLeaderForQueue",
    "PullOffsetMoved",
    "QueryNotFound",
    "RequestCodeNotSupported",
    "RocketError",
    "ServiceNotAvailable",
    "SlaveNotAvailable",
    "SubscriptionGroupNotExist",
    "SubscriptionNotExist",
    "SubscriptionNotLatest",
    "SubscriptionParseFailed",
    "SystemBusy",
    "TopicExistAlready",
    "TopicNotExist",
    "UnknownResponse",
    "VersionNotSupported",
    "for_code",
    "is_retriable",
]

log = logging.getLogger(__name__)


class RocketError(Exception):
    """Base of every error the SDK raises itself."""

    retriable: ClassVar[bool] = False
    refresh_route: ClassVar[bool] = False


class ClientError(RocketError):
    """A problem found on the client side before (or instead of) asking a broker."""


class IllegalStateError(ClientError):
    """The client is not started, already shut down, or misconfigured."""


class NoNameServerError(IllegalStateError):
    """No NameServer address was given: neither an argument, nor the `rocketmq.namesrv.addr` property
    (`python -X rocketmq.namesrv.addr=...`), nor the NAMESRV_ADDR environment variable."""


class NoRouteError(ClientError):
    """No NameServer knows a route for the topic (and the TBW102 fallback did not help)."""

    retriable = True
    refresh_route = True


class NameServerUnreachable(NoRouteError):
    """None of the configured NameServers answered (refused, reset, timed out)."""


class BrokerUnreachable(ClientError):
    """The brokers that serve a topic did not answer (refused, reset, timed out), or the NameServer
    dropped the only ones it had: the topic exists, its broker is down. The producer raises it when a
    send's time budget ran out while retrying."""

    retriable = True
    refresh_route = True


class MessageTooLarge(ClientError):
    """A message (or a single message of a batch) is bigger than maxMessageSize."""


class BrokerResponseError(RocketError):
    """A broker or NameServer answered with a non-success response code."""

    code: ClassVar[int] = -1

    def __init__(self, remark: str | None = None, *, code: int | None = None, addr: str | None = None) -> None:
        self.remark = remark or ""
        self.addr = addr
        if code is not None:
            self.response_code = code
        else:
            self.response_code = type(self).code
        where = f" from {addr}" if addr else ""
        super().__init__(f"{type(self).__name__} (code {self.response_code}){where}: {self.remark}")


class UnknownResponse(BrokerResponseError):
    """A code this SDK has no class for; `response_code` holds it."""


class BrokerSystemError(BrokerResponseError):
    code = ResponseCode.SYSTEM_ERROR
    retriable = True  # Java's producer retries SYSTEM_ERROR on another broker


class SystemBusy(BrokerResponseError):
    code = ResponseCode.SYSTEM_BUSY
    retriable = True


class RequestCodeNotSupported(BrokerResponseError):
    code = ResponseCode.REQUEST_CODE_NOT_SUPPORTED


class FlushDiskTimeout(BrokerResponseError):
    """Outside a send (where it is a SendStatus, the message being stored)."""

    code = ResponseCode.FLUSH_DISK_TIMEOUT


class SlaveNotAvailable(BrokerResponseError):
    code = ResponseCode.SLAVE_NOT_AVAILABLE


class FlushSlaveTimeout(BrokerResponseError):
    code = ResponseCode.FLUSH_SLAVE_TIMEOUT


class MessageIllegal(BrokerResponseError):
    code = ResponseCode.MESSAGE_ILLEGAL


class ServiceNotAvailable(BrokerResponseError):
    """e.g. a slave asked to store a message: the route that named it master is stale (a failover or a
    handover moved the mastership), so it is read again before the next attempt."""

    code = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True
    refresh_route = True


class VersionNotSupported(BrokerResponseError):
    code = ResponseCode.VERSION_NOT_SUPPORTED


class NoPermission(BrokerResponseError):
    """e.g. a broker whose write permission was wiped; another broker may take the message."""

    code = ResponseCode.NO_PERMISSION
    retriable = True
    refresh_route = True


class TopicNotExist(BrokerResponseError):
    code = ResponseCode.TOPIC_NOT_EXIST
    retriable = True
    refresh_route = True


class TopicExistAlready(BrokerResponseError):
    code = ResponseCode.TOPIC_EXIST_ALREADY


class PullOffsetMoved(BrokerResponseError):
    code = ResponseCode.PULL_OFFSET_MOVED


class QueryNotFound(BrokerResponseError):
    code = ResponseCode.QUERY_NOT_FOUND


class SubscriptionParseFailed(BrokerResponseError):
    code = ResponseCode.SUBSCRIPTION_PARSE_FAILED


class SubscriptionNotExist(BrokerResponseError):
    """The broker has not seen our heartbeat yet; the next heartbeat fixes it."""

    code = ResponseCode.SUBSCRIPTION_NOT_EXIST
    retriable = True


class SubscriptionNotLatest(BrokerResponseError):
    code = ResponseCode.SUBSCRIPTION_NOT_LATEST
    retriable = True


class SubscriptionGroupNotExist(BrokerResponseError):
    code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


class InvalidParameter(BrokerResponseError):
    code = ResponseCode.INVALID_PARAMETER


class ConsumerNotOnline(BrokerResponseError):
    code = ResponseCode.CONSUMER_NOT_ONLINE


class FlowControl(BrokerResponseError):
    code = ResponseCode.FLOW_CONTROL
    retriable = True


class NotLeaderForQueue(BrokerResponseError):
    code = ResponseCode.NOT_LEADER_FOR_QUEUE
    retriable = True
    refresh_route = True


class IllegalOperation(BrokerResponseError):
    code = ResponseCode.ILLEGAL_OPERATION


def _walk(cls: type[BrokerResponseError]) -> list[type[BrokerResponseError]]:
    found: list[type[BrokerResponseError]] = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_walk(sub))
    return found


_REGISTRY: dict[int, type[BrokerResponseError]] = {}


def _registry() -> dict[int, type[BrokerResponseError]]:
    # Built lazily so subclasses defined by other modules (or tests) after import are found too.
    if not _REGISTRY:
        for cls in _walk(BrokerResponseError):
            if cls.code >= 0 and cls.code not in _REGISTRY:
                _REGISTRY[cls.code] = cls
    return _REGISTRY


def for_code(code: int, remark: str | None = None, addr: str | None = None) -> BrokerResponseError:
    """The exception for a response code; UnknownResponse (carrying the code) when none matches."""
    cls = _registry().get(code)
    if cls is None:
        return UnknownResponse(remark, code=code, addr=addr)
    return cls(remark, addr=addr)


def is_retriable(exc: BaseException) -> bool:
    """Whether a send may be retried (on another broker): transport failures and retriable codes."""
    if isinstance(exc, RemotingError):
        return True
    return isinstance(exc, RocketError) and exc.retriable
