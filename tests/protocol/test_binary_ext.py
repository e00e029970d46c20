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
