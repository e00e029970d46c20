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

When every literal byte is ASCII (every length below 128, the common case), the section is decoded as
ASCII, which checks every value byte in one C pass, and the groups match any character; otherwise (a value
128 to 255 bytes long puts a byte >= 0x80 in its length field) it is decoded as latin-1 and each group
checks its characters are ASCII, which costs the regex engine a class test per character.
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
        # (code, section offset, section length) -> the layout's `fullmatch` of the section, and the codec
        # to decode the section with
        self._layouts: dict[tuple[int, int, int], tuple[Callable[[str], re.Match[str] | None], str]] = {}

    def decode(self, code: int, raw: bytes, start: int, end: int) -> dict[str, str] | None:
        """extFields of `raw[start:end]` when a remembered layout fits exactly, else None."""
        layout = self._layouts.get((code, start, end - start))
        if layout is None:
            return None
        match, codec = layout
        try:
            section = raw[start:end].decode(codec)
        except UnicodeDecodeError:
            return None
        found = match(section)
        return None if found is None else found.groupdict()

    def learn(self, code: int, raw: bytes, start: int, end: int, ext: dict[str, str]) -> None:
        """Remember the layout of a section the slow path has just decoded (ASCII keys and values only)."""
        if not ext:
            return
        fields: list[tuple[bytes, str, int]] = []
        pos = start
        for key, value in ext.items():
            if not (key.isascii() and key.isidentifier() and value.isascii()):
                return  # a group needs a name, and a non-ASCII value would decode otherwise as latin-1
            fixed = len(key).to_bytes(2, "big") + key.encode("ascii") + len(value).to_bytes(4, "big")
            fields.append((fixed, key, len(value)))
            pos += len(fixed) + len(value)
        if pos != end:
            return  # duplicate keys collapsed in the dict: not a layout we can replay
        codec, any_value_char = (
            ("ascii", ".") if all(f.isascii() for f, _k, _n in fields) else ("latin-1", "[\\x00-\\x7f]")
        )
        pattern = "".join(f"{re.escape(f.decode('latin-1'))}(?P<{k}>{any_value_char}{{{n}}})" for f, k, n in fields)
        if len(self._layouts) >= _MAX_LAYOUTS:
            self._layouts.clear()
        self._layouts[(code, start, end - start)] = (re.compile(pattern, re.DOTALL).fullmatch, codec)
