"""PutResult's message ids: `msg_id_text` (a batch's ids in one hex pass, as the send reply carries them) equals
the plain `",".join(msg_ids)`, and every id decodes back to the store host and the message's offset."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.message import decode_offset_msg_id, offset_msg_id
from broker.store.results import PutResult, PutStatus

hosts = st.one_of(
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(str),
)
ports = st.integers(0, 65535)
offsets = st.integers(0, 2**63 - 1)


def _result(host: str, port: int, first: int, rest: list[int]) -> PutResult:
    prefix = offset_msg_id(host, port, 0)[:-16]  # the store host's hex, as the CommitLog keeps it
    return PutResult(PutStatus.PUT_OK, first, 1, 0, 0, 1 + len(rest), [first, *rest] if rest else (), prefix)


@given(hosts, ports, offsets, st.lists(offsets, max_size=64))
def test_msg_id_text_is_the_ids_joined(host: str, port: int, first: int, rest: list[int]) -> None:
    result = _result(host, port, first, rest)
    assert result.msg_id_text == ",".join(result.msg_ids).encode()
    for text, offset in zip(result.msg_id_text.decode().split(","), [first, *rest], strict=True):
        assert decode_offset_msg_id(text)[1:] == (port, offset)


def test_a_failed_put_has_no_ids() -> None:
    assert PutResult(PutStatus.MESSAGE_ILLEGAL).msg_id_text == b""
