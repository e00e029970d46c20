"""The SQL92 filter's error: raised by the lexer and parser, shown to users by the broker (remark of
SUBSCRIPTION_PARSE_FAILED) and by the client's `MessageSelector.by_sql`."""

from __future__ import annotations

__all__ = ["FilterSyntaxError"]


class FilterSyntaxError(ValueError):
    """An invalid expression. `position` is the 0-based character index of the problem."""

    def __init__(self, expression: str, position: int, reason: str) -> None:
        self.expression = expression
        self.position = position
        self.reason = reason
        super().__init__(self.describe())

    def describe(self) -> str:
        # One line (remarks travel in a JSON header): the expression with a marker at the spot.
        marked = f"{self.expression[: self.position]}-->{self.expression[self.position :]}"
        return f"invalid SQL92 expression at position {self.position}: {self.reason} (here: {marked})"
