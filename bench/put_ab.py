"""The store's put path in two source trees, compared in one process: a ratio that the host's speed
swings cannot fake.

On this kind of VM the same code runs 2.1 or 3.4 us a put from one minute to the next, so two runs one
after the other compare the host's minutes, not the code. Here both trees' `broker` packages are imported
into one process (the module cache emptied between, each tree's functions keep their own globals), each
gets an ASYNC_FLUSH store, and short rounds alternate between them; a pair of neighbouring rounds sees the
same host. Prints each tree's per-put times and the per-pair ratio (second / first).

    git worktree add /tmp/base <rev>
    .venv/bin/python -m bench.put_ab /tmp/base . [--rounds 200] [--puts 1000] [--sustained 0]

--puts: a round is a burst of that many puts into pages mapped beforehand (the put path alone).
--sustained S: a round is instead S seconds of bench.store's one-writer loop (64 puts, a loop turn),
with the dispatch passes, page faults and flushes that come with it.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import uvloop

__all__ = ["main"]

PAGE = 4096


def import_tree(tree: Path) -> tuple[ModuleType, Any]:
    """bench.store and MessageStore as `tree` has them (whatever was imported before is dropped)."""
    for name in [m for m in sys.modules if m.split(".")[0] in ("broker", "bench")]:
        del sys.modules[name]
    sys.path.insert(0, str(tree))
    try:
        import bench.store as bench_store
        import broker
        from broker.store import MessageStore
    finally:
        sys.path.remove(str(tree))
    if not Path(broker.__file__).resolve().is_relative_to(tree):
        raise SystemExit(f"{tree}: imported broker from {broker.__file__} instead")
    return bench_store, MessageStore


def appender(store: Any) -> Any:
    """The store's synchronous single-message put, under whichever name the tree gives it."""
    return getattr(store, "append", None) or store.append_message


async def burst(store: Any, msgs: list[Any], puts: int) -> float:
    """us per put for `puts` puts into pages this process mapped writable beforehand."""
    mf = store.commit_log.queue.files[-1]
    start = mf.wrote_position - mf.wrote_position % PAGE + PAGE
    end = start + puts * 1300
    if end > mf.file_size:
        raise SystemExit("the CommitLog file is full: fewer --rounds or --puts")
    for page in range(start, end, PAGE):
        mf.mm[page] = 0
    await asyncio.sleep(0)
    append = appender(store)
    t0 = time.perf_counter()
    for i in range(puts):
        append(msgs[i & 63])
    return (time.perf_counter() - t0) / puts * 1e6


async def sustained(store: Any, msgs: list[Any], seconds: float) -> float:
    """us per put of bench.store's one-writer loop for `seconds`."""
    append = appender(store)
    clock = time.perf_counter
    done = 0
    t0 = clock()
    stop = t0 + seconds
    while clock() < stop:
        for msg in msgs:
            result = append(msg)
            if hasattr(result, "__await__"):
                await result  # a roll to the next CommitLog file
        done += len(msgs)
        await asyncio.sleep(0)
    return (clock() - t0) / done * 1e6


async def compare(trees: list[Path], rounds: int, puts: int, seconds: float) -> list[list[float]]:
    loaded = [import_tree(tree) for tree in trees]
    scratch = Path(tempfile.mkdtemp(prefix="put-ab-"))
    stores: list[Any] = []
    batches: list[list[Any]] = []
    try:
        for i, (bench_store, message_store) in enumerate(loaded):
            store = message_store(bench_store.make_config(scratch / f"store{i}", "ASYNC_FLUSH"))
            await store.start()
            stores.append(store)
            batches.append(bench_store.make_messages(1024))
            for msg in batches[-1]:
                put = appender(store)(msg)
                if hasattr(put, "__await__"):
                    await put
            await store.commit_log.allocator.ready()
        times: list[list[float]] = [[] for _ in trees]
        for n in range(rounds):
            for i in (0, 1) if n % 2 == 0 else (1, 0):  # neither tree always goes first
                if seconds:
                    times[i].append(await sustained(stores[i], batches[i], seconds))
                else:
                    times[i].append(await burst(stores[i], batches[i], puts))
        return times
    finally:
        for store in stores:
            await store.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("first", type=Path)
    ap.add_argument("second", type=Path)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--puts", type=int, default=1000)
    ap.add_argument("--sustained", type=float, default=0.0, metavar="S")
    args = ap.parse_args(argv)
    trees = [args.first.resolve(), args.second.resolve()]
    times = uvloop.run(compare(trees, args.rounds, args.puts, args.sustained))
    for tree, t in zip(trees, times, strict=True):
        t = sorted(t)
        print(f"{tree}: min {t[0]:.3f}  p10 {t[len(t) // 10]:.3f}  median {statistics.median(t):.3f} us a put")
    ratios = sorted(b / a for a, b in zip(*times, strict=True))
    q1, med, q3 = statistics.quantiles(ratios, n=4)
    print(f"second / first, per pair of rounds: median {med:.3f} (quartiles {q1:.3f}, {q3:.3f}), {len(ratios)} pairs")


if __name__ == "__main__":
    main()
