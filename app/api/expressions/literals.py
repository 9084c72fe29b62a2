"""The right side of a comparison: the operator checked against the left side's type, then the literal, the set
of values or the list it compares with, down to what is inside them (IP addresses and ranges, integer ranges,
string escapes, the structure of a regular expression).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from app.api.expressions.catalogue import UNKNOWN, Type, article
from app.api.expressions.lexer import INTEGER_TEXT, Group, Lexer, Token, clip

_IP_TEXT = re.compile(r"[0-9A-Fa-f:.]+(?:/[0-9]+)?")
_LIST_NAME = re.compile(r"[a-z0-9_]+|cf\.[a-z0-9_.]+")


@dataclass(slots=True)
class Value:
    """What part of an expression gives, as the parser read it: its type and where it starts."""

    type: Type
    start: int
    literal: bool = False
    star: bool = False
    """An unpacked array (`x[*]`): operations apply to each element."""
    token: Token | None = None
    """The string of a string literal."""


@dataclass
class Literals(Lexer):
    """The reading of what a comparison compares with; `Parser` adds the grammar that leads to it."""

    lists: set[str] = field(default_factory=set, kw_only=True)
    """The lists (`$name`) the expression reads, as the parser met them."""

    def right(self, left: Value, operator: str, token: Token) -> None:
        type_ = left.type
        name = type_.name
        reported = len(self.errors)
        if name == "Boolean":
            self.report(
                token.start,
                f'a Boolean cannot be compared with "{operator}"',
                'use it alone ("ssl") or negated ("not ssl")',
            )
        elif name in ("Array", "Map") and not left.star:
            self.report(
                token.start,
                f"{type_} cannot be compared directly",
                'use an index ([0]), a key (["name"]), or [*] inside any(...) or all(...)',
            )
        elif name == "IP" and operator in ("contains", "matches", "wildcard", "strict wildcard"):
            self.report(token.start, f'"{operator}" compares strings, not IP addresses', "use in {...} for ranges")
        elif name == "Integer" and operator in ("contains", "matches", "wildcard", "strict wildcard"):
            self.report(token.start, f'"{operator}" compares strings, not integers')
        if len(self.errors) > reported:
            type_ = UNKNOWN  # the mismatch is reported once; the right side is read for its syntax only
        if operator == "in":
            self._set(type_)
        else:
            self._literal(type_, operator, regex=operator == "matches")

    def _literal(self, type_: Type, operator: str, regex: bool = False) -> None:
        name = type_.name
        if name in ("IP",) or (name == "?" and self._looks_like_ip()):
            self._ip(allow_ranges=False)
            return
        token = self.peek()
        if token.kind in ("string", "raw"):
            self.advance()
            if token.kind == "string":
                self._escapes(token, regex=regex)
            if regex:
                self._regex(token)
            if name not in ("String", "Bytes", "?", "Boolean", "Array", "Map"):
                self.report(
                    token.start, f"expected {article(type_)} to compare with, found a string", _quote_hint(token)
                )
            return
        if token.kind == "number":
            self.advance()
            if not INTEGER_TEXT.fullmatch(token.text):
                self.report(token.start, f'"{clip(token.text)}" is not a valid number')
            elif name in ("String", "Bytes"):
                self.report(
                    token.start,
                    f"expected a string to compare with, found the number {token.text}",
                    f'write "{token.text}"',
                )
            return
        if token.kind == "op" and token.text == "{":
            self.fail(token.start, f'a set of values {{...}} can only follow "in", not "{operator}"')
        if token.kind == "list":
            self.fail(token.start, f'a list can only follow "in", not "{operator}"')
        self.unexpected(token, f"{article(type_) if name != '?' else 'a value'} to compare with")

    def _set(self, type_: Type) -> None:
        token = self.peek()
        if token.kind == "list":
            self.advance()
            self._list(token, type_)
            return
        if not (token.kind == "op" and token.text == "{"):
            self.unexpected(token, 'a set of values in braces ({"a" "b"}) or a list ($name)')
        self.advance()
        self._groups.append(Group("{", token.start))
        count = 0
        while True:
            item = self.peek()
            if item.kind == "op" and item.text == "}":
                break
            if item.kind == "op" and item.text == ",":
                self.fail(item.start, "the values of a set are separated by spaces, not commas")
            if type_.name == "IP" or (type_.name == "?" and self._looks_like_ip()):
                self._ip(allow_ranges=True)
            elif item.kind in ("string", "raw"):
                self.advance()
                if item.kind == "string":
                    self._escapes(item, regex=False)
                if type_.name not in ("String", "Bytes", "?"):
                    self.report(item.start, f"expected {article(type_)} in this set, found a string", _quote_hint(item))
            elif item.kind == "number":
                self.advance()
                self._integer_item(item, type_)
            else:
                self.unexpected(item, f'{article(type_) if type_.name != "?" else "a value"} or "}}"')
            count += 1
        self.advance()
        self._groups.pop()
        if count == 0:
            self.report(token.start, "a set needs at least one value")

    def _integer_item(self, item: Token, type_: Type) -> None:
        low, dots, high = item.text.partition("..")
        good = INTEGER_TEXT.fullmatch(low) and (not dots or INTEGER_TEXT.fullmatch(high))
        if not good:
            self.report(item.start, f'"{clip(item.text)}" is not a valid number or range (like 8000..8009)')
        elif type_.name in ("String", "Bytes"):
            self.report(
                item.start, f"expected a string in this set, found the number {item.text}", f'write "{item.text}"'
            )
        elif dots and int(low) > int(high):
            self.report(item.start, f"the range {item.text} is empty: its start is above its end")

    def _list(self, token: Token, type_: Type) -> None:
        name = token.body
        if not _LIST_NAME.fullmatch(name):
            hint = "list names are lower-case letters, digits and underscores"
            if name.lower() != name and _LIST_NAME.fullmatch(name.lower()):
                hint += f': "${name.lower()}"'
            self.report(token.start, f'"{clip(token.text)}" is not a valid list name', hint)
            return
        if type_.name not in ("IP", "String", "Bytes", "Integer", "?"):
            self.report(token.start, f"a list cannot hold {type_} values")
        self.lists.add(name)

    def _looks_like_ip(self) -> bool:
        token = self.peek()
        return token.kind == "number" and ("." in token.text.replace("..", "") or ":" in token.text)

    def _ip(self, allow_ranges: bool) -> None:
        token = self.peek()
        match = _IP_TEXT.match(self.text, token.start)
        if token.kind == "end" or match is None or match.end() == token.start:
            self.unexpected(token, "an IP address")
        text = match.group()
        self._peeked = None
        self.pos = match.end()
        self._previous = Token("number", token.start, match.end(), text)
        start = token.start
        if "/" in text:
            if not allow_ranges:
                self.report(start, f"{text} is a range", f"use in {{{text}}} to match every address in it")
            try:
                ipaddress.ip_network(text, strict=False)  # host bits set are masked, as Cloudflare does
            except ValueError:
                self.report(start, f'"{clip(text)}" is not a valid CIDR range')
            return
        low, dots, high = text.partition("..")
        if dots and not allow_ranges:
            self.report(start, f"{text} is a range", f"use in {{{text}}} to match every address in it")
        try:
            first = ipaddress.ip_address(low)
            if dots:
                last = ipaddress.ip_address(high)
                if first.version != last.version:
                    self.report(start, f"the range {text} mixes IPv4 and IPv6")
                elif int(first) > int(last):
                    self.report(start, f"the range {text} is empty: its start is above its end")
        except ValueError:
            self.report(start, f'"{clip(text)}" is not a valid IP address')

    def _regex(self, token: Token) -> None:
        """Report the unbalanced groups and classes of a regular expression, which Cloudflare's engine refuses.

        Only the structure is checked: the syntax of the rest (Rust's regex dialect) is left to Cloudflare."""
        body = token.body
        base = token.start + (token.text.find('"') + 1 if token.kind == "raw" else 1)
        groups: list[int] = []
        classes: list[int] = []
        index = 0
        while index < len(body):
            char = body[index]
            if char == "\\":
                index += 2
                continue
            if char == "[":
                classes.append(index)
                index += 1
                if not classes[:-1]:  # a leading "]" (or "^]") is a literal in an outer class
                    index += body[index : index + 1] == "^"
                    index += body[index : index + 1] == "]"
                continue
            if classes:
                if char == "]":
                    classes.pop()
            elif char == "(":
                groups.append(index)
            elif char == ")":
                if not groups:
                    self.report(
                        token.start,
                        "the regular expression has unbalanced parentheses",
                        f'the ")" at {base + index + 1} closes nothing (write \\) for a literal parenthesis)',
                    )
                    return
                groups.pop()
            index += 1
        if classes:
            self.report(base + classes[0], 'this "[" of the regular expression is never closed')
        elif groups:
            self.report(base + groups[-1], 'this "(" of the regular expression is never closed')

    def _escapes(self, token: Token, regex: bool) -> None:
        body = token.body
        index = 0
        while True:
            index = body.find("\\", index)
            if index < 0:
                return
            escaped = body[index + 1 : index + 2]
            at = token.start + 1 + index
            if regex or escaped in ('"', "\\"):
                index += 2
                continue
            if escaped == "x" and re.fullmatch(r"[0-9A-Fa-f]{2}", body[index + 2 : index + 4]):
                index += 4
                continue
            if re.fullmatch(r"[0-7]{3}", body[index + 1 : index + 4]):
                index += 4
                continue
            self.report(
                at,
                f'"\\{escaped}" is not an escape Cloudflare knows in a string',
                'write \\\\ for a backslash, \\" for a quote, \\xHH for a byte, or use a raw string r"..."',
            )
            index += 2


def _quote_hint(token: Token) -> str:
    inner = token.body
    return f"write {inner} without quotes" if inner and INTEGER_TEXT.fullmatch(inner) else ""
