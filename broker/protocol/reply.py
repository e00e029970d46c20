"""Request/Reply on the wire: the properties a request and its reply carry, and the header of
PUSH_REPLY_MESSAGE_TO_CLIENT (326), the request a broker sends to the requesting client.

A requester sends an ordinary message with CORRELATION_ID, REPLY_TO_CLIENT (its client id) and TTL.
The responder answers with a message to `<cluster>_REPLY_TOPIC` (the cluster comes from the request's
CLUSTER property, which every broker adds) carrying MSG_TYPE=reply and the same three properties, sent
with SEND_REPLY_MESSAGE(_V2) (324/325). The broker finds the requester's connection by the client id
and pushes the reply to it with code 326, whose header is `ReplyMessageRequestHeader` and whose body
is the reply's body as sent. Used by the broker's reply processor and by the SDK's producer.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.protocol.properties import decode_properties

__all__ = [
    "ARRIVE_TIME",
    "CORRELATION_ID",
    "MSG_TYPE",
    "PUSH_REPLY_TIME",
    "REPLY_FLAG",
    "REPLY_TOPIC_POSTFIX",
    "REPLY_TO_CLIENT",
    "TTL",
    "ReplyMessageRequestHeader",
    "format_host",
    "is_reply",
    "parse_host",
    "reply_topic",
]

CORRELATION_ID = "CORRELATION_ID"
REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
#: The requester's timeout: milliseconds from Java, seconds from Go; informational only.
TTL = "TTL"
MSG_TYPE = "MSG_TYPE"
#: MSG_TYPE of a reply: the client sends such a message with SEND_REPLY_MESSAGE(_V2).
REPLY_FLAG = "reply"
#: Set by the broker when it pushes a reply (ms), and by the requester when it arrives (ms).
PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
ARRIVE_TIME = "ARRIVE_TIME"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"


_REPLY_MARK = f"{MSG_TYPE}\x01{REPLY_FLAG}"


def reply_topic(cluster: str) -> str:
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


def is_reply(properties: str | None) -> bool:
    """Whether a message's encoded properties mark it a reply (MSG_TYPE=reply): sent with code 324/325."""
    if not properties or _REPLY_MARK not in properties:
        return False
    return decode_properties(properties).get(MSG_TYPE) == REPLY_FLAG


def format_host(host: tuple[str, int]) -> str:
    """`ip:port` as the header's bornHost/storeHost (Java writes its `/ip:port`; clients accept both)."""
    ip, port = host
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def parse_host(text: str) -> tuple[str, int]:
    """The inverse of `format_host`, also reading Java's leading slash; ("", 0) when unreadable."""
    ip, sep, port = text.lstrip("/").rpartition(":")
    if not sep or not port.isdigit():
        return "", 0
    return ip.strip("[]"), int(port)


def _int(fields: dict[str, str], name: str) -> int:
    value = fields.get(name, "")
    try:
        return int(value) if value else 0
    except ValueError:
        raise ValueError(f"the custom field <{name}> is not a number: {value!r}") from None


@dataclass(frozen=True, slots=True)
class ReplyMessageRequestHeader:
    """The extFields of PUSH_REPLY_MESSAGE_TO_CLIENT (every value a string on the wire)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str
    reconsume_times: int
    unit_mode: bool
    born_host: str
    store_host: str
    store_timestamp: int

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "producerGroup": self.producer_group,
            "topic": self.topic,
            "defaultTopic": self.default_topic,
            "defaultTopicQueueNums": str(self.default_topic_queue_nums),
            "queueId": str(self.queue_id),
            "sysFlag": str(self.sys_flag),
            "bornTimestamp": str(self.born_timestamp),
            "flag": str(self.flag),
            "properties": self.properties,
            "reconsumeTimes": str(self.reconsume_times),
            "unitMode": "true" if self.unit_mode else "false",
            "bornHost": self.born_host,
            "storeHost": self.store_host,
            "storeTimestamp": str(self.store_timestamp),
        }

    @classmethod
    def from_ext_fields(cls, fields: dict[str, str]) -> ReplyMessageRequestHeader:
        """ValueError naming the field when a required one is missing or a number is not one."""
        for name in ("topic", "bornHost", "storeHost"):
            if not fields.get(name):
                raise ValueError(f"the custom field <{name}> is null")
        return cls(
            producer_group=fields.get("producerGroup", ""),
            topic=fields["topic"],
            default_topic=fields.get("defaultTopic", ""),
            default_topic_queue_nums=_int(fields, "defaultTopicQueueNums"),
            queue_id=_int(fields, "queueId"),
            sys_flag=_int(fields, "sysFlag"),
            born_timestamp=_int(fields, "bornTimestamp"),
            flag=_int(fields, "flag"),
            properties=fields.get("properties", ""),
            reconsume_times=_int(fields, "reconsumeTimes"),
            unit_mode=fields.get("unitMode", "false").lower() in ("true", "1"),
            born_host=fields["bornHost"],
            store_host=fields["storeHost"],
            store_timestamp=_int(fields, "storeTimestamp"),
        )
