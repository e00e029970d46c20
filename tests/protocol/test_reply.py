"""Request/Reply wire pieces (broker.protocol.reply): the push header's fields, hosts and the reply mark."""

from __future__ import annotations

import pytest

from broker.protocol.reply import ReplyMessageRequestHeader, format_host, is_reply, parse_host, reply_topic

HEADER = ReplyMessageRequestHeader(
    producer_group="PID-r",
    topic="C_REPLY_TOPIC",
    default_topic="TBW102",
    default_topic_queue_nums=4,
    queue_id=0,
    sys_flag=1,
    born_timestamp=1_700_000_000_123,
    flag=7,
    properties="MSG_TYPE\x01reply\x02",
    reconsume_times=0,
    unit_mode=False,
    born_host="127.0.0.1:5000",
    store_host="127.0.0.1:10911",
    store_timestamp=1_700_000_000_456,
)


def test_push_header_round_trips_as_strings() -> None:
    fields = HEADER.to_ext_fields()
    assert all(isinstance(v, str) for v in fields.values())
    assert fields["bornTimestamp"] == "1700000000123" and fields["unitMode"] == "false"
    assert ReplyMessageRequestHeader.from_ext_fields(fields) == HEADER


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({**HEADER.to_ext_fields(), "topic": ""}, "<topic> is null"),
        ({k: v for k, v in HEADER.to_ext_fields().items() if k != "storeHost"}, "<storeHost> is null"),
        ({**HEADER.to_ext_fields(), "queueId": "x"}, "<queueId> is not a number"),
    ],
)
def test_push_header_names_the_bad_field(fields: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReplyMessageRequestHeader.from_ext_fields(fields)


@pytest.mark.parametrize(
    ("text", "host"),
    [
        ("127.0.0.1:5000", ("127.0.0.1", 5000)),
        ("/10.1.2.3:10911", ("10.1.2.3", 10911)),  # Java's InetSocketAddress.toString()
        ("[::1]:99", ("::1", 99)),
        ("no-port", ("", 0)),
        ("host:abc", ("", 0)),
    ],
)
def test_parse_host(text: str, host: tuple[str, int]) -> None:
    assert parse_host(text) == host


@pytest.mark.parametrize("host", [("127.0.0.1", 1), ("::1", 2)])
def test_format_host_round_trips(host: tuple[str, int]) -> None:
    assert parse_host(format_host(host)) == host


@pytest.mark.parametrize(
    ("properties", "reply"),
    [
        ("MSG_TYPE\x01reply\x02CORRELATION_ID\x01c\x02", True),
        ("KEYS\x01k\x02MSG_TYPE\x01reply\x02", True),
        ("MSG_TYPE\x01request\x02", False),
        ("NOT_MSG_TYPE\x01replyish\x02", False),
        ("", False),
        (None, False),
    ],
)
def test_is_reply(properties: str | None, reply: bool) -> None:
    assert is_reply(properties) is reply


def test_reply_topic() -> None:
    assert reply_topic("DefaultCluster") == "DefaultCluster_REPLY_TOPIC"
