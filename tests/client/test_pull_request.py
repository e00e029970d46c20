"""The one PULL_MESSAGE builder (broker/client/pull_request.py) in the three forms the SDK sends it: the
consumers' long poll, the admin tools' range read and the Spark source's range read, decoded with the
broker's own header codec."""

from __future__ import annotations

import dataclasses

import pytest

from broker.client.api import PullSysFlag
from broker.client.message import MessageQueue
from broker.client.pull_request import pull_request, pull_sys_flag
from broker.client.subscription import parse_subscription
from broker.protocol.codes import LanguageCode, RequestCode
from broker.protocol.headers import PullMessageRequestHeader

MQ = MessageQueue("Orders", "broker-a", 3)
SUB = dataclasses.replace(parse_subscription("Orders", "paid || shipped"), sub_version=1_700_000_000_000)


@pytest.mark.parametrize(
    ("kwargs", "sys_flag", "commit", "suspend_ms", "max_bytes"),
    [
        # a consumer's long poll: commits its offset, parks on the broker up to 15 s
        (
            {"commit_offset": 40, "suspend_ms": 15_000},
            PullSysFlag.COMMIT_OFFSET | PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION,
            40,
            15_000,
            None,
        ),
        # nothing committed yet (-1, or 0), a pull that must not wait
        ({"commit_offset": -1}, PullSysFlag.SUBSCRIPTION, 0, 0, None),
        ({"commit_offset": 0, "suspend_ms": 0}, PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION, 0, 0, None),
        # the subscription the heartbeat registered (postSubscriptionWhenPull=false)
        ({"suspend_ms": 20_000, "post_subscription": False}, PullSysFlag.SUSPEND, 0, 20_000, None),
        # the admin tools' range read: the defaults
        ({}, PullSysFlag.SUBSCRIPTION, 0, 0, None),
        # the Spark source's range read: larger answers
        ({"max_bytes": 4 << 20}, PullSysFlag.SUBSCRIPTION, 0, 0, 4 << 20),
    ],
)
def test_each_form_decodes_as_the_broker_reads_it(
    kwargs: dict[str, int | bool], sys_flag: int, commit: int, suspend_ms: int, max_bytes: int | None
) -> None:
    cmd = pull_request("cg", MQ, 41, 32, SUB, **kwargs)  # type: ignore[arg-type]
    assert cmd.code == RequestCode.PULL_MESSAGE and cmd.language == LanguageCode.PYTHON and cmd.body == b""
    h = PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    assert (h.consumer_group, h.topic, h.queue_id, h.broker_name) == ("cg", "Orders", 3, "broker-a")
    assert (h.queue_offset, h.max_msg_nums) == (41, 32)
    assert (h.sys_flag, h.commit_offset, h.suspend_timeout_millis, h.max_msg_bytes) == (
        sys_flag,
        commit,
        suspend_ms,
        max_bytes,
    )
    assert (h.subscription, h.sub_version, h.expression_type) == ("paid || shipped", 1_700_000_000_000, "TAG")
    assert ("maxMsgBytes" in cmd.ext_fields) is (max_bytes is not None)


def test_sys_flag_bits() -> None:
    assert pull_sys_flag(0, False, False) == 0
    assert pull_sys_flag(1, False, False) == PullSysFlag.COMMIT_OFFSET
    assert pull_sys_flag(-1, True, True) == PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION


def test_a_sql92_subscription_travels_as_sql92() -> None:
    sub = parse_subscription("Orders", "amount > 10", "SQL92")
    h = PullMessageRequestHeader.from_ext_fields(pull_request("cg", MQ, 0, 1, sub).ext_fields)
    assert (h.subscription, h.expression_type) == ("amount > 10", "SQL92")
