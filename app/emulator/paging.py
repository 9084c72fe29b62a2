"""What every list endpoint shares: page-number pagination, sorting and Cloudflare's string filter operators.

Page-number lists (``V4PagePaginationArray``) take ``page`` (1-based) and ``per_page`` and return ``result_info``
``{page, per_page, count, total_count, total_pages}``. A page past the end is a success with an empty ``result``,
never an error: the official SDK stops auto-paging on the first empty page. ``per_page`` outside an endpoint's bounds
is clamped into them rather than refused (Cloudflare's exact answer there is unverified), and a value that is not a
number is refused with 400.

Two filter syntaxes exist:

- zones and accounts put the operator in the value: ``name=contains:example`` with ``equal`` (default),
  ``not_equal``, ``starts_with``, ``ends_with``, ``contains`` and the ``*_case_sensitive`` variants;
- DNS records put it in the key: ``name.contains=example``, with ``exact``, ``contains``, ``startswith``,
  ``endswith`` (and ``present``/``absent`` for comments and tags), always case-insensitive.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from starlette.datastructures import QueryParams

from app.emulator.envelope import JSON, invalid_body, no_route

T = TypeVar("T")
Predicate = Callable[[T], bool]

_VALUE_OPERATORS = {
    "equal": "exact",
    "not_equal": "not_equal",
    "starts_with": "startswith",
    "ends_with": "endswith",
    "contains": "contains",
}


@dataclass(frozen=True)
class PageSpec:
    """One endpoint's ``per_page`` bounds."""

    default: int
    minimum: int
    maximum: int

    def parse(self, query: QueryParams) -> tuple[int, int]:
        page = max(1, _number(query, "page", 1))
        per_page = min(self.maximum, max(self.minimum, _number(query, "per_page", self.default)))
        return page, per_page


def _number(query: QueryParams, name: str, default: int) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(float(raw))
    except ValueError:
        raise invalid_body(f"{name} must be a number", pointer=f"/{name}") from None


def paginate(items: Sequence[T], page: int, per_page: int) -> tuple[list[T], JSON]:
    start = (page - 1) * per_page
    chunk = list(items[start : start + per_page])
    info: JSON = {
        "page": page,
        "per_page": per_page,
        "count": len(chunk),
        "total_count": len(items),
        "total_pages": math.ceil(len(items) / per_page),
    }
    return chunk, info


def page_of(items: Sequence[T], query: QueryParams, spec: PageSpec) -> tuple[list[T], JSON]:
    page, per_page = spec.parse(query)
    return paginate(items, page, per_page)


def text_match(value: str | None, operator: str, needle: str, *, case_sensitive: bool = False) -> bool:
    """Compare with one of ``exact``, ``not_equal``, ``contains``, ``startswith``, ``endswith``."""
    if value is None:
        return operator == "not_equal"
    if not case_sensitive:
        value, needle = value.casefold(), needle.casefold()
    match operator:
        case "exact":
            return value == needle
        case "not_equal":
            return value != needle
        case "contains":
            return needle in value
        case "startswith":
            return value.startswith(needle)
        case "endswith":
            return value.endswith(needle)
    raise ValueError(f"unknown operator {operator!r}")


def value_operator(raw: str) -> tuple[str, str, bool]:
    """Split ``contains:foo`` into (operator, needle, case sensitive); a value without a known operator is exact."""
    head, sep, rest = raw.partition(":")
    if sep:
        case_sensitive = head.endswith("_case_sensitive")
        base = head.removesuffix("_case_sensitive")
        if base in _VALUE_OPERATORS:
            return _VALUE_OPERATORS[base], rest, case_sensitive
    return "exact", raw, False


def value_filter(raw: str, get: Callable[[T], str | None]) -> Predicate[T]:
    operator, needle, case_sensitive = value_operator(raw)
    return lambda item: text_match(get(item), operator, needle, case_sensitive=case_sensitive)


def combine(predicates: Sequence[Predicate[T]], match: str | None) -> Predicate[T]:
    """``match=all`` (default) ANDs the filters, ``match=any`` ORs them; no filter keeps everything."""
    if not predicates:
        return lambda _item: True
    if match == "any":
        return lambda item: any(p(item) for p in predicates)
    return lambda item: all(p(item) for p in predicates)


def direction_of(query: QueryParams) -> Literal["asc", "desc"]:
    return "desc" if (query.get("direction") or "").lower() == "desc" else "asc"


def sort_by(items: Iterable[T], key: Callable[[T], Any], direction: Literal["asc", "desc"]) -> list[T]:
    return sorted(items, key=key, reverse=direction == "desc")


def bool_param(query: QueryParams, name: str) -> bool | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    lowered = raw.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise invalid_body(f"{name} must be true or false", pointer=f"/{name}")


def require_id(value: str, path: str, is_valid: Callable[[str], bool]) -> None:
    """Refuse an ID that is not an ID the way Cloudflare's router does, before looking anything up."""
    if not is_valid(value):
        raise no_route(path)
