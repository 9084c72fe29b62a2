"""Cloudflare's Rules language (wirefilter), checked before Cloudflare sees an expression.

A rule's `expression` is checked at admission so that `kubectl apply` of a typo is denied with the position of the
mistake, instead of the rule failing later as a `TerminalError`. The checker is a tokenizer (`lexer`) and a
recursive-descent parser (`parser`, with the right side of comparisons in `literals`) written for this language,
which type-check as they read against Cloudflare's documented fields and functions (`catalogue`). What depends on
the zone's plan (regular expressions on Free, field availability by plan, rule counts) is left to Cloudflare,
which reports it with its own message.

Syntax errors stop the check at the first one (what follows a syntax error cannot be read reliably); unknown
names, type and phase errors are all reported, sorted by position. Positions are 1-based character offsets.
"""

from __future__ import annotations

import contextlib
import functools

from app.api.expressions.catalogue import FIELDS, FUNCTIONS, MAX_LENGTH, PHASE_SCOPES, PHASES, Role
from app.api.expressions.lexer import ExpressionError, Stop
from app.api.expressions.parser import Parser

__all__ = [
    "FIELDS",
    "FUNCTIONS",
    "MAX_LENGTH",
    "PHASES",
    "ExpressionError",
    "Role",
    "check_expression",
    "lists_in",
]


def _run(text: str, phase: str, role: Role) -> Parser:
    if phase not in PHASE_SCOPES:
        raise ValueError(f"unknown phase {phase!r}: expected one of {', '.join(PHASES)}")
    if role == "counting" and phase != "http_ratelimit":
        raise ValueError("only rate limiting rules (http_ratelimit) have a counting expression")
    parser = Parser(text, phase, role)
    with contextlib.suppress(Stop):
        parser.check()
    return parser


def check_expression(text: str, phase: str, role: Role = "filter") -> list[ExpressionError]:
    """Every mistake in `text` as an expression of `phase` for `role`, sorted by position; empty when it is valid.

    Raises ValueError for a phase kflare does not write to (a programming error, not the user's).
    """
    errors = _run(text, phase, role).errors
    return sorted(dict.fromkeys(errors), key=lambda error: error.position)


@functools.lru_cache(maxsize=1024)
def lists_in(text: str, phase: str = "http_request_firewall_custom", role: Role = "filter") -> frozenset[str]:
    """The lists (`$name`, and Cloudflare's managed `$cf.name`) an expression reads, found by the parser, so a `$`
    inside a string is not one. A rule's lists are read on every event of the rule (its index of the lists it
    names): the answers for the expressions seen last are kept."""
    return frozenset(_run(text, phase, role).lists)
