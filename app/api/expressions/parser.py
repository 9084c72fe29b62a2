"""The grammar of the Rules language (wirefilter): a recursive-descent parser that checks types as it reads.

    expression := xor ( ("or" | "||") xor )*        precedence, lowest first: or, xor, and, not
    xor        := and ( ("xor" | "^^") and )*
    and        := unary ( ("and" | "&&") unary )*
    unary      := ("not" | "!") unary | primary
    primary    := "(" expression ")" | "true" | "false" | comparison
    comparison := value [ operator right ]          a value alone must be a Boolean
    value      := (field | function "(" [expression ("," expression)*] ")" | literal) ( "[" key "]" )*
    key        := string | integer | "*"            map key, array index, every element
    right      := literal | "{" item+ "}" | "$" list  sets and lists only after `in`

An expression with `[*]` maps over an array: `lower(http.request.headers.names[*])[*] == "x"` is an Array<Boolean>
that only `any()` and `all()` turn into a Boolean. Fields and function calls are checked against the phase's tables
(`app.api.expressions.catalogue`); the right side of a comparison is read by `Literals`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from app.api.expressions.catalogue import (
    BOOLEAN,
    BOOLEANS,
    FIELDS,
    FOREIGN_FUNCTIONS,
    FUNCTION_SPECS,
    FUNCTIONS,
    INTEGER,
    MAX_LENGTH,
    PHASE_SCOPES,
    REDIRECT,
    ROLE_SCOPES,
    SCOPE_WHERE,
    STRING,
    TYPE_NAMES,
    UNKNOWN,
    Param,
    Role,
    Type,
    article,
    is_text,
    is_type,
)
from app.api.expressions.lexer import (
    COMPARISON_SYMBOLS,
    COMPARISON_WORDS,
    INTEGER_TEXT,
    KEYWORDS,
    LOGICAL,
    Group,
    Token,
    clip,
)
from app.api.expressions.literals import Literals, Value


@dataclass
class Parser(Literals):
    phase: str
    role: Role
    _once: list[tuple[str, int]] = field(default_factory=list)
    _scopes: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self._scopes = PHASE_SCOPES[self.phase] | ROLE_SCOPES.get((self.phase, self.role), frozenset())

    # Grammar.

    def check(self) -> None:
        if len(self.text) > MAX_LENGTH:
            self.report(
                MAX_LENGTH, f"the expression is {len(self.text)} characters long; Cloudflare allows {MAX_LENGTH}"
            )
        if not self.text.strip():
            self.fail(0, "the expression is empty", 'use "true" to match every request')
        value = self.expression()
        token = self.peek()
        if token.kind != "end":
            expected = 'a logical operator ("and", "or", "xor") or the end of the expression'
            if token.kind == "ident" and token.text == "not":
                self.fail(
                    token.start,
                    '"not" cannot follow a value',
                    'to negate a comparison put "not" before it: "not ip.src in {...}"',
                )
            self.unexpected(token, expected)
        if self.role == "rewrite":
            if (value.type.name != "?" and not is_text(value.type)) or value.star:
                self.report(value.start, f"a rewrite expression must give a String, not {self._show(value)}")
        elif not is_type(value.type, "Boolean") or value.star:
            hint = ""
            if value.type == BOOLEANS:
                hint = _WRAP
            elif value.type.name != "?":
                hint = "compare it with a value, such as == or in {...}"
            self.report(value.start, f"the expression must be a Boolean (true or false), not {self._show(value)}", hint)
        for name, start in self._once[1:]:
            first = self._once[0][0]
            self.report(
                start,
                f"{name}() cannot be used here: an expression may use regex_replace() or wildcard_replace() once"
                f" (it already uses {first}())",
            )

    def expression(self) -> Value:
        return self._logical("or", self._xor)

    def _xor(self) -> Value:
        return self._logical("xor", self._and)

    def _and(self) -> Value:
        return self._logical("and", self.unary)

    def _logical(self, operator: str, operand: Callable[[], Value]) -> Value:
        left: Value = operand()
        while True:
            token = self.peek()
            if LOGICAL.get(token.text) != operator or token.kind not in ("ident", "op"):
                return left
            self.advance()
            right: Value = operand()
            self._boolean(left, token.text)
            self._boolean(right, token.text)
            array = left.type == BOOLEANS or right.type == BOOLEANS
            left = Value(BOOLEANS if array else BOOLEAN, left.start)

    def _boolean(self, value: Value, operator: str) -> None:
        if not (is_type(value.type, "Boolean") or value.type == BOOLEANS) or value.star:
            self.report(value.start, f'"{operator}" needs Booleans on both sides, not {self._show(value)}')
        elif value.type == BOOLEANS and not self._in_call():
            self.report(value.start, f'"{operator}" needs Booleans on both sides, not an array of Booleans', _WRAP)

    def unary(self) -> Value:
        token = self.peek()
        if (token.kind == "ident" and token.text == "not") or (token.kind == "op" and token.text == "!"):
            self.advance()
            operand = self.unary()
            self._boolean(operand, token.text)
            return Value(BOOLEANS if operand.type == BOOLEANS else BOOLEAN, token.start)
        return self.primary()

    def primary(self) -> Value:
        token = self.peek()
        if token.kind == "op" and token.text == "(":
            self.advance()
            self._groups.append(Group("(", token.start))
            inner = self.expression()
            self.expect(")", 'a logical operator or ")"')
            self._groups.pop()
            return Value(inner.type, token.start, star=inner.star)
        if token.kind == "ident" and token.text in ("true", "false"):
            self.advance()
            return Value(BOOLEAN, token.start, literal=True)
        return self.comparison()

    def comparison(self) -> Value:
        left = self.value()
        token = self.peek()
        operator = self._operator(token)
        if operator is None:
            if not _ends_operand(token):
                if token.kind == "ident" and token.text == "not":
                    self.fail(
                        token.start,
                        '"not" cannot follow a value',
                        'to negate a comparison put "not" before it: "not ip.src in {...}"',
                    )
                wanted = (
                    "a logical operator (and, or, xor)" if is_type(left.type, "Boolean") else "a comparison operator"
                )
                self.unexpected(token, f"{wanted}{_ENDING}")
            return left
        self.advance()
        if operator == "strict":
            follow = self.peek()
            if follow.kind != "ident" or follow.text != "wildcard":
                self.unexpected(follow, '"wildcard" (the operator is "strict wildcard")')
            self.advance()
            operator = "strict wildcard"
        if left.literal:
            self.fail(left.start, "the left side of a comparison must be a field or a function, not a literal")
        self.right(left, operator, token)
        if left.type.name == "?":
            return Value(UNKNOWN, left.start)  # already reported: a guess at its type would only add noise
        return Value(BOOLEANS if left.star else BOOLEAN, left.start)

    @staticmethod
    def _operator(token: Token) -> str | None:
        if token.kind == "ident":
            return "strict" if token.text == "strict" else COMPARISON_WORDS.get(token.text)
        if token.kind == "op":
            return COMPARISON_SYMBOLS.get(token.text)
        return None

    def value(self) -> Value:
        token = self.peek()
        if token.kind == "ident" and token.text not in KEYWORDS:
            self.advance()
            value = self.call(token) if self.at("(") else self.field(token)
        elif token.kind in ("string", "raw"):
            self.advance()
            if token.kind == "string":
                self._escapes(token, regex=False)
            value = Value(STRING, token.start, literal=True, token=token)
        elif token.kind == "number" and INTEGER_TEXT.fullmatch(token.text):
            self.advance()
            value = Value(INTEGER, token.start, literal=True)
        else:
            self.unexpected(token, "a field, a function or a value")
        while self.at("["):
            value = self.access(value)
        return value

    def field(self, token: Token) -> Value:
        name = token.text
        known = FIELDS.get(name)
        if known is None:
            close = difflib.get_close_matches(name, FIELDS, n=1, cutoff=0.75)
            close = close or difflib.get_close_matches(name, FUNCTIONS, n=1, cutoff=0.8)
            hint = f'did you mean "{close[0]}"?' if close else ""
            self.report(token.start, f'unknown field "{clip(name, 80)}"', hint)
            return Value(UNKNOWN, token.start)
        type_, scope = known
        if scope not in self._scopes:
            where = f"{self.phase} rules" if self.role != "counting" else "a counting expression"
            self.report(token.start, f'field "{name}" is not available in {where}', SCOPE_WHERE[scope])
        return Value(type_, token.start)

    def access(self, value: Value) -> Value:
        opener = self.advance()
        self._groups.append(Group("[", opener.start))
        token = self.peek()
        base = value.type
        result: Value
        if token.kind == "op" and token.text == "*":
            self.advance()
            if value.star:
                self.report(token.start, "[*] is already applied to this value")
            if not is_type(base, "Array", "Map"):
                self.report(token.start, f"[*] needs an array or a map, not {base}")
                base = UNKNOWN
            result = Value(base.of or UNKNOWN, value.start, star=True)
        elif token.kind in ("string", "raw"):
            self.advance()
            if not is_type(base, "Map"):
                self.report(token.start, f'a key like ["name"] needs a map, not {base}', "arrays take an index: [0]")
                base = UNKNOWN
            result = Value(base.of or UNKNOWN, value.start, star=value.star)
        elif token.kind == "number" and INTEGER_TEXT.fullmatch(token.text):
            self.advance()
            if token.text.startswith("-"):
                self.report(token.start, "an array index cannot be negative")
            if not is_type(base, "Array"):
                hint = 'maps take a key in quotes: ["name"]' if base.name == "Map" else ""
                self.report(token.start, f"an index like [0] needs an array, not {base}", hint)
                base = UNKNOWN
            result = Value(base.of or UNKNOWN, value.start, star=value.star)
        else:
            self.unexpected(token, 'an index ([0]), a key (["name"]) or [*]')
        self.expect("]")
        self._groups.pop()
        return result

    def call(self, name: Token) -> Value:
        opener = self.expect("(")
        self._groups.append(Group(f"{name.text}(", name.start))
        args: list[Value] = []
        if not self.at(")"):
            args.append(self.expression())
            while self.at(","):
                self.advance()
                args.append(self.expression())
        self.expect(")", '"," or ")"')
        self._groups.pop()
        del opener
        return self._apply(name, args)

    def _apply(self, name: Token, args: list[Value]) -> Value:
        spec = FUNCTION_SPECS.get(name.text)
        if spec is None:
            if name.text in FOREIGN_FUNCTIONS:
                self.report(name.start, FOREIGN_FUNCTIONS[name.text])
                return Value(UNKNOWN, name.start)
            close = difflib.get_close_matches(name.text, FUNCTIONS, n=1, cutoff=0.7)
            hint = f'did you mean "{close[0]}"?' if close else ""
            self.report(name.start, f'unknown function "{clip(name.text, 80)}"', hint)
            return Value(UNKNOWN, name.start)
        fn = name.text
        if (spec.phases is not None and self.phase not in spec.phases) or (
            spec.rewrite_only and self.role != "rewrite"
        ):
            if spec.rewrite_only:
                where = "in the rewrite expressions of transform rules and the target URL of redirect rules"
                if spec.phases is not None and REDIRECT not in spec.phases:
                    where = "in the rewrite expressions of transform rules"
            else:
                where = "in " + ", ".join(sorted(spec.phases or ())) + " rules"
            self.report(name.start, f"{fn}() is not available in {self._where()}", f"Cloudflare allows it only {where}")
        if spec.once:
            self._once.append((fn, name.start))
        if fn == "regex_replace" and len(args) > 1 and args[1].token is not None:
            self._regex(args[1].token)
        count = len(args)
        most = len(spec.params) if spec.variadic is None else None
        if count < spec.required or (most is not None and count > most):
            wanted = (
                f"{spec.required}"
                if most == spec.required
                else f"at least {spec.required}"
                if most is None
                else f"{spec.required} to {most}"
            )
            self.report(name.start, f"{fn}() takes {wanted} argument{'s' if wanted != '1' else ''}, not {count}")
            return Value(UNKNOWN, name.start)
        mapped = False
        for index, arg in enumerate(args):
            param = spec.params[index] if index < len(spec.params) else spec.variadic
            assert param is not None  # the count was checked above
            if arg.star:
                if index != 0:
                    self.report(arg.start, "[*] can only be used in the first argument of a function")
                mapped = True
            self._argument(fn, index, arg, param)
        if fn in ("any", "all"):
            if args and args[0].type.name != "?" and (args[0].type != BOOLEANS or args[0].star):
                self.report(
                    args[0].start,
                    f'{fn}() takes an array of Booleans, such as {fn}(http.request.headers.names[*] == "x"),'
                    f" not {self._show(args[0])}",
                )
            return Value(BOOLEAN, name.start)
        returns = spec.returns
        if fn == "concat" and args and args[0].type.name == "Array" and not args[0].star:
            returns = args[0].type
        return Value(Type("Array", returns) if mapped else returns, name.start)

    def _argument(self, fn: str, index: int, arg: Value, param: Param) -> None:
        ordinal = ("first", "second", "third", "fourth", "fifth", "sixth")[index] if index < 6 else f"#{index + 1}"
        if arg.type.name != "?" and arg.type.name not in param.types:
            wanted = " or ".join(sorted({TYPE_NAMES.get(t, t) for t in param.types}))
            self.report(arg.start, f"the {ordinal} argument of {fn}() must be {wanted}, not {self._show(arg)}")
        elif param.field_only and arg.literal:
            self.report(arg.start, f"the {ordinal} argument of {fn}() must be a field, not a literal")
        elif param.literal_only and not arg.literal and arg.type.name != "?":
            self.report(arg.start, f"the {ordinal} argument of {fn}() must be a literal value")

    def _where(self) -> str:
        return f"{self.phase} rules" if self.role == "filter" else f"{self.phase} {self.role} expressions"

    def _in_call(self) -> bool:
        return any(group.opener.endswith("(") and group.opener != "(" for group in self._groups)

    @staticmethod
    def _show(value: Value) -> str:
        if value.star:
            return f"each {value.type} of an array ([*])"
        if value.type == BOOLEANS:
            return "an array of Booleans"
        return article(value.type)


_WRAP: Final = "a comparison on [*] gives one Boolean per element: wrap it in any(...) or all(...)"
_ENDING: Final = " or the end of the expression"


def _ends_operand(token: Token) -> bool:
    """Whether `token` may follow a complete operand: the end, a closer, a comma or a logical operator."""
    if token.kind == "end":
        return True
    if token.kind == "op":
        return token.text in (")", ",", "]", "}") or token.text in LOGICAL
    return token.kind == "ident" and token.text in LOGICAL
