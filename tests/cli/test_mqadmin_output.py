"""broker.cli.mqadmin.output's stdout while a bar is shown on the same terminal: whole lines go out, unchanged,
between the bar being taken down and drawn again; the start of a line waits for its end."""

from __future__ import annotations

import io
from typing import Any, cast

from broker.cli.mqadmin import output


class Recorder(io.StringIO):
    """The real stdout and the bar in one log: ("out", text) and ("bar", "stop" | "start")."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str]] = []

    def write(self, text: str) -> int:
        self.log.append(("out", text))
        return len(text)

    def stop(self) -> None:
        self.log.append(("bar", "stop"))

    def start(self) -> None:
        self.log.append(("bar", "start"))


def held() -> tuple[output._HeldLines, Recorder]:
    rec = Recorder()
    return output._HeldLines(cast(Any, rec), rec), rec


def test_whole_lines_go_out_between_stop_and_start() -> None:
    lines, rec = held()
    print("OffsetID:           1", file=lines)
    print("Message Body:       m0", file=lines)
    print("partial", end="", file=lines)
    assert rec.log == []  # held until the next redraw
    assert lines.write_out()
    assert rec.log == [
        ("bar", "stop"),
        ("out", "OffsetID:           1\nMessage Body:       m0\n"),
        ("bar", "start"),
    ]
    assert not lines.write_out()  # only the start of a line is left: nothing to write, the bar stays
    print(" line", file=lines)
    assert lines.write_out() and rec.log[-2] == ("out", "partial line\n")
    print("end without newline", end="", file=lines)
    assert lines.rest() == "end without newline" and lines.rest() == ""


def test_many_held_characters_go_out_at_once() -> None:
    lines, rec = held()
    line = "x" * 99 + "\n"
    for _ in range(output.HOLD_CHARS // len(line)):
        lines.write(line)
    assert rec.log == []
    lines.write(line)
    assert [entry for entry in rec.log if entry[0] == "bar"] == [("bar", "stop"), ("bar", "start")]
    assert "".join(text for kind, text in rec.log if kind == "out") == line * (output.HOLD_CHARS // len(line) + 1)


def test_flush_writes_out() -> None:
    lines, rec = held()
    print("now", file=lines, flush=True)
    assert ("out", "now\n") in rec.log
