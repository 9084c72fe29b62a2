"""Reading an expression: its tokens, and how a mistake is reported with its position.

A syntax error stops the check (`Stop`): what follows it cannot be read reliably. A missing closer is blamed on the
group it leaves open, and a misplaced quote on the quote rather than on the text it shifted.
"""

from __future__ import annotations

import re
from dataclasses import KW_ONLY, dataclass, field
from typing import Final, NoReturn


@dataclass(frozen=True)
class ExpressionError:
    """One mistake in an expression. `str()` is the sentence a user reads, with the position and any hint."""

    position: int
    """1-based character offset of the mistake in the expression."""
    message: str
    hint: str = ""

    def __str__(self) -> str:
        return f"{self.message} at {self.position}" + (f"; {self.hint}" if self.hint else "")


# Tokens.

COMPARISON_WORDS: Final = {
    "eq": "eq",
    "ne": "ne",
    "lt": "lt",
    "le": "le",
    "gt": "gt",
    "ge": "ge",
    "contains": "contains",
    "matches": "matches",
    "wildcard": "wildcard",
    "in": "in",
}
COMPARISON_SYMBOLS: Final = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "~": "matches"}
LOGICAL: Final = {"and": "and", "&&": "and", "or": "or", "||": "or", "xor": "xor", "^^": "xor"}
KEYWORDS: Final = frozenset({*COMPARISON_WORDS, "and", "or", "xor", "not", "strict", "true", "false"})

_SPACE = re.compile(r"\s*")
_TOKEN = re.compile(
    r"""(?P<raw>r\#*")
    |(?P<ident>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)
    |(?P<number>-?[0-9][0-9A-Fa-f:.]*(?:/[0-9]+)?|::[0-9A-Fa-f:.]*(?:/[0-9]+)?)
    |(?P<string>")
    |(?P<list>\$)
    |(?P<op>==|!=|<=|>=|&&|\|\||\^\^|[<>~!(){}\[\],*])""",
    re.VERBOSE,
)
_LIST_TEXT = re.compile(r"[^\s(){}\[\],\"]*")
INTEGER_TEXT = re.compile(r"-?[0-9]+")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    """ident, number, string, raw, list, op, end."""
    start: int
    end: int
    text: str
    body: str = ""
    """A string's content, between its delimiters."""

    def show(self) -> str:
        return "the end of the expression" if self.kind == "end" else f'"{clip(self.text)}"'


def clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Stop(Exception):
    """A syntax error: nothing after it can be read reliably."""


@dataclass
class Group:
    """An open `(`, `{` or function call, to say which one a missing closer belongs to."""

    opener: str
    start: int


@dataclass
class Lexer:
    """The tokenizer under the parser: one token of lookahead, the errors found so far, and the groups still open."""

    text: str
    # Keyword-only, so that a subclass's fields without a default (the parser's phase and role) may follow.
    _: KW_ONLY
    errors: list[ExpressionError] = field(default_factory=list)
    pos: int = 0
    _peeked: Token | None = None
    _previous: Token | None = None
    _groups: list[Group] = field(default_factory=list)

    # Reporting.

    def report(self, start: int, message: str, hint: str = "") -> None:
        self.errors.append(ExpressionError(start + 1, message, hint))

    def fail(self, start: int, message: str, hint: str = "") -> NoReturn:
        self.report(start, message, hint)
        raise Stop

    def unexpected(self, token: Token, expected: str) -> NoReturn:
        if token.kind == "end" and self._groups:
            group = self._groups[-1]
            closer = {"(": ")", "{": "}", "[": "]"}[group.opener[-1]]
            self.fail(
                group.start,
                f'"{group.opener}" is never closed',
                f'a "{closer}" is missing; the expression ended while {expected} was expected',
            )
        if token.kind == "op" and token.text == ")" and not any(g.opener.endswith("(") for g in self._groups):
            where = self._groups[-1].start if self._groups else 0
            self.fail(
                where,
                "unbalanced parentheses",
                f'the ")" at {token.start + 1} closes nothing: a "(" is missing before it',
            )
        self._quote_check(token.start, f"{token.show()} at {token.start + 1}, where {expected} was expected")
        if token.kind == "ident" and token.text.lower() in KEYWORDS and token.text != token.text.lower():
            self.fail(
                token.start,
                f"unexpected {token.show()}",
                f'operators are written in lower case: "{token.text.lower()}"',
            )
        self.fail(token.start, f"expected {expected}, found {token.show()}")

    def _quote_check(self, start: int, found: str) -> None:
        """Blame a misplaced quote rather than what it displaced, when the quotes from `start` on do not pair up.

        A missing or extra quote shifts every string after it, so the error surfaces later than the mistake: right
        after a string that swallowed what followed it, or right after a word that should have been in quotes."""
        previous = self._previous
        if previous is None or not _odd_quotes(start, self.text):
            return
        # What was read from the misplaced quote on is unreliable: only the quote is reported from there.
        keep = [error for error in self.errors if error.position <= previous.start]
        if previous.kind in ("string", "raw") and previous.end == self._space_before(start):
            self.errors[:] = keep
            self.fail(
                previous.start,
                "a quote is missing or misplaced in the string",
                f"it ends at {previous.end} and is followed by {found}",
            )
        if previous.kind in ("ident", "number") and previous.end == start:
            self.errors[:] = keep
            self.fail(
                previous.start,
                "a quote seems to be missing here",
                f'"{clip(self.text[previous.start : start + 1])}" has only its closing quote'
                if self.text[start] == '"'
                else f"{found}",
            )

    def _space_before(self, index: int) -> int:
        while index > 0 and self.text[index - 1].isspace():
            index -= 1
        return index

    # Tokenizer.

    def peek(self) -> Token:
        if self._peeked is None:
            self._peeked = self._lex()
        return self._peeked

    def advance(self) -> Token:
        token = self.peek()
        self._peeked = None
        self.pos = token.end
        self._previous = token
        return token

    def _lex(self) -> Token:
        text = self.text
        space = _SPACE.match(text, self.pos)
        start = space.end() if space else self.pos
        if start >= len(text):
            return Token("end", start, start, "")
        match = _TOKEN.match(text, start)
        if match is None:
            char = text[start]
            hint = "strings are written in double quotes" if char == "'" else ""
            self._quote_check(start, f'the character "{char}" at {start + 1}')
            self.fail(start, f'unexpected character "{char}"', hint)
        kind = match.lastgroup or "op"
        if kind == "string":
            return self._lex_string(start)
        if kind == "raw":
            return self._lex_raw(start, match.end() - start - 2)
        if kind == "list":
            name = _LIST_TEXT.match(text, start + 1)
            end = name.end() if name else start + 1
            return Token("list", start, end, text[start:end], text[start + 1 : end])
        return Token(kind, start, match.end(), match.group())

    def _lex_string(self, start: int) -> Token:
        text = self.text
        index = start + 1
        while index < len(text):
            char = text[index]
            if char == "\\":
                index += 2
                continue
            if char == '"':
                return Token("string", start, index + 1, text[start : index + 1], text[start + 1 : index])
            index += 1
        self._quote_check(start, f"a quote at {start + 1} that opens a string never closed")
        self.fail(start, "this string is never closed", 'a closing " is missing')

    def _lex_raw(self, start: int, hashes: int) -> Token:
        closer = '"' + "#" * hashes
        body_start = start + 2 + hashes
        end = self.text.find(closer, body_start)
        if end < 0:
            self.fail(start, "this raw string is never closed", f"it must end with {closer}")
        return Token("raw", start, end + len(closer), self.text[start : end + len(closer)], self.text[body_start:end])

    def expect(self, text: str, expected: str | None = None) -> Token:
        token = self.peek()
        if token.kind != "op" or token.text != text:
            self.unexpected(token, expected or f'"{text}"')
        return self.advance()

    def at(self, text: str) -> bool:
        token = self.peek()
        return token.kind == "op" and token.text == text


def _odd_quotes(start: int, text: str) -> bool:
    """Whether the double quotes from `start` on fail to pair up (escaped ones left out)."""
    count = 0
    index = start
    while True:
        index = text.find('"', index)
        if index < 0:
            return count % 2 == 1
        if text[index - 1] != "\\":
            count += 1
        index += 1
