"""The index helper process: writes the IndexFiles from the CommitLog, beside the broker that writes it.

Started by broker.store.index_process (read there why) as

    python -m broker.store.index_helper --commit-log DIR --file-size N --index DIR --slots S --entries E
        [--start OFFSET] [--after-crash]

It maps the CommitLog files read-only, parses each record the broker announced (`parse_record`, no CRC
check: the broker wrote it a moment ago) and hands them to an `IndexService` of its own, in batches of up
to `GATHER_RECORDS` (numpy's fixed cost per write is then repaid). It starts where the index files end,
or at `--start`; a helper started again after a crash carries on where the last one stopped.

Commands come on stdin, one per line; answers go to stdout as `R <id> ...`:

    W <offset>                          whole records end at this CommitLog offset: index up to it
    Q <id> <hash> <max> <begin> <end>   the index's last update time and end offset, then the
                                        CommitLog offsets of records indexed under a key hash in
                                        [begin, end] ms, newest first
    F <id>                              fdatasync the files; answers the store time of the last record
                                        indexed (0: none yet)
    D <offset>                          delete the files whose entries all point below this offset

A query or a flush first indexes everything announced before it. At end of input (the broker stopped,
or died) the helper indexes what was announced, flushes, writes `E <timestamp>` and exits.
"""

from __future__ import annotations

import argparse
import logging
import mmap
import os
import select
import struct
import sys
from pathlib import Path

from broker.logs.relay import configure_child
from broker.protocol.message import SysFlag
from broker.protocol.properties import Prop, find_property_bytes
from broker.protocol.record_layout import (
    FIXED_SIZE_V4,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGICS,
    MIN_RECORD_SIZE,
    PREFIX,
    SYS_FLAG_AT,
    body_len_at,
    store_timestamp_at,
)
from broker.store.dispatch_request import BLANK, parse_record
from broker.store.index_service import GATHER_RECORDS, GATHER_S, IndexService

__all__ = ["CommitLogReader", "Indexer", "main", "serve"]

log = logging.getLogger("index-helper")

MAX_LINE = 4096  # commands are a few numbers; a longer line is garbage and dropped
# Below the broker's threads: the index is background work, and a starved helper only writes bigger
# batches (SYNC_FLUSH pipelined x64 sends, three alternating pairs: 21.1/24.3/27.0k at nice 0, 23.9/28.6/27.0k)
NICE = 10


class CommitLogReader:
    """Read-only views of the CommitLog files, one mapped at a time (a file deleted by retention must
    not stay mapped: its disk space is only freed when the last mapping goes)."""

    def __init__(self, directory: Path, file_size: int) -> None:
        self.directory = directory
        self.file_size = file_size
        self._base = -1
        self._mm: mmap.mmap | None = None

    def first_offset(self) -> int:
        names = [p.name for p in self.directory.iterdir() if p.name.isdigit() and len(p.name) == 20]
        return int(min(names)) if names else 0

    def file_at(self, offset: int) -> tuple[int, mmap.mmap] | None:
        """(start offset, mapping) of the file holding `offset`; None when there is none (yet)."""
        base = offset - offset % self.file_size
        if base == self._base and self._mm is not None:
            return base, self._mm
        self.close()
        try:
            fd = os.open(self.directory / f"{base:020d}", os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            self._mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file (being created)
            return None
        finally:
            os.close(fd)
        self._base = base
        return base, self._mm

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
        self._mm = None
        self._base = -1


# A record with IPv4 hosts (every record this broker writes), read in one unpack: TOTALSIZE MAGIC,
# SYSFLAG, STORETIMESTAMP and BODYLEN at the layout's offsets, the fields between skipped; the body
# starts right after. A fast copy of the layout's parser, held equal to it by tests/protocol/test_record_readers.py.
_V4_HEAD = struct.Struct(
    f">ii{SYS_FLAG_AT - PREFIX.size}xi{store_timestamp_at(0) - SYS_FLAG_AT - 4}x"
    f"q{body_len_at(0) - store_timestamp_at(0) - 8}xi"
)
_V4_HEAD_SIZE = FIXED_SIZE_V4
assert _V4_HEAD.size == _V4_HEAD_SIZE
_U16 = struct.Struct(">H")
_HOSTS_V6 = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6
_TRANSACTION_MASK = SysFlag.TRANSACTION_MASK  # constants for the per-record loop
_ROLLBACK = SysFlag.TRANSACTION_ROLLBACK_TYPE
_UNIQ_KEY, _KEYS = Prop.UNIQ_KEY, Prop.KEYS


class Indexer:
    """Follows the CommitLog up to what the broker announced and writes the index keys of its records.

    Only what the index needs is read from a record (system flag, store time, topic, UNIQ_KEY and KEYS
    cut out of the properties bytes): 3.5 us a record with the index write, against 5.3 with the dispatch
    parser, which is only used for records with IPv6 hosts.
    """

    def __init__(self, reader: CommitLogReader, index: IndexService, start: int | None = None) -> None:
        self.reader = reader
        self.index = index
        # the broker's recovery indexed everything before `start`; a helper started again after a crash
        # goes on from the newest indexed record (indexed twice at worst: queries drop repeats)
        self.position = max(index.end_phy_offset if start is None else start, reader.first_offset())
        self.announced = self.position
        self.last_timestamp = index.last_update_timestamp  # store time of the last record written out
        self._scanned_timestamp = self.last_timestamp
        self._keys: list[bytes] = []
        self._phys: list[int] = []
        self._tss: list[int] = []

    @property
    def gathered(self) -> int:
        return len(self._keys)

    def announce(self, offset: int) -> None:
        self.announced = max(self.announced, offset)

    def advance(self) -> None:
        """Read every announced record; write a batch whenever GATHER_RECORDS keys are gathered."""
        while self.position < self.announced:
            found = self.reader.file_at(self.position)
            if found is None:
                first = self.reader.first_offset()
                if first > self.position:  # retention deleted it: carry on with the oldest file left
                    self.position = first
                    continue
                return
            base, mm = found
            pos = self.position - base
            limit = min(self.reader.file_size, self.announced - base, len(mm))
            new_pos = self._scan(mm, base, pos, limit)
            self.position = base + new_pos
            if new_pos == pos:
                return  # a record the broker has not finished (or a corrupt one): wait for more

    def _scan(self, mm: mmap.mmap, base: int, pos: int, limit: int) -> int:
        """Gather the keys of the whole records in [pos, limit) of one file; returns where it stopped."""
        keys = self._keys
        head, u16 = _V4_HEAD.unpack_from, _U16.unpack_from
        while pos < limit:
            if pos + _V4_HEAD_SIZE <= limit:
                total, magic, sys_flag, store_ts, body_len = head(mm, pos)
            else:
                total = magic = sys_flag = body_len = 0
            end = pos + total
            if (
                magic in MESSAGE_MAGICS
                and not sys_flag & _HOSTS_V6
                and total >= MIN_RECORD_SIZE
                and end <= limit
                and 0 <= body_len <= total - MIN_RECORD_SIZE  # the topic and properties lengths lie inside
            ):
                p = pos + _V4_HEAD_SIZE + body_len
                if magic == MESSAGE_MAGIC_CODE:
                    topic_len = mm[p]
                    p += 1
                else:
                    (topic_len,) = u16(mm, p)
                    p += 2
                topic = mm[p : p + topic_len]
                p += topic_len
                (props_len,) = u16(mm, p)
                p += 2
                if p + props_len != end:
                    log.error("unreadable record at CommitLog offset %d: not indexed further", base + pos)
                    return pos
                if props_len and sys_flag & _TRANSACTION_MASK != _ROLLBACK:
                    props = mm[p:end]
                    uniq, more = find_property_bytes(props, _UNIQ_KEY), find_property_bytes(props, _KEYS)
                    self._gather(topic, uniq, more, base + pos, store_ts)
            else:
                size, request = parse_record(mm, pos, limit, check_crc=False)
                if request is None:
                    return self.reader.file_size if size == BLANK else pos
                end = pos + size
                store_ts = request.store_timestamp
                if request.sys_flag & SysFlag.TRANSACTION_MASK != SysFlag.TRANSACTION_ROLLBACK_TYPE:
                    uniq_text, keys_text = request.uniq_key, request.keys
                    self._gather(request.topic.encode(), uniq_text.encode() if uniq_text else None,
                                 keys_text.encode() if keys_text else None, base + pos, store_ts)  # fmt: skip
            self._scanned_timestamp = store_ts
            pos = end
            if len(keys) >= GATHER_RECORDS:
                self.write()
                keys = self._keys
        return pos

    def _gather(self, topic: bytes, uniq: bytes | None, more: bytes | None, phy: int, ts: int) -> None:
        prefix = topic + b"#"
        if uniq:
            self._keys.append(prefix + uniq)
            self._phys.append(phy)
            self._tss.append(ts)
        if more:
            for k in more.split(b" "):
                if k:
                    self._keys.append(prefix + k)
                    self._phys.append(phy)
                    self._tss.append(ts)

    def write(self) -> None:
        """Write the gathered keys (one vectorized write)."""
        if self._keys:
            # numpy with the first write: an idle broker's helper stays small
            from broker.store.index_batch import utf8_key_hashes

            keys, phys, tss = self._keys, self._phys, self._tss
            self._keys, self._phys, self._tss = [], [], []
            self.index.write_hashed(utf8_key_hashes(keys), phys, tss)
        self.last_timestamp = self._scanned_timestamp

    def catch_up(self) -> None:
        self.advance()
        self.write()


def _reply(out_fd: int, text: str) -> None:
    data = (text + "\n").encode()
    try:
        while data:
            data = data[os.write(out_fd, data) :]
    except BrokenPipeError:  # the broker died while asking: the end of input follows, and the helper finishes
        pass


def handle(indexer: Indexer, line: bytes, out_fd: int) -> None:
    """One command (see the module's docstring); a malformed one is logged and ignored."""
    fields = line.split()
    if not fields:
        return
    try:
        numbers = [int(f) for f in fields[1:]]
    except ValueError:
        log.warning("ignored a malformed command: %r", line[:80])
        return
    op = fields[0]
    if op == b"W" and len(numbers) == 1:
        indexer.announce(numbers[0])
    elif op == b"Q" and len(numbers) == 5:
        rid, khash, max_num, begin, end = numbers
        indexer.catch_up()
        index = indexer.index
        found = index.query_hash(khash, max(0, min(max_num, 10_000)), begin, end)
        _reply(out_fd, " ".join(map(str, ["R", rid, index.last_update_timestamp, index.end_phy_offset, *found])))
    elif op == b"F" and len(numbers) == 1:
        indexer.catch_up()
        indexer.index.flush()
        _reply(out_fd, f"R {numbers[0]} {indexer.last_timestamp}")
    elif op == b"D" and len(numbers) == 1:
        deleted = indexer.index.delete_expired(numbers[0])
        if deleted:
            log.info("deleted %d expired index files", deleted)
    else:
        log.warning("ignored an unknown command: %r", line[:80])


def serve(indexer: Indexer, in_fd: int, out_fd: int) -> None:
    """Read commands until end of input; index in between (gathered records wait at most GATHER_S)."""
    buffered = b""
    while True:
        ready, _, _ = select.select([in_fd], [], [], GATHER_S if indexer.gathered else None)
        if not ready:
            indexer.write()
            continue
        data = os.read(in_fd, 65536)
        if not data:
            break
        *lines, buffered = (buffered + data).split(b"\n")
        if len(buffered) > MAX_LINE:
            log.warning("dropped %d bytes without a line end", len(buffered))
            buffered = b""
        for line in lines:
            if len(line) <= MAX_LINE:
                handle(indexer, line, out_fd)
        indexer.advance()
    indexer.catch_up()
    indexer.index.flush()
    _reply(out_fd, f"E {indexer.last_timestamp}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit-log", type=Path, required=True)
    parser.add_argument("--file-size", type=int, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--slots", type=int, required=True)
    parser.add_argument("--entries", type=int, required=True)
    parser.add_argument("--start", type=int, default=None, help="first CommitLog offset to index [the index end]")
    parser.add_argument("--after-crash", action="store_true", help="the last helper died: check the files")
    args = parser.parse_args(argv)
    os.nice(NICE)
    configure_child()  # records for the broker's log (broker.logs.relay), in its format
    index = IndexService(args.index, hash_slot_num=args.slots, index_num=args.entries)
    # Not the broker's last exit: the broker's recovery checked (and after a crash repaired) these files
    # before handing them over; after_crash means the previous *helper* died while the broker ran on.
    index.load(
        last_exit_ok=not args.after_crash,
        origin="the previous index helper died: checked" if args.after_crash else "handed over by the broker",
    )
    reader = CommitLogReader(args.commit_log, args.file_size)
    try:
        serve(Indexer(reader, index, args.start), sys.stdin.fileno(), sys.stdout.fileno())
    finally:
        reader.close()
        index.close()


if __name__ == "__main__":
    main()
