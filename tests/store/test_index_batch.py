"""The vectorized index write (broker/store/index_batch.py) writes exactly the bytes of the per-record
path: same files, same headers, same chains, also across file rolls, slot collisions, records with many
keys, non-ASCII keys, re-dispatch after a restart and ROLLBACK records. Real files in a tmp dir."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.message import SysFlag
from broker.store.dispatch_request import DispatchRequest
from broker.store.index_batch import key_hashes, utf8_key_hashes
from broker.store.index_file import key_hash
from broker.store.index_service import VECTOR_MIN, IndexService

T0 = 1_700_000_000_000

_keys = st.text(alphabet=st.sampled_from("abcXYZ019-_#é中"), min_size=0, max_size=12)
_record = st.tuples(
    st.one_of(st.none(), _keys),  # UNIQ_KEY
    st.one_of(st.none(), st.lists(_keys, max_size=4).map(" ".join)),  # KEYS
    st.integers(0, 5_000),  # ms since the previous record
    st.sampled_from([0, 0, 0, SysFlag.TRANSACTION_ROLLBACK_TYPE]),
    st.sampled_from(["T", "Topic-2"]),
)


def _requests(records: list[tuple[str | None, str, int, int, str]], first_phy: int = 0) -> list[DispatchRequest]:
    out = []
    ts = T0
    for i, (uniq, keys, gap, sys_flag, topic) in enumerate(records):
        ts += gap
        out.append(DispatchRequest(topic, 0, first_phy + i * 100, 100, 0, ts, i, keys or None, uniq, sys_flag))
    return out


def _files(directory: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(directory.iterdir())]


def _service(directory: Path, slots: int, entries: int) -> IndexService:
    s = IndexService(directory, hash_slot_num=slots, index_num=entries)
    s.load(True)
    return s


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(_record, min_size=VECTOR_MIN, max_size=80),
    slots=st.sampled_from([1, 3, 16, 1000]),
    entries=st.sampled_from([5, 17, 200]),
    passes=st.integers(1, 4),
)
def test_batch_writes_the_same_bytes_as_record_by_record(
    tmp_path_factory, records, slots: int, entries: int, passes: int
) -> None:
    root = tmp_path_factory.mktemp("idx")
    requests = _requests(records)
    one = _service(root / "one", slots, entries)
    many = _service(root / "many", slots, entries)
    try:
        for r in requests:
            one.dispatch(r)
        size = -(-len(requests) // passes)
        for start in range(0, len(requests), size):
            many.dispatch_batch(requests[start : start + size])
        assert [f.index_count for f in one.files] == [f.index_count for f in many.files]
        # file names carry the creation time: compare contents in order
        assert _files(root / "one") == _files(root / "many")
    finally:
        one.close()
        many.close()


def test_a_batch_after_a_restart_skips_what_was_indexed_and_redoes_the_last_record(tmp_path: Path) -> None:
    requests = _requests([(f"U{i}", f"k{i} shared", 10, 0, "T") for i in range(40)])
    one = _service(tmp_path / "one", 64, 1000)
    many = _service(tmp_path / "many", 64, 1000)
    for r in requests[:25]:
        one.dispatch(r)
        many.dispatch(r)
    # the restart re-dispatches from a checkpoint before the last indexed record
    for r in requests[20:]:
        one.dispatch(r)
    many.dispatch_batch(requests[20:])
    assert _files(tmp_path / "one") == _files(tmp_path / "many")
    assert many.query("T", "shared", 100, 0, 2**62) == one.query("T", "shared", 100, 0, 2**62)
    one.close()
    many.close()


@given(st.lists(st.text(max_size=60), min_size=1, max_size=40))
def test_vectorized_key_hashes_equal_key_hash(keys: list[str]) -> None:
    assert key_hashes(keys).tolist() == [key_hash(k) for k in keys]


@given(st.lists(st.text(max_size=60), min_size=1, max_size=40))
def test_utf8_key_hashes_equal_key_hash(keys: list[str]) -> None:
    # the index helper hashes keys cut out of records as UTF-8 bytes
    assert utf8_key_hashes([k.encode() for k in keys]).tolist() == [key_hash(k) for k in keys]


def test_key_hash_edge_values() -> None:
    # "polygenelubricants" hashes to Integer.MIN_VALUE in Java; abs() keeps it negative, the index maps it to 0
    keys = ["polygenelubricants", "", "a", "T#" + "F" * 32, "x" * 500]
    assert key_hashes(keys).tolist() == [key_hash(k) for k in keys]
    assert utf8_key_hashes([k.encode() for k in keys]).tolist() == [key_hash(k) for k in keys]
    assert key_hash("polygenelubricants") == 0
