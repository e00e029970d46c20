"""IndexService: the list of IndexFiles under `index/`, fed by dispatch and queried by key.

MessageStore (broker.store.message_store) creates it, calls `load` and, after CommitLog recovery,
`truncate_dirty`; the reput service (broker.store.dispatch) calls `dispatch_batch` once per pass; the
query-by-key path calls `query`; the flush service calls `flush` from a worker thread and the clean
service calls `delete_expired`. Keys are `topic#UNIQ_KEY` and `topic#k` for each space-separated token
of KEYS; ROLLBACK records are not indexed (RocketMQ's IndexService.buildIndex).

Re-dispatch after a restart is idempotent: a record below the last file's endPhyOffset is skipped, and
the record at endPhyOffset (possibly half-indexed when the process died) is indexed again, its repeated
entries being dropped at query time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from broker.log_limit import LimitedLog
from broker.protocol.message import SysFlag
from broker.store.dispatch_request import call_later_or_now
from broker.store.index_file import IndexFile, index_file_size, key_hash

if TYPE_CHECKING:
    import asyncio

    import numpy as np

    from broker.store.dispatch_request import DispatchRequest

__all__ = ["IndexService"]

log = logging.getLogger(__name__)
# Every message retries the roll while an index file cannot be created: one line per 10 s, not per message.
limited_log = LimitedLog(log)

# dispatch_batch gathers records for one vectorized write: bench/index.py, 1 KiB sends with UNIQ_KEY + 1
# key, 1.66 us/msg at 64 records a write, 1.07 at 256
GATHER_RECORDS = 512
GATHER_S = 0.01
# records per write below which the per-record path is cheaper than numpy's fixed cost (bench/index.py);
# numpy itself is imported with the first larger write, so a broker whose index is written by the helper
# process (broker.store.index_process) never loads it
VECTOR_MIN = 32

_NAME_FORMAT = "%Y%m%d%H%M%S"
_NAME_LEN = 17  # yyyyMMddHHmmssSSS


def _name_for(ms: int) -> str:
    """Java's UtilAll.timeMillisToHumanString: local time, yyyyMMddHHmmssSSS."""
    return datetime.fromtimestamp(ms / 1000).strftime(_NAME_FORMAT) + f"{ms % 1000:03d}"


def _ms_of(name: str) -> int | None:
    if len(name) != _NAME_LEN or not name.isdigit():
        return None
    try:
        return int(datetime.strptime(name[:14], _NAME_FORMAT).timestamp() * 1000) + int(name[14:])
    except ValueError:
        return None


class IndexService:
    """All index files, oldest first; the last one is written. Dispatch and query run on one thread."""

    def __init__(self, directory: Path, *, hash_slot_num: int = 5_000_000, index_num: int = 20_000_000) -> None:
        if hash_slot_num <= 0 or index_num <= 1:
            raise ValueError("hash_slot_num must be > 0 and index_num > 1")
        self.directory = Path(directory)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.files: list[IndexFile] = []
        self._last_name_ms = 0
        self._lock = threading.Lock()  # guards `files` against the flush thread
        self._pending: list[DispatchRequest] = []  # see dispatch_batch
        self._timer: asyncio.TimerHandle | None = None

    # -- lifecycle ------------------------------------------------------------------------------------

    def load(self, last_exit_ok: bool, *, origin: str | None = None) -> bool:
        """Map every index file, oldest first. Files of another geometry or with an impossible header are
        reported (and, after a crash, deleted: the index is derived data). Returns False if any was bad.

        `origin` says in the log line where the files come from, when that is not the broker's last exit
        (the index helper: the broker's recovery handed them over)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for tmp in self.directory.glob("*.tmp"):
            tmp.unlink(missing_ok=True)
        ok = True
        expected = index_file_size(self.hash_slot_num, self.index_num)
        for path in sorted(p for p in self.directory.iterdir() if p.is_file() and p.name.isdigit()):
            if path.stat().st_size != expected:
                log.error(
                    "%s is %d bytes, expected %d (maxHashSlotNum=%d, maxIndexNum=%d): ignored",
                    path, path.stat().st_size, expected, self.hash_slot_num, self.index_num,
                )  # fmt: skip
                ok = False
                continue
            f = IndexFile(path, self.hash_slot_num, self.index_num)
            if f.index_count > self.index_num or f.hash_slot_count < 0 or f.end_phy_offset < f.begin_phy_offset:
                log.error("%s has an impossible header (%r)%s", path, f, "" if last_exit_ok else ": deleted")
                ok = False
                if last_exit_ok:
                    f.close()
                else:
                    f.destroy()
                continue
            self.files.append(f)
            self._last_name_ms = max(self._last_name_ms, _ms_of(path.name) or 0)
        if origin is None:
            origin = "last exit clean" if last_exit_ok else "last exit abnormal"
        log.info("loaded %d index files (%s)", len(self.files), origin)
        return ok

    def truncate_dirty(self, max_phy_offset: int, store_time_of: Callable[[int], int] | None = None) -> int:
        """After CommitLog recovery: forget entries pointing at or beyond its max offset; returns how many.

        Files left with no entry are deleted, including an empty newest file whose inherited endPhyOffset
        lies beyond the new end (it would make dispatch skip records that are now new).
        """
        removed = 0
        with self._lock:
            while self.files and self.files[-1].end_phy_offset >= max_phy_offset:
                f = self.files[-1]
                first = f.first_phy_offset()
                if first < 0 or first >= max_phy_offset:
                    removed += f.entry_count
                    self.files.pop()
                    f.destroy()
                    continue
                removed += f.truncate(max_phy_offset, store_time_of)
                break
        return removed

    def flush(self) -> int:
        """fdatasync every file written since the last flush (blocking: run in a worker thread).

        Returns the end timestamp covered (the checkpoint's indexMsgTimestamp), 0 when there are no files.
        """
        with self._lock:
            files = list(self.files)
        ts = files[-1].end_timestamp if files else 0
        for f in files:
            f.flush()
        return ts

    def close(self) -> None:
        """Close the files; records still gathered are dropped (recovery indexes them again)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending = []
        with self._lock:
            for f in self.files:
                f.close()
            self.files = []

    def destroy(self) -> None:
        """Delete every index file."""
        with self._lock:
            for f in self.files:
                f.destroy()
            self.files = []

    def delete_expired(self, min_phy_offset: int) -> int:
        """Delete whole files (never the newest) whose entries all point below `min_phy_offset`."""
        deleted = 0
        with self._lock:
            while len(self.files) > 1 and self.files[0].end_phy_offset < min_phy_offset:
                self.files.pop(0).destroy()
                deleted += 1
        return deleted

    # -- state ----------------------------------------------------------------------------------------

    @property
    def end_phy_offset(self) -> int:
        """The newest indexed CommitLog offset: dispatch after a restart need not start before it."""
        return self.files[-1].end_phy_offset if self.files else 0

    @property
    def last_update_timestamp(self) -> int:
        return self.files[-1].end_timestamp if self.files else 0

    # -- writing --------------------------------------------------------------------------------------

    def _roll(self) -> IndexFile | None:
        prev = self.files[-1] if self.files else None
        ms = max(int(time.time() * 1000), self._last_name_ms + 1)  # two files in one millisecond: keep order
        path = self.directory / _name_for(ms)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            f = IndexFile.create(
                path,
                self.hash_slot_num,
                self.index_num,
                end_phy_offset=prev.end_phy_offset if prev else 0,
                end_timestamp=prev.end_timestamp if prev else 0,
            )
        except OSError as exc:
            limited_log.error(
                "index-create",
                "cannot create index file %s: %s; messages are not indexed until this is fixed",
                path,
                exc,
            )
            return None
        self._last_name_ms = ms
        with self._lock:
            self.files.append(f)
        log.info("created index file %s", path.name)
        return f

    def dispatch_batch(self, requests: list[DispatchRequest]) -> None:
        """Index a reput pass's records, gathered with the passes before it into one vectorized write.

        numpy's fixed cost per write is repaid by large batches, and a busy broker's passes are small (one
        per socket read: ~60 records at 40k sends/s). So records wait until `GATHER_RECORDS` are pending or
        `GATHER_S` has passed; a query by key writes them first, and so does the checkpoint's flush
        (`write_pending`). Entries still waiting when the process dies are re-dispatched at recovery, which
        starts at the index's end offset. Off the event loop (recovery's thread) there is no timer:
        records are written at once.
        """
        self._pending += requests
        if len(self._pending) >= GATHER_RECORDS:
            self.write_pending()
        elif self._timer is None:
            self._timer = call_later_or_now(GATHER_S, self.write_pending)

    def write_pending(self) -> None:
        """Write the records gathered by `dispatch_batch` now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        requests, self._pending = self._pending, []
        if not requests:
            return
        if len(requests) < VECTOR_MIN:
            for request in requests:
                self._index_one(request)
            return
        # The skips and keys below are `_index_one`'s, written out rather than shared: a helper call per
        # record is measurably slower (bench/index.py); tests/store/test_index_batch.py holds them equal.
        indexed_to = self.end_phy_offset  # a new file starts where the last one ended
        keys: list[str] = []
        phys: list[int] = []
        tss: list[int] = []
        for request in requests:
            uniq = request.uniq_key
            more = request.keys
            if not uniq and not more:
                continue
            phy = request.commit_log_offset
            if phy < indexed_to:
                continue  # indexed before a restart
            if request.sys_flag & SysFlag.TRANSACTION_MASK == SysFlag.TRANSACTION_ROLLBACK_TYPE:
                continue
            prefix = request.topic + "#"
            ts = request.store_timestamp
            if uniq:
                keys.append(prefix + uniq)
                phys.append(phy)
                tss.append(ts)
            if more:
                for k in more.split(" "):
                    if k:
                        keys.append(prefix + k)
                        phys.append(phy)
                        tss.append(ts)
        if keys:
            from broker.store.index_batch import key_hashes

            self.write_hashed(key_hashes(keys), phys, tss)

    def write_hashed(self, hashes: np.ndarray, phys: list[int], tss: list[int]) -> None:
        """Append entries (key hashes with their records' CommitLog offsets and store times, in CommitLog
        order) in one vectorized write, rolling to a new file when this one fills up."""
        import numpy as np

        from broker.store.index_batch import put_entries

        files = self.files
        f = files[-1] if files and files[-1].index_count < self.index_num else self._roll()
        if f is None:
            return
        phy_array = np.array(phys, dtype=np.int64)
        ts_array = np.array(tss, dtype=np.int64)
        done = put_entries(f, hashes, phy_array, ts_array)
        while done < len(hashes):  # the file filled up: the rest go to a new one
            f = self._roll()
            if f is None:
                return
            put = put_entries(f, hashes[done:], phy_array[done:], ts_array[done:])
            if put == 0:
                return
            done += put

    def dispatch(self, request: DispatchRequest) -> None:
        """Index one record now (after the records gathered before it)."""
        self.write_pending()
        self._index_one(request)

    def _index_one(self, request: DispatchRequest) -> None:
        """Index a record's UNIQ_KEY and KEYS (skipping ROLLBACK records and already-indexed offsets)."""
        uniq = request.uniq_key
        keys = request.keys
        if not uniq and not keys:
            return
        if request.sys_flag & SysFlag.TRANSACTION_MASK == SysFlag.TRANSACTION_ROLLBACK_TYPE:
            return
        phy = request.commit_log_offset
        if phy < self.end_phy_offset:
            return  # indexed before a restart
        prefix = request.topic + "#"
        hashes = [key_hash(prefix + uniq)] if uniq else []
        if keys:
            hashes += [key_hash(prefix + k) for k in keys.split(" ") if k]
            if not hashes:
                return  # KEYS of blanks only: nothing to index (Java skips empty keys)
        files = self.files
        f = files[-1] if files and files[-1].index_count < self.index_num else self._roll()
        if f is None:
            return
        ts = request.store_timestamp
        done = f.put_hashes(hashes, phy, ts)
        while done < len(hashes):  # the file filled up mid-record: the rest go to a new one
            f = self._roll()
            if f is None:
                return
            put = f.put_hashes(hashes[done:], phy, ts)
            if put == 0:
                return
            done += put

    # -- reading --------------------------------------------------------------------------------------

    def query(self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int) -> list[int]:
        """CommitLog offsets of records indexed under `topic#key` stored in [begin_ts, end_ts], newest first.

        Matching is by hash (as in RocketMQ); the caller checks the records' keys when it must be exact.
        Times are compared at the index's one-second resolution.
        """
        return self.query_hash(key_hash(f"{topic}#{key}"), max_num, begin_ts, end_ts)

    def query_hash(self, khash: int, max_num: int, begin_ts: int, end_ts: int) -> list[int]:
        """`query` by the key's hash (`index_file.key_hash`), as the index helper process is asked."""
        self.write_pending()
        found: list[int] = []
        files = self.files
        for i in range(len(files) - 1, -1, -1):
            f = files[i]
            if f.is_time_matched(begin_ts, end_ts):
                f.select(found, khash, max_num + 8, begin_ts, end_ts)  # slack for repeats dropped below
            if f.begin_timestamp < begin_ts or len(found) >= max_num + 8:
                break
        result: list[int] = []
        seen: set[int] = set()
        for off in found:
            if off not in seen:
                seen.add(off)
                result.append(off)
                if len(result) >= max_num:
                    break
        return result
