"""CRC-32 with zlib's polynomial, as RocketMQ's BODYCRC and bodyCrc32 use it (masked to an int32 by callers).

ISA-L's implementation (the `isal` package) when it is installed: 48 ns for a 1 KiB body here against
zlib's 372 (Debian's zlib has no carry-less-multiply path), and every put computes one. The values are the
same; tests/protocol/test_crc.py holds them equal.
"""

from __future__ import annotations

__all__ = ["IMPLEMENTATION", "crc32"]

try:
    from isal.isal_zlib import crc32
except ImportError:  # an install without the optional speed-up: the standard library's
    from zlib import crc32

IMPLEMENTATION = crc32.__module__ or "zlib"
