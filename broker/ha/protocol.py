"""The classic HA wire format (reference section 7), sans I/O.

Used by the master's per-slave connection (broker.ha.master) and the slave's client (broker.ha.slave).
Slave -> master: a stream of 8-byte big-endian int64 reports, each the slave's max CommitLog offset;
the master only looks at the last complete report it has buffered. Master -> slave: blocks of a 12-byte
header (int64 masterPhyOffset, int32 bodySize) followed by bodySize raw CommitLog bytes; bodySize 0 is a
heartbeat.
"""

from __future__ import annotations

import struct

__all__ = [
    "HEADER",
    "HEADER_SIZE",
    "REPORT",
    "REPORT_SIZE",
    "ReportReader",
    "encode_header",
    "encode_report",
    "transfer_start",
]

REPORT = struct.Struct(">q")
REPORT_SIZE = REPORT.size  # 8
HEADER = struct.Struct(">qi")
HEADER_SIZE = HEADER.size  # 12


def encode_report(max_offset: int) -> bytes:
    return REPORT.pack(max_offset)


def encode_header(master_phy_offset: int, body_size: int) -> bytes:
    return HEADER.pack(master_phy_offset, body_size)


def transfer_start(first_report: int, master_max_offset: int, file_size: int) -> int:
    """Where the master starts streaming to a slave whose first report was `first_report`.

    A slave with an empty CommitLog (report 0) gets only the master's last file, from its start (the
    Java master does not ship the whole history to a new slave); otherwise transfer resumes exactly at
    the reported offset.
    """
    if first_report != 0:
        return first_report
    start = master_max_offset - master_max_offset % file_size
    return max(start, 0)


class ReportReader:
    """Buffers the slave's report stream; `feed()` returns the last complete report, or None.

    Reports are read only at 8-byte boundaries counted from the start of the connection, so a report
    split across TCP segments is picked up once its last byte arrives (Java's processPosition).
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> int | None:
        buf = self._pending + data if self._pending else data
        whole = len(buf) - len(buf) % REPORT_SIZE
        self._pending = buf[whole:]
        if whole == 0:
            return None
        (value,) = REPORT.unpack_from(buf, whole - REPORT_SIZE)
        return int(value)
