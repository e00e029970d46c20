"""Tokenizer of the SQL92 filter grammar; `parser.parse` is its only caller.

Tokens carry their character position so that every syntax error can point at the offending spot.
Keywords are case-insensitive, as in RocketMQ's JavaCC grammar; property names are case-sensitive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from broker.filter.errors import FilterSyntaxError

__all__ = ["KEYWORDS", "Token", "TokenType", "tokenize"]

KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE"})


class TokenType(Enum):
    IDENT = "property name"
    KEYWORD = "keyword"
    STRING = "string constant"
    NUMBER = "number"
    OPERATOR = "operator"
    MINUS = "'-'"
    LPAREN = "'('"
    RPAREN = "')'"
    COMMA = "','"
    END = "end of expression"


@dataclass(frozen=True, slots=True)
class Token:
    type: TokenType
    text: str  # keywords upper-cased; strings unquoted; everything else as written
    pos: int

    def describe(self) -> str:
        if self.type is TokenType.END:
            return "end of expression"
        if self.type is TokenType.STRING:
            return f"string '{self.text}'"
        if self.type in (TokenType.IDENT, TokenType.NUMBER):
            return f"{self.type.value} {self.text!r}"
        return repr(self.text)


_SPACE = re.compile(r"\s+")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.]*")
_NUMBER = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)")
_OPERATORS = ("<>", ">=", "<=", "=", ">", "<")
_SINGLE = {"(": TokenType.LPAREN, ")": TokenType.RPAREN, ",": TokenType.COMMA, "-": TokenType.MINUS}


def tokenize(text: str) -> list[Token]:
    """Split `text` into tokens ending with END; FilterSyntaxError names the position of a bad char."""
    tokens: list[Token] = []
    pos, end = 0, len(text)
    while pos < end:
        space = _SPACE.match(text, pos)
        if space:
            pos = space.end()
            continue
        ch = text[pos]
        if ch == "'":
            value, pos_after = _string(text, pos)
            tokens.append(Token(TokenType.STRING, value, pos))
            pos = pos_after
            continue
        ident = _IDENT.match(text, pos)
        if ident:
            word = ident.group()
            if word.upper() in KEYWORDS:
                tokens.append(Token(TokenType.KEYWORD, word.upper(), pos))
            else:
                tokens.append(Token(TokenType.IDENT, word, pos))
            pos = ident.end()
            continue
        number = _NUMBER.match(text, pos)
        if number:
            after = number.end()
            if after < end and (text[after].isalpha() or text[after] == "_"):
                raise FilterSyntaxError(text, after, f"unexpected {text[after]!r} right after the number")
            tokens.append(Token(TokenType.NUMBER, number.group(), pos))
            pos = after
            continue
        op = next((o for o in _OPERATORS if text.startswith(o, pos)), None)
        if op is not None:
            tokens.append(Token(TokenType.OPERATOR, op, pos))
            pos += len(op)
            continue
        if ch in _SINGLE:
            tokens.append(Token(_SINGLE[ch], ch, pos))
            pos += 1
            continue
        if ch == "!" and text.startswith("!=", pos):
            raise FilterSyntaxError(text, pos, "'!=' is not SQL92; use '<>'")
        raise FilterSyntaxError(text, pos, f"unexpected character {ch!r}")
    tokens.append(Token(TokenType.END, "", end))
    return tokens


def _string(text: str, start: int) -> tuple[str, int]:
    """A quoted string starting at `start`; '' inside is one quote. Returns (value, position after)."""
    parts: list[str] = []
    pos = start + 1
    while True:
        close = text.find("'", pos)
        if close < 0:
            raise FilterSyntaxError(text, start, "string constant is not closed with '")
        parts.append(text[pos:close])
        if text.startswith("''", close):
            parts.append("'")
            pos = close + 2
            continue
        return "".join(parts), close + 1
