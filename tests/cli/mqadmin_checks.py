"""Assertions shared by the mqadmin tests: a command succeeded, failed with a message, or needs a request code
the broker does not answer yet (then the test is an expected failure naming that code)."""

from __future__ import annotations

import re
import subprocess

import pytest

__all__ = ["fails", "ok", "ok_or_missing", "table"]


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args} failed ({done.returncode}):\n{done.stderr}{done.stdout}"
    assert done.stderr == "", done.stderr
    return done.stdout


def ok_or_missing(done: subprocess.CompletedProcess[str], code: int) -> str:
    """As ok(), except that a server answering "request type <code> not supported" makes the test xfail."""
    if done.returncode != 0 and f"request type {code} not supported" in done.stderr:
        pytest.xfail(f"the broker/NameServer does not answer request code {code} yet")
    return ok(done)


def fails(done: subprocess.CompletedProcess[str], says: str, code: int = 1) -> None:
    assert done.returncode == code, (
        f"{done.args}: expected exit {code}, got {done.returncode}\n{done.stderr}{done.stdout}"
    )
    assert says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def table(out: str, first: str) -> list[list[str]]:
    """The rows (split on whitespace) of the lines that start with `first`."""
    return [line.split() for line in out.splitlines() if re.match(rf"^{re.escape(first)}\s", line)]
