"""How mqadmin prints: a message's fields (RocketMQ's queryMsgById layout), fixed-width table rows, and a
progress bar on stderr for long commands (shown only when stderr is a terminal, so scripts and pipes get
clean output)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import Progress, TaskID

from broker.cli.mqadmin.timestamps import format_ms
from broker.client import MessageExt

__all__ = ["Bar", "body_text", "print_message", "progress"]


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
    """A transient bar on stderr while the block runs; disabled (no output at all) when stderr is no TTY."""
    with Progress(console=Console(stderr=True), transient=True, disable=not sys.stderr.isatty()) as bar:
        yield Bar(bar, bar.add_task(what, total=total))
