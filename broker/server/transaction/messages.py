"""Pure message rewrites of transactional messaging (reference 8.6), no I/O.

Used by the send processor (half messages), the END_TRANSACTION processor (commit and op messages)
and the check service (op bodies, check requests). Everything reuses the one store path by
rewriting topics: a half message is stored in RMQ_SYS_TRANS_HALF_TOPIC queue 0 with its real topic
and queue in REAL_TOPIC / REAL_QID; an op message in RMQ_SYS_TRANS_OP_HALF_TOPIC (tag "d", body
"<half queue offset>,") records that a half message was committed or rolled back.
"""

from __future__ import annotations

from broker.protocol.codes import RequestCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import EndTransactionRequestHeader
from broker.protocol.message import MessageExt, SysFlag, encode_record
from broker.protocol.properties import Prop
from broker.server.topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from broker.store.results import MessageToStore

__all__ = [
    "COMMIT",
    "LEGACY_TRANS_CHECK_GROUP",
    "OP_TAG",
    "ROLLBACK",
    "TRANS_CHECK_GROUP",
    "UNKNOWN",
    "check_request",
    "commit_message",
    "is_half",
    "op_message",
    "parse_op_body",
    "rewrite_to_half",
    "validate_end",
]

COMMIT = 8  # commitOrRollback values of END_TRANSACTION (MessageSysFlag transaction types)
ROLLBACK = 12
UNKNOWN = 0
OP_TAG = "d"  # TransactionalMessageUtil.REMOVETAG
# The internal group whose offsets on the half/op topics record the check service's progress: RocketMQ's
# MixAll.CID_SYS_RMQ_TRANS, whose value is "CID_RMQ_SYS_TRANS" (the name tools hide as a system group).
TRANS_CHECK_GROUP = "CID_RMQ_SYS_TRANS"
# The name earlier versions of this broker stored that progress under; read once when the new one is absent.
LEGACY_TRANS_CHECK_GROUP = "CID_SYS_RMQ_TRANS"


def is_half(props: dict[str, str], sys_flag: int) -> bool:
    """A send that opens a transaction: TRAN_MSG=true or the PREPARED sysFlag type."""
    return (
        props.get(Prop.TRAN_MSG) == "true" or (sys_flag & SysFlag.TRANSACTION_MASK) == SysFlag.TRANSACTION_PREPARED_TYPE
    )


def rewrite_to_half(msg: MessageToStore, props: dict[str, str], uniq: str) -> None:
    """Park `msg` (whose full properties are `props`) in the half topic, queue 0."""
    props[Prop.REAL_TOPIC] = msg.topic
    props[Prop.REAL_QID] = str(msg.queue_id)
    props[Prop.TRANSACTION_ID] = uniq
    msg.topic = TRANS_HALF_TOPIC
    msg.queue_id = 0
    msg.sys_flag &= ~SysFlag.TRANSACTION_MASK  # reset: a half is stored as a plain message
    msg.properties = props
    msg.properties_bytes = None


def validate_end(header: EndTransactionRequestHeader, half: MessageExt) -> str | None:
    """Why END_TRANSACTION does not match its half message, or None (EndTransactionProcessor.checkPrepareMessage)."""
    if half.topic != TRANS_HALF_TOPIC:
        return f"the message at commit-log offset {header.commit_log_offset} is not a half message"
    group = half.properties.get(Prop.PGROUP)
    if group != header.producer_group:
        return f"the producer group of the half message is {group!r}, not {header.producer_group!r}"
    if half.queue_offset != header.tran_state_table_offset:
        return (
            f"the transaction state table offset {header.tran_state_table_offset} is wrong: "
            f"the half message is at {half.queue_offset}"
        )
    if half.commit_log_offset != header.commit_log_offset:
        return f"the commit log offset {header.commit_log_offset} is wrong"
    return None


def _clean_properties(half: MessageExt) -> dict[str, str]:
    props = dict(half.properties)
    for name in (
        Prop.REAL_TOPIC,
        Prop.REAL_QID,
        Prop.TRAN_MSG,
        Prop.TRANSACTION_CHECK_TIMES,
        Prop.TRAN_PREPARED_QUEUE_OFFSET,
    ):
        props.pop(name, None)
    return props


def commit_message(half: MessageExt) -> MessageToStore:
    """The visible message a commit stores: the real topic and queue, sysFlag COMMIT, and
    preparedTransactionOffset pointing at the half message."""
    return MessageToStore.from_stored(
        half,
        topic=half.properties[Prop.REAL_TOPIC],
        queue_id=int(half.properties.get(Prop.REAL_QID, "0")),
        properties=_clean_properties(half),
        sys_flag=(half.sys_flag & ~SysFlag.TRANSACTION_MASK) | SysFlag.TRANSACTION_COMMIT_TYPE,
        prepared_transaction_offset=half.commit_log_offset,
    )


def op_message(half_queue_offset: int, queue_id: int, born_host: tuple[str, int], now_ms: int) -> MessageToStore:
    """The op message that settles the half message at `half_queue_offset` (5.x body: "<offset>,")."""
    return MessageToStore(
        topic=TRANS_OP_HALF_TOPIC,
        queue_id=queue_id,
        body=f"{half_queue_offset},".encode(),
        flag=0,
        properties={Prop.TAGS: OP_TAG, Prop.WAIT: "false"},
        sys_flag=0,
        born_timestamp=now_ms,
        born_host=born_host,
    )


def parse_op_body(body: bytes) -> list[int]:
    """Half queue offsets named by an op body: "12," (5.x), "12" (4.x) or several "1,2,3,"."""
    offsets = []
    for part in body.decode(errors="replace").split(","):
        part = part.strip()
        if part.lstrip("-").isdigit():
            offsets.append(int(part))
    return offsets


def check_request(half: MessageExt) -> RemotingCommand:
    """CHECK_TRANSACTION_STATE (39) for a stored half message: header names the half's offsets,
    body is its record with the real topic and queue restored (what the producer's checker sees)."""
    props = half.properties
    uniq = props.get(Prop.TRANSACTION_ID) or props.get(Prop.UNIQ_KEY) or half.offset_msg_id
    shown = MessageExt(
        topic=props.get(Prop.REAL_TOPIC, half.topic),
        body=half.body,
        properties=dict(props),
        flag=half.flag,
        queue_id=int(props.get(Prop.REAL_QID, str(half.queue_id))),
        sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        store_timestamp=half.store_timestamp,
        store_host=half.store_host,
        reconsume_times=half.reconsume_times,
        prepared_transaction_offset=half.prepared_transaction_offset,
        queue_offset=half.queue_offset,
        commit_log_offset=half.commit_log_offset,
    )
    ext = {
        "tranStateTableOffset": str(half.queue_offset),
        "commitLogOffset": str(half.commit_log_offset),
        "msgId": uniq,
        "transactionId": uniq,
        "offsetMsgId": half.offset_msg_id,
        "topic": shown.topic,
    }
    return RemotingCommand(code=RequestCode.CHECK_TRANSACTION_STATE, ext_fields=ext, body=encode_record(shown))
