"""One IndexFile: a hash index from `topic#key` to CommitLog offsets, byte-for-byte RocketMQ's layout.

Used only by IndexService (broker.store.index_service), which owns the list of files, rolls to a new one
when a file is full and runs the blocking `flush` in a worker thread. Layout (reference section 5.3):
a 40-byte header, `hash_slot_num` int32 slots holding the number of the newest entry for that slot, and
`index_num` 20-byte entries `keyHash int32 | phyOffset int64 | timeDiff int32 | prevIndex int32`, entry
n at `40 + slots*4 + n*20`; entry numbers start at 1 (0 means "empty slot" / "end of chain").

Disk: the file is sparse. Its header and hash slots (hash_slot_num x 4 bytes, written anywhere) get real
blocks when it is created, its entries ENTRY_RESERVE bytes at a time ahead of the writer (`reserved_to`), so
an IndexFile takes ~20 MB plus 20 bytes a key instead of ~420 MB at once, and a full disk is still an error
(a write into a hole of a mapping would be SIGBUS).

Each put writes the entry, then the header (Java keeps the header in memory until a flush; writing it
every time makes a killed process leave a consistent file: the page cache keeps every write), then
the slot. A crash between header and slot leaves an unlinked entry for the message at endPhyOffset,
which the dispatcher indexes again after a restart.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import threading
from array import array
from collections.abc import Callable
from pathlib import Path

from broker.log_limit import LimitedLog
from broker.protocol.javahash import java_string_hash

__all__ = [
    "ENTRY_RESERVE",
    "HEADER_SIZE",
    "INDEX_ENTRY_SIZE",
    "IndexFile",
    "index_file_size",
    "key_hash",
]

log = logging.getLogger(__name__)
limited_log = LimitedLog(log)

HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
INVALID_INDEX = 0

# entries get disk space this much at a time (~200k entries): one fallocate per that many keys
ENTRY_RESERVE = 4 << 20
_PAGE = 4096

_HEADER = struct.Struct(">qqqqii")  # beginTs endTs beginPhy endPhy hashSlotCount indexCount
_ENTRY = struct.Struct(">iqii")  # keyHash phyOffset timeDiff prevIndex
_SLOT = struct.Struct(">i")
_PHY = struct.Struct(">q")

_MASK32 = 0xFFFFFFFF
_INT_MAX = 0x7FFFFFFF
# Index keys differ per message, so hashing each from scratch (a Python loop over ~45 characters) would
# dominate dispatch. Java's hash is a polynomial: hash(a + b) = hash(a) * 31**len(b) + hash(b) (mod 2**32).
# Keys are mostly `topic#UNIQ_KEY`, whose UNIQ_KEY is a fixed producer part, 8 hex digits of time and a
# 4-hex-digit counter; KEYS are often `prefix-<number>`. So a key is split into head + 4-char tail, the
# head memoised in a bounded dict; a head missing from its memo is split again 8 characters earlier, that
# part coming from java_string_hash's LRU cache; the tail comes from a table of character pairs.
_TAIL = 4
_MID = 8
_POW_TAIL = pow(31, _TAIL, 1 << 32)
_POW_MID = pow(31, _MID, 1 << 32)
_HEADS_MAX = 1 << 14  # ~2 MB at most
_heads: dict[str, int] = {}
# hash of every 2-byte ASCII pair (c0 * 31 + c1), so a 4-char tail costs one unpack and two lookups
_PAIR = array("H", [(v >> 8) * 31 + (v & 0xFF) for v in range(1 << 16)])
_TAIL_PAIRS = struct.Struct(">HH")


def _head_hash(head: str) -> int:
    h = _heads.get(head)
    if h is None:
        t = 0
        for c in head[-_MID:].encode():
            t = t * 31 + c  # no masking per step: 8 steps stay small
        h = (java_string_hash(head[:-_MID]) * _POW_MID + t) & _MASK32
        if len(_heads) >= _HEADS_MAX:
            _heads.clear()  # a cache, not a table: start over rather than track recency
        _heads[head] = h
    return h


def key_hash(key: str) -> int:
    """IndexFile keyHash of `key`: abs(Java hashCode), Integer.MIN_VALUE mapped to 0 (as index_key_hash)."""
    if len(key) >= _TAIL + _MID + 4 and key.isascii():
        a, b = _TAIL_PAIRS.unpack(key[-_TAIL:].encode())
        h: int = (_head_hash(key[:-_TAIL]) * _POW_TAIL + _PAIR[a] * 961 + _PAIR[b]) & _MASK32
    else:
        h = java_string_hash(key) & _MASK32
    if h & 0x80000000:
        h = 0x100000000 - h  # abs of the negative int32; MIN_VALUE gives 2**31, mapped to 0 below
        return 0 if h == 0x80000000 else h
    return h


def _page_up(n: int) -> int:
    return n + (-n % _PAGE)


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE


class IndexFile:
    """A mapped index file. Not thread-safe for writers (one dispatcher); `flush` may run in a thread."""

    __slots__ = (
        "_closed",
        "_io_lock",
        "begin_phy_offset",
        "begin_timestamp",
        "dirty",
        "end_phy_offset",
        "end_timestamp",
        "entries_at",
        "fd",
        "hash_slot_count",
        "hash_slot_num",
        "index_count",
        "index_num",
        "mm",
        "path",
        "reserved_to",
    )

    def __init__(self, path: Path, hash_slot_num: int, index_num: int) -> None:
        """Map an existing file and read its header (use `create` for a new one)."""
        self.path = Path(path)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.entries_at = HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        size = index_file_size(hash_slot_num, index_num)
        self.fd = os.open(self.path, os.O_RDWR)
        try:
            actual = os.fstat(self.fd).st_size
            if actual != size:
                raise ValueError(
                    f"{self.path}: {actual} bytes, expected {size} for {hash_slot_num} slots and {index_num} entries"
                )
            self.mm = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self.fd)
            raise
        header: tuple[int, int, int, int, int, int] = _HEADER.unpack_from(self.mm, 0)
        self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset = header[:4]
        self.hash_slot_count: int = header[4]
        self.index_count: int = header[5]
        if self.index_count <= 0:
            self.index_count = 1  # a Java file not yet flushed has a zero header; its count starts at 1
        self.dirty = False
        self._closed = False
        self._io_lock = threading.Lock()
        # [0, reserved_to) has real blocks; a loaded file reserves again what it writes into (a no-op where
        # the blocks exist)
        self.reserved_to = 0

    @classmethod
    def create(
        cls, path: Path, hash_slot_num: int, index_num: int, *, end_phy_offset: int = 0, end_timestamp: int = 0
    ) -> IndexFile:
        """Create, reserve and map a new file; it starts where the previous file ended (Java's constructor).

        Sparse: the header and slots (and the first entries) are fallocated here, so a full disk fails here
        (OSError) rather than as SIGBUS later; further entries are reserved as they are written.
        """
        size = index_file_size(hash_slot_num, index_num)
        reserved = min(size, _page_up(HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + ENTRY_RESERVE))
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, size)
            os.posix_fallocate(fd, 0, reserved)
            os.pwrite(fd, _HEADER.pack(end_timestamp, end_timestamp, end_phy_offset, end_phy_offset, 0, 1), 0)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.rename(tmp, path)  # last, so a crash never leaves a short file under a valid name
        f = cls(path, hash_slot_num, index_num)
        f.reserved_to = reserved
        return f

    def reserve_entries(self, n: int) -> bool:
        """Make sure the next `n` entries have disk blocks (fallocate, ENTRY_RESERVE ahead); False when the
        disk has no room (nothing may be written then)."""
        end = self.entries_at + (self.index_count + n) * INDEX_ENTRY_SIZE
        if end <= self.reserved_to:
            return True
        upto = min(_page_up(end + ENTRY_RESERVE), index_file_size(self.hash_slot_num, self.index_num))
        try:
            os.posix_fallocate(self.fd, self.reserved_to, upto - self.reserved_to)
        except OSError as exc:
            limited_log.error("index-reserve", "cannot reserve disk space in index file %s: %s", self.path.name, exc)
            return False
        self.reserved_to = upto
        return True

    # -- state ----------------------------------------------------------------------------------------

    @property
    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    @property
    def entry_count(self) -> int:
        return self.index_count - 1

    @property
    def closed(self) -> bool:
        return self._closed

    def is_time_matched(self, begin: int, end: int) -> bool:
        """Does [begin, end] overlap this file's [beginTimestamp, endTimestamp] (Java's isTimeMatched)."""
        bt, et = self.begin_timestamp, self.end_timestamp
        return (begin < bt and end > et) or bt <= begin <= et or bt <= end <= et

    def write_header(self) -> None:
        _HEADER.pack_into(
            self.mm,
            0,
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    # -- writing --------------------------------------------------------------------------------------

    def put(self, khash: int, phy_offset: int, store_timestamp: int) -> bool:
        """Add an entry for a key hash (see `key_hash`); False when the file is full."""
        return self.put_hashes((khash,), phy_offset, store_timestamp) == 1

    def put_hashes(self, hashes: tuple[int, ...] | list[int], phy_offset: int, store_timestamp: int) -> int:
        """Add one entry per key hash of one record; returns how many fit (the rest go to the next file).

        The entries are written first, then the header once for the record (the dispatch path pays one
        header pack per record, not per key), then the slots: a crash between header and slots leaves
        unlinked entries of the record at endPhyOffset, which is dispatched again after a restart.
        """
        count = self.index_count
        room = self.index_num - count
        if room <= 0:
            return 0
        if len(hashes) > room:
            hashes = hashes[:room]
        if not self.reserve_entries(len(hashes)):
            return 0
        mm = self.mm
        slots = self.hash_slot_num
        begin_ts = self.begin_timestamp
        if begin_ts <= 0:  # as Java: a new file starts from the previous one's end time until its first entry
            time_diff = 0
        else:
            time_diff = (store_timestamp - begin_ts) // 1000
            if time_diff < 0:
                time_diff = 0
            elif time_diff > _INT_MAX:
                time_diff = _INT_MAX
        entry_pos = self.entries_at + count * INDEX_ENTRY_SIZE
        links: list[tuple[int, int]] = []
        n = count
        for khash in hashes:
            slot_pos = HEADER_SIZE + (khash % slots) * HASH_SLOT_SIZE
            (slot_value,) = _SLOT.unpack_from(mm, slot_pos)
            for pending_pos, pending_n in links:  # two keys of this record in one slot: chain them
                if pending_pos == slot_pos:
                    slot_value = pending_n
            if slot_value <= INVALID_INDEX or slot_value > n:
                slot_value = INVALID_INDEX
                self.hash_slot_count += 1
            _ENTRY.pack_into(mm, entry_pos, khash, phy_offset, time_diff, slot_value)
            links.append((slot_pos, n))
            entry_pos += INDEX_ENTRY_SIZE
            n += 1
        if count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        self.index_count = n
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        _HEADER.pack_into(
            mm, 0, self.begin_timestamp, store_timestamp, self.begin_phy_offset, phy_offset, self.hash_slot_count, n
        )
        for slot_pos, entry_no in links:
            _SLOT.pack_into(mm, slot_pos, entry_no)
        self.dirty = True
        return n - count

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        return self.put(key_hash(key), phy_offset, store_timestamp)

    # -- reading --------------------------------------------------------------------------------------

    def select(self, out: list[int], khash: int, max_num: int, begin: int, end: int) -> None:
        """Append to `out` the offsets of entries with this key hash stored in [begin, end], newest first.

        Like Java, entries are matched by hash only: a caller that must be exact checks the records' keys.
        """
        count = self.index_count
        if count <= 1 or self._closed:
            return
        mm = self.mm
        (slot_value,) = _SLOT.unpack_from(mm, HEADER_SIZE + (khash % self.hash_slot_num) * HASH_SLOT_SIZE)
        if slot_value <= INVALID_INDEX or slot_value > count:
            return
        base = self.entries_at
        begin_ts = self.begin_timestamp
        nxt = slot_value
        while len(out) < max_num:
            h, phy, time_diff, prev = _ENTRY.unpack_from(mm, base + nxt * INDEX_ENTRY_SIZE)
            if time_diff < 0:
                break
            time_read = begin_ts + time_diff * 1000
            if h == khash and begin <= time_read <= end:
                out.append(phy)
            # prev >= nxt would loop (a torn file): chains always point backwards
            if prev <= INVALID_INDEX or prev > count or prev >= nxt or time_read < begin:
                break
            nxt = prev

    def entry(self, n: int) -> tuple[int, int, int, int]:
        """Entry number n: (keyHash, phyOffset, timeDiff, prevIndex)."""
        return _ENTRY.unpack_from(self.mm, self.entries_at + n * INDEX_ENTRY_SIZE)

    def slot(self, khash: int) -> int:
        return int(_SLOT.unpack_from(self.mm, HEADER_SIZE + (khash % self.hash_slot_num) * HASH_SLOT_SIZE)[0])

    def first_phy_offset(self) -> int:
        """phyOffset of entry 1, or -1 when the file has no entries."""
        if self.index_count <= 1:
            return -1
        return int(_PHY.unpack_from(self.mm, self.entries_at + INDEX_ENTRY_SIZE + 4)[0])

    # -- recovery -------------------------------------------------------------------------------------

    def truncate(self, max_phy_offset: int, store_time_of: Callable[[int], int] | None = None) -> int:
        """Remove the entries pointing at or beyond `max_phy_offset`; returns how many were removed.

        Entries are appended in CommitLog order, so they form a suffix; each is unlinked newest first,
        which restores its slot to the entry it had replaced.
        """
        count = self.index_count
        base = self.entries_at
        lo, hi = 1, count  # first entry with phy >= max_phy_offset, by binary search
        while lo < hi:
            mid = (lo + hi) // 2
            (phy,) = _PHY.unpack_from(self.mm, base + mid * INDEX_ENTRY_SIZE + 4)
            if phy >= max_phy_offset:
                hi = mid
            else:
                lo = mid + 1
        keep = lo
        if keep >= count:
            return 0
        mm = self.mm
        for n in range(count - 1, keep - 1, -1):
            pos = base + n * INDEX_ENTRY_SIZE
            h, _phy, _diff, prev = _ENTRY.unpack_from(mm, pos)
            slot_pos = HEADER_SIZE + (h % self.hash_slot_num) * HASH_SLOT_SIZE
            (slot_value,) = _SLOT.unpack_from(mm, slot_pos)
            if slot_value == n or slot_value >= keep:
                # prev may itself be removed below: it is unlinked in turn, being next in newest-first order
                restored = prev if INVALID_INDEX < prev < n else INVALID_INDEX
                _SLOT.pack_into(mm, slot_pos, restored)
                if restored == INVALID_INDEX and self.hash_slot_count > 0:
                    self.hash_slot_count -= 1
            mm[pos : pos + INDEX_ENTRY_SIZE] = bytes(INDEX_ENTRY_SIZE)
        self.index_count = keep
        if keep > 1:
            _h, phy, diff, _prev = self.entry(keep - 1)
            self.end_phy_offset = phy
            # the entry keeps whole seconds only; the exact time comes from the CommitLog when available
            ts = store_time_of(phy) if store_time_of is not None else -1
            self.end_timestamp = ts if ts > 0 else self.begin_timestamp + diff * 1000
        self.write_header()
        self.dirty = True
        log.info("index file %s: removed %d entries at or beyond %d", self.path.name, count - keep, max_phy_offset)
        return count - keep

    # -- durability and lifecycle ---------------------------------------------------------------------

    def flush(self) -> None:
        """fdatasync (blocking; releases the GIL, unlike mmap.flush, so it can run in a worker thread)."""
        with self._io_lock:
            if self._closed or not self.dirty:
                return
            self.dirty = False
            os.fdatasync(self.fd)

    def close(self) -> None:
        with self._io_lock:
            if self._closed:
                return
            self._closed = True
            self.mm.close()
            os.close(self.fd)

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        log.info("deleted index file %s", self.path.name)

    def __repr__(self) -> str:
        return (
            f"IndexFile({self.path.name}, entries={self.entry_count}, phy=[{self.begin_phy_offset}, "
            f"{self.end_phy_offset}], ts=[{self.begin_timestamp}, {self.end_timestamp}])"
        )
