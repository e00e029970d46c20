"""The put rules (broker.server.put_rules) and MessageToStore.from_stored.

A send that is rewritten (half, delay, timer) stores its properties as a dict built from the one parse
of its text plus what the broker adds; it must be exactly what parsing the stored text would give, in
the same order (the order decides the stored bytes)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.batch import merge_batch_properties
from broker.protocol.javahash import tags_code
from broker.protocol.message import MessageExt, SysFlag
from broker.protocol.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, Prop, decode_properties
from broker.server.errors import RequestError
from broker.server.put_rules import (
    batch_dispatch_keys,
    batch_message_problem,
    checked_properties,
    rewrite_for_delay,
    stored_properties,
)
from broker.server.topics import SCHEDULE_TOPIC
from broker.store.dispatch_request import dispatch_fields
from broker.store.results import MessageToStore

_text = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "CLUSTER", "DELAY", "WAIT", "x"]), st.text(max_size=5)
        ).map(lambda nv: f"{nv[0]}\x01{nv[1]}"),
        st.text(alphabet="ab\x01", max_size=4),
    ),
    max_size=6,
).map("\x02".join)


@given(_text, st.sampled_from(["", "DefaultCluster"]), st.sampled_from([None, "7F0000010000ABCD"]))
def test_stored_properties_equal_parsing_the_stored_text(text: str, cluster: str, generated: str | None) -> None:
    try:
        sent = checked_properties(text)
    except RequestError:
        return  # refused before anything is stored
    # the text the send processor stores: the sender's, then CLUSTER and (when it generated one) UNIQ_KEY
    stored_text = text if not text or text.endswith(PROPERTY_SEPARATOR) else text + PROPERTY_SEPARATOR
    stored_text += f"{Prop.CLUSTER}{NAME_VALUE_SEPARATOR}{cluster}{PROPERTY_SEPARATOR}"
    if generated:
        stored_text += f"{Prop.UNIQ_KEY}{NAME_VALUE_SEPARATOR}{generated}{PROPERTY_SEPARATOR}"
    full = stored_properties(sent, cluster, generated)
    assert list(full.items()) == list(decode_properties(stored_text).items())
    assert sent == checked_properties(text)  # the parsed dict is not changed


@given(_text, _text, st.sampled_from([None, "7F0000010000ABCD"]))
def test_batch_dispatch_keys_equal_what_dispatch_reads_from_the_stored_text(
    inner_text: str, level_text: str, generated: str | None
) -> None:
    try:
        inner, level = checked_properties(inner_text), checked_properties(level_text)
    except RequestError:
        return  # the batch is refused
    text, uniq = inner_text, inner.get(Prop.UNIQ_KEY)
    if not uniq:  # as the send processor does: a generated UNIQ_KEY appended to the inner text
        uniq = generated or "GENERATED"
        text += ("" if not text or text.endswith(PROPERTY_SEPARATOR) else PROPERTY_SEPARATOR) + f"UNIQ_KEY\x01{uniq}"
    if level_text and not level_text.endswith(PROPERTY_SEPARATOR):  # as the send processor ends it
        level_text += PROPERTY_SEPARATOR
    stored = merge_batch_properties(text, level_text + "CLUSTER\x01c\x02")
    tags, keys, found_uniq = batch_dispatch_keys(inner, uniq, level)
    assert (tags_code(tags) if tags else 0, keys, found_uniq) == dispatch_fields("T", stored, 0, None)


@given(st.dictionaries(st.sampled_from(["DELAY", "TRAN_MSG", "TIMER_DELAY_SEC", "TAGS", "x"]), st.text(max_size=3)))
def test_batch_message_problem_passes_only_what_the_full_checks_pass(props: dict[str, str]) -> None:
    full = (
        props.get(Prop.DELAY, "0") not in ("", "0")
        or props.get(Prop.TRAN_MSG) == "true"
        or bool(props.get("TIMER_DELAY_SEC"))
    )
    assert (batch_message_problem(props) is not None) is full


def test_rewrite_for_delay_declining_leaves_the_properties_alone() -> None:
    for props in ({Prop.DELAY: "0"}, {Prop.DELAY: "x"}, {Prop.DELAY: "3"}):
        msg = MessageToStore("T", 1, b"b", sys_flag=SysFlag.TRANSACTION_PREPARED_TYPE)
        before = dict(props)
        assert not rewrite_for_delay(msg, props, 18)
        assert props == before and msg.topic == "T"
    msg = MessageToStore("T", 1, b"b")
    props = {Prop.DELAY: "40"}
    assert rewrite_for_delay(msg, props, 18)
    assert (msg.topic, msg.queue_id, msg.properties_bytes) == (SCHEDULE_TOPIC, 17, None)
    assert props == {Prop.DELAY: "18", Prop.REAL_TOPIC: "T", Prop.REAL_QID: "1"} and msg.properties is props


def test_from_stored_keeps_the_stored_fields_and_takes_the_given_ones() -> None:
    stored = MessageExt(
        topic="OLD",
        body=b"payload",
        properties={"a": "1"},
        flag=5,
        queue_id=3,
        sys_flag=SysFlag.MULTI_TAGS,
        born_timestamp=1234,
        born_host=("10.0.0.1", 4321),
        reconsume_times=2,
    )
    msg = MessageToStore.from_stored(stored, topic="NEW", queue_id=1, properties={"b": "2"})
    assert msg == MessageToStore(
        topic="NEW",
        queue_id=1,
        body=b"payload",
        flag=5,
        properties={"b": "2"},
        sys_flag=SysFlag.MULTI_TAGS,
        born_timestamp=1234,
        born_host=("10.0.0.1", 4321),
        reconsume_times=2,
    )
    other = MessageToStore.from_stored(
        stored, topic="X", queue_id=0, properties={}, sys_flag=0, reconsume_times=3, prepared_transaction_offset=99
    )
    assert (other.sys_flag, other.reconsume_times, other.prepared_transaction_offset) == (0, 3, 99)
