"""EpochFile: a controller-mode broker's epoch history, `epochFileCheckpoint` under storePathRootDir.

Each entry says that from `start_offset` on, the CommitLog was written under master epoch `epoch`; an entry
ends where the next starts. RocketMQ's text format: the entry count, a CRC32 (& 0x7FFFFFFF) of the entry
lines, then one `epoch-startOffset` line per entry. The old content is copied to `.bak` before a write, and a
file that is missing, empty or fails its check is read from `.bak` instead.
"""

from __future__ import annotations

import logging
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EpochEntry", "EpochFile"]

log = logging.getLogger(__name__)

_MAX_ENTRIES = 1_000_000


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


def _parse(text: str) -> list[EpochEntry] | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    try:
        count, crc = int(lines[0]), int(lines[1])
    except ValueError:
        return None
    body = lines[2:]
    if count != len(body) or count > _MAX_ENTRIES:
        return None
    if crc != 0 and crc != zlib.crc32("\n".join(body).encode()) & 0x7FFFFFFF:
        return None
    entries = []
    for line in body:
        epoch, sep, start = line.partition("-")
        if not sep or not epoch.isdigit() or not start.isdigit():
            return None
        entries.append(EpochEntry(int(epoch), int(start)))
    return entries


class EpochFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[EpochEntry] = []

    def load(self) -> list[EpochEntry]:
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                parsed = _parse(candidate.read_text())
            except (OSError, UnicodeDecodeError):
                continue
            if parsed is not None:
                self.entries = parsed
                return parsed
            log.warning("epoch file %s is damaged; trying its backup", candidate)
        self.entries = []
        return []

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else -1

    def append(self, epoch: int, start_offset: int) -> None:
        """Start `epoch` at `start_offset`: entries of this epoch or later are dropped first (a new master's
        epoch replaces what a deposed one may have written), then the file is rewritten."""
        kept = [e for e in self.entries if e.epoch < epoch and e.start_offset <= start_offset]
        self.entries = [*kept, EpochEntry(epoch, start_offset)]
        self._write()

    def replace(self, entries: list[EpochEntry]) -> None:
        """A slave's copy of its master's history, up to what the slave holds."""
        if entries != self.entries:
            self.entries = list(entries)
            self._write()

    def _write(self) -> None:
        body = "\n".join(f"{e.epoch}-{e.start_offset}" for e in self.entries)
        crc = zlib.crc32(body.encode()) & 0x7FFFFFFF
        text = f"{len(self.entries)}\n{crc}\n{body}\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            backup = self.path.with_name(self.path.name + ".bak")
            backup.write_bytes(self.path.read_bytes())
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
