"""Subscriptions: parsing `"tagA || tagB"` or a SQL92 selector, and the client-side re-check.

The push and pull consumers build one `SubscriptionData` per subscribed topic (from a tag string or
a `MessageSelector`); it goes into the heartbeat and the pull request as is, and
`matches_message()` drops messages whose tag only collided on the 32-bit hash the broker filters
with, or that a SQL92 selector does not select (the broker filters first; this is the re-check).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TypedDict

from broker.filter import EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG, SqlFilter, compile_sql, is_sql92
from broker.protocol.javahash import java_string_hash
from broker.protocol.message import MessageExt

__all__ = ["SUB_ALL", "MessageSelector", "SubscriptionData", "SubscriptionJson", "parse_subscription"]

log = logging.getLogger(__name__)

SUB_ALL = "*"


class SubscriptionJson(TypedDict):
    """Java's SubscriptionData as JSON: in the heartbeat's consumerData, CHECK_CLIENT_CONFIG and running info."""

    classFilterMode: bool
    codeSet: list[int]
    expressionType: str
    subString: str
    subVersion: int
    tagsSet: list[str]
    topic: str


@dataclass(slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    expression_type: str = "TAG"
    #: The compiled SQL92 expression (expression_type SQL92 only).
    sql: SqlFilter | None = field(default=None, compare=False)

    @property
    def sub_all(self) -> bool:
        return not self.tags_set and self.sql is None

    def matches_message(self, msg: MessageExt) -> bool:
        """The client-side filter: the SQL92 expression over user properties, else the exact tag."""
        if self.sql is not None:
            return self.sql.matches(msg.properties)
        return self.matches(msg.tags)

    def matches(self, tags: str | None) -> bool:
        """Exact tag filter: everything for `*`, otherwise the message's tag must be listed."""
        if not self.tags_set:
            return True
        return tags is not None and tags in self.tags_set

    def to_json(self) -> SubscriptionJson:
        return {
            "classFilterMode": False,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """How a consumer selects messages: `MessageSelector.by_sql("a > 5")` or `by_tag("a || b")`."""

    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """Select by a SQL92 expression over user properties (needs enablePropertyFilter on brokers).
        An invalid expression raises FilterSyntaxError (a ValueError) here, naming the position."""
        compile_sql(expression)
        return cls(EXPRESSION_TYPE_SQL92, expression)

    @classmethod
    def by_tag(cls, expression: str | None) -> MessageSelector:
        return cls(EXPRESSION_TYPE_TAG, expression or SUB_ALL)


def parse_subscription(
    topic: str, expression: str | MessageSelector | None, expression_type: str = EXPRESSION_TYPE_TAG
) -> SubscriptionData:
    """`None`, `""` or `"*"` subscribe to everything; otherwise tags separated by `||`, or a SQL92
    expression when `expression_type` is SQL92 (or `expression` is a MessageSelector saying so)."""
    if isinstance(expression, MessageSelector):
        expression_type, expression = expression.expression_type, expression.expression
    if is_sql92(expression_type):
        sql = compile_sql((expression or "").strip())
        return SubscriptionData(topic, sql.expression, expression_type=EXPRESSION_TYPE_SQL92, sql=sql)
    expr = (expression or "").strip()
    if not expr or expr == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL)
    tags: list[str] = []
    for part in expr.split("||"):
        tag = part.strip()
        if tag and tag not in tags:
            tags.append(tag)
    if not tags:
        raise ValueError(f"subscription expression {expression!r} names no tag")
    return SubscriptionData(topic, expr, tuple(tags), tuple(java_string_hash(t) for t in tags))
