"""Where a returning replica's CommitLog stops agreeing with its master's, and cutting it there on disk.

`truncation_point` is RocketMQ's rule over two epoch histories (broker.ha.epoch_file): walk this broker's
epochs from the newest; the first one the master also has, with the same start offset, gives the point,
the smaller of where that epoch ends on either side. What this broker wrote past it (a deposed master's
tail that no replica acknowledged) is not the master's data. `cut_commit_log` removes it from the files of a
store that is not running: the file holding the point is zeroed from there, later files are deleted, and the
store's next start, told it stopped abnormally, recovers to the point and rebuilds its queues from there.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from broker.ha.epoch_file import EpochEntry
from broker.store import MessageStore

__all__ = ["cut_commit_log", "cut_torn_tail", "truncation_point"]

log = logging.getLogger(__name__)

_ZEROS = bytes(1 << 20)


def _ends(entries: list[EpochEntry], max_offset: int) -> list[tuple[EpochEntry, int]]:
    return [(e, entries[i + 1].start_offset if i + 1 < len(entries) else max_offset) for i, e in enumerate(entries)]


def truncation_point(local: list[EpochEntry], local_max: int, master: list[EpochEntry], master_max: int) -> int | None:
    """The offset up to which this broker's CommitLog is the master's; None when no epoch is shared."""
    if not local:
        return None
    theirs = {(e.epoch, e.start_offset): end for e, end in _ends(master, master_max)}
    for entry, end in reversed(_ends(local, local_max)):
        master_end = theirs.get((entry.epoch, entry.start_offset))
        if master_end is not None:
            return min(end, master_end)
    return None


def cut_commit_log(commit_log_dir: Path, file_size: int, offset: int) -> int:
    """Make `offset` the end of the CommitLog files in `commit_log_dir` (the store must be stopped).
    Returns the bytes dropped (counted by file extent: the zeroed tail plus the deleted files)."""
    dropped = 0
    for path in sorted(commit_log_dir.iterdir()):
        if not path.name.isdigit():
            continue
        start = int(path.name)
        if start >= offset:
            dropped += path.stat().st_size
            path.unlink()
            log.info("CommitLog cut at %d: deleted %s", offset, path.name)
        elif start + file_size > offset:
            position = offset - start
            with open(path, "r+b") as handle:
                handle.seek(position)
                left = file_size - position
                dropped += left
                while left > 0:
                    chunk = _ZEROS[: min(left, len(_ZEROS))]
                    handle.write(chunk)
                    left -= len(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            log.info("CommitLog cut at %d: zeroed %s from position %d", offset, path.name, position)
    return dropped


def cut_torn_tail(store: MessageStore) -> int:
    """A slave about to become master: drop the bytes after its last whole record (replication cuts the
    CommitLog into blocks, not records, so a link that died mid-block leaves part of a record), so that its
    first put starts on a record boundary. Returns the bytes dropped. Nothing else may write the store."""
    store.reput.catch_up()  # dispatches every whole record: what stays behind is not one
    end = store.reput.reput_from_offset
    torn = store.commit_log.max_offset - end
    if torn > 0:
        log.warning("CommitLog ends with %d bytes of a partly replicated record at %d: dropping them", torn, end)
        store.commit_log.queue.truncate_dirty_files(end)
        store.commit_log.queue.set_positions(end)
    return max(torn, 0)
