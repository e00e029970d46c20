"""The SQL92 filter's printer: AST -> expression text that parses back to the same AST.

Used in error messages and logs (a normalised form of what a consumer subscribed with) and by the
round-trip property test. Every AND/OR/NOT is parenthesised, so no precedence rule is needed.
"""

from __future__ import annotations

from decimal import Decimal

from broker.filter.ast import And, Between, Compare, In, IsNull, Literal, Node, Not, Or, Property

__all__ = ["to_sql"]


def _literal(node: Literal) -> str:
    if node.kind == "string":
        assert isinstance(node.value, str)
        return "'" + node.value.replace("'", "''") + "'"
    if node.kind == "boolean":
        return "TRUE" if node.value else "FALSE"
    if node.kind == "null":
        return "NULL"
    value = node.value
    if isinstance(value, Decimal):
        text = format(value, "f")
        return text if "." in text else text + ".0"  # keep it a decimal when read back
    return str(value)


def _quote(values: tuple[str, ...]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


def to_sql(node: Node) -> str:
    if isinstance(node, Literal):
        return _literal(node)
    if isinstance(node, Property):
        return node.name
    if isinstance(node, Compare):
        return f"{to_sql(node.left)} {node.op} {to_sql(node.right)}"
    if isinstance(node, Between):
        word = "NOT BETWEEN" if node.negated else "BETWEEN"
        return f"{to_sql(node.operand)} {word} {to_sql(node.low)} AND {to_sql(node.high)}"
    if isinstance(node, In):
        word = "NOT IN" if node.negated else "IN"
        return f"{to_sql(node.operand)} {word} ({_quote(node.values)})"
    if isinstance(node, IsNull):
        return f"{to_sql(node.operand)} IS {'NOT NULL' if node.negated else 'NULL'}"
    if isinstance(node, And):
        return f"({to_sql(node.left)} AND {to_sql(node.right)})"
    if isinstance(node, Or):
        return f"({to_sql(node.left)} OR {to_sql(node.right)})"
    if isinstance(node, Not):
        return f"NOT ({to_sql(node.operand)})"
    raise TypeError(f"not a filter node: {node!r}")
