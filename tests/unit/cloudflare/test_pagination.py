"""Every pagination style as an async iterator, driven through the client (so each page is one budgeted call)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx

from app.cloudflare import (
    BadResponse,
    CloudflareClient,
    CloudflareModel,
    PageStyle,
)
from tests.unit.cloudflare.helpers import ok


def record(number: int) -> dict[str, Any]:
    return {"id": f"r{number}", "name": f"host{number}.example.com", "type": "A", "content": "192.0.2.1", "ttl": 1}


def pages_of(items: list[dict[str, Any]], *, total_pages: bool = True):  # type: ignore[no-untyped-def]
    def respond(request: httpx.Request) -> httpx.Response:
        page = int(request.url.params.get("page", "1"))
        per_page = int(request.url.params.get("per_page", "20"))
        chunk = items[(page - 1) * per_page : page * per_page]
        info: dict[str, Any] = {"page": page, "per_page": per_page, "count": len(chunk), "total_count": len(items)}
        if total_pages:
            info["total_pages"] = max(1, -(-len(items) // per_page))
        return httpx.Response(200, json=ok(chunk, info))

    return respond


async def test_page_numbers_stop_at_total_pages(client: CloudflareClient, api: respx.MockRouter) -> None:
    route = api.get("/zones/z1/dns_records").mock(side_effect=pages_of([record(n) for n in range(25)]))
    records = [r async for r in client.list_dns_records("z1", per_page=10)]
    assert [r.id for r in records] == [f"r{n}" for n in range(25)]
    assert route.call_count == 3  # no extra call for an empty page
    assert [call.request.url.params["page"] for call in route.calls] == ["1", "2", "3"]


async def test_page_numbers_without_total_pages(client: CloudflareClient, api: respx.MockRouter) -> None:
    route = api.get("/zones/z1/dns_records").mock(
        side_effect=pages_of([record(n) for n in range(20)], total_pages=False)
    )
    records = [r async for r in client.list_dns_records("z1", per_page=10)]
    assert len(records) == 20
    assert route.call_count == 3  # two full pages, then the empty one that ends it


async def test_page_numbers_with_a_short_page_end(client: CloudflareClient, api: respx.MockRouter) -> None:
    route = api.get("/zones/z1/dns_records").mock(
        side_effect=pages_of([record(n) for n in range(15)], total_pages=False)
    )
    assert len([r async for r in client.list_dns_records("z1", per_page=10)]) == 15
    assert route.call_count == 2


async def test_empty_list(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones").respond(200, json=ok([], {"page": 1, "per_page": 50, "count": 0, "total_pages": 0}))
    assert [z async for z in client.list_zones()] == []


async def test_zone_filters_are_sent(client: CloudflareClient, api: respx.MockRouter) -> None:
    route = api.get("/zones").respond(
        200, json=ok([{"id": "z1", "name": "example.com"}], {"page": 1, "per_page": 50, "total_pages": 1})
    )
    zones = [z async for z in client.list_zones(name="example.com", account_id="a1")]
    assert zones[0].name == "example.com"
    params = route.calls.last.request.url.params
    assert params["name"] == "example.com"
    assert params["account.id"] == "a1"
    assert params["per_page"] == "50"


class Ruleset(CloudflareModel):
    id: str
    kind: str


async def test_cursor(client: CloudflareClient, api: respx.MockRouter) -> None:
    pages = {
        None: ([{"id": "a", "kind": "zone"}, {"id": "b", "kind": "managed"}], {"cursor": "c2", "per_page": 2}),
        "c2": ([{"id": "c", "kind": "zone"}], {"cursor": "", "per_page": 2}),
    }

    def respond(request: httpx.Request) -> httpx.Response:
        items, info = pages[request.url.params.get("cursor")]
        return httpx.Response(200, json=ok(items, info))

    route = api.get("/zones/z1/rulesets").mock(side_effect=respond)
    rulesets = [r async for r in client.iterate("/zones/z1/rulesets", Ruleset, style=PageStyle.CURSOR, per_page=2)]
    assert [r.id for r in rulesets] == ["a", "b", "c"]
    assert route.call_count == 2


class ListItem(CloudflareModel):
    id: str
    ip: str


async def test_cursor_after(client: CloudflareClient, api: respx.MockRouter) -> None:
    def respond(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        start = int(cursor) if cursor else 0
        items = [{"id": f"i{n}", "ip": f"192.0.2.{n}"} for n in range(start, min(start + 500, 1200))]
        after = str(start + 500) if start + 500 < 1200 else None
        cursors = {"before": str(start)} | ({"after": after} if after else {})
        return httpx.Response(200, json=ok(items, {"cursors": cursors}))

    route = api.get("/accounts/a/rules/lists/l/items").mock(side_effect=respond)
    items = [
        item
        async for item in client.iterate(
            "/accounts/a/rules/lists/l/items", ListItem, style=PageStyle.CURSOR_AFTER, per_page=500
        )
    ]
    assert len(items) == 1200
    assert route.call_count == 3
    assert route.calls[1].request.url.params["cursor"] == "500"


class Bucket(CloudflareModel):
    name: str


async def test_r2_cursor_with_an_object_result(client: CloudflareClient, api: respx.MockRouter) -> None:
    def respond(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("cursor") == "next":
            return httpx.Response(200, json=ok({"buckets": [{"name": "c"}]}, {"cursor": "", "per_page": 2}))
        return httpx.Response(200, json=ok({"buckets": [{"name": "a"}, {"name": "b"}]}, {"cursor": "next"}))

    api.get("/accounts/a/r2/buckets").mock(side_effect=respond)
    buckets = [
        b async for b in client.iterate("/accounts/a/r2/buckets", Bucket, style=PageStyle.CURSOR, items_key="buckets")
    ]
    assert [b.name for b in buckets] == ["a", "b", "c"]


async def test_single_page(client: CloudflareClient, api: respx.MockRouter) -> None:
    route = api.get("/zones/z1/workers/routes").respond(200, json=ok([{"id": "w1", "kind": "x"}]))
    assert [r.id async for r in client.iterate("/zones/z1/workers/routes", Ruleset, style=PageStyle.SINGLE)] == ["w1"]
    assert route.call_count == 1
    assert "page" not in route.calls.last.request.url.params


async def test_a_repeated_cursor_ends_with_an_error(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones/z1/rulesets").respond(200, json=ok([{"id": "a", "kind": "zone"}], {"cursor": "same"}))
    with pytest.raises(BadResponse, match="already returned"):
        _ = [r async for r in client.iterate("/zones/z1/rulesets", Ruleset, style=PageStyle.CURSOR)]


async def test_a_result_that_is_not_a_list(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones").respond(200, json=ok({"id": "z1"}))
    with pytest.raises(BadResponse, match="not a list"):
        _ = [z async for z in client.list_zones()]


async def test_runaway_page_numbers_are_bounded(client: CloudflareClient, api: respx.MockRouter) -> None:
    from app.cloudflare import paginate_pages
    from app.cloudflare.envelope import ApiResponse

    async def endless(params: Any) -> ApiResponse:
        return ApiResponse(status=200, result=[1], result_info={"total_pages": 10**9})

    with pytest.raises(BadResponse, match="past 5 pages"):
        _ = [item async for item in paginate_pages(endless, max_pages=5)]
