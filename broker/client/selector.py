"""Queue selectors for `Producer.send(msg, selector=..., arg=...)`, used for ordered messages.

A selector maps (queues, message, arg) to one queue. Messages with the same sharding key must land
on the same queue, so the hash selector uses Java's String.hashCode: a Java producer and ours
choose the same queue for the same key.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from broker.client.message import Message, MessageQueue
from broker.protocol.javahash import java_string_hash

__all__ = [
    "MessageQueueSelector",
    "select_by_hash",
    "select_by_random",
    "sharding_hash",
]

log = logging.getLogger(__name__)

MessageQueueSelector: TypeAlias = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def sharding_hash(arg: Any) -> int:
    """Java's hashCode of the argument: String.hashCode for str, the value for int/long."""
    if isinstance(arg, str):
        return java_string_hash(arg)
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(2**31) <= arg < 2**31:
            return arg
        # Long.hashCode: (int)(value ^ (value >>> 32)).
        v = arg & 0xFFFFFFFFFFFFFFFF
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h
    if isinstance(arg, bytes):
        return java_string_hash(arg.decode("latin-1"))
    raise TypeError(f"cannot hash a sharding key of type {type(arg).__name__}; use str or int")


def select_by_hash(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """SelectMessageQueueByHash: abs(hashCode(arg) % n); Java's % keeps the dividend's sign."""
    if not queues:
        raise ValueError("no queue to select from")
    return queues[abs(sharding_hash(arg)) % len(queues)]


def select_by_random(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    if not queues:
        raise ValueError("no queue to select from")
    return queues[random.randrange(len(queues))]
