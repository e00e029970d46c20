"""BODYCRC's CRC-32 (broker.protocol.crc): ISA-L's, installed as a dependency, gives zlib's values."""

from __future__ import annotations

import zlib

from hypothesis import given
from hypothesis import strategies as st

from broker.protocol import crc
from broker.protocol.message import body_crc


def test_the_fast_implementation_is_the_one_in_use() -> None:
    # isal is a dependency: falling back to zlib here means the install lost it (a slower broker)
    assert crc.IMPLEMENTATION.startswith("isal"), crc.IMPLEMENTATION


@given(st.binary(max_size=9000))
def test_it_equals_zlib(data: bytes) -> None:
    assert crc.crc32(data) == zlib.crc32(data)
    assert crc.crc32(memoryview(data)) == zlib.crc32(data)
    assert body_crc(data) == zlib.crc32(data) & 0x7FFFFFFF


def test_known_values() -> None:
    assert crc.crc32(b"") == 0
    assert crc.crc32(b"123456789") == 0xCBF43926  # the CRC-32 check value
