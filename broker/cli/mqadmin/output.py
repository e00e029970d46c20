"""How mqadmin prints: a message's fields (RocketMQ's queryMsgById layout), fixed-width table rows, and a
progress bar on stderr for long commands.

Data always goes to stdout and the bar only ever to stderr; `progress()` is the one place that decides. The
bar is shown only when stderr is a terminal, so scripts get clean output, and piped stdout is the same
whatever stderr is. rich's own way of printing under a bar is not used: it sends stdout through the bar's
console, that is to stderr, and wraps long lines.
"""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, TaskID

from broker.cli.mqadmin.timestamps import format_ms
from broker.client import MessageExt

__all__ = ["Bar", "body_text", "print_message", "progress"]

# how often a shown bar is redrawn; when stdout is a terminal, also how long a printed line may wait
REDRAW = 0.1
# when stdout is a terminal: this many characters held are written at once, not at the next redraw
HOLD_CHARS = 1 << 16


def body_text(msg: MessageExt, charset: str = "utf-8") -> str:
    body = msg.uncompressed_body()
    try:
        return body.decode(charset)
    except (UnicodeDecodeError, LookupError):
        return body.hex()


def print_message(msg: MessageExt, *, print_body: bool = True, charset: str = "utf-8") -> None:
    rows: list[tuple[str, object]] = [
        ("OffsetID", msg.offset_msg_id),
        ("MsgId", msg.msg_id),
        ("Topic", msg.topic),
        ("Tags", f"[{msg.tags or ''}]"),
        ("Keys", f"[{' '.join(msg.keys)}]"),
        ("Queue ID", msg.queue_id),
        ("Queue Offset", msg.queue_offset),
        ("CommitLog Offset", msg.commit_log_offset),
        ("Reconsume Times", msg.reconsume_times),
        ("Born Timestamp", format_ms(msg.born_timestamp)),
        ("Store Timestamp", format_ms(msg.store_timestamp)),
        ("Born Host", "{}:{}".format(*msg.born_host)),
        ("Store Host", "{}:{}".format(*msg.store_host)),
        ("System Flag", msg.sys_flag),
        ("Properties", msg.properties),
    ]
    if print_body:
        rows.append(("Message Body", body_text(msg, charset)))
    for name, value in rows:
        print(f"{name + ':':<20}{value}")
    print()


class Bar:
    """One progress task; `advance()` after each unit of work."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self._progress = progress
        self._task = task

    def advance(self, amount: float = 1) -> None:
        self._progress.advance(self._task, amount)

    def total(self, total: float) -> None:
        self._progress.update(self._task, total=total)


@contextmanager
def progress(what: str, total: float | None) -> Iterator[Bar]:
    """A transient bar on stderr while the block runs, when stderr is a terminal; else no output at all.

    Call it from a coroutine: the event loop redraws the bar on the thread that prints the data, so the two
    never write at the same time.
    """
    bars = Progress(
        console=Console(stderr=True),
        transient=True,
        auto_refresh=False,
        redirect_stdout=False,
        redirect_stderr=False,
        disable=not sys.stderr.isatty(),
    )
    # the description is rich markup: "MessageQueue [topic=...]" would be read as a tag and vanish
    bar = Bar(bars, bars.add_task(escape(what), total=total))
    if bars.disable:
        yield bar
        return
    data = sys.stdout
    held = _HeldLines(bars, data) if data.isatty() else None
    loop = asyncio.get_running_loop()
    tick: asyncio.TimerHandle | None = None

    def redraw() -> None:
        nonlocal tick
        if held is None or not held.write_out():
            bars.refresh()
        tick = loop.call_later(REDRAW, redraw)

    try:
        with bars:
            tick = loop.call_later(REDRAW, redraw)
            if held is not None:
                sys.stdout = held
            try:
                yield bar
            finally:
                tick.cancel()
                sys.stdout = data
    finally:
        if held is not None:  # the bar is gone: what is still held goes straight out
            data.write(held.rest())
            data.flush()


class _HeldLines(io.TextIOBase):
    """sys.stdout while a bar is shown and stdout is a terminal too (most likely the bar's own screen).

    Printed lines are held, then written to the real stdout with the bar taken down meanwhile: at the next
    redraw, or at once when many are held. So a line never lands in the middle of the bar, and is not
    changed on the way.
    """

    def __init__(self, bars: Progress, out: TextIO) -> None:
        self._bars = bars
        self._out = out
        self._held: list[str] = []
        self._chars = 0
        self._whole = False  # a whole line is held

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._out.isatty()

    def fileno(self) -> int:
        return self._out.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._out.encoding

    def write(self, text: str) -> int:
        self._held.append(text)
        self._chars += len(text)
        self._whole = self._whole or "\n" in text
        if self._chars >= HOLD_CHARS:
            self.write_out()
        return len(text)

    def flush(self) -> None:
        self.write_out()

    def write_out(self) -> bool:
        """Write the whole lines held, if any, the bar taken down meanwhile; the start of a line stays held."""
        if not self._whole:
            return False
        lines, _, rest = "".join(self._held).rpartition("\n")
        self._held, self._chars, self._whole = [rest], len(rest), False
        self._bars.stop()
        try:
            self._out.write(lines + "\n")
            self._out.flush()
        finally:
            self._bars.start()
        return True

    def rest(self) -> str:
        """Everything still held, to write once the bar is gone."""
        rest = "".join(self._held)
        self._held, self._chars, self._whole = [], 0, False
        return rest
