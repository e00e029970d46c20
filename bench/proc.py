"""What /proc says about a broker process and its helper processes (the CommitLog page populator,
broker.store.populate, and the index helper, broker.store.index_process): CPU time and resident memory,
for the benchmarks' cost columns."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["child_pids", "children_cpu_s", "cpu_s", "disk_bytes_written", "pss_mib", "rss_mib"]


def child_pids(pid: int) -> list[int]:
    """The live children of every thread of `pid`."""
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass  # gone meanwhile
    return found


def _own_cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s(pid: int) -> float:
    """utime + stime of the live children of `pid` (a broker's helper processes), in seconds."""
    return sum(_own_cpu_s(c) for c in child_pids(pid))


def cpu_s(pid: int | None) -> float:
    """utime + stime of a process and its live children, in seconds (0 when unknown)."""
    if pid is None:
        return 0.0
    return _own_cpu_s(pid) + children_cpu_s(pid)


_PARTS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")


def _status_mib(pid: int) -> dict[str, float]:
    found = dict.fromkeys(_PARTS, 0.0)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in found:
            found[name] = int(value.split()[0]) / 1024
    return found


def pss_mib(pid: int) -> float:
    """The proportional set size of `pid` in MiB (smaps_rollup): each resident page divided by the number
    of processes mapping it, so the interpreter and libraries that several processes share count once
    in all; 0 where the kernel has no smaps_rollup."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            name, _, value = line.partition(":")
            if name == "Pss":
                return int(value.split()[0]) / 1024
    except OSError:
        pass
    return 0.0


def rss_mib(pid: int) -> dict[str, float]:
    """VmRSS and its parts RssAnon, RssFile and RssShmem of `pid`, and its Pss, in MiB; `children`: the
    VmRSS of its live children, `children_own` their RssAnon + RssShmem (the index helper maps CommitLog
    and index files, whose pages, page cache, are in its VmRSS as in the broker's) and `children_pss`."""
    found = _status_mib(pid)
    found["Pss"] = pss_mib(pid)
    found["children"] = found["children_own"] = found["children_pss"] = 0.0
    for child in child_pids(pid):
        try:
            part = _status_mib(child)
        except OSError:
            continue
        found["children"] += part["VmRSS"]
        found["children_own"] += part["RssAnon"] + part["RssShmem"]
        found["children_pss"] += pss_mib(child)
    return found


def disk_bytes_written(path: Path) -> int:
    """Bytes the block device holding `path` has written so far (its sysfs stat, in 512-byte sectors);
    0 where the device has no such file (a network or overlay filesystem)."""
    dev = os.stat(path).st_dev
    try:
        fields = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/stat").read_text().split()
    except OSError:
        return 0
    return int(fields[6]) * 512
