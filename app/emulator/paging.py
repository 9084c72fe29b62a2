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

import base64
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

from fastapi.responses import JSONResponse
from pydantic import JsonValue
from starlette.datastructures import QueryParams

from app.emulator.envelope import JSON, invalid_body, no_route, ok
from app.emulator.state import Obj

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

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


def sort_by(
    items: Iterable[T], key: Callable[[T], SupportsRichComparison], direction: Literal["asc", "desc"]
) -> list[T]:
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


# Paging styles: how a list answers

Render = Callable[[Obj], JsonValue]


class Paging:
    """How a list answers: the result and its ``result_info``."""

    def respond(self, items: Sequence[Obj], query: QueryParams, render: Render) -> JSONResponse:
        raise NotImplementedError


@dataclass(frozen=True)
class PageNumbers(Paging):
    """``V4PagePaginationArray``: ``page`` and ``per_page`` in bounds (see the module's doc)."""

    spec: PageSpec

    def respond(self, items: Sequence[Obj], query: QueryParams, render: Render) -> JSONResponse:
        page, info = page_of(items, query, self.spec)
        return ok([render(item) for item in page], result_info=info)


@dataclass(frozen=True)
class SinglePage(Paging):
    """``SinglePage``: every item at once, without ``result_info``."""

    def respond(self, items: Sequence[Obj], query: QueryParams, render: Render) -> JSONResponse:
        return ok([render(item) for item in items])


@dataclass(frozen=True)
class Cursor(Paging):
    """Opaque-cursor lists: ``cursor`` and a page size (``size_param``, clamped into bounds); ``result_info``
    ``{count, cursor, per_page}`` with an empty cursor on the last page, which is where the SDK stops. ``wrap`` puts
    the page under one key of an object result, as R2 does (``{"buckets": [...]}``)."""

    default: int
    minimum: int
    maximum: int
    size_param: str = "per_page"
    wrap: str | None = None

    def respond(self, items: Sequence[Obj], query: QueryParams, render: Render) -> JSONResponse:
        raw_size = query.get(self.size_param)
        try:
            size = int(float(raw_size)) if raw_size else self.default
        except ValueError:
            raise invalid_body(f"{self.size_param} must be a number", pointer=f"/{self.size_param}") from None
        size = min(self.maximum, max(self.minimum, size))
        start = _decode_cursor(query.get("cursor") or "")
        chunk = list(items[start : start + size])
        more = start + size < len(items)
        info: JSON = {"count": len(chunk), "cursor": _encode_cursor(start + size) if more else "", "per_page": size}
        rendered = [render(item) for item in chunk]
        return ok({self.wrap: rendered} if self.wrap else rendered, result_info=info)


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    if not cursor:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        return max(0, int(text.removeprefix("offset:")))
    except (ValueError, UnicodeDecodeError):
        raise invalid_body("cursor is not a cursor this endpoint gave out", pointer="/cursor") from None
