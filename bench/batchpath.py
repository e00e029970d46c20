"""Broker CPU per message of the batch send path beside the single send, in one process:
`python -m bench.batchpath [--batch 32] [--per-read 8] [--num N] [--rounds R] [--flush F] [--base TREE]`.

An in-process BrokerController (real store in a temp dir, no NameServer, as bench.sendpath builds it) gets,
through a server connection whose transport only counts the reply bytes, in alternating rounds:

- **batch**: SEND_BATCH_MESSAGE (320) frames of `--batch` messages of 1 KiB (bench.sendpath's batch frames:
  each inner message with KEYS, TAGS, WAIT and its own UNIQ_KEY, WAIT=true in the header, as the Java
  client's batch send), `--per-read` frames a read: the broker's body decode, checks, CommitLog append,
  ConsumeQueue dispatch and reply;
- **single**: SEND_MESSAGE_V2 frames of one such message, 64 a read.

Each round reports CPU per message two ways: the process (every thread: the event loop, the flush and
allocation threads) and the event loop's thread alone (where the send path runs). Rounds alternate, so
both paths see the same minutes of a loaded host; the least disturbed round (min) is the one to compare
code with, the median says how much the host moved.

`--pull`: instead, the consume path W4 exercises: a backlog of `--num` messages sent as batches (as W4 fills
it), then rounds of PULL_MESSAGE (11) frames of 32 messages (as a push consumer asks: commit-offset,
suspend and subscription flags, subscription "*"), `--per-read` pulls a read, each round reading the whole
backlog from offset 0: CPU per message served (the store read, the reply's header and body join).

`--base TREE`: instead, the batch path (with `--pull`: the consume path) of two source trees (TREE, e.g.
a `git archive` of an earlier commit, and this one), each tree's `broker` package imported into this
process in turn and given its own broker, rounds alternating between them; prints each tree's times and
the per-pair ratio (this / TREE) of the loop thread's CPU, which the host's speed swings cannot fake.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.broker import QUEUES, TOPIC
from bench.sendpath import CountingTransport, _batch_frames, _frames
from broker.protocol.command import RemotingCommand, encode_binary

__all__ = ["main"]


@dataclass
class FedBroker:
    """One broker and one connection into it, fed prepared reads."""

    name: str
    broker: Any
    root: Path
    conn: Any
    transport: CountingTransport
    reads: list[bytes]
    frames_per_read: int
    per_frame: int
    reply_bytes: int = 150  # at least this much is written back per request frame (a send's reply ~200 B)

    @property
    def messages(self) -> int:
        return len(self.reads) * self.frames_per_read * self.per_frame


def _broker_modules(tree: Path | None) -> tuple[Any, Any]:
    """BrokerController and load_broker_config of `tree` (None: the tree this command runs from)."""
    if tree is None:
        from broker.server.broker import BrokerController
        from broker.server.config import load_broker_config

        return BrokerController, load_broker_config
    for name in [m for m in sys.modules if m.split(".")[0] == "broker"]:
        del sys.modules[name]
    sys.path.insert(0, str(tree))
    try:
        import broker
        from broker.server.broker import BrokerController
        from broker.server.config import load_broker_config
    finally:
        sys.path.remove(str(tree))
    if not Path(broker.__file__).resolve().is_relative_to(tree):
        raise SystemExit(f"{tree}: imported broker from {broker.__file__} instead")
    return BrokerController, load_broker_config


async def _open(
    name: str, modules: tuple[Any, Any], flush: str, reads: list[bytes], per_read: int, per_frame: int
) -> FedBroker:
    controller, load = modules
    root = Path(tempfile.mkdtemp(prefix="bench-batchpath-"))
    broker = controller(
        load(
            {
                "brokerName": "batchpath",
                "listenPort": "0",
                "haListenPort": "0",
                "brokerIP1": "127.0.0.1",
                "storePathRootDir": str(root / "store"),
                "flushDiskType": flush,
                "mappedFileSizeCommitLog": str(1 << 30),
            }
        )
    )
    await broker.start()
    conn = broker.server._create_protocol()
    transport = CountingTransport()
    conn.connection_made(transport)
    path = FedBroker(name, broker, root, conn, transport, reads, per_read, per_frame)
    conn.data_received(reads[0])  # creates the topic (auto-creation from TBW102)
    await asyncio.sleep(0.5)
    return path


async def _round(path: FedBroker) -> tuple[float, float]:
    """(process, loop thread) CPU µs per message of one pass over the path's reads."""
    transport = path.transport
    expected = len(path.reads) * path.frames_per_read * path.reply_bytes  # every reply
    before = transport.written
    cpu, thread = time.process_time(), time.thread_time()
    for data in path.reads:
        path.conn.data_received(data)
        await asyncio.sleep(0)  # one loop iteration: the reput pass, group commit callbacks
    while transport.written - before < expected:
        await asyncio.sleep(0.001)
    n = path.messages
    return (time.process_time() - cpu) / n * 1e6, (time.thread_time() - thread) / n * 1e6


async def _close(path: FedBroker) -> None:
    await path.broker.shutdown()
    shutil.rmtree(path.root, ignore_errors=True)


def _pull_reads(per_queue: int, per_read: int) -> list[bytes]:
    """PULL_MESSAGE frames of 32 over every queue's first `per_queue` messages, `per_read` frames a read."""
    frames: list[bytes] = []
    for offset in range(0, per_queue, 32):
        for q in range(QUEUES):
            ext = {
                "consumerGroup": "BenchCG",
                "topic": TOPIC,
                "queueId": str(q),
                "queueOffset": str(offset),
                "maxMsgNums": "32",
                "sysFlag": "7",  # commit offset, suspend, subscription: a push consumer's pull
                "commitOffset": str(offset),
                "suspendTimeoutMillis": "15000",
                "subscription": "*",
                "subVersion": "0",
                "expressionType": "TAG",
            }
            frames.append(encode_binary(RemotingCommand(code=11, opaque=len(frames) + 1, ext_fields=ext)))
    return [b"".join(frames[i : i + per_read]) for i in range(0, len(frames), per_read)]


async def _open_backlog(name: str, modules: tuple[Any, Any], args: argparse.Namespace) -> FedBroker:
    """A broker holding a backlog of `--num` messages sent as batches, and a consumer's connection into it
    fed PULL_MESSAGE frames of 32 over every queue."""
    fill = [_batch_frames(8, 1 + r * 8, args.batch) for r in range(args.num // args.batch // 8)]
    sender = await _open(name, modules, args.flush, fill, 8, args.batch)
    for data in fill[1:]:
        sender.conn.data_received(data)
        await asyncio.sleep(0)
    store = sender.broker.store
    per_queue = min(store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES))
    per_queue -= per_queue % 32
    conn = sender.broker.server._create_protocol()
    transport = CountingTransport()
    conn.connection_made(transport)
    reads = _pull_reads(per_queue, args.per_read)
    # a found pull's reply carries 32 records of ~1.2 KiB
    return FedBroker(name, sender.broker, sender.root, conn, transport, reads, args.per_read, 32, 32 * 1000)


async def _pulls(args: argparse.Namespace) -> None:
    fed = await _open_backlog("pull", _broker_modules(None), args)
    try:
        results = [await _round(fed) for _ in range(args.rounds)]
    finally:
        await _close(fed)
    print(f"PULL_MESSAGE of 32, {args.per_read} pulls a read, {fed.messages} messages a round, {args.rounds} rounds:")
    print(
        f"  CPU us per message served: process {_summary([r[0] for r in results])}   "
        f"loop thread {_summary([r[1] for r in results])}"
    )


def _summary(values: list[float]) -> str:
    return f"min {min(values):.2f} median {statistics.median(values):.2f}"


async def _side_by_side(args: argparse.Namespace) -> None:
    batch_reads = [
        _batch_frames(args.per_read, 1 + r * args.per_read, args.batch)
        for r in range(args.num // (args.per_read * args.batch))
    ]
    single_reads = [_frames(64, 1 + r * 64) for r in range(args.num // 64)]
    modules = _broker_modules(None)
    paths = [
        await _open("batch", modules, args.flush, batch_reads, args.per_read, args.batch),
        await _open("single", modules, args.flush, single_reads, 64, 1),
    ]
    times: dict[str, list[tuple[float, float]]] = {p.name: [] for p in paths}
    try:
        for n in range(args.rounds):
            for path in paths if n % 2 == 0 else paths[::-1]:
                times[path.name].append(await _round(path))
    finally:
        for path in paths:
            await _close(path)
    print(f"{args.flush}, {args.num} messages a round, {args.rounds} rounds each, alternating (CPU us per message):")
    for name, label in (("batch", f"batch {args.batch} x{args.per_read} a read"), ("single", "single x64 a read")):
        proc = [t[0] for t in times[name]]
        loop = [t[1] for t in times[name]]
        print(f"  {label:24} process {_summary(proc)}   loop thread {_summary(loop)}")
    ratios = sorted(b[1] / s[1] for b, s in zip(times["batch"], times["single"], strict=True))
    print(f"  batch / single, loop thread, per pair: median {statistics.median(ratios):.3f}")


async def _ab(args: argparse.Namespace) -> None:
    reads = [
        _batch_frames(args.per_read, 1 + r * args.per_read, args.batch)
        for r in range(args.num // (args.per_read * args.batch))
    ]
    here = Path(__file__).resolve().parent.parent
    trees = [args.base.resolve(), here]
    paths = []
    for tree in trees:
        if args.pull:
            paths.append(await _open_backlog(str(tree), _broker_modules(tree), args))
        else:
            paths.append(await _open(str(tree), _broker_modules(tree), args.flush, reads, args.per_read, args.batch))
    times: list[list[tuple[float, float]]] = [[], []]
    try:
        for n in range(args.rounds):
            for i in (0, 1) if n % 2 == 0 else (1, 0):
                times[i].append(await _round(paths[i]))
    finally:
        for path in paths:
            await _close(path)
    what = "PULL_MESSAGE of 32" if args.pull else f"batch {args.batch}"
    print(f"{args.flush} {what} x{args.per_read} a read, {paths[0].messages} messages a round, {args.rounds} rounds:")
    for tree, t in zip(trees, times, strict=True):
        print(f"  {tree}: process {_summary([x[0] for x in t])}   loop thread {_summary([x[1] for x in t])} us/msg")
    ratios = sorted(b[1] / a[1] for a, b in zip(*times, strict=True))
    q1, med, q3 = statistics.quantiles(ratios, n=4)
    print(f"  this / base, loop thread, per pair: median {med:.3f} (quartiles {q1:.3f}-{q3:.3f})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=32_768, help="messages a round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--flush", default="ASYNC_FLUSH", choices=["ASYNC_FLUSH", "SYNC_FLUSH"])
    parser.add_argument("--batch", type=int, default=32, help="messages a SEND_BATCH_MESSAGE frame")
    parser.add_argument("--per-read", type=int, default=8, help="batch frames handed over per read")
    parser.add_argument("--base", type=Path, help="compare the batch path with this source tree's")
    parser.add_argument("--pull", action="store_true", help="the consume path: PULL_MESSAGE of 32 from a backlog")
    args = parser.parse_args(argv)
    from broker.transport.loop import run

    run(_ab(args) if args.base else _pulls(args) if args.pull else _side_by_side(args))


if __name__ == "__main__":
    main()
