"""Parser for Java `.properties` files (namesrv.properties, broker.conf), as java.util.Properties reads them.

Called by the CLI entry points (`-c FILE`) and by anything reading RocketMQ-style property text,
e.g. the body of UPDATE_BROKER_CONFIG. Rules follow Properties.load: `#`/`!` comment lines, keys
ending at the first unescaped `=`, `:` or whitespace, backslash line continuations (leading
whitespace of the next line dropped), and the escapes `\\t \\n \\r \\f \\uXXXX`; later keys win.
"""

from __future__ import annotations

import logging
import os

from broker.config.errors import ConfigError

__all__ = ["load_properties", "parse_properties"]

log = logging.getLogger(__name__)

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read and parse a properties file. Raises ConfigError when it cannot be read or parsed."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {os.fspath(path)}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        # java.util.Properties.load(InputStream) reads ISO-8859-1; accept such files too.
        text = raw.decode("latin-1")
    try:
        return parse_properties(text)
    except ConfigError as exc:
        raise ConfigError(f"{os.fspath(path)}: {exc}") from None


def parse_properties(text: str) -> dict[str, str]:
    """Parse properties text into an ordered dict of key -> value (strings, escapes resolved)."""
    result: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split_key_value(line, number)
        result[key] = value
    return result


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continuation lines, drop blanks and comments; returns (first line number, logical line)."""
    lines: list[tuple[int, str]] = []
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    index = 0
    while index < len(natural):
        number = index + 1
        current = natural[index].lstrip(_WHITESPACE)
        index += 1
        if not current or current[0] in "#!":
            continue
        while _ends_with_continuation(current) and index < len(natural):
            current = current[:-1] + natural[index].lstrip(_WHITESPACE)
            index += 1
        if _ends_with_continuation(current):
            current = current[:-1]  # a continuation on the last line continues into nothing
        lines.append((number, current))
    return lines


def _ends_with_continuation(line: str) -> bool:
    # An odd number of trailing backslashes: the last one escapes the line end.
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _split_key_value(line: str, number: int) -> tuple[str, str]:
    pos = 0
    size = len(line)
    while pos < size:
        char = line[pos]
        if char == "\\":
            pos += 2
            continue
        if char in "=:" or char in _WHITESPACE:
            break
        pos += 1
    key_raw = line[:pos]
    # Separator: whitespace, then at most one '=' or ':', then whitespace.
    while pos < size and line[pos] in _WHITESPACE:
        pos += 1
    if pos < size and line[pos] in "=:":
        pos += 1
    while pos < size and line[pos] in _WHITESPACE:
        pos += 1
    return _unescape(key_raw, number), _unescape(line[pos:], number)


def _unescape(raw: str, number: int) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    pos = 0
    size = len(raw)
    while pos < size:
        char = raw[pos]
        if char != "\\" or pos + 1 >= size:
            out.append(char)
            pos += 1
            continue
        nxt = raw[pos + 1]
        if nxt == "u":
            digits = raw[pos + 2 : pos + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"line {number}: malformed \\uxxxx escape {raw[pos : pos + 6]!r}")
            out.append(chr(int(digits, 16)))
            pos += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        pos += 2
    return "".join(out)
