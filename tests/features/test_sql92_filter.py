"""SQL92 filtering: the pure parser/evaluator by table and by property, and the broker + client over
real TCP: seed examples select exactly the right messages, bad expressions are refused at subscribe
time with a remark that points at the error."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client import ConsumeStatus, Message, MessageExt, MessageSelector, Producer, PullConsumer, PushConsumer
from broker.client.errors import RocketError
from broker.filter import FilterSyntaxError, compile_sql, evaluate, parse, to_sql
from broker.filter.ast import And, Between, Compare, In, IsNull, Literal, Node, Not, Or, Property
from broker.filter.lexer import KEYWORDS
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.message import MessageExt as StoredMessage
from broker.protocol.message import decode_records, encode_record
from broker.server.property_filter import record_properties
from broker.transport.client import connect
from broker.transport.loop import run
from tests.features.features_harness import features_cluster, wait_for

# ---------------------------------------------------------------------------------------- pure: tables

SEED_MESSAGE_HIT = {"a": "10", "b": "abc", "c": "true"}
SEED_MESSAGE_MISS = {"a": "1", "b": "abc", "c": "true"}

EVALUATIONS: list[tuple[str, dict[str, str], bool | None]] = [
    # the seed's example: a > 5 AND b = 'abc'
    ("a > 5 AND b = 'abc'", SEED_MESSAGE_HIT, True),
    ("a > 5 AND b = 'abc'", SEED_MESSAGE_MISS, False),
    ("a between 0 and 3", {"a": "3"}, True),
    ("a between 0 and 3", {"a": "4"}, False),
    ("a NOT BETWEEN 0 AND 3", {"a": "4"}, True),
    ("a >= 10", {"a": "10"}, True),
    ("a < 10.5", {"a": "10.25"}, True),
    ("a <= -1", {"a": "-1"}, True),
    ("a > 5", {"a": "abc"}, False),  # not a number: false, not unknown
    ("NOT (a > 5)", {"a": "abc"}, True),
    ("a = 5", {"a": "5.0"}, True),  # numeric equality against a number
    ("a = '5'", {"a": "5.0"}, False),  # string equality against a string
    ("b <> 'abc'", {"b": "abd"}, True),
    ("b IN ('x', 'abc')", SEED_MESSAGE_HIT, True),
    ("b NOT IN ('x', 'abc')", SEED_MESSAGE_HIT, False),
    ("c = TRUE", SEED_MESSAGE_HIT, True),
    ("c", SEED_MESSAGE_HIT, True),
    ("c = FALSE", SEED_MESSAGE_HIT, False),
    ("d IS NULL", SEED_MESSAGE_HIT, True),
    ("a IS NOT NULL", SEED_MESSAGE_HIT, True),
    # three-valued logic: a missing property is NULL, comparisons with it are UNKNOWN
    ("d > 1", SEED_MESSAGE_HIT, None),
    ("NOT (d > 1)", SEED_MESSAGE_HIT, None),
    ("d = 'x'", {}, None),
    ("d > 1 AND a > 100", SEED_MESSAGE_HIT, False),
    ("d > 1 AND a > 5", SEED_MESSAGE_HIT, None),
    ("d > 1 OR a > 5", SEED_MESSAGE_HIT, True),
    ("d > 1 OR a > 100", SEED_MESSAGE_HIT, None),
    ("d IN ('x')", {}, None),
    ("a = NULL", SEED_MESSAGE_HIT, None),
    ("TRUE", {}, True),
    ("NOT FALSE AND (a = 10 OR b = 'zzz')", SEED_MESSAGE_HIT, True),
    ("b = 'it''s'", {"b": "it's"}, True),
    ("x.y_z$ = 1", {"x.y_z$": "1"}, True),
    ("a > 5 and b = 'abc' or NOT c", SEED_MESSAGE_MISS, False),  # AND binds tighter than OR
]


@pytest.mark.parametrize(("expression", "props", "expected"), EVALUATIONS)
def test_evaluation_table(expression: str, props: dict[str, str], expected: bool | None) -> None:
    assert evaluate(parse(expression), props) is expected
    assert compile_sql(expression).matches(props) is (expected is True)


PARSES: list[tuple[str, Node]] = [
    ("a > 5", Compare(">", Property("a"), Literal("number", 5))),
    ("a between 0 and 3", Between(Property("a"), Literal("number", 0), Literal("number", 3))),
    (
        "NOT a = 1 AND b = 2",
        And(Not(Compare("=", Property("a"), Literal("number", 1))), Compare("=", Property("b"), Literal("number", 2))),
    ),
    (
        "a = 1 OR b = 2 AND c = 3",
        Or(
            Compare("=", Property("a"), Literal("number", 1)),
            And(Compare("=", Property("b"), Literal("number", 2)), Compare("=", Property("c"), Literal("number", 3))),
        ),
    ),
    ("a IN ('x','y')", In(Property("a"), ("x", "y"))),
    ("a is not null", IsNull(Property("a"), negated=True)),
    ("a > 3.14", Compare(">", Property("a"), Literal("number", Decimal("3.14")))),
    ("a = FALSE", Compare("=", Property("a"), Literal("boolean", False))),
]


@pytest.mark.parametrize(("expression", "ast"), PARSES)
def test_parse_table(expression: str, ast: Node) -> None:
    assert parse(expression) == ast


ERRORS: list[tuple[str, int, str]] = [
    ("", 0, "empty"),
    ("a >", 3, "expected a property name or a constant"),
    ("a > 5 AND", 9, "expected a property name or a constant"),
    ("a > 'abc'", 4, "compares numbers"),
    ("a BETWEEN 1 AND 'z'", 16, "compares numbers"),
    ("a BETWEEN 1 OR 3", 12, "expected AND"),
    ("a = = 1", 4, "expected a property name or a constant"),
    ("(a = 1", 6, "expected ')'"),
    ("a = 1)", 5, "expected AND, OR or the end"),
    ("a != 1", 2, "'!=' is not SQL92"),
    ("'abc'", 5, "expected a comparison operator"),
    ("a IN (1, 2)", 6, "string constant in the IN list"),
    ("a IN ('x' 'y')", 10, "',' or ')'"),
    ("b = 'open", 4, "not closed"),
    ("a > 5 # 1", 6, "unexpected character '#'"),
    ("a IS 5", 5, "expected NULL"),
    ("a > 5abc", 5, "right after the number"),
]


@pytest.mark.parametrize(("expression", "position", "reason"), ERRORS)
def test_invalid_expressions_point_at_the_error(expression: str, position: int, reason: str) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        parse(expression)
    assert info.value.position == position
    assert reason in str(info.value)
    assert f"at position {position}" in str(info.value)


def test_compile_is_cached_per_expression() -> None:
    assert compile_sql("a > 5 AND b = 'abc'") is compile_sql("a > 5 AND b = 'abc'")


# ---------------------------------------------------------------------------------------- pure: properties

_names = st.from_regex(r"[a-z_][a-z0-9_.]{0,6}", fullmatch=True).filter(lambda n: n.upper() not in KEYWORDS)
_strings = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
_numbers = st.one_of(
    st.integers(-(10**12), 10**12).map(lambda v: Literal("number", v)),
    st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**6), max_value=10**6).map(
        lambda d: Literal("number", d)
    ),
)
_operands = st.one_of(
    _names.map(Property),
    _numbers,
    _strings.map(lambda s: Literal("string", s)),
    st.booleans().map(lambda b: Literal("boolean", b)),
    st.just(Literal("null", None)),
)
_numeric_operands = st.one_of(_names.map(Property), _numbers)


def _predicates() -> st.SearchStrategy[Node]:
    return st.one_of(
        st.builds(Compare, st.sampled_from(["=", "<>"]), _operands, _operands),
        st.builds(Compare, st.sampled_from([">", ">=", "<", "<="]), _numeric_operands, _numeric_operands),
        st.builds(Between, _numeric_operands, _numeric_operands, _numeric_operands, st.booleans()),
        st.builds(In, _operands, st.lists(_strings, min_size=1, max_size=3).map(tuple), st.booleans()),
        st.builds(IsNull, _operands, st.booleans()),
        _names.map(Property),
        st.booleans().map(lambda b: Literal("boolean", b)),
    )


_trees = st.recursive(
    _predicates(),
    lambda inner: st.one_of(st.builds(And, inner, inner), st.builds(Or, inner, inner), st.builds(Not, inner)),
    max_leaves=12,
)
_props = st.dictionaries(
    st.sampled_from(["a", "b", "c", "x.y"]),
    st.one_of(st.integers(-5, 5).map(str), st.sampled_from(["true", "false", "abc", "1.5", ""])),
)


@settings(max_examples=300, deadline=None)
@given(_trees)
def test_printing_round_trips(ast: Node) -> None:
    assert parse(to_sql(ast)) == ast


@settings(max_examples=300, deadline=None)
@given(_trees, _props)
def test_three_valued_not_and_de_morgan(ast: Node, props: dict[str, str]) -> None:
    value = evaluate(ast, props)
    assert value in (True, False, None)
    assert evaluate(Not(ast), props) == (None if value is None else not value)
    other = Compare(">", Property("a"), Literal("number", 0))
    assert evaluate(Not(And(ast, other)), props) == evaluate(Or(Not(ast), Not(other)), props)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(_names, _strings.filter(lambda s: "\x01" not in s and "\x02" not in s), max_size=5),
    st.binary(max_size=64),
    st.sampled_from(["T", "t" * 200]),  # a 200-character topic needs the v2 record (2-byte length)
    st.sampled_from(["10.0.0.1", "::1"]),
)
def test_record_properties_reads_what_decode_reads(props: dict[str, str], body: bytes, topic: str, host: str) -> None:
    msg = StoredMessage(topic=topic, body=body, properties=props, born_host=(host, 1), store_host=(host, 2))
    raw = encode_record(msg)
    assert record_properties(memoryview(raw)) == next(decode_records(raw)).properties


# ---------------------------------------------------------------------------------------- live

TOPIC = "SqlT"


async def _send_seed_messages(namesrv: str) -> None:
    async with Producer("PG-sql", namesrv) as producer:
        for i in range(20):
            props = {"a": str(i), "b": "abc" if i % 2 == 0 else "xyz"}
            if i % 5 == 0:
                props["c"] = "true"
            await producer.send(Message(TOPIC, f"m{i}", tags="T", properties=props))


def _expected(expression: str) -> set[str]:
    sql = compile_sql(expression)
    out = set()
    for i in range(20):
        props = {"a": str(i), "b": "abc" if i % 2 == 0 else "xyz"}
        if i % 5 == 0:
            props["c"] = "true"
        if sql.matches(props):
            out.add(f"m{i}")
    return out


async def _raw_pull(addr: str, expression: str, queue_id: int, offset: int = 0) -> RemotingCommand:
    conn = await connect(addr)
    try:
        ext = {
            "consumerGroup": "CG-raw",
            "topic": TOPIC,
            "queueId": str(queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": "32",
            "sysFlag": str(0x4),
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": expression,
            "subVersion": "0",
            "expressionType": "SQL92",
        }
        return await conn.invoke(RemotingCommand(code=RequestCode.PULL_MESSAGE, ext_fields=ext), 5.0)
    finally:
        conn.close()


def test_seed_selectors_select_exactly_the_right_messages(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path, enablePropertyFilter="true") as cluster:
            await cluster.create_topic(TOPIC, queues=2)
            await _send_seed_messages(cluster.namesrv_addr)
            broker_addr = cluster.running_broker.addr

            # The broker filters: a raw pull (no client re-check) returns only matching records.
            seen: set[str] = set()
            for qid in (0, 1):
                resp = await _raw_pull(broker_addr, "a > 5 AND b = 'abc'", qid)
                # a queue holding no match at all answers "nothing new" at its end, not its start
                assert resp.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND), resp.remark
                if resp.code == ResponseCode.PULL_NOT_FOUND:
                    assert resp.ext_fields["nextBeginOffset"] == resp.ext_fields["maxOffset"] == "10"
                seen |= {m.body.decode() for m in decode_records(resp.body)}
            assert seen == _expected("a > 5 AND b = 'abc'") == {"m6", "m8", "m10", "m12", "m14", "m16", "m18"}

            # Push consumers with the seed's selectors, one group each.
            selectors = [
                "a > 5 AND b = 'abc'",
                "a between 0 and 3",
                "c IS NOT NULL AND b IN ('abc')",
                "NOT (a < 15) OR c = TRUE",
            ]
            received: dict[str, list[str]] = {s: [] for s in selectors}
            consumers = []
            for n, expression in enumerate(selectors):

                def listener(msgs: list[MessageExt], expression: str = expression) -> ConsumeStatus:
                    received[expression].extend(m.body.decode() for m in msgs)
                    return ConsumeStatus.CONSUME_SUCCESS

                consumer = PushConsumer(
                    f"CG-sql-{n}", client_config=cluster.client_config(), consume_from_where="CONSUME_FROM_FIRST_OFFSET"
                )
                consumer.subscribe(TOPIC, MessageSelector.by_sql(expression))
                consumer.register_listener(listener)
                await consumer.start()
                consumers.append(consumer)
            try:
                for expression in selectors:
                    want = _expected(expression)
                    await wait_for(lambda e=expression, w=want: set(received[e]) >= w, 20, expression)
                await asyncio.sleep(0.5)  # nothing else trickles in afterwards
                for expression in selectors:
                    assert sorted(received[expression]) == sorted(_expected(expression)), expression
            finally:
                for consumer in consumers:
                    await consumer.shutdown()

            # A pull consumer with expression_type= gives the same answer.
            pull = PullConsumer(
                "CG-sql-pull", client_config=cluster.client_config(), consume_from_where="CONSUME_FROM_FIRST_OFFSET"
            )
            pull.subscribe(TOPIC, "a between 0 and 3", expression_type="SQL92")
            await pull.start()
            try:
                got: list[str] = []
                while len(got) < 4:
                    batch = await pull.poll(10)
                    assert batch, f"only {got} arrived"
                    got.extend(m.body.decode() for m in batch)
                assert sorted(got) == ["m0", "m1", "m2", "m3"]
            finally:
                await pull.shutdown()

    run(main())


def test_bad_expressions_are_refused_at_subscribe_time(tmp_path: Path) -> None:
    async def main() -> None:
        with pytest.raises(FilterSyntaxError, match="at position 9"):
            MessageSelector.by_sql("a > 5 AND")
        async with features_cluster(tmp_path, enablePropertyFilter="true") as cluster:
            await cluster.create_topic(TOPIC, queues=1)
            addr = cluster.running_broker.addr
            # Heartbeat with an invalid SQL92 subscription: refused, nothing registered.
            heartbeat = {
                "clientID": "127.0.0.1@bad",
                "producerDataSet": [],
                "consumerDataSet": [
                    {
                        "groupName": "CG-bad",
                        "consumeType": "CONSUME_PASSIVELY",
                        "messageModel": "CLUSTERING",
                        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                        "unitMode": False,
                        "subscriptionDataSet": [
                            {
                                "topic": TOPIC,
                                "subString": "a > 'x'",
                                "expressionType": "SQL92",
                                "tagsSet": [],
                                "codeSet": [],
                                "subVersion": 1,
                            }
                        ],
                    }
                ],
            }
            conn = await connect(addr)
            try:
                resp = await conn.invoke(
                    RemotingCommand(code=RequestCode.HEART_BEAT, body=orjson.dumps(heartbeat)), 5.0
                )
                assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
                assert "at position 4" in (resp.remark or "") and "-->'x'" in (resp.remark or "")
                assert cluster.running_broker.consumers.get("CG-bad") is None
                check = {
                    "clientId": "c",
                    "group": "CG-bad",
                    "subscriptionData": {"topic": TOPIC, "subString": "(a = 1", "expressionType": "SQL92"},
                }
                resp = await conn.invoke(
                    RemotingCommand(code=RequestCode.CHECK_CLIENT_CONFIG, body=orjson.dumps(check)), 5.0
                )
                assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
                assert "expected ')'" in (resp.remark or "")
            finally:
                conn.close()
            resp = await _raw_pull(addr, "a BETWEEN 1 OR 3", 0)
            assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
            assert "at position 12" in (resp.remark or "")

    run(main())


def test_sql92_needs_enable_property_filter(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:  # enablePropertyFilter defaults to false
            await cluster.create_topic(TOPIC, queues=1)
            consumer = PushConsumer("CG-off", client_config=cluster.client_config())
            consumer.subscribe(TOPIC, MessageSelector.by_sql("a > 5"))
            consumer.register_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
            with pytest.raises(RocketError, match="enablePropertyFilter"):
                await consumer.start()
            await consumer.instance.close()
            resp = await _raw_pull(cluster.running_broker.addr, "a > 5", 0)
            assert resp.code == ResponseCode.SYSTEM_ERROR
            assert "enablePropertyFilter" in (resp.remark or "")

    run(main())
