"""The stored message record (CommitLog layout, "MessageExt") and message ids.

Pull responses carry records exactly as stored, and clients and tools read them with `decode_record` /
`decode_records`. The layout itself (offsets, sizes, magic codes, the reference parser) is
broker.protocol.record_layout; sysFlag bits follow shared/reference/rocketmq-protocol.md section 5.1. The
store writes v1 magic and IPv4 hosts whenever possible, because ali-ons and the C++ clients can decode
nothing else.
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from broker.protocol import record_layout as layout
from broker.protocol.crc import crc32
from broker.protocol.properties import Prop, decode_properties, encode_properties
from broker.protocol.record_layout import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    MessageDecodeError,
    parse_record,
)

__all__ = [
    "BLANK_MAGIC_CODE",
    "LAYOUT_SYS_FLAGS",
    "MESSAGE_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE_V2",
    "NO_QUEUE_OFFSET",
    "SENDER_SYS_FLAGS",
    "MessageDecodeError",
    "MessageExt",
    "SysFlag",
    "body_crc",
    "decode_offset_msg_id",
    "decode_record",
    "decode_records",
    "encode_record",
    "host_bytes",
    "offset_msg_id",
    "sender_sys_flag",
]

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_OFFSET_ID = struct.Struct(">iq")


class SysFlag:
    """Bits of the record's SYSFLAG (MessageSysFlag.java)."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_MASK = 0xC
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    BORNHOST_V6 = layout.BORNHOST_V6
    STOREHOST_V6 = layout.STOREHOST_V6
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80
    COMPRESSION_TYPE_MASK = 0x700
    COMPRESSION_ZLIB = 0x300


# PREPARED (0x4) and ROLLBACK (0xC) records get no queue offset and no ConsumeQueue unit: the one bit
# both have set, tested per record (a module constant: cheaper than the class attribute on hot paths)
NO_QUEUE_OFFSET = SysFlag.TRANSACTION_PREPARED_TYPE


# The bits a sender may set: compression, multi-tags and a PREPARED transaction type. The others describe
# how the broker wrote the record (host sizes, batch wrapping), so they belong to the store: a sender's
# BORNHOST_V6 on a record written with 4-byte hosts would make every reader misparse it.
SENDER_SYS_FLAGS = SysFlag.COMPRESSED | SysFlag.MULTI_TAGS | SysFlag.TRANSACTION_MASK | SysFlag.COMPRESSION_TYPE_MASK
LAYOUT_SYS_FLAGS = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6 | SysFlag.NEED_UNWRAP | SysFlag.INNER_BATCH
_KNOWN_SYS_FLAGS = SENDER_SYS_FLAGS | LAYOUT_SYS_FLAGS


def sender_sys_flag(sys_flag: int) -> int:
    """The sysFlag a send request may store: layout bits cleared, as the store sets them itself.

    ValueError for a negative value or unknown bits, and for a COMMIT or ROLLBACK transaction type: only
    END_TRANSACTION writes those, and such a record gets no queue offset, so it could never be consumed.
    """
    if sys_flag < 0 or sys_flag & ~_KNOWN_SYS_FLAGS:
        raise ValueError(f"sysFlag {sys_flag} has bits no RocketMQ client sets (known: 0x{_KNOWN_SYS_FLAGS:x})")
    if sys_flag & SysFlag.TRANSACTION_MASK in (SysFlag.TRANSACTION_COMMIT_TYPE, SysFlag.TRANSACTION_ROLLBACK_TYPE):
        raise ValueError(f"sysFlag {sys_flag}: a send cannot carry a COMMIT or ROLLBACK transaction type")
    return sys_flag & SENDER_SYS_FLAGS


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """BODYCRC as stored: CRC32 masked to a non-negative int32."""
    return crc32(body) & 0x7FFFFFFF


def host_bytes(host: str) -> bytes:
    """4 bytes for IPv4 (and IPv4-mapped IPv6, so old clients can decode it), 16 for real IPv6."""
    addr = ipaddress.ip_address(host)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.packed


def _host_str(raw: bytes) -> str:
    return str(ipaddress.ip_address(raw))


@dataclass(slots=True)
class MessageExt:
    """A message as stored; `body` is as stored (still compressed when SysFlag.COMPRESSED is set)."""

    topic: str
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    queue_id: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    store_size: int = 0
    body_crc: int = 0

    @property
    def tags(self) -> str | None:
        return self.properties.get(Prop.TAGS)

    @property
    def keys(self) -> list[str]:
        return [k for k in self.properties.get(Prop.KEYS, "").split(" ") if k]

    @property
    def offset_msg_id(self) -> str:
        return offset_msg_id(self.store_host[0], self.store_host[1], self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """The client-facing id: UNIQ_KEY when the producer set one, else the offset id."""
        return self.properties.get(Prop.UNIQ_KEY) or self.offset_msg_id

    def uncompressed_body(self) -> bytes:
        if self.sys_flag & SysFlag.COMPRESSED:
            return zlib.decompress(self.body)
        return bytes(self.body)


def offset_msg_id(host: str, port: int, commit_log_offset: int) -> str:
    """offsetMsgId: upper-case hex of storeHost ip + int32 port + int64 commit-log offset."""
    return (host_bytes(host) + _OFFSET_ID.pack(port, commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """(host, port, commit-log offset) from an offsetMsgId; ValueError when it is not one."""
    if len(msg_id) not in (32, 56):
        raise ValueError(f"offset message id must have 32 or 56 hex digits, got {len(msg_id)}")
    raw = bytes.fromhex(msg_id)
    ip_len = 4 if len(raw) == 16 else 16
    port, offset = _OFFSET_ID.unpack_from(raw, ip_len)
    return _host_str(raw[:ip_len]), port, offset


def encode_record(msg: MessageExt) -> bytes:
    """Encode a whole record (any host size, v2 magic for long topics). Not the store's hot path."""
    born_ip, store_ip = host_bytes(msg.born_host[0]), host_bytes(msg.store_host[0])
    sys_flag = msg.sys_flag & ~(SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6)
    if len(born_ip) == 16:
        sys_flag |= SysFlag.BORNHOST_V6
    if len(store_ip) == 16:
        sys_flag |= SysFlag.STOREHOST_V6
    topic = msg.topic.encode()
    props = encode_properties(msg.properties).encode()
    if len(props) > 0x7FFF:
        raise ValueError(f"properties of {len(props)} bytes exceed the int16 length field")
    v2 = len(topic) > 127
    topic_len_field = _U16.pack(len(topic)) if v2 else bytes((len(topic),))
    crc = body_crc(msg.body)
    out = bytearray()
    out += layout.HEAD.pack(
        0,
        MESSAGE_MAGIC_CODE_V2 if v2 else MESSAGE_MAGIC_CODE,
        crc,
        msg.queue_id,
        msg.flag,
        msg.queue_offset,
        msg.commit_log_offset,
        sys_flag,
        msg.born_timestamp,
    )
    out += born_ip + _I32.pack(msg.born_host[1])
    out += _I64.pack(msg.store_timestamp)
    out += store_ip + _I32.pack(msg.store_host[1])
    out += struct.pack(">iqi", msg.reconsume_times, msg.prepared_transaction_offset, len(msg.body))
    out += msg.body
    out += topic_len_field + topic
    out += _U16.pack(len(props)) + props
    _I32.pack_into(out, 0, len(out))
    return bytes(out)


def decode_record(buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = False) -> MessageExt:
    """Decode the record at `pos`. Raises MessageDecodeError on truncation, bad magic or bad CRC."""
    r = parse_record(buf, pos)
    body = bytes(buf[r.body_at : r.body_at + r.body_len])
    if verify_crc and body_crc(body) != r.body_crc:
        raise MessageDecodeError(f"record at {pos} has BODYCRC {r.body_crc} but its body hashes to {body_crc(body)}")
    try:
        topic = bytes(buf[r.topic_at : r.topic_at + r.topic_len]).decode()
        props = decode_properties(bytes(buf[r.properties_at : r.properties_at + r.properties_len]).decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise MessageDecodeError(f"record at {pos} is malformed: {exc}") from None
    return MessageExt(
        topic=topic,
        body=body,
        properties=props,
        flag=r.flag,
        queue_id=r.queue_id,
        sys_flag=r.sys_flag,
        born_timestamp=r.born_timestamp,
        born_host=(_host_str(r.born_ip), r.born_port),
        store_timestamp=r.store_timestamp,
        store_host=(_host_str(r.store_ip), r.store_port),
        reconsume_times=r.reconsume_times,
        prepared_transaction_offset=r.prepared_transaction_offset,
        queue_offset=r.queue_offset,
        commit_log_offset=r.physical_offset,
        store_size=r.total_size,
        body_crc=r.body_crc,
    )


def decode_records(buf: bytes | bytearray | memoryview, *, verify_crc: bool = False) -> Iterator[MessageExt]:
    """Decode records laid back to back (a pull or query response body)."""
    pos, size = 0, len(buf)
    while pos < size:
        msg = decode_record(buf, pos, verify_crc=verify_crc)
        pos += msg.store_size
        yield msg
