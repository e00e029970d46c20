"""Store benchmark: puts (128 B / 1 KiB / 4 KiB; ASYNC_FLUSH and SYNC_FLUSH; 1, 16, 256 writers), reads,
crash recovery and the store's own memory over it, beside the disk's own sequential-write bandwidth and
fdatasync rate measured in the same run. Run by hand or from `make bench-*`:

    .venv/bin/python -m bench.store [--dir DIR] [--seconds 2] [--recovery-mib 1024] [--markdown]

Prints a table; with --markdown prints a section ready to append to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import logging
import mmap
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import uvloop

from bench.proc import children_cpu_s, disk_bytes_written, rss_mib
from broker.protocol.properties import encode_properties
from broker.store import MessageStore, MessageToStore, PutResult, StoreConfig
from broker.store.index_process import IndexProcess
from broker.store.results import PUT_OK

__all__ = ["main"]

log = logging.getLogger(__name__)

FILE_SIZE = 1 << 30


# -- the disk's own limits ---------------------------------------------------------------------------


def disk_seq_write_mb_s(directory: Path, total_mib: int = 512) -> float:
    """O_DIRECT sequential 1 MiB writes (no page cache): the device's bandwidth."""
    path = directory / "dd.bin"
    buf = mmap.mmap(-1, 1 << 20)  # page-aligned, as O_DIRECT needs
    buf.write(b"\xa5" * (1 << 20))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(total_mib):
            os.write(fd, buf)
        os.fsync(fd)
        dt = time.perf_counter() - t0
    finally:
        os.close(fd)
        path.unlink()
    return total_mib / dt * 1.048576


def disk_fsync_rate(directory: Path, seconds: float = 2.0) -> float:
    """4 KiB write + fdatasync in a loop, into a zero-filled file (like zero-filled SYNC_FLUSH CommitLog files)."""
    path = directory / "fsync.bin"
    size = 64 << 20
    with open(path, "wb") as fh:
        fh.write(bytes(size))
        fh.flush()
        os.fsync(fh.fileno())
    fd = os.open(path, os.O_WRONLY)
    block = b"\x5a" * 4096
    n = 0
    try:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            os.pwrite(fd, block, (n * 4096) % size)
            os.fdatasync(fd)
            n += 1
        dt = time.perf_counter() - t0
    finally:
        os.close(fd)
        path.unlink()
    return n / dt


# -- store runs --------------------------------------------------------------------------------------


def make_config(root: Path, flush: str) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commit_log=FILE_SIZE,
        flush_disk_type=flush,
        max_hash_slot_num=500_000,
        max_index_num=2_000_000,
    )


def make_messages(size: int, count: int = 64) -> list[MessageToStore]:
    """Messages as the broker's send path hands them over: the wire's properties text, with TAGS and
    UNIQ_KEY already looked up for the dispatch hint."""
    body = os.urandom(size)
    messages = []
    for i in range(count):
        uniq = f"7F0000010001{i:020X}"
        props = {"TAGS": "TagA", "UNIQ_KEY": uniq, "WAIT": "true"}
        messages.append(
            MessageToStore(
                topic="BenchTopic",
                queue_id=i % 8,
                body=body,
                born_timestamp=int(time.time() * 1000),
                born_host=("127.0.0.1", 50000),
                properties_bytes=(encode_properties(props) + "\x02").encode(),
                dispatch_keys=("TagA", None, uniq),
            )
        )
    return messages


def pct(sorted_vals: list[float], p: float) -> float:
    if not sorted_vals:
        return 0.0
    return sorted_vals[min(len(sorted_vals) - 1, int(len(sorted_vals) * p))]


async def run_puts(root: Path, flush: str, size: int, writers: int, seconds: float) -> dict[str, float]:
    store = MessageStore(make_config(root, flush))
    await store.start()
    msgs = make_messages(size)
    # warm-up: let the first file exist and the allocator start on the next
    for m in msgs:
        await store.put(m)
    await store.commit_log.allocator.ready()  # the next 1 GiB file is zero-filled before we measure
    lat: list[float] = []
    count = 0
    failed = 0
    stop_at = time.perf_counter() + seconds
    record = flush == "SYNC_FLUSH" or writers > 1

    async def writer(w: int) -> None:
        # Puts the broker's way: `append` answers at once when nothing is to be waited for
        # (ASYNC_FLUSH), or with a future (the group commit); no coroutine per put.
        nonlocal count, failed
        append = store.append
        pc = time.perf_counter
        n = len(msgs)
        i = w
        done = bad = 0
        while pc() < stop_at:
            # 64 puts, then a turn of the loop (an ASYNC_FLUSH put never suspends), as the broker gets a
            # read's worth of sends between turns: dispatch and the timers run on the turns.
            for _ in range(64):
                t = pc() if record else 0.0
                r = append(msgs[i % n])
                if type(r) is not PutResult:
                    r = await r
                if record:
                    lat.append(pc() - t)
                if r.status is not PUT_OK:
                    bad += 1
                i += writers
            done += 64
            await asyncio.sleep(0)
        count += done
        failed += bad

    assert store.flush_service is not None
    flushes = store.flush_service.flush_count
    t0 = time.perf_counter()
    me = os.getpid()
    c0 = time.process_time() + children_cpu_s(me)
    loop0 = time.thread_time()  # the event loop's own CPU: what bounds one writer
    disk0 = disk_bytes_written(root)
    await asyncio.gather(*(writer(w) for w in range(writers)))
    dt = time.perf_counter() - t0
    loop_cpu = time.thread_time() - loop0
    disk = disk_bytes_written(root) - disk0  # SYNC_FLUSH: every acknowledged put is on the disk by now
    # how long the dispatcher needs to catch up (ConsumeQueue + index), part of the real cost
    t1 = time.perf_counter()
    while store.dispatch_behind_bytes > 0:
        await asyncio.sleep(0.001)
    if isinstance(store.index, IndexProcess):  # and the index helper: a query waits until it has caught up
        await asyncio.to_thread(store.query_message, "BenchTopic", "-", 1, 0, 0)
    catch_up = time.perf_counter() - t1
    # every thread of the process (puts, dispatch, flush syscalls) and its helper processes (populator, index)
    cpu = time.process_time() + children_cpu_s(me) - c0
    flushes = store.flush_service.flush_count - flushes
    lat.sort()
    await store.shutdown()
    return {
        "rate": count / dt,
        "mb_s": count * (size + 180) / dt / 1e6,
        "p50_ms": pct(lat, 0.50) * 1000,
        "p99_ms": pct(lat, 0.99) * 1000,
        "failed": failed,
        "dispatch_catch_up_s": catch_up,
        "rate_incl_dispatch": count / (dt + catch_up),
        "cpu_us": cpu / count * 1e6 if count else 0.0,
        "loop_us": loop_cpu / count * 1e6 if count else 0.0,
        "per_flush": count / flushes if flushes else 0.0,
        "disk_per_put": disk / count if count else 0.0,
    }


async def run_reads(root: Path, size: int, count: int) -> dict[str, float]:
    store = MessageStore(make_config(root, "ASYNC_FLUSH"))
    await store.start()
    msgs = make_messages(size, 8)
    for i in range(count):
        await store.put(msgs[i % 8])
    while store.dispatch_behind_bytes > 0:
        await asyncio.sleep(0.001)
    read = 0
    t0 = time.perf_counter()
    for qid in range(8):
        off = 0
        while True:
            got = store.get_message("g", "BenchTopic", qid, off, 32, max_total_bytes=1 << 20)
            if not got.buffers:
                break
            read += got.message_count
            off = got.next_begin_offset
            got.release()
    dt = time.perf_counter() - t0
    await store.shutdown()
    return {"rate": read / dt, "count": read}


def own_mib() -> float:
    """This process's own resident memory (RssAnon: the Python heap and buffers, not the mapped store
    files, which are page cache)."""
    return rss_mib(os.getpid())["RssAnon"]


async def write_for_recovery(root: Path, mib: int) -> float:
    """Write `mib` MiB of 1 KiB records and "die"; returns how much this process's own memory grew."""
    before = own_mib()
    store = MessageStore(make_config(root, "ASYNC_FLUSH"))
    await store.start()
    msgs = make_messages(1024)
    target = mib << 20
    i = 0
    while store.max_phy_offset < target:
        await store.put(msgs[i % len(msgs)])
        i += 1
    while store.dispatch_behind_bytes > 0:
        await asyncio.sleep(0.001)
    await asyncio.sleep(1.2)  # one ConsumeQueue/checkpoint flush, as a running broker would have
    # the process "dies" here: no shutdown, `abort` stays, the page cache keeps the data (as with kill -9)
    return own_mib() - before


async def time_recovery(root: Path) -> tuple[float, int, float]:
    """Seconds to recover the store at `root`, records scanned, and how much this process's own memory
    grew by the time the store is open (recovery rebuilds ConsumeQueues and index in process)."""
    before = own_mib()
    t0 = time.perf_counter()
    store = MessageStore(make_config(root, "ASYNC_FLUSH"))
    await store.start()
    dt = time.perf_counter() - t0
    grown = own_mib() - before
    assert store.recovery_report is not None and store.recovery_report.abnormal
    n = store.recovery_report.records
    await store.shutdown()
    return dt, n, grown


def recovery_child(root: str, mib: int, memory_note: str) -> None:
    grown = uvloop.run(write_for_recovery(Path(root), mib))
    Path(memory_note).write_text(f"{grown:.1f}")
    os._exit(0)  # skip every cleanup, like a kill


# -- main --------------------------------------------------------------------------------------------


def machine() -> dict[str, str]:
    cpu = "?"
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"nproc": str(os.cpu_count()), "cpu": cpu, "uptime": uptime, "python": platform.python_version()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir under .data/)")
    ap.add_argument("--seconds", type=float, default=2.0, help="duration of each put run")
    ap.add_argument("--sizes", default="128,1024,4096")
    ap.add_argument("--writers", default="1,16,256")
    ap.add_argument("--reads", type=int, default=200_000, help="messages written then read back")
    ap.add_argument("--recovery-mib", type=int, default=1024, help="CommitLog size for the recovery run (0: skip)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    base = args.dir or Path(".data")
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-store-", dir=base))
    rows: list[str] = []
    try:
        info = machine()
        seq = disk_seq_write_mb_s(work)
        fsr = disk_fsync_rate(work)
        print(f"disk: O_DIRECT sequential write {seq:.0f} MB/s; 4k write+fdatasync {fsr:.0f}/s", flush=True)
        for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            for size in (int(s) for s in args.sizes.split(",")):
                for writers in (int(w) for w in args.writers.split(",")):
                    root = work / f"{flush}-{size}-{writers}"
                    r = uvloop.run(run_puts(root, flush, size, writers, args.seconds))
                    shutil.rmtree(root, ignore_errors=True)
                    ratio = (
                        f"{r['mb_s'] / seq:.0%} of disk MB/s"
                        if flush == "ASYNC_FLUSH"
                        else f"{r['per_flush']:.0f} msgs per fdatasync; {r['rate'] / fsr:.1f}x disk fsync rate; "
                        f"disk wrote {r['disk_per_put'] / (size + 180):.1f}x the records"
                    )
                    row = (
                        f"| {flush} | {size} | {writers} | {r['rate']:,.0f} | {r['mb_s']:.0f} | {r['p50_ms']:.2f} | "
                        f"{r['p99_ms']:.2f} | {r['rate_incl_dispatch']:,.0f} | {r['cpu_us']:.1f} | {ratio} |"
                    )
                    rows.append(row)
                    print(row, flush=True)
        reads = {}
        for size in (128, 1024):
            root = work / f"read-{size}"
            reads[size] = uvloop.run(run_reads(root, size, args.reads))
            shutil.rmtree(root, ignore_errors=True)
            print(f"reads {size} B: {reads[size]['rate']:,.0f} msgs/s ({reads[size]['count']} messages)", flush=True)
        rec = worst = None
        write_grown = 0.0
        if args.recovery_mib:
            root = work / "recovery"
            memory_note = work / "write-memory"
            pid = os.fork()
            if pid == 0:
                recovery_child(str(root), args.recovery_mib, str(memory_note))
            os.waitpid(pid, 0)
            write_grown = float(memory_note.read_text())
            # The worst case on a copy: no checkpoint, so the scan starts at the first file and every record
            # is checked (CRC) and dispatched again.
            worst_root = work / "recovery-worst"
            shutil.copytree(root, worst_root)
            (worst_root / "checkpoint").unlink()
            rec = uvloop.run(time_recovery(root))
            print(f"recovery after a kill, {args.recovery_mib} MiB CommitLog: {rec[0]:.2f} s", flush=True)
            worst = uvloop.run(time_recovery(worst_root))
            print(f"recovery without a checkpoint: {worst[0]:.2f} s, {worst[1]} records", flush=True)
            print(
                f"store's own memory (RssAnon growth): {write_grown:.1f} MiB writing {args.recovery_mib} MiB, "
                f"{worst[2]:.1f} MiB recovering it without a checkpoint",
                flush=True,
            )
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(worst_root, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.markdown:
        print()
        print(f"## Store (bench/store.py), {datetime.date.today().isoformat()}")
        print()
        print(f"Command: `.venv/bin/python -m bench.store --seconds {args.seconds} --markdown`  ")
        print(
            f"Machine: {info['nproc']} x {info['cpu']}, Python {info['python']}, uvloop; files of 1 GiB "
            "(zero-filled ahead of use for SYNC_FLUSH, fallocated for ASYNC_FLUSH)  "
        )
        print(f"Load: `{info['uptime']}`  ")
        print(
            f"Disk in the same run: O_DIRECT sequential write **{seq:.0f} MB/s**, 4 KiB write+fdatasync **{fsr:.0f}/s**"
        )
        print()
        print("In process, one event loop. Each writer puts as the broker's send path does (`append`: the")
        print("result at once, or a future to await) and lets the loop turn every 64 puts.")
        print("*rate* counts acknowledged puts (SYNC_FLUSH: after the group fdatasync);")
        print("*incl. dispatch* adds the time the reput service needed afterwards to build ConsumeQueue and index;")
        print("*CPU µs/put* is the process CPU time (all threads, and the helper processes) of puts plus")
        print("their dispatch, per put.")
        print()
        print(
            "| flush | body B | writers | puts/s | MB/s | p50 ms | p99 ms | puts/s incl. dispatch | CPU µs/put "
            "| vs. disk |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for row in rows:
            print(row)
        print()
        for size, r in reads.items():
            print(f"- reads from the page cache, {size} B bodies, 32 per get: **{r['rate']:,.0f} msgs/s**")
        if rec is not None:
            mib = args.recovery_mib
            print(f"- recovery after a kill, {mib} MiB CommitLog: **{rec[0]:.2f} s** ({rec[1]} records scanned)")
        if worst is not None:
            print(
                f"- same CommitLog without its checkpoint (every record CRC-checked and dispatched again): "
                f"**{worst[0]:.2f} s** ({worst[1]} records scanned)"
            )
            print(
                f"- the store's own memory (the process's RssAnon growth, Python heap and buffers; the mapped "
                f"files are page cache): **{write_grown:.1f} MiB** after writing the {args.recovery_mib} MiB, "
                f"**{worst[2]:.1f} MiB** after recovering them without a checkpoint"
            )


if __name__ == "__main__":
    main()
