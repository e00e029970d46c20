"""fastjson-compatible JSON output for NameServer bodies: compact, optionally with unquoted integer keys.

Used by the NameServer route and cluster encoders (broker.namesrv.body). Java's NameServer serialises
`HashMap<Long, String>` brokerAddrs with fastjson, which writes integer keys without quotes
(`{0:"ip:port"}`); clients older than V4_9_4 (Go, C++, ali-ons) get exactly that, and Go cuts the
text between the braces, so the output must have no whitespace. Newer clients get quoted keys.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

__all__ = ["IntKeyMap", "dumps"]

log = logging.getLogger(__name__)


class IntKeyMap(dict[int, Any]):
    """A map whose integer keys fastjson would write unquoted; keys are emitted in ascending order."""

    __slots__ = ()


def dumps(value: Any, *, quote_int_keys: bool) -> bytes:
    """Serialise `value` compactly. Plain dicts keep insertion order; build them in Java's field order."""
    parts: list[bytes] = []
    _write(value, quote_int_keys, parts)
    return b"".join(parts)


def _write(value: Any, quote: bool, out: list[bytes]) -> None:
    if isinstance(value, IntKeyMap):
        out.append(b"{")
        first = True
        for key in sorted(value):
            if not first:
                out.append(b",")
            first = False
            out.append(b'"%d":' % key if quote else b"%d:" % key)
            _write(value[key], quote, out)
        out.append(b"}")
    elif isinstance(value, dict):
        out.append(b"{")
        first = True
        for key, item in value.items():
            if not first:
                out.append(b",")
            first = False
            out.append(orjson.dumps(str(key)))
            out.append(b":")
            _write(item, quote, out)
        out.append(b"}")
    elif isinstance(value, list | tuple):
        out.append(b"[")
        for index, item in enumerate(value):
            if index:
                out.append(b",")
            _write(item, quote, out)
        out.append(b"]")
    else:
        out.append(orjson.dumps(value))
