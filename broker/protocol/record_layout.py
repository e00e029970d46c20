"""The CommitLog record layout: where each field sits, how big a record is, and the reference parser.

The one source of the layout (shared/reference/rocketmq-protocol.md section 5.1). Every reader of stored
records takes its offsets, sizes and magic codes from here. `broker.protocol.message.decode_record` (the
clients) and the Spark rows parse with `parse_record`; the hot readers keep a faster copy of the parse,
each measured against this one: the store's dispatch parser, recovery's check, the index helper's IPv4
scan and the SQL92 filter's `record_properties`. tests/protocol/test_record_readers.py holds every
reader equal to `parse_record` over the same random records.

A record, in order: the fixed head (TOTALSIZE .. BORNTIMESTAMP, 48 bytes), BORNHOST, STORETIMESTAMP,
STOREHOST (each host 8 bytes for IPv4, 20 for IPv6, as the sysFlag bits say), RECONSUMETIMES,
PREPAREDTRANSACTIONOFFSET, BODYLEN + BODY, TOPICLEN (1 byte with the v1 magic code, 2 with v2) + TOPIC,
PROPLEN (2 bytes) + PROPERTIES.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from broker.protocol.errors import RemoteProtocolError

__all__ = [
    "BLANK_MAGIC_CODE",
    "BODY_CRC_AT",
    "BODY_LEN_AT",
    "BORNHOST_V6",
    "BORN_HOST_AT",
    "BORN_TIMESTAMP_AT",
    "FIXED_SIZE_V4",
    "FIXED_V4",
    "FIXED_V4_HOSTS",
    "HEAD",
    "HOSTS_V6",
    "MAGIC_AT",
    "MESSAGE_MAGICS",
    "MESSAGE_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE_V2",
    "MIN_RECORD_SIZE",
    "PHYSICAL_OFFSET_AT",
    "PREFIX",
    "PROPS_LEN_SIZE",
    "QUEUE_ID_AT",
    "QUEUE_OFFSET_AT",
    "STOREHOST_V6",
    "STORE_TIMESTAMP_AT",
    "SYS_FLAG_AT",
    "MessageDecodeError",
    "Record",
    "body_at",
    "body_len_at",
    "born_host_size",
    "parse_record",
    "store_host_at",
    "store_host_size",
    "store_timestamp_at",
    "topic_len_size",
    "total_size",
]

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7, v1: 1-byte topic length
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB: 2-byte topic length
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194: end-of-file filler
MESSAGE_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)

# The sysFlag bits that change the layout (the other bits are in broker.protocol.message.SysFlag)
BORNHOST_V6 = 0x10
STOREHOST_V6 = 0x20

# Fixed offsets: the same in every record
TOTAL_SIZE_AT = 0
MAGIC_AT = 4
BODY_CRC_AT = 8
QUEUE_ID_AT = 12
FLAG_AT = 16
QUEUE_OFFSET_AT = 20
PHYSICAL_OFFSET_AT = 28
SYS_FLAG_AT = 36
BORN_TIMESTAMP_AT = 40
BORN_HOST_AT = 48  # from here on offsets depend on the host sizes: use the functions below

_HOST_V4_SIZE = 4 + 4  # address + int32 port
_HOST_V6_SIZE = 16 + 4
PROPS_LEN_SIZE = 2

PREFIX = struct.Struct(">ii")  # TOTALSIZE MAGIC: enough to tell a record from a blank or from zeros
HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP, common to every host size
# TOTALSIZE .. BODYLEN of a record with two IPv4 hosts, in one unpack (hosts as address + port) ...
FIXED_V4 = struct.Struct(">iiiiiqqiq4siq4siiqi")
# ... and with each host as one 8-byte field: the put path packs it with host fields it keeps ready
FIXED_V4_HOSTS = struct.Struct(">iiiiiqqiq8sq8siqi")
FIXED_SIZE_V4 = FIXED_V4.size  # 88: the body starts here when both hosts are IPv4
_TAIL = struct.Struct(">iqi")  # RECONSUMETIMES PREPAREDTRANSACTIONOFFSET BODYLEN
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")


def born_host_size(sys_flag: int) -> int:
    return _HOST_V6_SIZE if sys_flag & BORNHOST_V6 else _HOST_V4_SIZE


def store_host_size(sys_flag: int) -> int:
    return _HOST_V6_SIZE if sys_flag & STOREHOST_V6 else _HOST_V4_SIZE


def store_timestamp_at(sys_flag: int) -> int:
    return BORN_HOST_AT + born_host_size(sys_flag)


def store_host_at(sys_flag: int) -> int:
    return store_timestamp_at(sys_flag) + 8


def body_len_at(sys_flag: int) -> int:
    """Offset of BODYLEN, after STOREHOST, RECONSUMETIMES (4) and PREPAREDTRANSACTIONOFFSET (8)."""
    return store_host_at(sys_flag) + store_host_size(sys_flag) + 4 + 8


def body_at(sys_flag: int) -> int:
    return body_len_at(sys_flag) + 4


def topic_len_size(magic: int) -> int:
    """Bytes of the TOPICLEN field: 1 with the v1 magic code, 2 with v2 (topics longer than 127 bytes)."""
    return 1 if magic == MESSAGE_MAGIC_CODE else 2


def total_size(
    body_len: int, topic_len: int, props_len: int, sys_flag: int = 0, magic: int = MESSAGE_MAGIC_CODE
) -> int:
    """TOTALSIZE of a record: the size formula (v1 with IPv4 hosts unless sys_flag and magic say otherwise)."""
    return body_at(sys_flag) + body_len + topic_len_size(magic) + topic_len + PROPS_LEN_SIZE + props_len


MIN_RECORD_SIZE = total_size(0, 0, 0)  # 91: no valid record is smaller

# The offsets that depend on the host sizes, by the sysFlag's host bits (sys_flag & HOSTS_V6): the fast
# copies look them up per record instead of calling the functions above
HOSTS_V6 = BORNHOST_V6 | STOREHOST_V6
_HOST_BITS = (0, BORNHOST_V6, STOREHOST_V6, HOSTS_V6)
STORE_TIMESTAMP_AT = {bits: store_timestamp_at(bits) for bits in _HOST_BITS}
BODY_LEN_AT = {bits: body_len_at(bits) for bits in _HOST_BITS}
assert HEAD.size == BORN_HOST_AT and FIXED_SIZE_V4 == body_at(0) == FIXED_V4_HOSTS.size


class MessageDecodeError(RemoteProtocolError):
    """A record is truncated, has an unknown magic code, or its BODYCRC does not match."""


class Record(NamedTuple):
    """Every field of one record, raw: hosts as address bytes + port, the variable fields located."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_ip: bytes
    born_port: int
    store_timestamp: int
    store_ip: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    # The variable fields as (position in the buffer parsed, length), not copied: each reader takes what it
    # needs (recovery takes nothing, the SQL92 filter only the properties)
    body_at: int
    body_len: int
    topic_at: int
    topic_len: int
    properties_at: int
    properties_len: int


_new_record = tuple.__new__  # a NamedTuple's own __new__ is Python code: this skips it, per record


def parse_record(buf: Any, pos: int = 0, limit: int | None = None) -> Record:
    """The record at `pos` of `buf` (bytes, memoryview or mmap), reading nothing at or past `limit`.

    MessageDecodeError, naming what is wrong, unless every field lies inside TOTALSIZE and the lengths
    add up to it exactly. The BODYCRC is returned, not checked (callers that want it compare it).
    """
    size = len(buf)
    if limit is None or limit > size:
        limit = size
    if pos + FIXED_SIZE_V4 > limit:  # no record is this short (MIN_RECORD_SIZE)
        raise MessageDecodeError(f"record at {pos} is truncated: {limit - pos} bytes left")
    # every field up to BODYLEN in one unpack, right when both hosts are IPv4 (every record this broker
    # writes); the host fields and what follows them are read again below otherwise
    (total, magic, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts, born_ip, born_port, store_ts,
     store_ip, store_port, reconsume, prepared, body_len) = FIXED_V4.unpack_from(buf, pos)  # fmt: skip
    if magic not in MESSAGE_MAGICS:
        raise MessageDecodeError(f"record at {pos} has unknown magic code {magic & 0xFFFFFFFF:#x}")
    if total < MIN_RECORD_SIZE or pos + total > limit:
        raise MessageDecodeError(f"record at {pos} declares {total} bytes but {limit - pos} are available")
    end = pos + total
    if not sys_flag & HOSTS_V6:
        p = pos + FIXED_SIZE_V4
    else:
        p = pos + body_at(sys_flag)
        if p > end:
            raise MessageDecodeError(f"record at {pos}: its hosts run past TOTALSIZE {total}")
        at, ip_len = pos + BORN_HOST_AT, born_host_size(sys_flag) - 4
        born_ip = bytes(buf[at : at + ip_len])
        (born_port,) = _I32.unpack_from(buf, at + ip_len)
        at = pos + store_timestamp_at(sys_flag)
        (store_ts,) = _I64.unpack_from(buf, at)
        at, ip_len = pos + store_host_at(sys_flag), store_host_size(sys_flag) - 4
        store_ip = bytes(buf[at : at + ip_len])
        (store_port,) = _I32.unpack_from(buf, at + ip_len)
        reconsume, prepared, body_len = _TAIL.unpack_from(buf, p - _TAIL.size)
    # the body must leave room for the two length fields after it
    length_size = 1 if magic == MESSAGE_MAGIC_CODE else 2  # topic_len_size(), inlined: once per record
    if body_len < 0 or p + body_len + length_size + PROPS_LEN_SIZE > end:
        raise MessageDecodeError(f"record at {pos} has body length {body_len} beyond its end")
    body_pos = p
    p += body_len
    topic_len = buf[p] if length_size == 1 else _U16.unpack_from(buf, p)[0]
    p += length_size
    if p + topic_len + PROPS_LEN_SIZE > end:
        raise MessageDecodeError(f"record at {pos}: its topic runs past TOTALSIZE {total}")
    topic_at = p
    p += topic_len
    (props_len,) = _U16.unpack_from(buf, p)
    p += PROPS_LEN_SIZE
    if p + props_len != end:
        raise MessageDecodeError(f"record at {pos}: field lengths do not add up to TOTALSIZE {total}")
    return _new_record(
        Record,
        (
            total, magic, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts, born_ip, born_port,
            store_ts, store_ip, store_port, reconsume, prepared, body_pos, body_len, topic_at, topic_len, p, props_len,
        ),
    )  # fmt: skip
