"""SQL92 message filtering on user properties (RocketMQ's `MessageSelector.bySql`).

Callers: the broker's heartbeat, CHECK_CLIENT_CONFIG and pull paths (broker/server/property_filter.py)
and the client's subscription (broker/client/subscription.py). Everything here is pure: `compile_sql`
parses an expression once (cached by its text, so every pull of a subscription reuses it) into a
`SqlFilter` whose `matches(props)` selects a message when the expression is TRUE.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from broker.filter.ast import Node
from broker.filter.errors import FilterSyntaxError
from broker.filter.evaluate import Predicate, Props, Truth, compile_predicate, evaluate
from broker.filter.parser import parse
from broker.filter.printer import to_sql

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "FilterSyntaxError",
    "SqlFilter",
    "compile_sql",
    "evaluate",
    "is_sql92",
    "parse",
    "to_sql",
]

EXPRESSION_TYPE_SQL92 = "SQL92"
EXPRESSION_TYPE_TAG = "TAG"


def is_sql92(expression_type: str | None) -> bool:
    return (expression_type or EXPRESSION_TYPE_TAG).upper() == EXPRESSION_TYPE_SQL92


@dataclass(frozen=True, slots=True)
class SqlFilter:
    """A compiled expression: the text, its AST and the predicate built from it."""

    expression: str
    ast: Node
    predicate: Predicate = field(compare=False, repr=False)

    def evaluate(self, props: Props) -> Truth:
        return self.predicate(props)

    def matches(self, props: Props) -> bool:
        return self.predicate(props) is True


@lru_cache(maxsize=1024)
def compile_sql(expression: str) -> SqlFilter:
    """Parse and compile once per distinct expression; FilterSyntaxError (a ValueError) if invalid."""
    ast = parse(expression)
    return SqlFilter(expression, ast, compile_predicate(ast))
