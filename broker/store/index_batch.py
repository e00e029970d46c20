"""Index many records at once with numpy: the reput path's IndexFile writes, vectorized.

IndexService.write_pending (broker.store.index_service) uses this for the records gathered from reput
passes when there are at least `VECTOR_MIN` of them; fewer records and direct `dispatch` calls take the
per-record path (`IndexFile.put_hashes`). Both write the same bytes: tests/store/test_index_batch.py holds them equal.

Per record the per-record path costs ~2.5 us per key in Python (hash, slot read, entry pack, slot pack,
header pack), the largest part of dispatch. Here a write costs a fixed amount of numpy calls plus well
under 1 us per key: the key hashes come from one running sum, the entries are one structured array
copied into the file, and each hash slot is written once per write with its newest entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from broker.store.index_file import HEADER_SIZE, INDEX_ENTRY_SIZE, INVALID_INDEX, key_hash

if TYPE_CHECKING:
    from broker.store.index_file import IndexFile

__all__ = ["key_hashes", "put_entries", "utf8_key_hashes"]

_INT_MAX = 0x7FFFFFFF
_ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("time_diff", ">i4"), ("prev", ">i4")])
assert _ENTRY_DTYPE.itemsize == INDEX_ENTRY_SIZE


# Java's String.hashCode of s[a:b] is sum(s[j] * 31**(b-1-j)) mod 2**32. With P[k] = 31**k and
# Q[k] = 31**-k (31 is odd, so it has an inverse modulo 2**64), that is P[b-1] * (S[b-1] - S[a-1]) where
# S is the running sum of s[j] * Q[j]: every key of a batch hashed from one cumulative sum over the
# concatenated keys, whatever their lengths. uint64 arithmetic wraps modulo 2**64, whose low 32 bits are
# Java's int arithmetic.
_MAX_CHARS = 1 << 16  # characters hashed in one go; longer batches go in slices
_INVERSE_31 = pow(31, -1, 1 << 64)


def _powers(base: int) -> np.ndarray:
    """base**k mod 2**64 for k < _MAX_CHARS (a running product: uint64 wraps; 0.7 s at start-up with pow)."""
    factors = np.full(_MAX_CHARS, base, dtype=np.uint64)
    factors[0] = 1
    powers: np.ndarray = np.cumprod(factors, dtype=np.uint64)
    return powers


_P = _powers(31)
_Q = _powers(_INVERSE_31)


def key_hashes(keys: list[str]) -> np.ndarray:
    """`key_hash` of every key (abs of Java's String.hashCode, Integer.MIN_VALUE -> 0), as int64.

    ASCII keys (one Java char per byte) are hashed together, see above; a batch with another key (UTF-16
    code units matter there) is hashed key by key.
    """
    joined = "".join(keys)
    if not joined.isascii() or len(joined) > _MAX_CHARS:
        if len(joined) > _MAX_CHARS and len(keys) > 1:
            half = len(keys) // 2
            return np.concatenate((key_hashes(keys[:half]), key_hashes(keys[half:])))
        return np.array([key_hash(k) for k in keys], dtype=np.int64)
    return _ascii_hashes(joined.encode("ascii"), keys)


def utf8_key_hashes(keys: list[bytes]) -> np.ndarray:
    """`key_hashes` of UTF-8 keys (as cut out of a record by the index helper), without decoding ASCII."""
    joined = b"".join(keys)
    if not joined.isascii() or len(joined) > _MAX_CHARS:
        return key_hashes([k.decode(errors="replace") for k in keys])
    return _ascii_hashes(joined, keys)


def _ascii_hashes(joined: bytes, keys: list[str] | list[bytes]) -> np.ndarray:
    """The hashes of `keys`, ASCII and at most _MAX_CHARS together, given joined."""
    n = len(joined)
    if n == 0:
        return np.zeros(len(keys), dtype=np.int64)
    chars = np.frombuffer(joined, dtype=np.uint8).astype(np.uint64)
    running = np.cumsum(chars * _Q[:n], dtype=np.uint64)
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    before = np.where(starts > 0, running[np.maximum(starts - 1, 0)], np.uint64(0))
    last = np.maximum(ends - 1, 0)
    h = (_P[last] * (running[last] - before)) & np.uint64(0xFFFFFFFF)
    h[ends == starts] = 0  # an empty key hashes to 0
    signed = h.astype(np.int64)
    negative = signed > _INT_MAX
    signed[negative] = (1 << 32) - signed[negative]  # abs of the negative int32
    signed[signed == 1 << 31] = 0  # abs(Integer.MIN_VALUE) is MIN_VALUE: Java's index maps it to 0
    return signed


def _time_diffs(tss: np.ndarray, begin: int) -> np.ndarray:
    if begin <= 0:
        return np.zeros(len(tss), dtype=np.int64)
    # ufuncs rather than np.clip, whose Python-level wrapper costs more than the work on a small batch
    diffs: np.ndarray = np.minimum(np.maximum((tss - begin) // 1000, 0), _INT_MAX)
    return diffs


def put_entries(f: IndexFile, hashes: np.ndarray, phys: np.ndarray, tss: np.ndarray) -> int:
    """Append entries (in CommitLog order, grouped by record) to `f`; returns how many fit.

    The same writes as one `put_hashes` per record, in the same crash-safe order: entries, then the
    header, then the slots. A slot's chain links each entry to the previous entry of that slot, inside
    this batch or (for the first) the slot's current entry when that one is valid.
    """
    count = f.index_count
    n = min(len(hashes), f.index_num - count)
    if n <= 0 or not f.reserve_entries(n):
        return 0
    hashes, phys, tss = hashes[:n], phys[:n], tss[:n]
    slots = hashes % f.hash_slot_num
    numbers = np.arange(count, count + n, dtype=np.int64)
    order = np.argsort(slots, kind="stable")
    sorted_slots = slots[order]
    sorted_numbers = numbers[order]
    first_of_slot = np.empty(n, dtype=bool)
    first_of_slot[0] = True
    np.not_equal(sorted_slots[1:], sorted_slots[:-1], out=first_of_slot[1:])
    last_of_slot = np.empty(n, dtype=bool)
    last_of_slot[-1] = True
    last_of_slot[:-1] = first_of_slot[1:]

    slot_table = np.frombuffer(f.mm, dtype=">i4", count=f.hash_slot_num, offset=HEADER_SIZE)
    try:
        chained = np.empty(n, dtype=np.int64)
        chained[1:] = sorted_numbers[:-1]  # the previous entry of the same slot in this batch...
        current = slot_table[sorted_slots[first_of_slot]].astype(np.int64)  # ...or the file's, if valid
        invalid = (current <= INVALID_INDEX) | (current > sorted_numbers[first_of_slot])
        current[invalid] = INVALID_INDEX
        chained[first_of_slot] = current
        prev = np.empty(n, dtype=np.int64)
        prev[order] = chained

        begin = f.begin_timestamp
        if count <= 1:  # a new file: its first record is timed from the previous file's end, the rest from it
            first_record = phys == phys[0]
            time_diff = np.where(first_record, _time_diffs(tss, begin), _time_diffs(tss, int(tss[0])))
            f.begin_phy_offset = int(phys[0])
            f.begin_timestamp = int(tss[0])
        else:
            time_diff = _time_diffs(tss, begin)
        entries = np.empty(n, dtype=_ENTRY_DTYPE)
        entries["hash"] = hashes
        entries["phy"] = phys
        entries["time_diff"] = time_diff
        entries["prev"] = prev
        at = f.entries_at + count * INDEX_ENTRY_SIZE
        f.mm[at : at + n * INDEX_ENTRY_SIZE] = entries.tobytes()

        f.hash_slot_count += int(invalid.sum())
        f.index_count = count + n
        f.end_phy_offset = int(phys[-1])
        f.end_timestamp = int(tss[-1])
        f.write_header()
        slot_table[sorted_slots[last_of_slot]] = sorted_numbers[last_of_slot]
    finally:
        del slot_table  # an exported buffer would keep the mmap from closing
    f.dirty = True
    return n
