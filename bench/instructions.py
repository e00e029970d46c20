"""Instructions per send, counted by valgrind: `python -m bench.instructions [--auth] [--set K=V] [--batch N]`.

CPU time on a shared virtual machine moves by a third from one round to the next; the number of instructions
the broker executes does not. This runs bench.sendpath's in-process broker (real store, SEND_MESSAGE_V2 frames
fed 64 a read, every reply awaited) under `valgrind --tool=callgrind` twice: both build the same frames, one
sends a fifth of them and the other all, and the difference of their counts over the difference of the sends
is the instructions a message costs, without the start, the frame building or the shutdown. With `--auth`,
the same for a broker with ACL 2.0 on and signed frames (bench.sendpath --auth), and the ratio on / off.

An instruction is not a nanosecond: cache misses and branch mispredictions are not counted, so the CPU time
ratio of bench.sendpath --auth on a quiet machine is the figure for users; this one is for comparing code.
Counts are those of the main process (the store's threads included, not the index helper's process). Needs
valgrind (Debian's package); about a minute a side on two cores.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import re
import shutil
import subprocess
import sys

from bench import sendpath
from broker.transport.loop import run

__all__ = ["callgrind_count", "main"]

_COLLECTED = re.compile(r"Collected : (\d+)")


async def _child(args: argparse.Namespace) -> None:
    path = await sendpath._open(args, auth=args.auth)
    try:
        reads = _sent_reads(len(path.reads), args.share)
        path.reads = path.reads[:reads]
        path.frames = reads * args.per_read
        path.messages = path.frames * args.batch
        await path.round()
    finally:
        await path.close()


def _sent_reads(reads: int, share: int) -> int:
    return reads if share == 5 else reads // 5


def callgrind_count(python_args: list[str]) -> int:
    """Instructions of one `python <python_args>` run under callgrind."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, *python_args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"the run under valgrind failed ({done.returncode}): {done.stderr[-2000:]}")
    return int(found.group(1))


def _count(argv: list[str], auth: bool, share: int) -> int:
    """Instructions of one child run (`share` fifths of the frames sent)."""
    extra = ["--auth"] if auth else []
    return callgrind_count(["-m", __spec__.name, *argv, "--child", "--share", str(share), *extra])


def _per_message(argv: list[str], auth: bool, messages: int, pool: concurrent.futures.Executor) -> float:
    """Instructions a message: the two runs' difference over the difference of the messages they sent."""
    fifth, whole = pool.submit(_count, argv, auth, 1), pool.submit(_count, argv, auth, 5)
    return (whole.result() - fifth.result()) / messages


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=10_240, help="messages the longer run sends")
    parser.add_argument("--flush", default="ASYNC_FLUSH", choices=["ASYNC_FLUSH", "SYNC_FLUSH"])
    parser.add_argument("--per-read", type=int, default=64, help="request frames handed over per read")
    parser.add_argument("--batch", type=int, default=1, help="messages a frame (>1: SEND_BATCH_MESSAGE)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a broker.conf key")
    parser.add_argument("--auth", action="store_true", help="also a broker with ACL 2.0 on; prints on / off")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--share", type=int, default=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run(_child(args))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    passed = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--auth"]
    reads = args.num // (args.per_read * args.batch)
    messages = (_sent_reads(reads, 5) - _sent_reads(reads, 1)) * args.per_read * args.batch
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        off = _per_message(passed, False, messages, pool)
        print(f"{args.flush} send path, {args.batch} a frame: auth off {off:,.0f} instructions a message", flush=True)
        if args.auth:
            on = _per_message(passed, True, messages, pool)
            print(f"auth on {on:,.0f} instructions a message; on / off {on / off:.3f}")


if __name__ == "__main__":
    main()
