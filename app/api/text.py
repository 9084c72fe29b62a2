"""Characters no name or value of a kflare object may hide: control characters and invisible formatting.

A NUL cuts a string short in many tools; a right-to-left override (U+202E) or an isolate (U+2066-U+2069) makes
`kubectl get`, the dashboard and a code review show text in another order than Cloudflare reads it, so a record
can look like another. Two levels:

- `Name` (names that identify something: a DNS record's name): no control character (Unicode category Cc) and no
  format character (Cf: bidirectional marks, overrides and isolates, zero-width characters, soft hyphens...);
- `Text` (values people read: a record's content, comments, tags): no control character and no bidirectional
  mark, embedding, override or isolate. Other format characters stay allowed (the zero-width joiner of an emoji);
- `Code` (a Worker's script, a multi-line value): as `Text`, but tabs and line breaks are what code is made of.
  Bidirectional controls are refused there too: they are how source code hides what it does.

Each is checked twice, from the same definition: by pydantic (so the admission webhook names the character and
its position) and by a CEL rule in the CRD's schema (so the API server refuses it even without the webhook).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Annotated, Final

from pydantic import AfterValidator, Field, JsonValue
from pydantic_core import PydanticCustomError

BIDI_CONTROLS: Final = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)  # fmt: skip
"""Arabic letter mark, left-to-right and right-to-left marks, embeddings, overrides and isolates."""

# RE2 classes (CEL's `matches`); `\\` is one backslash in a CEL string.
_BIDI_CLASS: Final = "\\\\x{061C}\\\\x{200E}\\\\x{200F}\\\\x{202A}-\\\\x{202E}\\\\x{2066}-\\\\x{2069}"
NAME_RULE: Final = "!self.matches('[\\\\p{Cc}\\\\p{Cf}]')"
TEXT_RULE: Final = f"!self.matches('[\\\\p{{Cc}}{_BIDI_CLASS}]')"
_CODE_CONTROLS: Final = "\\\\x{00}-\\\\x{08}\\\\x{0B}\\\\x{0C}\\\\x{0E}-\\\\x{1F}\\\\x{7F}-\\\\x{9F}"
CODE_RULE: Final = f"!self.matches('[{_CODE_CONTROLS}{_BIDI_CLASS}]')"
CODE_MESSAGE: Final = "must not contain control characters but tabs and line breaks, nor bidirectional overrides"
PRINTABLE_ASCII: Final = r"^[ -~]*$"
"""A pattern for values that are ASCII by nature (URLs, host names, paths in a container): it refuses every hidden
character at no cost to the API server's CEL budget, which nested lists of rules (a tunnel's ingress) exhaust."""
NAME_MESSAGE: Final = "must not contain control or invisible formatting characters (such as NUL or U+202E)"
TEXT_MESSAGE: Final = "must not contain control characters or bidirectional overrides (such as NUL or U+202E)"


def hidden_character(value: str, *, name: bool, code: bool = False) -> tuple[int, str] | None:
    """The first character `value` may not hold, with its position; None when there is none."""
    if value.isascii() and value.isprintable():
        return None  # the common case, decided in C: ASCII has no format character, and its controls are unprintable
    for index, char in enumerate(value):
        category = unicodedata.category(char)
        if code and char in "\t\n\r":
            continue
        if category == "Cc" or (category == "Cf" and (name or char in BIDI_CONTROLS)):
            return index, char
    return None


_CONTROL_NAMES: Final = {0: "NUL", 9: "TAB", 10: "LINE FEED", 13: "CARRIAGE RETURN", 27: "ESCAPE", 127: "DELETE"}


def _describe(char: str) -> str:
    code = ord(char)
    return f"U+{code:04X} ({unicodedata.name(char, _CONTROL_NAMES.get(code, 'a control character'))})"


def _checker(*, name: bool, code: bool = False) -> Callable[[str], str]:
    message = CODE_MESSAGE if code else NAME_MESSAGE if name else TEXT_MESSAGE

    def check(value: str) -> str:
        if value.isascii() and value.isprintable():
            return value  # as `hidden_character` decides first, without the call: this runs for every string field
        found = hidden_character(value, name=name, code=code)
        if found is not None:
            index, char = found
            if char in "\r\n":
                raise PydanticCustomError(
                    "hidden_character",
                    "must not contain line breaks: {char} at position {index}",
                    {"char": _describe(char), "index": index},
                )
            raise PydanticCustomError(
                "hidden_character",
                "{message}: {char} at position {index}",
                {"message": message.split(" (such as")[0], "char": _describe(char), "index": index},
            )
        return value

    return check


def _rule(rule: str, message: str) -> dict[str, JsonValue]:
    return {"x-kubernetes-validations": [{"rule": rule, "message": message}]}


NameCheck: Final = AfterValidator(_checker(name=True))
TextCheck: Final = AfterValidator(_checker(name=False))
NAME_SCHEMA: Final = _rule(NAME_RULE, NAME_MESSAGE)
TEXT_SCHEMA: Final = _rule(TEXT_RULE, TEXT_MESSAGE)
CodeCheck: Final = AfterValidator(_checker(name=False, code=True))
CODE_SCHEMA: Final = _rule(CODE_RULE, CODE_MESSAGE)

# Constraints (`Field(max_length=...)`) come before a check wherever these are used: pydantic applies the ones given
# before a validator in its core, and those given after it through a Python function for every value.
Name = Annotated[str, Field(json_schema_extra=NAME_SCHEMA), NameCheck]
"""A string that names something: no control or format character."""
Text = Annotated[str, Field(json_schema_extra=TEXT_SCHEMA), TextCheck]
"""A string people read: no control character, no bidirectional control."""
Code = Annotated[str, Field(json_schema_extra=CODE_SCHEMA), CodeCheck]
"""Code or a multi-line value: as Text, with tabs and line breaks."""
