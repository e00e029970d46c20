"""A command run in a pseudo-terminal, as a user runs `make run` in theirs: Ctrl-C is a byte typed into it.

The command becomes a session leader with the pty as its controlling terminal, so the kernel's line
discipline turns b"\\x03" into SIGINT for whatever process group holds the terminal's foreground, exactly
as in a real shell session. Output is collected by a reader thread.
"""

from __future__ import annotations

import fcntl
import os
import pty
import subprocess
import termios
import threading
import time
from pathlib import Path

__all__ = ["TerminalRun"]


def _take_terminal() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class TerminalRun:
    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        master, slave = pty.openpty()
        self._master = master
        self.proc = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_take_terminal,
        )
        os.close(slave)
        self._chunks: list[bytes] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._master, 4096)
            except OSError:  # EIO: every process holding the terminal has exited
                return
            if not data:
                return
            with self._lock:
                self._chunks.append(data)

    @property
    def output(self) -> str:
        with self._lock:
            return b"".join(self._chunks).decode(errors="replace").replace("\r\n", "\n")

    def wait_output(self, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if self.proc.poll() is not None:
                self._reader.join(2)
                if text in self.output:
                    break
                raise AssertionError(f"exited {self.proc.returncode} before printing {text!r}:\n{self.output}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} within {timeout} s:\n{self.output}")
            time.sleep(0.05)
        return self.output

    def ctrl_c(self) -> None:
        os.write(self._master, b"\x03")

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        self._reader.join(5)
        os.close(self._master)
