"""Recursive-descent parser of RocketMQ's SQL92 filter grammar (the seed's "基本语法"):

    expression := or
    or         := and ("OR" and)*
    and        := not ("AND" not)*
    not        := "NOT" not | predicate
    predicate  := "(" expression ")"
                | operand comparison-op operand               (= <> > >= < <=)
                | operand ["NOT"] "BETWEEN" operand "AND" operand
                | operand ["NOT"] "IN" "(" string ("," string)* ")"
                | operand "IS" ["NOT"] "NULL"
                | property | TRUE | FALSE                     (a boolean on its own)
    operand    := property | string | ["-"] number | TRUE | FALSE | NULL

Callers: `broker.filter.compile_sql` (cached, used by the broker's heartbeat/pull paths and the
client's MessageSelector). Pure: text in, AST out, or FilterSyntaxError with the position.
Constants are checked here rather than at evaluation time, as RocketMQ does: `a > 'abc'` or
`a BETWEEN 'x' AND 3` can never be true, so they are refused when the consumer subscribes.
"""

from __future__ import annotations

from decimal import Decimal

from broker.filter.ast import And, Between, Compare, In, IsNull, Literal, Node, Not, Operand, Or, Property
from broker.filter.errors import FilterSyntaxError
from broker.filter.lexer import Token, TokenType, tokenize

__all__ = ["number_literal", "parse"]

_ORDERING = frozenset({">", ">=", "<", "<="})


def number_literal(text: str, negative: bool = False) -> Literal:
    """A numeric constant: int when it has no fraction, Decimal otherwise (exact, printable)."""
    value: int | Decimal = Decimal(text) if "." in text else int(text)
    return Literal("number", -value if negative else value)


def parse(text: str) -> Node:
    """Parse a whole expression; FilterSyntaxError says where and why it is invalid."""
    if not text.strip():
        raise FilterSyntaxError(text, 0, "the expression is empty")
    parser = _Parser(text)
    node = parser.expression()
    parser.expect_end()
    return node


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    # -- token helpers

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        if tok.type is not TokenType.END:
            self.i += 1
        return tok

    def is_keyword(self, word: str, offset: int = 0) -> bool:
        tok = self.tokens[min(self.i + offset, len(self.tokens) - 1)]
        return tok.type is TokenType.KEYWORD and tok.text == word

    def error(self, tok: Token, expected: str) -> FilterSyntaxError:
        return FilterSyntaxError(self.text, tok.pos, f"expected {expected}, found {tok.describe()}")

    def expect_keyword(self, word: str) -> None:
        if not self.is_keyword(word):
            raise self.error(self.tok, word)
        self.advance()

    def expect(self, kind: TokenType, expected: str) -> Token:
        if self.tok.type is not kind:
            raise self.error(self.tok, expected)
        return self.advance()

    def expect_end(self) -> None:
        if self.tok.type is not TokenType.END:
            raise self.error(self.tok, "AND, OR or the end of the expression")

    # -- grammar

    def expression(self) -> Node:
        node = self.and_()
        while self.is_keyword("OR"):
            self.advance()
            node = Or(node, self.and_())
        return node

    def and_(self) -> Node:
        node = self.not_()
        while self.is_keyword("AND"):
            self.advance()
            node = And(node, self.not_())
        return node

    def not_(self) -> Node:
        if self.is_keyword("NOT"):
            self.advance()
            return Not(self.not_())
        return self.predicate()

    def predicate(self) -> Node:
        if self.tok.type is TokenType.LPAREN:
            self.advance()
            node = self.expression()
            self.expect(TokenType.RPAREN, "')'")
            return node
        start = self.tok
        left = self.operand()
        tok = self.tok
        if tok.type is TokenType.OPERATOR:
            self.advance()
            right_tok = self.tok
            right = self.operand()
            if tok.text in _ORDERING:
                self._check_numeric(left, start, tok.text)
                self._check_numeric(right, right_tok, tok.text)
            return Compare(tok.text, left, right)
        negated = False
        if self.is_keyword("NOT") and (self.is_keyword("BETWEEN", 1) or self.is_keyword("IN", 1)):
            self.advance()
            negated = True
        if self.is_keyword("BETWEEN"):
            self.advance()
            self._check_numeric(left, start, "BETWEEN")
            low_tok = self.tok
            low = self.operand()
            self._check_numeric(low, low_tok, "BETWEEN")
            self.expect_keyword("AND")
            high_tok = self.tok
            high = self.operand()
            self._check_numeric(high, high_tok, "BETWEEN")
            return Between(left, low, high, negated)
        if self.is_keyword("IN"):
            self.advance()
            return In(left, self.string_list(), negated)
        if self.is_keyword("IS"):
            self.advance()
            is_not = False
            if self.is_keyword("NOT"):
                self.advance()
                is_not = True
            self.expect_keyword("NULL")
            return IsNull(left, is_not)
        if isinstance(left, Property) or (isinstance(left, Literal) and left.kind == "boolean"):
            return left  # a boolean on its own
        raise self.error(tok, "a comparison operator, BETWEEN, IN or IS after the constant")

    def string_list(self) -> tuple[str, ...]:
        self.expect(TokenType.LPAREN, "'(' to open the IN list")
        values: list[str] = []
        while True:
            tok = self.tok
            if tok.type is not TokenType.STRING:
                raise self.error(tok, "a string constant in the IN list")
            values.append(self.advance().text)
            if self.tok.type is TokenType.COMMA:
                self.advance()
                continue
            self.expect(TokenType.RPAREN, "',' or ')' in the IN list")
            return tuple(values)

    def operand(self) -> Operand:
        tok = self.tok
        if tok.type is TokenType.IDENT:
            self.advance()
            return Property(tok.text)
        if tok.type is TokenType.STRING:
            self.advance()
            return Literal("string", tok.text)
        if tok.type is TokenType.NUMBER:
            self.advance()
            return number_literal(tok.text)
        if tok.type is TokenType.MINUS:
            self.advance()
            number = self.expect(TokenType.NUMBER, "a number after '-'")
            return number_literal(number.text, negative=True)
        if tok.type is TokenType.KEYWORD and tok.text in ("TRUE", "FALSE"):
            self.advance()
            return Literal("boolean", tok.text == "TRUE")
        if tok.type is TokenType.KEYWORD and tok.text == "NULL":
            self.advance()
            return Literal("null", None)
        raise self.error(tok, "a property name or a constant")

    def _check_numeric(self, operand: Operand, tok: Token, op: str) -> None:
        if isinstance(operand, Literal) and operand.kind != "number":
            raise FilterSyntaxError(self.text, tok.pos, f"{op} compares numbers, but {tok.describe()} is not a number")
