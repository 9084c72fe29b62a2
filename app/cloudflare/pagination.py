"""Async iterators over Cloudflare's list endpoints, one per pagination style the API uses.

- `PAGE`: `page` (1-based) and `per_page` in, `result_info.total_pages` out. Ends on an empty page, at
  `page >= total_pages`, or (without `total_pages`) on a page shorter than `result_info.per_page`. Accounts, zones,
  DNS records, KV namespaces, D1 databases, tunnels.
- `CURSOR`: `cursor` and `per_page` in, `result_info.cursor` out; ends when the cursor is absent or empty. Rulesets;
  with `items_key="buckets"`, R2 buckets (whose `result` is `{buckets: [...]}`).
- `CURSOR_AFTER`: `cursor` and `per_page` in, `result_info.cursors.after` out; ends when it is absent or empty. IP
  list items.
- `SINGLE`: one call answers everything. Worker scripts and routes, lists, tunnel connections.

Each iterator takes a `fetch(params)` coroutine that makes one call (through the client, so every page goes
through the token's budget and the timeouts) and yields the raw items; the client parses them into models. A server
that returns a cursor it already returned, or more than `max_pages` pages, ends the iteration with `BadResponse`
rather than loop for ever.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

from pydantic import JsonValue

from app.cloudflare.envelope import ApiResponse
from app.cloudflare.errors import BadResponse

Fetch = Callable[[Mapping[str, object]], Awaitable[ApiResponse]]

DEFAULT_MAX_PAGES = 10_000


class PageStyle(enum.Enum):
    PAGE = "page"
    CURSOR = "cursor"
    CURSOR_AFTER = "cursors.after"
    SINGLE = "single"


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _items(response: ApiResponse, items_key: str | None) -> Sequence[JsonValue]:
    result = response.result
    if items_key is not None:
        result = result.get(items_key) if isinstance(result, Mapping) else None
        if result is None:
            return []
    if result is None:
        return []
    if not isinstance(result, list):
        where = f"result.{items_key}" if items_key else "result"
        raise BadResponse(f"a list call answered with a {type(result).__name__} in {where}, not a list")
    return result


async def paginate_pages(
    fetch: Fetch,
    *,
    params: Mapping[str, object] | None = None,
    per_page: int | None = None,
    max_pages: int = DEFAULT_MAX_PAGES,
) -> AsyncIterator[JsonValue]:
    """Page-number pagination (`page`, `per_page`, `result_info.total_pages`)."""
    page = 1
    while True:
        query = dict(params or {})
        query["page"] = page
        if per_page is not None:
            query["per_page"] = per_page
        response = await fetch(query)
        items = _items(response, None)
        for item in items:
            yield item
        if not items:
            return
        info = response.result_info or {}
        total_pages = _int(info.get("total_pages"))
        if total_pages is not None:
            if page >= total_pages:
                return
        else:
            size = _int(info.get("per_page")) or per_page
            if size and len(items) < size:
                return
        if page >= max_pages:
            raise BadResponse(f"a page-numbered list went past {max_pages} pages")
        page += 1


def _cursor_of(info: Mapping[str, JsonValue], style: PageStyle) -> str | None:
    if style is PageStyle.CURSOR_AFTER:
        cursors = info.get("cursors")
        value = cursors.get("after") if isinstance(cursors, Mapping) else None
    else:
        value = info.get("cursor")
    return value if isinstance(value, str) and value else None


async def paginate_cursor(
    fetch: Fetch,
    *,
    style: PageStyle = PageStyle.CURSOR,
    params: Mapping[str, object] | None = None,
    per_page: int | None = None,
    items_key: str | None = None,
    max_pages: int = DEFAULT_MAX_PAGES,
) -> AsyncIterator[JsonValue]:
    """Cursor pagination: `result_info.cursor` (`CURSOR`) or `result_info.cursors.after` (`CURSOR_AFTER`), sent
    back as the `cursor` parameter. `items_key` names the list inside an object `result` (R2: `buckets`)."""
    if style not in (PageStyle.CURSOR, PageStyle.CURSOR_AFTER):
        raise ValueError(f"{style} is not a cursor style")
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(max_pages):
        query = dict(params or {})
        if per_page is not None:
            query["per_page"] = per_page
        if cursor is not None:
            query["cursor"] = cursor
        response = await fetch(query)
        for item in _items(response, items_key):
            yield item
        cursor = _cursor_of(response.result_info or {}, style)
        if cursor is None:
            return
        if cursor in seen:
            raise BadResponse("a cursor-paginated list returned a cursor it had already returned")
        seen.add(cursor)
    raise BadResponse(f"a cursor-paginated list went past {max_pages} pages")


async def paginate_single(
    fetch: Fetch, *, params: Mapping[str, object] | None = None, items_key: str | None = None
) -> AsyncIterator[JsonValue]:
    """A list endpoint that answers everything in one call."""
    response = await fetch(dict(params or {}))
    for item in _items(response, items_key):
        yield item


def paginate(
    fetch: Fetch,
    style: PageStyle,
    *,
    params: Mapping[str, object] | None = None,
    per_page: int | None = None,
    items_key: str | None = None,
    max_pages: int = DEFAULT_MAX_PAGES,
) -> AsyncIterator[JsonValue]:
    """The iterator for `style`."""
    if style is PageStyle.PAGE:
        if items_key is not None:
            raise ValueError("page-numbered lists have a list result")
        return paginate_pages(fetch, params=params, per_page=per_page, max_pages=max_pages)
    if style is PageStyle.SINGLE:
        return paginate_single(fetch, params=params, items_key=items_key)
    return paginate_cursor(
        fetch, style=style, params=params, per_page=per_page, items_key=items_key, max_pages=max_pages
    )
