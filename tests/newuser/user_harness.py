"""What a new user runs, run as they run it: `mqadmin` and small SDK programs as subprocesses.

The NameServers and brokers these tests talk to are either in-process (tests/local_cluster.py, when only the
client side is under test) or real `mqnamesrv` / `mqbroker` processes (processes.py). Every program gets the
test's environment without NAMESRV_ADDR unless the test sets it, so a developer's own shell cannot leak in.
"""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BIN", "Outcome", "mqadmin", "python_program", "user_env"]

BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def user_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    env.update(extra)
    return env


async def _run(argv: list[str], env: dict[str, str], timeout: float, cwd: Path | None) -> Outcome:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        raise AssertionError(f"{argv} did not finish in {timeout} s:\n{out.decode()}\n{err.decode()}") from None
    assert proc.returncode is not None
    return Outcome(proc.returncode, out.decode(), err.decode())


async def mqadmin(*args: str, env: dict[str, str] | None = None, timeout: float = 60.0) -> Outcome:
    return await _run([str(BIN / "mqadmin"), *args], user_env() if env is None else env, timeout, None)


async def python_program(
    source: str,
    *,
    env: dict[str, str] | None = None,
    xoptions: tuple[str, ...] = (),
    timeout: float = 60.0,
    cwd: Path | None = None,
) -> Outcome:
    """`python -c source` with the venv's interpreter; `xoptions` become `-X name=value` flags."""
    flags = [arg for x in xoptions for arg in ("-X", x)]
    argv = [sys.executable, *flags, "-c", textwrap.dedent(source)]
    return await _run(argv, user_env() if env is None else env, timeout, cwd)
