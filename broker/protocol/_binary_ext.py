"""Fast path for the extFields section of binary ROCKETMQ headers, used by command._decode_binary_header.

A client sends the same header keys in the same order request after request (the Java benchmark
producer's SEND_MESSAGE_V2 has 14), and most value lengths repeat too. Walking the entries in Python
costs about a microsecond each, so we remember a layout per (code, section offset, section length): one
precompiled regular expression over the latin-1 text of the header (latin-1 maps byte i to character
i), whose literals are every key with its length fields and whose groups, named after the keys, are the
values, each of the remembered length and ASCII. One `fullmatch` and one `groupdict` (C calls) check the
layout and build the extFields dict: ~45% less than unpacking keys and lengths with a Struct, comparing
them and zipping slices into a dict. Anything else (first sight, different lengths, non-ASCII text, a key
that cannot name a group) returns None and the caller walks the entries with full checks, then
`learn()`s the layout for next time.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["BinaryExtCache"]

_MAX_LAYOUTS = 512


class BinaryExtCache:
    """Layouts of recently seen extFields sections; not thread-safe (one per event-loop thread is fine)."""

    __slots__ = ("_layouts",)

    def __init__(self) -> None:
        # (code, section offset, section length) -> the layout's `fullmatch`
        self._layouts: dict[tuple[int, int, int], Callable[[str, int, int], re.Match[str] | None]] = {}

    def decode(self, code: int, raw: bytes, start: int, end: int) -> dict[str, str] | None:
        """extFields of `raw[start:end]` when a remembered layout fits exactly, else None."""
        match = self._layouts.get((code, start, end - start))
        if match is None:
            return None
        found = match(raw.decode("latin-1"), start, end)
        return None if found is None else found.groupdict()

    def learn(self, code: int, raw: bytes, start: int, end: int, ext: dict[str, str]) -> None:
        """Remember the layout of a section the slow path has just decoded (ASCII keys and values only)."""
        if not raw[start:end].isascii() or not ext:
            return
        pattern: list[str] = []
        pos = start
        for key, value in ext.items():
            if not key.isidentifier():
                return  # cannot name a group
            fixed = len(key).to_bytes(2, "big") + key.encode("ascii") + len(value).to_bytes(4, "big")
            pattern += [re.escape(fixed.decode("latin-1")), f"(?P<{key}>[\\x00-\\x7f]{{{len(value)}}})"]
            pos += len(fixed) + len(value)
        if pos != end:
            return  # duplicate keys collapsed in the dict: not a layout we can replay
        if len(self._layouts) >= _MAX_LAYOUTS:
            self._layouts.clear()
        self._layouts[(code, start, end - start)] = re.compile("".join(pattern), re.DOTALL).fullmatch
