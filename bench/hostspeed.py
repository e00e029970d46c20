"""Host speed probe: `python -m bench.hostspeed [--seconds 3]` counts a pure-Python loop.

The VM this project is measured on runs up to ~1.5x slower in some minutes than in others; printing this
count beside a benchmark tells which kind of minute it ran in (about 20M iterations per 3 s is a normal one).
"""

from __future__ import annotations

import argparse
import time

__all__ = ["main"]


def spin(seconds: float) -> int:
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        count += 1
    return count


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hostspeed", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    print(f"host speed: {spin(args.seconds) / 1e6:.1f}M loop iterations in {args.seconds:g} s")


if __name__ == "__main__":
    main()
