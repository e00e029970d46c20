"""Subscriptions: parsing `"tagA || tagB"` and the client-side exact tag filter.

The push and pull consumers build one `SubscriptionData` per subscribed topic; it goes into the
heartbeat and the pull request as is, and `matches()` drops messages whose tag only collided on
the 32-bit hash the broker filters with.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from broker.protocol.javahash import java_string_hash

__all__ = ["SUB_ALL", "SubscriptionData", "parse_subscription"]

log = logging.getLogger(__name__)

SUB_ALL = "*"


@dataclass(slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    expression_type: str = "TAG"

    @property
    def sub_all(self) -> bool:
        return not self.tags_set

    def matches(self, tags: str | None) -> bool:
        """Exact tag filter: everything for `*`, otherwise the message's tag must be listed."""
        if not self.tags_set:
            return True
        return tags is not None and tags in self.tags_set

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": False,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }


def parse_subscription(topic: str, expression: str | None) -> SubscriptionData:
    """`None`, `""` or `"*"` subscribe to everything; otherwise tags separated by `||`."""
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
