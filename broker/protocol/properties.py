"""The message properties string: `name\\x01value\\x02name\\x01value\\x02...`, and property names.

Used by the send path (header field `properties` / `i`), the store (TAGS, KEYS, UNIQ_KEY, DELAY...)
and the client. Parsing follows Java's MessageDecoder.string2messageProperties: a segment is kept
only when it is at least 3 characters long and has its \\x01 neither first nor last.
"""

from __future__ import annotations

__all__ = [
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "Prop",
    "decode_properties",
    "encode_properties",
]

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


class Prop:
    """Property names from MessageConst.java (the ones this project reads or writes)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT = "WAIT"
    DELAY = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QID = "REAL_QID"
    TRAN_MSG = "TRAN_MSG"
    PGROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME = "RECONSUME_TIME"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    UNIQ_KEY = "UNIQ_KEY"
    TRANSACTION_ID = "__transactionId__"
    TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    MSG_REGION = "MSG_REGION"
    TRACE_ON = "TRACE_ON"
    CLUSTER = "CLUSTER"
    SHARDING_KEY = "__SHARDINGKEY"
    DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
    DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
    CONSUME_START_TIME = "CONSUME_START_TIME"


def decode_properties(text: str) -> dict[str, str]:
    """Parse a properties string; malformed segments are skipped exactly as Java skips them."""
    result: dict[str, str] = {}
    if not text:
        return result
    for segment in text.split(PROPERTY_SEPARATOR):
        if len(segment) < 3:
            continue
        sep = segment.find(NAME_VALUE_SEPARATOR)
        if sep <= 0 or sep == len(segment) - 1:
            continue
        result[segment[:sep]] = segment[sep + 1 :]
    return result


def encode_properties(props: dict[str, str]) -> str:
    """Serialise properties; every pair is terminated by \\x02, as Java writes them."""
    return "".join(f"{name}\x01{value}\x02" for name, value in props.items())
