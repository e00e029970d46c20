"""The SQL92 filter's syntax tree: immutable nodes produced by `parser.parse` and read by the
evaluator (`evaluate.compile_predicate`) and the printer (`printer.to_sql`).

Nodes are frozen dataclasses so that equal expressions compare equal (the round-trip property
`parse(to_sql(ast)) == ast` is tested with hypothesis) and so that a parsed expression can be
shared by every pull of a subscription.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal as TypingLiteral

__all__ = [
    "COMPARISON_OPERATORS",
    "And",
    "Between",
    "Compare",
    "In",
    "IsNull",
    "Literal",
    "LiteralKind",
    "Node",
    "Not",
    "Operand",
    "Or",
    "Property",
]

LiteralKind = TypingLiteral["string", "number", "boolean", "null"]
COMPARISON_OPERATORS = ("=", "<>", ">", ">=", "<", "<=")


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant. `kind` is explicit because Python's True == 1 would make TRUE equal to 1."""

    kind: LiteralKind
    value: str | int | Decimal | bool | None


@dataclass(frozen=True, slots=True)
class Property:
    """A user property of the message, looked up by name; absent means NULL."""

    name: str


Operand = Literal | Property


@dataclass(frozen=True, slots=True)
class Compare:
    op: str  # one of COMPARISON_OPERATORS
    left: Operand
    right: Operand


@dataclass(frozen=True, slots=True)
class Between:
    operand: Operand
    low: Operand
    high: Operand
    negated: bool = False


@dataclass(frozen=True, slots=True)
class In:
    operand: Operand
    values: tuple[str, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class IsNull:
    operand: Operand
    negated: bool = False


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


# A bare Property or boolean Literal is a condition of its own ("c" where c is 'true', or TRUE).
Node = Compare | Between | In | IsNull | And | Or | Not | Property | Literal
