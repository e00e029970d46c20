"""mqadmin under a real terminal: data goes to stdout, the progress bar to stderr and only when stderr is a
terminal. Each command runs with its stdout and stderr on pipes or pseudo-terminals (os.openpty), against the
session's NameServer + broker pair, and its output is compared with the same command's output in a pipe."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import termios
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.cli.conftest import MQADMIN, Run
from tests.cli.mqadmin_checks import ok
from tests.interop.interop_harness import BROKER_NAME, ServerPair

TOPIC = "TerminalTopic"
COUNT = 6
ESC = "\x1b"


@pytest.fixture(scope="module")
def sent(pair: ServerPair, mqadmin: Run) -> None:
    """COUNT messages on queue 0 of TOPIC, bodies m0 .. m5."""
    ok(mqadmin("updateTopic", "-b", pair.broker_addr, "-t", TOPIC, "-r", "1", "-w", "1"))
    for i in range(COUNT):
        ok(mqadmin("sendMessage", "-t", TOPIC, "-p", f"m{i}", "-b", BROKER_NAME, "-i", "0"))


class Terminal:
    """A pseudo-terminal 120 columns wide; `text` is everything written to it, read until every writer closed
    it (a reader thread keeps it drained, so a writer never blocks on a full terminal)."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: the last writer closed its end
                return
            if not chunk:
                return
            self._chunks.append(chunk)

    def started(self) -> None:
        """The child has its own copy of the slave end: close ours, so EOF comes when the child exits."""
        os.close(self.slave)
        self._reader.start()

    @property
    def text(self) -> str:
        self._reader.join(timeout=30)
        # the terminal turns "\n" into "\r\n"
        return b"".join(self._chunks).decode(errors="replace").replace("\r\n", "\n")

    def close(self) -> None:
        os.close(self.master)


@contextmanager
def terminals(n: int) -> Iterator[list[Terminal]]:
    ttys = [Terminal() for _ in range(n)]
    try:
        yield ttys
    finally:
        for tty in ttys:
            tty.close()


def run(pair: ServerPair, args: tuple[str, ...], stdout: Terminal | None, stderr: Terminal | None) -> tuple[str, str]:
    """Run mqadmin with stdout and stderr each on a terminal, or on a pipe when None; (stdout, stderr)."""
    env = {**os.environ, "NAMESRV_ADDR": pair.namesrv_addr, "TERM": "xterm-256color", "COLUMNS": "120"}
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(name, None)
    child = subprocess.Popen(
        [str(MQADMIN), *args],
        stdin=subprocess.DEVNULL,
        stdout=stdout.slave if stdout else subprocess.PIPE,
        stderr=stderr.slave if stderr else subprocess.PIPE,
        env=env,
    )
    for tty in (stdout, stderr):
        if tty:
            tty.started()
    out, err = child.communicate(timeout=90)
    assert child.returncode == 0, (out, err, stderr.text if stderr else "")
    return (stdout.text if stdout else out.decode(), stderr.text if stderr else err.decode())


CONSUME = ("consumeMessage", "-t", TOPIC, "-c", str(COUNT))
BY_QUEUE = ("printMsgByQueue", "-t", TOPIC, "-a", BROKER_NAME, "-i", "0", "-p", "true", "-d", "true", "-f", "true")
# each command, and the description of its progress bar
COMMANDS = [(CONSUME, f"consuming {TOPIC}"), (BY_QUEUE, f"reading MessageQueue [topic={TOPIC}")]


def plain(pair: ServerPair, args: tuple[str, ...]) -> str:
    """The command's stdout with stdout and stderr both pipes: no progress anywhere, nothing on stderr."""
    out, err = run(pair, args, None, None)
    assert err == ""
    assert ESC not in out
    return out


def test_plain_output_is_the_data(pair: ServerPair, sent: None) -> None:
    out = plain(pair, CONSUME)
    assert [line for line in out.splitlines() if line.startswith("Message Body:")] == [
        f"Message Body:       m{i}" for i in range(COUNT)
    ]
    assert out.endswith(f"Consumed {COUNT} message(s) from {TOPIC}\n")
    out = plain(pair, BY_QUEUE)
    assert [line.rsplit("BODY: ", 1)[1] for line in out.splitlines() if line.startswith("MSGID:")] == [
        f"m{i}" for i in range(COUNT)
    ]
    assert out.splitlines()[-1].split() == ["Tag:", "Count:", str(COUNT)]


@pytest.mark.parametrize(("args", "bar"), COMMANDS, ids=["consumeMessage", "printMsgByQueue"])
def test_piped_stdout_is_whole_when_stderr_is_a_terminal(
    pair: ServerPair, sent: None, args: tuple[str, ...], bar: str
) -> None:
    expected = plain(pair, args)
    with terminals(1) as (tty,):
        out, err = run(pair, args, None, tty)
    assert out == expected
    # the bar was on the terminal, and none of it reached stdout
    assert bar in err and ESC in err
    assert "Message Body" not in err and "MSGID" not in err


@pytest.mark.parametrize(("args", "bar"), COMMANDS, ids=["consumeMessage", "printMsgByQueue"])
def test_terminal_stdout_gets_the_data_and_no_bar(
    pair: ServerPair, sent: None, args: tuple[str, ...], bar: str
) -> None:
    """stdout a terminal, stderr a pipe: the data on the terminal as in a pipe, no bar anywhere."""
    expected = plain(pair, args)
    with terminals(1) as (tty,):
        out, err = run(pair, args, tty, None)
    assert out == expected
    assert err == ""


@pytest.mark.parametrize(("args", "bar"), COMMANDS, ids=["consumeMessage", "printMsgByQueue"])
def test_two_terminals_keep_data_and_bar_apart(pair: ServerPair, sent: None, args: tuple[str, ...], bar: str) -> None:
    """stdout and stderr on two terminals: each line of data on stdout's, the bar only on stderr's."""
    expected = plain(pair, args)
    with terminals(2) as (tty_out, tty_err):
        out, err = run(pair, args, tty_out, tty_err)
    assert out == expected
    assert bar in err and ESC in err
    assert "Message Body" not in err and "MSGID" not in err
