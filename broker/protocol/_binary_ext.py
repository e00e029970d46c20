"""Fast path for the extFields section of binary ROCKETMQ headers, used by command._decode_binary_header.

A client sends the same header keys in the same order request after request (the Java benchmark
producer's SEND_MESSAGE_V2 has 14), and most value lengths repeat too. Walking the entries in Python
costs about a microsecond each, so we remember a layout per (code, section offset, section length): one precompiled
Struct that unpacks every key and length in a single C call. When the unpacked keys and lengths equal
the remembered ones the layout holds, and the values are slices of one latin-1 decode of the (ASCII)
header. Anything else (first sight, different lengths, non-ASCII text) returns None and the caller
walks the entries with full checks, then `learn()`s the layout for next time.
"""

from __future__ import annotations

import struct
from operator import itemgetter

__all__ = ["BinaryExtCache"]

_MAX_LAYOUTS = 512


class _Layout:
    __slots__ = ("expected", "keys", "struct", "values")

    def __init__(self, fmt: str, expected: tuple[object, ...], keys: list[str], spans: list[tuple[int, int]]):
        self.struct = struct.Struct(fmt)
        self.expected = expected
        self.keys = keys
        # One C call slicing every value out of the header text (a Python loop costs ~4x more).
        getter = itemgetter(*(slice(a, b) for a, b in spans))
        self.values = getter if len(spans) > 1 else lambda text: (getter(text),)


class BinaryExtCache:
    """Layouts of recently seen extFields sections; not thread-safe (one per event-loop thread is fine)."""

    __slots__ = ("_layouts",)

    def __init__(self) -> None:
        self._layouts: dict[tuple[int, int, int], _Layout] = {}

    def decode(self, code: int, raw: bytes, start: int, end: int) -> dict[str, str] | None:
        """extFields of `raw[start:end]` when a remembered layout fits exactly, else None."""
        layout = self._layouts.get((code, start, end - start))
        if layout is None:
            return None
        try:
            if layout.struct.unpack_from(raw, start) != layout.expected:
                return None
        except struct.error:
            return None
        if not raw[start:end].isascii():
            return None
        # latin-1 maps byte i to character i, so byte offsets index the text directly.
        text = raw.decode("latin-1")
        return dict(zip(layout.keys, layout.values(text), strict=False))  # equal lengths by construction

    def learn(self, code: int, raw: bytes, start: int, end: int, ext: dict[str, str]) -> None:
        """Remember the layout of a section the slow path has just decoded (ASCII keys and values only)."""
        if not raw[start:end].isascii() or not ext:
            return
        fmt = [">"]
        expected: list[object] = []
        spans: list[tuple[int, int]] = []
        pos = start
        for key, value in ext.items():
            key_bytes = key.encode("ascii")
            fmt.append(f"h{len(key_bytes)}si{len(value)}x")
            expected += [len(key_bytes), key_bytes, len(value)]
            value_start = pos + 2 + len(key_bytes) + 4
            spans.append((value_start, value_start + len(value)))
            pos = value_start + len(value)
        if pos != end:
            return  # duplicate keys collapsed in the dict: not a layout we can replay
        if len(self._layouts) >= _MAX_LAYOUTS:
            self._layouts.clear()
        self._layouts[(code, start, end - start)] = _Layout("".join(fmt), tuple(expected), list(ext), spans)
