"""RemotingCommand, the unit of every request and response, and its frame codec (sans-I/O).

Transports (broker.transport) feed received bytes into a `FrameDecoder` and send `encode(cmd)`.
The frame is `int32 length | int32 (serializeType << 24 | headerLen) | header | body`, where the
header is JSON (type 0) or the binary ROCKETMQ layout (type 1). We decode both and always answer in
JSON, the only form ali-ons and the C++ clients can read. This module imports no asyncio.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
import orjson

from broker.protocol._binary_ext import BinaryExtCache
from broker.protocol.codes import (
    CURRENT_VERSION,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LanguageCode,
    SerializeType,
)
from broker.protocol.errors import FrameTooLarge, HeaderError, LocalProtocolError, MalformedFrame

__all__ = [
    "DEFAULT_MAX_FRAME_LENGTH",
    "GATHER_FRAMES_FROM",
    "FrameDecoder",
    "RemotingCommand",
    "decode_frame",
    "encode",
    "encode_binary",
    "ext_value",
    "frame",
]

DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024

# Plain ints for the per-frame paths: on Python 3.11 an attribute lookup on an Enum class goes through
# EnumType.__getattr__'s hook, several times slower than a module constant, and every frame made several.
_JSON = int(SerializeType.JSON)
_ROCKETMQ = int(SerializeType.ROCKETMQ)

_INT = struct.Struct(">i")
_PREFIX = struct.Struct(">ii")
_BINARY_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remarkLen
_EXT_LAYOUTS = BinaryExtCache()
_LANGUAGE_NAMES = {lang.value: lang.name for lang in LanguageCode}
_LANGUAGE_BY_NAME = {lang.name: lang.value for lang in LanguageCode}


@dataclass(slots=True)
class RemotingCommand:
    """One request or response. `ext_fields` maps header keys to strings, exactly as on the wire."""

    code: int
    opaque: int = 0
    flag: int = 0
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    remark: str | None = None
    language: int = LanguageCode.JAVA
    version: int = CURRENT_VERSION
    serialize_type: int = SerializeType.JSON
    # Loop time at which a connection kept this request back (flow control); 0.0 when it was handled
    # in the read that brought it. The send path's waitTimeMillsInSendQueue check reads it.
    received_at: float = 0.0

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def response(
        self, code: int, remark: str | None = None, ext_fields: dict[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """The response to this request: same opaque, response flag set, our language and version."""
        return RemotingCommand(
            code=code,
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            ext_fields=ext_fields if ext_fields is not None else {},
            body=body,
            remark=remark,
        )


def ext_value(value: Any) -> str:
    """Stringify one extFields value the way fastjson would: numbers as digits, booleans lower-case."""
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float):
        return str(value)
    raise HeaderError(f"extFields value of type {type(value).__name__} is not a scalar")


def _json_header(cmd: RemotingCommand) -> bytes:
    # Keys in Java's alphabetical order; extFields values are always strings on output (Go needs it).
    header: dict[str, Any] = {"code": cmd.code}
    if cmd.ext_fields:
        header["extFields"] = cmd.ext_fields
    header["flag"] = cmd.flag
    header["language"] = _LANGUAGE_NAMES.get(cmd.language, "JAVA")
    header["opaque"] = cmd.opaque
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = cmd.version
    return orjson.dumps(header)


def encode(cmd: RemotingCommand) -> bytes:
    """Encode a command as one frame with a JSON header, ready to write to a socket."""
    return frame(_json_header(cmd), cmd.body)


def frame(header: bytes, body: bytes = b"") -> bytes:
    """One frame from an already-encoded JSON header (see `encode`) and a body."""
    if not body:  # most replies: one concatenation
        return _PREFIX.pack(4 + len(header), len(header)) + header
    return b"".join((_PREFIX.pack(4 + len(header) + len(body), len(header)), header, body))


def encode_binary(cmd: RemotingCommand) -> bytes:
    """Encode with the binary ROCKETMQ header (what the Java benchmark client sends)."""
    if not -0x8000 <= cmd.code <= 0x7FFF:
        raise LocalProtocolError(f"code {cmd.code} does not fit the int16 of the ROCKETMQ header")
    remark = cmd.remark.encode() if cmd.remark else b""
    ext = _binary_ext_section(cmd.ext_fields)
    header_len = _BINARY_FIXED.size + len(remark) + 4 + len(ext)
    return b"".join(
        (
            _PREFIX.pack(4 + header_len + len(cmd.body), (_ROCKETMQ << 24) | header_len),
            _BINARY_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, len(remark)),
            remark,
            _INT.pack(len(ext)),
            ext,
            cmd.body,
        )
    )


# Entries are `int16 keyLen | key | int32 valueLen | value`. Built as latin-1 text (character i is byte i)
# from cached key prefixes and length words, then encoded once: a third of the cost of packing each
# entry, which matters to clients sending 14 keys per message. Only for ASCII values, whose length in
# characters is their length in bytes.
_SHORT = 1024
_LENGTH_WORDS = [_INT.pack(n).decode("latin-1") for n in range(_SHORT)]
_KEY_PREFIXES: dict[str, str] = {}


def _key_prefix(key: str) -> str:
    if len(_KEY_PREFIXES) >= 4096:  # keys come from header classes; bound it anyway
        _KEY_PREFIXES.clear()
    raw = key.encode()
    prefix = _KEY_PREFIXES[key] = (struct.pack(">h", len(raw)) + raw).decode("latin-1")
    return prefix


def _binary_ext_section(ext: dict[str, str]) -> bytes:
    values = "".join(ext.values())
    if values.isascii() and len(values) < _SHORT:
        prefix = _KEY_PREFIXES.get
        words = _LENGTH_WORDS
        return "".join(
            [f"{prefix(key) or _key_prefix(key)}{words[len(value)]}{value}" for key, value in ext.items()]
        ).encode("latin-1")
    parts: list[bytes] = []
    for key, value in ext.items():
        k, v = key.encode(), value.encode()
        parts += (struct.pack(">h", len(k)), k, _INT.pack(len(v)), v)
    return b"".join(parts)


_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def _stringify_ext(raw_ext: dict[str, Any]) -> dict[str, str]:
    # Slow path for C++/ali-ons headers that put JSON numbers and booleans in extFields.
    return {key: ext_value(value) for key, value in raw_ext.items() if value is not None}


_I32 = Annotated[int, msgspec.Meta(ge=_I32_MIN, le=_I32_MAX)]


class _WireHeader(msgspec.Struct, gc=False):
    """The JSON header as Java and Go clients send it: every extFields value a string. msgspec checks
    types and ranges in C, so the common case costs one call; anything else takes the lenient path."""

    code: _I32
    opaque: _I32 = 0
    flag: _I32 = 0
    extFields: dict[str, str] = {}  # the wire name
    language: str = "JAVA"
    version: _I32 = 0
    remark: str | None = None


_WIRE_HEADER = msgspec.json.Decoder(_WireHeader)


def _decode_json_header(raw: bytes | memoryview) -> RemotingCommand:
    try:
        h = _WIRE_HEADER.decode(raw)
    except (msgspec.MsgspecError, UnicodeDecodeError):  # msgspec raises the latter for bad UTF-8 in keys
        # Numbers or booleans in extFields (C++, ali-ons), nulls, or a bad header: the lenient decoder
        # accepts the first two and names the fault of the last.
        return _decode_json_header_lenient(raw)
    language = _LANGUAGE_BY_NAME.get(h.language, LanguageCode.OTHER)
    return RemotingCommand(h.code, h.opaque, h.flag, h.extFields, b"", h.remark, language, h.version, _JSON)


def _decode_json_header_lenient(raw: bytes | memoryview) -> RemotingCommand:
    try:
        header = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise HeaderError(f"header is not valid JSON: {exc}") from None
    if type(header) is not dict:
        raise HeaderError("JSON header is not an object")
    get = header.get
    code = get("code")
    opaque = get("opaque", 0)
    flag = get("flag", 0)
    version = get("version", 0)
    # One combined test on the hot path; the loop below only runs to name the culprit.
    if not (
        type(code) is int
        and type(opaque) is int
        and type(flag) is int
        and type(version) is int
        and _I32_MIN <= code <= _I32_MAX
        and _I32_MIN <= opaque <= _I32_MAX
        and _I32_MIN <= flag <= _I32_MAX
        and _I32_MIN <= version <= _I32_MAX
    ):
        if code is None:
            raise HeaderError("JSON header has no 'code'")
        for name, value in (("code", code), ("opaque", opaque), ("flag", flag), ("version", version)):
            if type(value) is not int or not _I32_MIN <= value <= _I32_MAX:
                raise HeaderError(f"header field {name!r} must be a 32-bit integer, got {value!r}")
    language = get("language", "JAVA")
    language_code = _LANGUAGE_BY_NAME.get(language, LanguageCode.OTHER) if type(language) is str else 7
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        raise HeaderError("header field 'remark' must be a string")
    raw_ext = get("extFields")
    ext: dict[str, str]
    if raw_ext is None:
        ext = {}
    elif type(raw_ext) is not dict:
        raise HeaderError("header field 'extFields' must be an object")
    else:
        # orjson hands us a fresh dict: reuse it when every value is already a string (Java, Go).
        ext = raw_ext
        for value in raw_ext.values():
            if type(value) is not str:
                ext = _stringify_ext(raw_ext)
                break
    return RemotingCommand(code, opaque, flag, ext, b"", remark, language_code, version, _JSON)


def _decode_binary_header(raw: bytes) -> RemotingCommand:
    size = len(raw)
    if size < _BINARY_FIXED.size + 4:
        raise HeaderError(f"ROCKETMQ header of {size} bytes is shorter than its fixed part")
    code, language, version, opaque, flag, remark_len = _BINARY_FIXED.unpack_from(raw, 0)
    pos = _BINARY_FIXED.size
    if remark_len < 0 or pos + remark_len + 4 > size:
        raise HeaderError(f"ROCKETMQ header remark length {remark_len} overruns the header")
    try:
        remark = raw[pos : pos + remark_len].decode() if remark_len else None
        pos += remark_len
        (ext_len,) = _INT.unpack_from(raw, pos)
        pos += 4
        end = pos + ext_len
        if ext_len < 0 or end != size:
            raise HeaderError(f"ROCKETMQ header extFields length {ext_len} does not match the header size")
        # Fast path: a remembered layout of this client's extFields (see broker/protocol/_binary_ext.py).
        cached = _EXT_LAYOUTS.decode(code, raw, pos, end)
        if cached is not None:
            return RemotingCommand(code, opaque, flag, cached, b"", remark, language, version, _ROCKETMQ)
        ext_start = pos
        ext: dict[str, str] = {}
        while pos < end:
            if pos + 2 > end:
                raise HeaderError("ROCKETMQ header extFields entry is truncated")
            key_len = (raw[pos] << 8) | raw[pos + 1]
            pos += 2
            if pos + key_len + 4 > end:
                raise HeaderError(f"ROCKETMQ header extFields key length {key_len} overruns the header")
            key = raw[pos : pos + key_len].decode()
            pos += key_len
            (value_len,) = _INT.unpack_from(raw, pos)
            pos += 4
            if value_len < 0 or pos + value_len > end:
                raise HeaderError(f"ROCKETMQ header extFields value length {value_len} overruns the header")
            ext[key] = raw[pos : pos + value_len].decode()
            pos += value_len
        if pos != end:
            raise HeaderError("ROCKETMQ header extFields entry overruns the header")
        _EXT_LAYOUTS.learn(code, raw, ext_start, end, ext)
    except UnicodeDecodeError as exc:
        raise HeaderError(f"ROCKETMQ header text is not UTF-8: {exc.reason}") from None
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        ext_fields=ext,
        remark=remark,
        language=language,
        version=version,
        serialize_type=_ROCKETMQ,
    )


def decode_frame(frame: bytes) -> RemotingCommand:
    """Decode one frame *without* its 4-byte length prefix (i.e. the `length` bytes that follow it)."""
    return _decode_at(frame, 0, len(frame))


def _decode_at(buffer: bytes, start: int, end: int) -> RemotingCommand:
    """Decode the frame occupying buffer[start:end] (length prefix excluded)."""
    if end - start < 4:
        raise MalformedFrame(f"frame of {end - start} bytes has no header length word")
    (type_and_len,) = _INT.unpack_from(buffer, start)
    body_at = start + 4 + (type_and_len & 0xFFFFFF)
    if body_at > end:
        raise MalformedFrame(f"header length {type_and_len & 0xFFFFFF} exceeds the frame length {end - start}")
    cmd = _decode_header((type_and_len >> 24) & 0xFF, buffer[start + 4 : body_at])
    cmd.body = buffer[body_at:end]
    return cmd


def _decode_header(serialize_type: int, header: bytes) -> RemotingCommand:
    if serialize_type == _JSON:
        return _decode_json_header(header)
    if serialize_type == _ROCKETMQ:
        return _decode_binary_header(header)
    raise HeaderError(f"unknown serialize type {serialize_type}")


# A frame at least this long is gathered as it arrives into an anonymous mapping of its announced size.
# Joining the bytes held so far to every read (fine for small frames, which mostly arrive whole) is
# quadratic in a frame's size: a 16 MiB frame in 64 KiB reads copied ~2 GiB and held two copies at each
# join. A mapping takes memory only for the pages written, and unmapping it gives them back to the system
# at once, where freed heap blocks of that size stay in the process (RSS) after a flood of half-sent frames.
GATHER_FRAMES_FROM = 64 * 1024


class FrameDecoder:
    """Turns a byte stream into RemotingCommands: `feed(data)` returns every complete command.

    Raises a RemoteProtocolError subclass on the first bad frame; after that the stream cannot be
    resynchronised and the caller must close the connection. Between feeds, `buffered` bytes of an
    incomplete frame are held; `frame_size` is that frame's announced size (0 until its length word has
    arrived) and `frames_begun` counts incomplete frames, so a caller can tell a new one from the last.
    """

    __slots__ = ("_buffer", "_filled", "_gathered", "_gathered_size", "frames_begun", "max_frame_length")

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self.max_frame_length = max_frame_length
        self._buffer = b""
        self._gathered: mmap.mmap | None = None  # a large frame under way, `_filled` bytes of it arrived
        self._gathered_size = 0
        self._filled = 0
        self.frames_begun = 0

    @property
    def buffered(self) -> int:
        return len(self._buffer) if self._gathered is None else self._filled

    def clear(self) -> None:
        """Drop what is buffered (the connection is gone)."""
        self._buffer = b""
        if self._gathered is not None:
            self._gathered.close()
            self._gathered = None

    @property
    def frame_size(self) -> int:
        """Size of the incomplete frame, length word included; 0 when none or its length is not known yet."""
        if self._gathered is not None:
            return self._gathered_size
        if len(self._buffer) < 4:
            return 0
        return 4 + int(_INT.unpack_from(self._buffer, 0)[0])

    def feed(self, data: bytes) -> list[RemotingCommand]:
        if self._gathered is not None:
            return self._feed_gathered(data)
        held = self._buffer
        buffer = held + data if held else data
        commands: list[RemotingCommand] = []
        append = commands.append
        unpack_length = _INT.unpack_from
        max_length = self.max_frame_length
        pos = 0
        size = len(buffer)
        # Frames are decoded in place (no per-frame slice of the buffer).
        while size - pos >= 4:
            (length,) = unpack_length(buffer, pos)
            if length < 4 or length > max_length:
                self._check_length(length)
            end = pos + 4 + length
            if end > size:
                break
            append(_decode_at(buffer, pos + 4, end))
            pos = end
        if pos == size:
            self._buffer = b""
            return commands
        if pos or not held:
            self.frames_begun += 1
        if size - pos >= 4:
            # A partial frame: reject a bad length word now rather than after buffering up to it.
            (length,) = unpack_length(buffer, pos)
            self._check_length(length)
            if length >= GATHER_FRAMES_FROM:
                self._gathered = gathered = mmap.mmap(-1, 4 + length, flags=mmap.MAP_PRIVATE)
                self._gathered_size = 4 + length
                self._filled = size - pos
                gathered[: size - pos] = memoryview(buffer)[pos:]
                self._buffer = b""
                return commands
        self._buffer = buffer[pos:]
        return commands

    def _feed_gathered(self, data: bytes) -> list[RemotingCommand]:
        gathered = self._gathered
        assert gathered is not None
        filled = self._filled
        need = self._gathered_size - filled
        if len(data) < need:
            gathered[filled : filled + len(data)] = data
            self._filled = filled + len(data)
            return []
        gathered[filled:] = memoryview(data)[:need]
        self._gathered = None
        self._gathered_size = self._filled = 0
        try:
            commands = [_decode_gathered(gathered)]
        finally:
            gathered.close()  # the command holds its own copy of the body
        if len(data) > need:
            commands += self.feed(data[need:])
        return commands

    def _check_length(self, length: int) -> None:
        if length < 4:
            raise MalformedFrame(f"frame length {length} is smaller than the header length word")
        if length > self.max_frame_length:
            raise FrameTooLarge(f"frame length {length} exceeds the maximum of {self.max_frame_length}")


def _decode_gathered(frame: mmap.mmap) -> RemotingCommand:
    """Decode a whole frame (length word included) gathered in a mapping, copying its body once."""
    (type_and_len,) = _INT.unpack_from(frame, 4)
    body_at = 8 + (type_and_len & 0xFFFFFF)
    if body_at > len(frame):
        raise MalformedFrame(f"header length {type_and_len & 0xFFFFFF} exceeds the frame length {len(frame) - 4}")
    cmd = _decode_header((type_and_len >> 24) & 0xFF, frame[8:body_at])
    cmd.body = frame[body_at:]
    return cmd
