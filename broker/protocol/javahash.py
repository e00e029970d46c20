"""Java's `String.hashCode`, needed wherever RocketMQ stores a hash: tag codes and index keys.

Computed over UTF-16 code units and wrapped to a signed 32-bit int, so that a ConsumeQueue unit
or IndexFile slot written here is the same one the Java broker would write.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["index_key_hash", "java_string_hash", "tags_code"]


@lru_cache(maxsize=65536)
def java_string_hash(text: str) -> int:
    h = 0
    if text.isascii():
        for ch in text.encode():
            h = (31 * h + ch) & 0xFFFFFFFF
    else:
        units = text.encode("utf-16-be")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """The ConsumeQueue tagsCode of a message: hash of its TAGS property, 0 when it has none."""
    return java_string_hash(tags) if tags else 0


def index_key_hash(key: str) -> int:
    """IndexFile key hash: abs(hashCode), with Integer.MIN_VALUE (whose abs overflows) mapped to 0."""
    h = java_string_hash(key)
    return 0 if h == -(2**31) else abs(h)
