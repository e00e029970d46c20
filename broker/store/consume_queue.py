"""ConsumeQueues: per topic and queue, the logical offset -> (CommitLog offset, size, tagsCode) table.

MessageStore (broker.store.message_store) owns one ConsumeQueueStore: it calls `load` and `recover` at
start, `truncate_dirty` after CommitLog recovery, `correct_min_offset`/`clean_expired` after retention
and `flush` from the flush worker thread. The reput service (broker.store.dispatch) calls `dispatch` for
every record; the pull path calls `find(...).read_units` and unpacks the units itself.

On disk (reference section 5.2): 20-byte units `int64 commitLogOffset | int32 size | int64 tagsCode`,
300 000 per file, `consumequeue/<topic>/<queueId>/<20-digit start byte offset>`; logical offset = byte
offset / 20. A blank unit `(0, Integer.MAX_VALUE, 0)` fills positions that no message owns (before the
first unit of a queue created mid-way, or a gap), as Java's fillPreBlank does.
"""

from __future__ import annotations

import logging
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from broker.protocol.message import NO_QUEUE_OFFSET
from broker.store.mapped_file import MappedFile
from broker.store.mapped_file_queue import MappedFileQueue
from broker.store.results import StoreError

if TYPE_CHECKING:
    from broker.store.dispatch_request import DispatchRequest

__all__ = [
    "BLANK_UNIT_SIZE",
    "CQ_STORE_UNIT_SIZE",
    "DEFAULT_UNITS_PER_FILE",
    "UNIT",
    "ConsumeQueue",
    "ConsumeQueueStore",
]

log = logging.getLogger(__name__)

CQ_STORE_UNIT_SIZE = 20
DEFAULT_UNITS_PER_FILE = 300_000
UNIT = struct.Struct(">qiq")  # commitLogOffset, size, tagsCode; public so the pull path can iter_unpack
BLANK_UNIT_SIZE = 0x7FFFFFFF  # size of a filler unit (Integer.MAX_VALUE, with offset 0 and tagsCode 0)
_BLANK = UNIT.pack(0, BLANK_UNIT_SIZE, 0)
_PHY = struct.Struct(">q")
_SIZE_AT = 8
_I32 = struct.Struct(">i")
_SCAN_CHUNK = 4096  # units unpacked per step when scanning for the min offset


def _valid(phy: int, size: int) -> bool:
    """RocketMQ's recovery test for a written unit (blank units pass, zeros do not)."""
    return phy >= 0 and size > 0


class ConsumeQueue:
    """One queue. Single writer (dispatch); readers on the same thread; `flush` may run in a worker thread."""

    __slots__ = (
        "_last",
        "directory",
        "file_size",
        "max_physic_offset",
        "min_logic_offset",
        "queue",
        "queue_id",
        "topic",
    )

    def __init__(self, topic: str, queue_id: int, root: Path, file_size: int = DEFAULT_UNITS_PER_FILE * 20) -> None:
        if file_size <= 0 or file_size % CQ_STORE_UNIT_SIZE:
            raise ValueError(f"consume queue file size {file_size} is not a positive multiple of 20")
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.directory = Path(root) / topic / str(queue_id)
        self.queue = MappedFileQueue(self.directory, file_size)
        self.min_logic_offset = 0  # bytes
        self.max_physic_offset = -1  # end (offset + size) of the newest unit's record
        self._last: MappedFile | None = None  # file written by the fast path

    # -- offsets --------------------------------------------------------------------------------------

    def get_max_offset(self) -> int:
        """Next logical offset to be written."""
        return self.queue.max_offset // CQ_STORE_UNIT_SIZE

    def get_min_offset(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    # -- writing --------------------------------------------------------------------------------------

    def put(self, phy_offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Write the unit of logical offset `cq_offset`; repeats are ignored, gaps filled with blank units.

        False only when a file could not be created (disk full): the caller logs and may retry.
        """
        if phy_offset + size <= self.max_physic_offset:
            return True  # dispatched again after a restart
        return self.put_next(phy_offset, size, tags_code, cq_offset) or self._put_slow(
            phy_offset, size, tags_code, cq_offset * CQ_STORE_UNIT_SIZE
        )

    def put_next(self, phy_offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """`put`'s common case alone: a new record's unit right after the last one, with room for it in the
        last file. The put path's direct dispatch calls it (its record is new by construction); False when
        that is not the case, and nothing was written."""
        mf = self._last
        if mf is None:
            return False
        pos = mf.wrote_position
        if pos >= mf.file_size or mf.file_from_offset + pos != cq_offset * CQ_STORE_UNIT_SIZE:
            return False
        UNIT.pack_into(mf.mm, pos, phy_offset, size, tags_code)
        mf.wrote_position = pos + CQ_STORE_UNIT_SIZE
        self.max_physic_offset = phy_offset + size
        return True

    def put_run(self, offsets: list[int], sizes: list[int], tags_codes: list[int], cq_offset: int) -> bool:
        """`put_next` of a batch's units, the one at `cq_offset` first, in one copy; False (nothing written)
        unless all of them are `put_next`'s common case in the last file."""
        mf = self._last
        if mf is None:
            return False
        pos = mf.wrote_position
        end = pos + len(offsets) * CQ_STORE_UNIT_SIZE
        if end > mf.file_size or mf.file_from_offset + pos != cq_offset * CQ_STORE_UNIT_SIZE:
            return False
        mf.mm[pos:end] = b"".join(map(UNIT.pack, offsets, sizes, tags_codes))
        mf.wrote_position = end
        self.max_physic_offset = offsets[-1] + sizes[-1]
        return True

    def _put_slow(self, phy_offset: int, size: int, tags_code: int, expect: int) -> bool:
        queue = self.queue
        try:
            if not queue.files:
                self.directory.mkdir(parents=True, exist_ok=True)
                mf = queue.get_last_mapped_file(expect, need_create=True)
                if mf is not None and expect > mf.file_from_offset:
                    # a queue that starts mid-way (files deleted, or offsets carried over): Java's fillPreBlank
                    self._fill_blanks(mf.file_from_offset, expect)
                    self.min_logic_offset = expect
                    log.info("consume queue %s/%d starts at logical offset %d", self.topic, self.queue_id, expect // 20)
            current = queue.max_offset
            if expect < current:
                log.debug("%s/%d: unit %d written already", self.topic, self.queue_id, expect // CQ_STORE_UNIT_SIZE)
                return True
            if expect > current:
                log.warning(
                    "%s/%d: logical offset %d expected %d; filling the gap with blank units",
                    self.topic, self.queue_id, expect // CQ_STORE_UNIT_SIZE, current // CQ_STORE_UNIT_SIZE,
                )  # fmt: skip
                self._fill_blanks(current, expect)
            mf = queue.get_last_mapped_file(expect, need_create=True)
        except OSError as exc:
            log.error("%s/%d: cannot create a consume queue file: %s", self.topic, self.queue_id, exc)
            return False
        if mf is None:
            return False
        pos = mf.wrote_position
        UNIT.pack_into(mf.mm, pos, phy_offset, size, tags_code)
        mf.wrote_position = pos + CQ_STORE_UNIT_SIZE
        self.max_physic_offset = phy_offset + size
        self._last = mf
        return True

    def _fill_blanks(self, start: int, end: int) -> None:
        """Blank units over [start, end) (byte offsets; start is the queue's current end)."""
        pos = start
        while pos < end:
            mf = self.queue.get_last_mapped_file(pos, need_create=True)
            if mf is None:
                raise OSError("no consume queue file to fill")
            rel = mf.wrote_position
            n = min(end - pos, mf.file_size - rel) // CQ_STORE_UNIT_SIZE
            mf.mm[rel : rel + n * CQ_STORE_UNIT_SIZE] = _BLANK * n
            mf.wrote_position = rel + n * CQ_STORE_UNIT_SIZE
            pos += n * CQ_STORE_UNIT_SIZE

    # -- reading --------------------------------------------------------------------------------------

    def get_index(self, offset: int) -> tuple[int, int, int] | None:
        """(commitLogOffset, size, tagsCode) of logical `offset`, None outside [min, max)."""
        pos = offset * CQ_STORE_UNIT_SIZE
        if pos < self.min_logic_offset:
            return None
        mf = self.queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if rel >= mf.wrote_position or mf.closed:
            return None
        return UNIT.unpack_from(mf.mm, rel)

    def read_units(self, offset: int, max_units: int) -> memoryview | None:
        """Up to `max_units` units from logical `offset`, within one file (the pull path's batch read).

        A view of the mapped file: unpack it with `UNIT.iter_unpack` and release it promptly, since a
        held view keeps a deleted file mapped. None when `offset` is outside [min, max).
        """
        pos = offset * CQ_STORE_UNIT_SIZE
        if pos < self.min_logic_offset or max_units <= 0:
            return None
        mf = self.queue.find_mapped_file_by_offset(pos)
        if mf is None or mf.closed:
            return None
        rel = pos - mf.file_from_offset
        end = rel + max_units * CQ_STORE_UNIT_SIZE
        wrote = mf.wrote_position
        if end > wrote:
            end = wrote
        if rel >= end:
            return None
        return memoryview(mf.mm)[rel:end]

    def get_offset_by_time(self, timestamp: int, store_time_of: Callable[[int, int], int]) -> int:
        """First logical offset whose record was stored at or after `timestamp` (max offset if none).

        Binary search over the units, each probe asking `store_time_of(phy_offset, size)` for the record's
        store time (the ConsumeQueue keeps none); a negative answer means the record is gone (retention)
        and counts as older. Store times are assumed non-decreasing in CommitLog order.
        """
        lo, hi = self.get_min_offset(), self.get_max_offset()
        while lo < hi:
            mid = (lo + hi) // 2
            unit = self.get_index(mid)
            if unit is None or unit[1] == BLANK_UNIT_SIZE:
                lo = mid + 1
                continue
            t = store_time_of(unit[0], unit[1])
            if t < timestamp:  # includes t < 0: gone
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- loading, recovery, truncation ----------------------------------------------------------------

    def load(self) -> bool:
        return self.queue.load()

    def recover(self) -> None:
        """Find the end of the written units and set the write position there (RocketMQ's recover).

        Units are written in order into files that start zeroed, and truncation zeroes what it drops,
        so the valid units form a prefix: each of the last three files is checked with a binary search
        for its first invalid unit (`offset >= 0 and size > 0` is valid, as in Java).
        """
        files = self.queue.files
        if not files:
            return
        idx = max(0, len(files) - 3)
        units = self.file_size // CQ_STORE_UNIT_SIZE
        end = files[idx].file_from_offset
        for mf in files[idx:]:
            n = self._valid_prefix(mf, units)
            end = mf.file_from_offset + n * CQ_STORE_UNIT_SIZE
            if n < units:
                break
        queue = self.queue
        while queue.files and queue.files[-1].file_from_offset > end:
            log.info("%s/%d: dropping %s beyond the last unit", self.topic, self.queue_id, queue.files[-1].path.name)
            queue.delete_last_mapped_file()
        queue.set_positions(end)
        holder = queue.find_mapped_file_by_offset(end)
        if holder is not None:
            rel = end - holder.file_from_offset
            tail = holder.mm[rel : rel + CQ_STORE_UNIT_SIZE]
            if tail.count(0) != len(tail):  # a torn unit: clear it so that a later scan stops here too
                holder.mm[rel : rel + len(tail)] = bytes(len(tail))
        self._last = queue.files[-1] if queue.files else None
        self.max_physic_offset = self._last_record_end(end)
        first = files[0]
        self.min_logic_offset = max(self.min_logic_offset, first.file_from_offset)
        self._skip_leading_blanks()

    @staticmethod
    def _valid_prefix(mf: MappedFile, units: int) -> int:
        """Number of valid units at the start of a file (binary search on the prefix property)."""
        mm = mf.mm

        def valid(i: int) -> bool:
            pos = i * CQ_STORE_UNIT_SIZE
            return _valid(_PHY.unpack_from(mm, pos)[0], _I32.unpack_from(mm, pos + _SIZE_AT)[0])

        if valid(units - 1):
            return units
        lo, hi = 0, units - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if valid(mid):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _last_record_end(self, end: int) -> int:
        """phy + size of the newest non-blank unit before byte offset `end`, -1 if there is none."""
        pos = end - CQ_STORE_UNIT_SIZE
        floor = self.queue.min_offset
        while pos >= floor >= 0:
            unit = self._unit_at(pos)
            if unit is None:
                return -1
            if unit[1] != BLANK_UNIT_SIZE:
                return unit[0] + unit[1]
            pos -= CQ_STORE_UNIT_SIZE
        return -1

    def _unit_at(self, pos: int) -> tuple[int, int, int] | None:
        mf = self.queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        return UNIT.unpack_from(mf.mm, pos - mf.file_from_offset)

    def _skip_leading_blanks(self) -> None:
        pos, end = self.min_logic_offset, self.queue.max_offset
        while pos < end:
            unit = self._unit_at(pos)
            if unit is None or unit[1] != BLANK_UNIT_SIZE:
                break
            pos += CQ_STORE_UNIT_SIZE
        self.min_logic_offset = pos

    def truncate_dirty(self, max_phy_offset: int) -> int:
        """Drop the units whose records are not wholly below `max_phy_offset` (the recovered CommitLog end).

        Walks back from the end (dropping trailing blank units too), zeroes what it drops and deletes
        files left beyond the new end. Returns the number of units dropped.
        """
        queue = self.queue
        old_end = queue.max_offset
        pos = old_end
        floor = max(queue.min_offset, 0)
        while pos > floor:
            unit = self._unit_at(pos - CQ_STORE_UNIT_SIZE)
            if unit is None:
                break
            phy, size, _tags = unit
            if size != BLANK_UNIT_SIZE and phy + size <= max_phy_offset:
                break
            pos -= CQ_STORE_UNIT_SIZE
        if pos == old_end:
            self.max_physic_offset = self._last_record_end(old_end)
            return 0
        dropped = (old_end - pos) // CQ_STORE_UNIT_SIZE
        while queue.files and queue.files[-1].file_from_offset > pos:
            queue.delete_last_mapped_file()
        holder = queue.files[-1] if queue.files else None
        if holder is not None:
            rel = pos - holder.file_from_offset
            holder.mm[rel : holder.wrote_position] = bytes(holder.wrote_position - rel)
            holder.wrote_position = rel
            holder.flushed_position = min(holder.flushed_position, rel)
        queue.flushed_where = min(queue.flushed_where, pos)
        self._last = holder
        self.max_physic_offset = self._last_record_end(pos)
        self.min_logic_offset = min(self.min_logic_offset, pos)
        log.info(
            "%s/%d: dropped %d units pointing at or beyond CommitLog offset %d",
            self.topic, self.queue_id, dropped, max_phy_offset,
        )  # fmt: skip
        return dropped

    # -- retention ------------------------------------------------------------------------------------

    def correct_min_offset(self, min_phy_offset: int) -> None:
        """Advance the min offset to the first unit whose record is still in the CommitLog (all gone: max)."""
        pos = max(self.min_logic_offset, self.queue.min_offset)
        end = self.queue.max_offset
        while pos < end:
            mf = self.queue.find_mapped_file_by_offset(pos)
            if mf is None:
                break
            rel = pos - mf.file_from_offset
            stop = min(mf.wrote_position, rel + _SCAN_CHUNK * CQ_STORE_UNIT_SIZE)
            found = -1
            with memoryview(mf.mm)[rel:stop] as chunk:  # a view, not a copy of up to 6 MB
                for i, (phy, size, _tags) in enumerate(UNIT.iter_unpack(chunk)):
                    if size != BLANK_UNIT_SIZE and phy >= min_phy_offset:
                        found = i
                        break
            if found >= 0:
                pos += found * CQ_STORE_UNIT_SIZE
                break
            pos = mf.file_from_offset + stop
        if pos > self.min_logic_offset:
            log.info("%s/%d: min offset now %d", self.topic, self.queue_id, pos // CQ_STORE_UNIT_SIZE)
            self.min_logic_offset = pos

    def delete_expired_files(self, min_phy_offset: int) -> int:
        """Delete files (never the newest) whose units all point below `min_phy_offset`; returns how many."""
        deleted = self.queue.delete_expired_files_by_offset(min_phy_offset, CQ_STORE_UNIT_SIZE)
        if deleted:
            self.min_logic_offset = max(self.min_logic_offset, self.queue.min_offset)
        return deleted

    # -- durability and lifecycle ---------------------------------------------------------------------

    def flush(self, least_pages: int = 0) -> bool:
        """Blocking fdatasync of what was written; True when nothing is left to flush.

        MappedFileQueue.flush stops at a file boundary, so this moves on through filled files.
        """
        for _ in range(len(self.queue.files) + 1):
            before = self.queue.flushed_where
            if self.queue.flush(least_pages):
                return True
            if self.queue.flushed_where == before:
                return False  # fewer than least_pages dirty pages: wait for more
        return False

    def close(self) -> None:
        self._last = None
        self.queue.close()

    def destroy(self) -> None:
        self._last = None
        self.queue.destroy()
        self.min_logic_offset = 0
        self.max_physic_offset = -1

    def __repr__(self) -> str:
        return f"ConsumeQueue({self.topic}/{self.queue_id}, [{self.get_min_offset()}, {self.get_max_offset()}))"


class ConsumeQueueStore:
    """Every ConsumeQueue under `consumequeue/`. Dispatch, reads and retention run on one thread."""

    def __init__(self, root: Path, file_size: int = DEFAULT_UNITS_PER_FILE * CQ_STORE_UNIT_SIZE) -> None:
        self.root = Path(root)
        self.file_size = file_size
        self._table: dict[str, dict[int, ConsumeQueue]] = {}
        # The same queues by (topic, queue id), the CommitLog's key: read by the put path's direct
        # dispatch (broker.store.dispatch.ReputService.appended), one lookup a put.
        self.by_key: dict[tuple[str, int], ConsumeQueue] = {}
        self._failed: set[tuple[str, int]] = set()  # queues whose last write failed (logged once)
        # Called when a unit cannot be written (a full disk): frees space if it can (the CommitLog's
        # prepared spare file) and says whether it did, for one more try.
        self.on_write_failure: Callable[[], bool] | None = None

    # -- lookup ---------------------------------------------------------------------------------------

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        queues = self._table.get(topic)
        return queues.get(queue_id) if queues is not None else None

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        queues = self._table.get(topic)
        if queues is not None:
            cq = queues.get(queue_id)
            if cq is not None:
                return cq
        if not topic or "/" in topic or topic in (".", "..") or "\x00" in topic:
            raise ValueError(f"topic {topic!r} cannot name a directory")
        if queue_id < 0:
            raise ValueError(f"queue id {queue_id} is negative")
        cq = ConsumeQueue(topic, queue_id, self.root, self.file_size)
        self._table.setdefault(topic, {})[queue_id] = cq
        self.by_key[(topic, queue_id)] = cq
        return cq

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.find(topic, queue_id)
        return cq.get_max_offset() if cq is not None else 0

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.find(topic, queue_id)
        return cq.get_min_offset() if cq is not None else 0

    def topics_and_queues(self) -> dict[str, list[int]]:
        return {topic: sorted(queues) for topic, queues in self._table.items()}

    def max_physic_offset(self) -> int:
        """The CommitLog end covered by dispatched units (-1 when none): where a rebuild may start."""
        return max((cq.max_physic_offset for qs in self._table.values() for cq in qs.values()), default=-1)

    # -- dispatch (hot) -------------------------------------------------------------------------------

    def dispatch(self, request: DispatchRequest) -> None:
        if request.sys_flag & NO_QUEUE_OFFSET:
            return
        queues = self._table.get(request.topic)
        cq = queues.get(request.queue_id) if queues is not None else None
        if cq is None:
            cq = self.find_or_create(request.topic, request.queue_id)
        if cq.put(request.commit_log_offset, request.msg_size, request.tags_code, request.consume_queue_offset):
            if self._failed:
                self._failed.discard((request.topic, request.queue_id))
            return
        self._write_failed(cq, request)

    def _write_failed(self, cq: ConsumeQueue, request: DispatchRequest) -> None:
        """A unit could not be written (a full disk): free space and try once more, else stop dispatch.

        Never skip the unit: the message was acknowledged. Dispatch stops at it and retries later; a
        skipped unit would be filled with a blank by the next one, and the message never delivered.
        """
        args = (request.commit_log_offset, request.msg_size, request.tags_code, request.consume_queue_offset)
        if self.on_write_failure is not None and self.on_write_failure() and cq.put(*args):
            self._failed.discard((request.topic, request.queue_id))
            return
        key = (request.topic, request.queue_id)
        if key not in self._failed:
            self._failed.add(key)
            log.error("%s/%d: consume queue write failed at offset %d", *key, request.consume_queue_offset)
        raise StoreError(f"consume queue {key[0]}/{key[1]} cannot take offset {request.consume_queue_offset}")

    # -- lifecycle ------------------------------------------------------------------------------------

    def load(self) -> bool:
        """Map every queue's files; False when a file has the wrong size (see MappedFileQueue.load)."""
        self.root.mkdir(parents=True, exist_ok=True)
        ok = True
        for topic_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for qdir in sorted(p for p in topic_dir.iterdir() if p.is_dir() and p.name.isdigit()):
                cq = self.find_or_create(topic_dir.name, int(qdir.name))
                if not cq.load():
                    ok = False
        return ok

    def recover(self) -> int:
        """Recover every queue; returns the max CommitLog end they cover (-1 when none)."""
        for queues in self._table.values():
            for cq in queues.values():
                cq.recover()
        return self.max_physic_offset()

    def truncate_dirty(self, max_phy_offset: int) -> int:
        """After CommitLog recovery: drop units beyond its end in every queue; returns how many."""
        return sum(cq.truncate_dirty(max_phy_offset) for qs in self._table.values() for cq in qs.values())

    def correct_min_offset(self, min_phy_offset: int) -> None:
        for queues in self._table.values():
            for cq in queues.values():
                cq.correct_min_offset(min_phy_offset)

    def clean_expired(self, min_phy_offset: int) -> int:
        """After CommitLog retention: delete expired queue files and advance min offsets; files deleted."""
        deleted = 0
        for queues in self._table.values():
            for cq in queues.values():
                deleted += cq.delete_expired_files(min_phy_offset)
                cq.correct_min_offset(min_phy_offset)
        return deleted

    def flush(self, least_pages: int = 0) -> bool:
        """Flush every queue (blocking: run in a worker thread); True when everything was flushed."""
        done = True
        for queues in list(self._table.values()):
            for cq in list(queues.values()):
                try:
                    done = cq.flush(least_pages) and done
                except (OSError, ValueError) as exc:  # a queue deleted while being flushed
                    log.debug("flush of %r skipped: %s", cq, exc)
        return done

    def delete_topic(self, topic: str) -> int:
        """Delete the queues and the directory of one topic; returns how many queues were deleted."""
        deleted = 0
        queues = self._table.pop(topic, None)
        if queues:
            for cq in queues.values():
                del self.by_key[(topic, cq.queue_id)]
                cq.destroy()
                deleted += 1
        topic_dir = self.root / topic
        if topic and "/" not in topic and topic not in (".", "..") and topic_dir.is_dir():
            shutil.rmtree(topic_dir, ignore_errors=True)
            log.info("deleted consume queues of topic %s", topic)
        return deleted

    def delete_topics(self, topics: list[str] | set[str]) -> int:
        return sum(self.delete_topic(t) for t in topics)

    def remove_expired_queues(self, min_phy_offset: int, keep: Callable[[str], bool]) -> list[tuple[str, int]]:
        """RocketMQ's ConsumeQueueStore.cleanExpired: destroy every queue whose newest record ends before
        `min_phy_offset` (all its messages left the CommitLog), except those of topics `keep` accepts; a
        topic left with no queue loses its directory. An empty queue (no record yet) stays. Returns the
        (topic, queue id) pairs removed."""
        removed: list[tuple[str, int]] = []
        for topic in sorted(self._table):
            if keep(topic):
                continue
            queues = self._table[topic]
            for queue_id in sorted(queues):
                cq = queues[queue_id]
                if 0 <= cq.max_physic_offset < min_phy_offset:
                    del queues[queue_id]
                    del self.by_key[(topic, queue_id)]
                    cq.destroy()
                    shutil.rmtree(cq.directory, ignore_errors=True)
                    removed.append((topic, queue_id))
            if not queues:
                self.delete_topic(topic)
        if removed:
            log.info("removed %d consume queues whose messages all left the CommitLog: %s", len(removed), removed)
        return removed

    def close(self) -> None:
        for queues in self._table.values():
            for cq in queues.values():
                cq.close()
