"""The remembered-layout fast path for binary ROCKETMQ extFields must agree with the full decoder."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol._binary_ext import BinaryExtCache
from broker.protocol.command import RemotingCommand, decode_frame, encode_binary

_text = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0x2FF), max_size=12)
_ext = st.dictionaries(_text.filter(bool), _text, max_size=6)


@settings(max_examples=300, deadline=None)
@given(first=_ext, second=_ext, code=st.integers(0, 400), remark=st.one_of(st.none(), _text.filter(bool)))
def test_fast_path_matches_full_decode(
    first: dict[str, str], second: dict[str, str], code: int, remark: str | None
) -> None:
    # Decode each header twice: the second decode may take the remembered layout of the first or of
    # an earlier example with the same code and section size; results must not differ.
    for ext in (first, second, first):
        frame = encode_binary(RemotingCommand(code=code, ext_fields=ext, remark=remark, body=b"b"))[4:]
        for _ in range(2):
            cmd = decode_frame(frame)
            assert (cmd.code, cmd.ext_fields, cmd.remark, cmd.body) == (code, ext, remark, b"b")


def test_layout_rejects_same_lengths_with_other_keys() -> None:
    cache = BinaryExtCache()
    one = encode_binary(RemotingCommand(code=10, ext_fields={"a": "xy", "b": "1"}))[8:]
    other = encode_binary(RemotingCommand(code=10, ext_fields={"c": "xy", "b": "1"}))[8:]
    start = 17 + 4  # fixed part (no remark) + extLen
    assert cache.decode(10, one, start, len(one)) is None
    cache.learn(10, one, start, len(one), {"a": "xy", "b": "1"})
    assert cache.decode(10, one, start, len(one)) == {"a": "xy", "b": "1"}
    assert cache.decode(10, other, start, len(other)) is None


_long = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0xFF), min_size=100, max_size=400)


@settings(max_examples=200, deadline=None)
@given(value=_long, other=st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0x7F), max_size=20))
def test_long_values_whose_lengths_are_not_ascii_bytes_match_full_decode(value: str, other: str) -> None:
    # a value 128-255 (or 384-511...) bytes long puts a byte >= 0x80 in its length field: such layouts are
    # remembered too, and decoded through the latin-1 pattern whose groups check each character
    for ext in ({"i": value, "b": other}, {"i": value.encode("ascii", "replace").decode(), "b": other}):
        frame = encode_binary(RemotingCommand(code=310, ext_fields=ext, body=b"b"))[4:]
        for _ in range(3):
            assert decode_frame(frame).ext_fields == ext


def test_a_layout_with_a_200_byte_value_is_remembered_and_checks_its_values() -> None:
    cache = BinaryExtCache()
    start = 17 + 4
    ascii_frame = encode_binary(RemotingCommand(code=310, ext_fields={"i": "p" * 200, "b": "T"}))[8:]
    cache.learn(310, ascii_frame, start, len(ascii_frame), {"i": "p" * 200, "b": "T"})
    assert cache.decode(310, ascii_frame, start, len(ascii_frame)) == {"i": "p" * 200, "b": "T"}
    # the same lengths with a non-ASCII byte in the value: not this layout (the full decoder decides)
    non_ascii = ascii_frame.replace(b"p" * 200, b"p" * 198 + "é".encode(), 1)
    assert len(non_ascii) == len(ascii_frame)
    assert cache.decode(310, non_ascii, start, len(non_ascii)) is None
    short = encode_binary(RemotingCommand(code=310, ext_fields={"i": "p" * 20, "b": "T"}))[8:]
    cache.learn(310, short, start, len(short), {"i": "p" * 20, "b": "T"})
    assert cache.decode(310, short, start, len(short)) == {"i": "p" * 20, "b": "T"}
    assert cache.decode(310, short.replace(b"p" * 20, b"p" * 18 + "é".encode(), 1), start, len(short)) is None
