"""Response codes map to the exception hierarchy; retry logic reads only the flags."""

from __future__ import annotations

import pytest

from broker.client import errors
from broker.protocol.codes import ResponseCode
from broker.transport.errors import RequestTimeout


@pytest.mark.parametrize(
    ("code", "cls", "retriable", "refresh"),
    [
        (ResponseCode.SYSTEM_ERROR, errors.BrokerSystemError, True, False),
        (ResponseCode.SYSTEM_BUSY, errors.SystemBusy, True, False),
        (ResponseCode.MESSAGE_ILLEGAL, errors.MessageIllegal, False, False),
        (ResponseCode.SERVICE_NOT_AVAILABLE, errors.ServiceNotAvailable, True, True),
        (ResponseCode.NO_PERMISSION, errors.NoPermission, True, True),
        (ResponseCode.TOPIC_NOT_EXIST, errors.TopicNotExist, True, True),
        (ResponseCode.QUERY_NOT_FOUND, errors.QueryNotFound, False, False),
        (ResponseCode.SUBSCRIPTION_NOT_EXIST, errors.SubscriptionNotExist, True, False),
        (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, errors.RequestCodeNotSupported, False, False),
    ],
)
def test_for_code_maps_codes_to_classes(code: int, cls: type, retriable: bool, refresh: bool) -> None:
    exc = errors.for_code(code, "why", "10.0.0.1:10911")
    assert type(exc) is cls
    assert exc.response_code == code
    assert exc.retriable is retriable
    assert exc.refresh_route is refresh
    assert "why" in str(exc) and "10.0.0.1:10911" in str(exc) and str(int(code)) in str(exc)
    assert isinstance(exc, errors.BrokerResponseError) and isinstance(exc, errors.RocketError)


def test_unknown_code_keeps_the_code() -> None:
    exc = errors.for_code(9999, "odd")
    assert type(exc) is errors.UnknownResponse
    assert exc.response_code == 9999
    assert not exc.retriable


def test_is_retriable_covers_transport_errors() -> None:
    assert errors.is_retriable(RequestTimeout("slow"))
    assert errors.is_retriable(errors.TopicNotExist())
    assert not errors.is_retriable(errors.MessageIllegal())
    assert not errors.is_retriable(ValueError("bug"))
