"""fastjson's dialect of JSON: read it, and write it compactly (wire bodies) or pretty (config files).

Java RocketMQ serialises with fastjson, which writes integer map keys unquoted (`{0:"ip:port"}`) and
objects used as map keys as JSON objects (`{{"brokerName":"b","queueId":0,"topic":"T"}:5}`). NameServer
routes, admin bodies (ConsumeStats, ResetOffsetBody) and the broker's config files all carry these, so
the protocol bodies, the NameServer and the store's config files share this one reader and writer.
Standard JSON is tried first with orjson (in C); the dialect parser only runs when orjson refuses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

import orjson

__all__ = ["FastjsonError", "ObjectKey", "dumps", "dumps_pretty", "loads"]

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_INT_KEY = re.compile(r"-?\d+L?")  # fastjson may write a Long key with an L suffix (WriteClassName)
MAX_DEPTH = 200  # hostile input must not exhaust the interpreter's recursion limit


class FastjsonError(ValueError):
    """The text is neither standard JSON nor fastjson's dialect of it."""


class ObjectKey(tuple[tuple[str, Any], ...]):
    """A map key that fastjson wrote as a JSON object (e.g. a MessageQueue), hashable and sorted by name."""

    __slots__ = ()

    @classmethod
    def of(cls, mapping: dict[str, Any]) -> ObjectKey:
        return cls(sorted((str(k), _freeze(v)) for k, v in mapping.items()))

    def to_dict(self) -> dict[str, Any]:
        return {k: _thaw(v) for k, v in self}


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return ObjectKey.of(value)
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, ObjectKey):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


# -- reading ------------------------------------------------------------------------------------------


def loads(
    data: str | bytes | bytearray | memoryview, object_key: Callable[[dict[str, Any]], Hashable] = ObjectKey.of
) -> Any:
    """Parse standard JSON or fastjson output. Unquoted integer keys become ints; object keys are turned
    into hashable values by `object_key` (ObjectKey by default)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode()
        except UnicodeDecodeError as exc:
            raise FastjsonError(f"not UTF-8: {exc.reason}") from None
    else:
        text = data
    parser = _Parser(text, object_key)
    value = parser.value()
    parser.skip_ws()
    if parser.pos != len(text):
        raise parser.fail("trailing characters")
    return value


class _Parser:
    __slots__ = ("depth", "object_key", "pos", "text")

    def __init__(self, text: str, object_key: Callable[[dict[str, Any]], Hashable]) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0
        self.object_key = object_key

    def fail(self, what: str) -> FastjsonError:
        return FastjsonError(f"bad JSON at offset {self.pos}: {what}")

    def skip_ws(self) -> None:
        m = _WS.match(self.text, self.pos)
        self.pos = m.end() if m else self.pos

    def value(self) -> Any:
        self.skip_ws()
        text, pos = self.text, self.pos
        if pos >= len(text):
            raise self.fail("unexpected end")
        ch = text[pos]
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.array()
        if ch == '"':
            return self.string()
        for word, val in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, pos):
                self.pos = pos + len(word)
                return val
        m = _NUMBER.match(text, pos)
        if not m:
            raise self.fail(f"unexpected {ch!r}")
        self.pos = m.end()
        return float(m.group()) if m.group(1) or m.group(2) else int(m.group())

    def string(self) -> str:
        try:
            s, end = scanstring(self.text, self.pos + 1, True)
        except ValueError as exc:
            raise self.fail(f"bad string ({exc})") from None
        self.pos = end
        return str(s)

    def key(self) -> Hashable:
        ch = self.text[self.pos] if self.pos < len(self.text) else ""
        if ch == '"':
            return self.string()
        if ch == "{":
            return self.object_key(self.obj())
        m = _INT_KEY.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            return int(m.group().rstrip("L"))
        raise self.fail("expected a key")

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail("nesting too deep")
        self.pos += 1
        self.skip_ws()

    def _next(self, close: str) -> bool:
        """After an item: True when the container closes here, False after a comma."""
        self.skip_ws()
        if self.text.startswith(",", self.pos):
            self.pos += 1
            return False
        if self.text.startswith(close, self.pos):
            self.pos += 1
            self.depth -= 1
            return True
        raise self.fail(f"expected ',' or '{close}'")

    def obj(self) -> dict[Any, Any]:
        self._enter()
        result: dict[Any, Any] = {}
        if self.text.startswith("}", self.pos):
            self.pos += 1
            self.depth -= 1
            return result
        while True:
            self.skip_ws()
            k = self.key()
            self.skip_ws()
            if not self.text.startswith(":", self.pos):
                raise self.fail("expected ':'")
            self.pos += 1
            result[k] = self.value()
            if self._next("}"):
                return result

    def array(self) -> list[Any]:
        self._enter()
        result: list[Any] = []
        if self.text.startswith("]", self.pos):
            self.pos += 1
            self.depth -= 1
            return result
        while True:
            result.append(self.value())
            if self._next("]"):
                return result


# -- writing ------------------------------------------------------------------------------------------


def dumps(value: Any, *, quote_int_keys: bool = False) -> bytes:
    """Compact JSON as fastjson writes it: no whitespace (Go cuts route text between braces), integer keys
    unquoted unless `quote_int_keys` (what the NameServer sends clients of V4_9_4 and later), object keys
    written as objects. Values or keys with `to_obj()` are written as what it returns; dicts keep order."""
    out: list[bytes] = []
    _dump(value, out, quote_int_keys)
    return b"".join(out)


def _dump(value: Any, out: list[bytes], quote: bool) -> None:
    if isinstance(value, dict):
        out.append(b"{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(b",")
            if isinstance(key, str):
                out.append(orjson.dumps(key))
            elif isinstance(key, int) and not isinstance(key, bool):
                out.append(b'"%d"' % key if quote else b"%d" % key)
            elif isinstance(key, ObjectKey):
                _dump(key.to_dict(), out, quote)
            else:
                _dump(key, out, quote)
            out.append(b":")
            _dump(item, out, quote)
        out.append(b"}")
    elif isinstance(value, ObjectKey):
        _dump(value.to_dict(), out, quote)
    elif isinstance(value, list | tuple):
        out.append(b"[")
        for i, item in enumerate(value):
            if i:
                out.append(b",")
            _dump(item, out, quote)
        out.append(b"]")
    elif hasattr(value, "to_obj"):
        _dump(value.to_obj(), out, quote)
    else:
        try:
            out.append(orjson.dumps(value))
        except TypeError as exc:
            raise TypeError(f"cannot write {type(value).__name__} as JSON") from exc


def dumps_pretty(data: Any) -> str:
    """Serialise like fastjson's `toJSONString(obj, PrettyFormat)`, the format of the broker's config files.

    String-keyed maps put each entry on its own line; maps with int or object keys are written inline
    with the closing brace on a new line, as fastjson's MapSerializer does. None values in maps are
    omitted (fastjson's default without WriteMapNullValue); keys are sorted (ints numerically).
    """
    out: list[str] = []
    _write_pretty(out, data, 0)
    return "".join(out)


def _sort_key(k: Any) -> tuple[int, Any]:
    if isinstance(k, str):
        return (2, k)
    if isinstance(k, bool) or not isinstance(k, int):
        return (1, repr(k))
    return (0, k)


def _write_pretty(out: list[str], value: Any, indent: int) -> None:
    if isinstance(value, dict):
        _write_pretty_map(out, value, indent)
    elif isinstance(value, ObjectKey):
        _write_pretty_map(out, value.to_dict(), indent)
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        out.append("[")
        pad = "\n" + "\t" * (indent + 1)
        for i, item in enumerate(value):
            if i:
                out.append(",")
            out.append(pad)
            _write_pretty(out, item, indent + 1)
        out.append("\n" + "\t" * indent + "]")
    elif isinstance(value, str):
        out.append(orjson.dumps(value).decode())  # UTF-8 as is, control characters escaped, like fastjson
    elif value is None or isinstance(value, bool):
        out.append("null" if value is None else "true" if value else "false")
    elif isinstance(value, int):
        out.append(str(value))  # not orjson: Java longs fit, but nothing here should cap the range
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"cannot write {value!r} as JSON")
        out.append(repr(value))
    else:
        raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _write_pretty_map(out: list[str], mapping: dict[Any, Any], indent: int) -> None:
    items = [(k, v) for k, v in mapping.items() if v is not None]
    if not items:
        out.append("{}")
        return
    items.sort(key=lambda kv: _sort_key(kv[0]))
    out.append("{")
    pad = "\n" + "\t" * (indent + 1)
    for i, (k, v) in enumerate(items):
        if i:
            out.append(",")
        if isinstance(k, str):
            out.append(pad)
            out.append(orjson.dumps(k).decode())
        elif isinstance(k, ObjectKey):
            _write_pretty_map(out, k.to_dict(), indent + 1)
        elif isinstance(k, int) and not isinstance(k, bool):
            out.append(str(k))
        else:
            raise TypeError(f"unsupported map key {k!r}")
        out.append(":")
        _write_pretty(out, v, indent + 1)
    out.append("\n" + "\t" * indent + "}")
