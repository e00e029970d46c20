"""Evaluation of a parsed SQL92 filter over a message's properties, with SQL's three-valued logic.

`compile_predicate(ast)` turns the tree into nested closures once (a subscription is parsed and
compiled once, then run for every message a pull scans); `evaluate(ast, props)` is the same thing
for a single call. Results are True, False or None (UNKNOWN); a message is selected only when the
expression is True.

Values: message properties are strings. Where an operand meets a number (ordering comparisons,
BETWEEN, `= 5`), the property string is read as a number; where it meets TRUE/FALSE it is read as
a boolean. A value that cannot be read that way makes the comparison False (not UNKNOWN), as
RocketMQ's ComparisonExpression does, so `NOT (a > 5)` selects a message whose `a` is 'abc'. An
absent property is NULL: any comparison with NULL is UNKNOWN, and only IS [NOT] NULL tests it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation

from broker.filter.ast import And, Between, Compare, In, IsNull, Literal, Node, Not, Operand, Or, Property

__all__ = ["Predicate", "Truth", "compile_predicate", "evaluate", "matches", "to_number"]

Truth = bool | None
Value = str | int | Decimal | bool | None
Props = Mapping[str, str]
Predicate = Callable[[Props], Truth]

_INT = re.compile(r"[+-]?\d+\Z")
_DECIMAL = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?\Z")


def to_number(value: Value) -> int | Decimal | None:
    """A number from a constant or a property string; None when it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | Decimal):
        return value
    text = value.strip()
    if _INT.match(text):
        return int(text)
    if _DECIMAL.match(text):
        try:
            return Decimal(text)
        except InvalidOperation:
            return None
    return None


def _to_bool(value: Value) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _equal(left: Value, right: Value) -> Truth:
    if left is None or right is None:
        return None
    if isinstance(left, bool) or isinstance(right, bool):
        lb, rb = _to_bool(left), _to_bool(right)
        return lb is not None and rb is not None and lb == rb
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    ln, rn = to_number(left), to_number(right)
    return ln is not None and rn is not None and ln == rn


_ORDER: dict[str, Callable[[int | Decimal, int | Decimal], bool]] = {
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
}


def _operand(node: Operand) -> Callable[[Props], Value]:
    if isinstance(node, Property):
        name = node.name
        return lambda props: props.get(name)
    value = node.value
    return lambda _props: value


def _compare(node: Compare) -> Predicate:
    left, right = _operand(node.left), _operand(node.right)
    if node.op == "=":
        return lambda p: _equal(left(p), right(p))
    if node.op == "<>":

        def not_equal(p: Props) -> Truth:
            eq = _equal(left(p), right(p))
            return None if eq is None else not eq

        return not_equal
    order = _ORDER[node.op]

    def ordered(p: Props) -> Truth:
        lv, rv = left(p), right(p)
        if lv is None or rv is None:
            return None
        ln, rn = to_number(lv), to_number(rv)
        if ln is None or rn is None:
            return False
        return order(ln, rn)

    return ordered


def _between(node: Between) -> Predicate:
    value, low, high = _operand(node.operand), _operand(node.low), _operand(node.high)
    negated = node.negated

    def between(p: Props) -> Truth:
        v, lo, hi = value(p), low(p), high(p)
        if v is None or lo is None or hi is None:
            return None
        n, ln, hn = to_number(v), to_number(lo), to_number(hi)
        if n is None or ln is None or hn is None:
            return False
        inside = ln <= n <= hn
        return not inside if negated else inside

    return between


def _in(node: In) -> Predicate:
    value = _operand(node.operand)
    allowed = frozenset(node.values)
    negated = node.negated

    def member(p: Props) -> Truth:
        v = value(p)
        if v is None:
            return None
        found = (v if isinstance(v, str) else str(v)) in allowed
        return not found if negated else found

    return member


def compile_predicate(node: Node) -> Predicate:
    """Closures equivalent to `evaluate(node, props)`, built once per subscription."""
    if isinstance(node, Compare):
        return _compare(node)
    if isinstance(node, Between):
        return _between(node)
    if isinstance(node, In):
        return _in(node)
    if isinstance(node, IsNull):
        value = _operand(node.operand)
        if node.negated:
            return lambda p: value(p) is not None
        return lambda p: value(p) is None
    if isinstance(node, And):
        left, right = compile_predicate(node.left), compile_predicate(node.right)

        def and_(p: Props) -> Truth:
            lv = left(p)
            if lv is False:
                return False
            rv = right(p)
            if rv is False:
                return False
            return None if lv is None or rv is None else True

        return and_
    if isinstance(node, Or):
        left, right = compile_predicate(node.left), compile_predicate(node.right)

        def or_(p: Props) -> Truth:
            lv = left(p)
            if lv is True:
                return True
            rv = right(p)
            if rv is True:
                return True
            return None if lv is None or rv is None else False

        return or_
    if isinstance(node, Not):
        inner = compile_predicate(node.operand)

        def not_(p: Props) -> Truth:
            v = inner(p)
            return None if v is None else not v

        return not_
    if isinstance(node, Property | Literal):
        value = _operand(node)
        return lambda p: _to_bool(value(p))
    raise TypeError(f"not a filter node: {node!r}")


def evaluate(node: Node, props: Props) -> Truth:
    """True, False or None (UNKNOWN) for one set of properties."""
    return compile_predicate(node)(props)


def matches(node: Node, props: Props) -> bool:
    """Whether a message with these properties is selected (the expression is TRUE)."""
    return evaluate(node, props) is True
