"""The rules every put of the broker follows, whichever processor or service makes it.

Used by the send processor (processors/send.py), the reply and send-back processors, the transaction
service and END_TRANSACTION: the one PutStatus -> response code table, the check-and-parse of a
sender's properties string, what a batch may not contain, and the delay-level rewrite to
SCHEDULE_TOPIC_XXXX (the single path the architecture asks for). Pure functions, no I/O.
"""

from __future__ import annotations

from broker.protocol.batch import MAX_PROPERTIES_LENGTH
from broker.protocol.codes import ResponseCode
from broker.protocol.message import SysFlag
from broker.protocol.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, Prop
from broker.server.errors import RequestError
from broker.server.timer_message import TIMER_PROPERTIES
from broker.server.topics import SCHEDULE_TOPIC
from broker.store.results import MessageToStore, PutStatus

__all__ = [
    "PUT_STATUS_CODES",
    "batch_dispatch_keys",
    "batch_message_problem",
    "check_properties",
    "checked_properties",
    "rewrite_for_delay",
    "stored_properties",
]

# The one PutStatus -> response code table. The first four mean "stored"; their responses carry the
# full send-result header.
PUT_STATUS_CODES: dict[PutStatus, int] = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.OS_PAGE_CACHE_BUSY: ResponseCode.SYSTEM_BUSY,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
}


def checked_properties(text: str) -> dict[str, str]:
    """A send's properties, checked and parsed in one pass (as `decode_properties` parses: empty values
    skipped, the last of a name wins). Empty segments and empty values are tolerated; a segment without a
    name/value separator or without a name, or a text over 32767 bytes, is a RequestError saying why."""
    props: dict[str, str] = {}
    if not text:
        return props
    # UTF-8 takes at most 4 bytes a character: only a long text needs encoding to know its size
    if len(text) > MAX_PROPERTIES_LENGTH // 4 and len(text.encode()) > MAX_PROPERTIES_LENGTH:
        raise RequestError(
            ResponseCode.MESSAGE_ILLEGAL,
            f"message properties length {len(text.encode())} exceeds the maximum {MAX_PROPERTIES_LENGTH}",
        )
    for segment in text.split(PROPERTY_SEPARATOR):
        if not segment:
            continue
        name, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if not sep:
            raise RequestError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"message properties segment {segment[:40]!r} has no name/value separator \\x01",
            )
        if not name:
            raise RequestError(
                ResponseCode.MESSAGE_ILLEGAL, f"message properties segment {segment[:40]!r} has an empty name"
            )
        if value:
            props[name] = value
    return props


def stored_properties(sent: dict[str, str], cluster: str, generated_uniq: str | None) -> dict[str, str]:
    """The properties a send stores, as a dict: the sender's (`checked_properties` of its text) with the
    broker's CLUSTER and, when the sender set none, the UNIQ_KEY the broker generated; what
    `decode_properties` reads from the sender's text with those two segments appended."""
    full = dict(sent)
    if cluster:
        full[Prop.CLUSTER] = cluster
    if generated_uniq:
        full[Prop.UNIQ_KEY] = generated_uniq
    return full


def batch_dispatch_keys(
    inner: dict[str, str], uniq: str, batch_level: dict[str, str]
) -> tuple[str | None, str | None, str]:
    """(TAGS, KEYS, UNIQ_KEY) of a batch's inner message as stored: its own properties (`inner`, whose
    UNIQ_KEY is `uniq`, the sender's or the one the broker generated) followed by the batch-level ones,
    of which the last non-empty value wins (what the CommitLog's dispatch would read from the text)."""
    get = batch_level.get
    return (
        get(Prop.TAGS) or inner.get(Prop.TAGS),
        get(Prop.KEYS) or inner.get(Prop.KEYS),
        get(Prop.UNIQ_KEY) or uniq,
    )


def check_properties(text: str) -> str | None:
    """Why a properties string is malformed, or None (see `checked_properties`)."""
    try:
        checked_properties(text)
    except RequestError as exc:
        return exc.remark
    return None


# Every property `batch_message_problem` looks at: a message with none of them (nearly all) is checked
# with one set operation
BATCH_CHECKED = frozenset({Prop.DELAY, Prop.TRAN_MSG, *TIMER_PROPERTIES})


def batch_message_problem(props: dict[str, str]) -> str | None:
    """Why a message cannot be part of a batch (the seed's limits: no delay, no transaction; and no
    delivery time), or None."""
    if props.keys().isdisjoint(BATCH_CHECKED):
        return None
    if props.get(Prop.DELAY, "0") not in ("", "0"):
        return "delayed messages cannot be sent in a batch"
    if props.get(Prop.TRAN_MSG) == "true":
        return "transactional messages cannot be sent in a batch"
    if any(props.get(name) for name in TIMER_PROPERTIES):
        return "timed messages (TIMER_DELIVER_MS, TIMER_DELAY_SEC/_MS, __STARTDELIVERTIME) cannot be sent in a batch"
    return None


def rewrite_for_delay(msg: MessageToStore, props: dict[str, str], max_level: int) -> bool:
    """Move a message with DELAY > 0 to SCHEDULE_TOPIC_XXXX (queue level - 1); True when rewritten.
    `props` are the message's full properties; they become its stored ones."""
    raw = props.get(Prop.DELAY)
    if not raw:
        return False
    try:
        level = int(raw)
    except ValueError:
        return False
    tran_type = msg.sys_flag & SysFlag.TRANSACTION_MASK
    if level <= 0 or tran_type not in (SysFlag.TRANSACTION_NOT_TYPE, SysFlag.TRANSACTION_COMMIT_TYPE):
        return False
    level = min(level, max_level)
    props[Prop.DELAY] = str(level)
    props[Prop.REAL_TOPIC] = msg.topic
    props[Prop.REAL_QID] = str(msg.queue_id)
    msg.topic = SCHEDULE_TOPIC
    msg.queue_id = level - 1
    msg.properties = props
    msg.properties_bytes = None
    return True
