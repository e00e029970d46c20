"""Dispatch-side micro-benchmarks: `python -m bench.index [--num N] [--slots S] [--entries E] [--dir D]`.

Measures the per-message cost of IndexService.dispatch (and of dispatch_batch, the reput's vectorized
path, at 16, 64 and 256 records a pass) for a record with a UNIQ_KEY and one KEYS token
(the common producer case: two index entries), of the key hash alone (the split hash vs. the plain
lru-cached one on keys that never repeat), of ConsumeQueueStore.dispatch, and of the ConsumeQueue
read path (read_units + iter_unpack, 32 units per pull). Files go to a temporary directory (or --dir)
with RocketMQ's default geometry unless told otherwise. Run by hand; nothing imports it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from broker.protocol.javahash import index_key_hash, java_string_hash
from broker.store.consume_queue import UNIT, ConsumeQueueStore
from broker.store.dispatch_request import DispatchRequest
from broker.store.index_file import key_hash
from broker.store.index_service import IndexService

__all__ = ["main", "run"]

T0 = 1_700_000_000_000
PREFIX = "7F0000010B6C18B4AAC2"  # a producer's fixed UNIQ_KEY part (ip, pid, class loader hash)


def _requests(num: int, start: int = 0) -> list[DispatchRequest]:
    return [
        DispatchRequest(
            topic="BenchmarkTest",
            queue_id=i & 7,
            commit_log_offset=i * 1100,
            msg_size=1100,
            tags_code=0,
            store_timestamp=T0 + i // 100,
            consume_queue_offset=i >> 3,
            keys=f"order-{i}",
            uniq_key=f"{PREFIX}{i:012X}",
        )
        for i in range(start, start + num)
    ]


def _per_call_us(seconds: float, num: int) -> float:
    return seconds / num * 1e6


def run(num: int, slots: int, entries: int, directory: Path) -> list[tuple[str, str]]:
    results: list[tuple[str, str]] = []
    keys = [f"BenchmarkTest#{PREFIX}{i:012X}" for i in range(num)]
    fresh = [f"BenchmarkTest#{PREFIX}{i:012X}" for i in range(num, 2 * num)]

    t = time.perf_counter()
    for k in keys:
        key_hash(k)
    per = _per_call_us(time.perf_counter() - t, num)
    results.append(("key_hash (split, memoised parts), unique keys", f"{per:.2f} us"))
    java_string_hash.cache_clear()
    t = time.perf_counter()
    for k in fresh:
        index_key_hash(k)
    results.append(("index_key_hash (plain), unique keys", f"{_per_call_us(time.perf_counter() - t, num):.2f} us"))

    index = IndexService(directory / "index", hash_slot_num=slots, index_num=entries)
    index.load(True)
    index.dispatch(_requests(1)[0])  # creates the file outside the timed loop
    reqs = _requests(num, 1)
    t = time.perf_counter()
    for r in reqs:
        index.dispatch(r)
    per = _per_call_us(time.perf_counter() - t, num)
    results.append(("IndexService.dispatch, UNIQ_KEY + 1 key", f"{per:.2f} us/msg ({1e6 / per:,.0f} msg/s)"))
    for pass_size in (16, 64, 256):
        more = _requests(num, 1 + num * (pass_size.bit_length()))  # offsets beyond those indexed already
        t = time.perf_counter()
        for start in range(0, num, pass_size):
            index.dispatch_batch(more[start : start + pass_size])
        per = _per_call_us(time.perf_counter() - t, num)
        results.append((f"IndexService.dispatch_batch, {pass_size}/pass", f"{per:.2f} us/msg ({1e6 / per:,.0f} msg/s)"))
    t = time.perf_counter()
    for r in reqs[:: max(1, num // 1000)]:
        index.query(r.topic, r.keys or "", 32, 0, 2**62)
    n_q = len(reqs[:: max(1, num // 1000)])
    results.append(("IndexService.query by key", f"{_per_call_us(time.perf_counter() - t, n_q):.2f} us"))
    index.close()

    cqs = ConsumeQueueStore(directory / "consumequeue")
    cqs.load()
    cq_reqs = _requests(num)
    t = time.perf_counter()
    for r in cq_reqs:
        cqs.dispatch(r)
    per = _per_call_us(time.perf_counter() - t, num)
    results.append(("ConsumeQueueStore.dispatch", f"{per:.2f} us/msg ({1e6 / per:,.0f} msg/s)"))

    cq = cqs.find("BenchmarkTest", 0)
    assert cq is not None
    max_off = cq.get_max_offset()
    read = 0
    t = time.perf_counter()
    for _ in range(5):
        off = 0
        while off < max_off:
            view = cq.read_units(off, 32)
            if view is None:
                break
            for _phy, _size, _tags in UNIT.iter_unpack(view):
                read += 1
            off += len(view) // 20
            view.release()
    per = _per_call_us(time.perf_counter() - t, read)
    results.append(("ConsumeQueue read_units(32) + iter_unpack", f"{per:.3f} us/unit ({1e6 / per:,.0f} units/s)"))
    cqs.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=200_000)
    parser.add_argument("--slots", type=int, default=5_000_000, help="maxHashSlotNum")
    parser.add_argument("--entries", type=int, default=20_000_000, help="maxIndexNum")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the files (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for name, value in run(args.num, args.slots, args.entries, Path(tmp)):
            print(f"{name:48s} {value}")


if __name__ == "__main__":
    main()
