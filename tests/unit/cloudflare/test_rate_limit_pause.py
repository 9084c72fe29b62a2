"""A 429 for the global limit pauses every caller of that token for the server's Retry-After, and no caller of
another token."""

from __future__ import annotations

import asyncio

import pytest
import respx

from app.cloudflare import CloudflareSession, RateLimited
from tests.unit.cloudflare.helpers import OTHER_TOKEN, TOKEN, FakeClock, eventually, fail, ok

ZONE = {"id": "z1", "name": "example.com"}


async def test_429_pauses_all_callers_of_the_token_but_not_other_tokens(
    session: CloudflareSession, api: respx.MockRouter, clock: FakeClock
) -> None:
    route = api.get("/zones/z1")
    route.side_effect = [
        respx.MockResponse(429, json=fail((971, "Please wait")), headers={"Retry-After": "30"}),
        respx.MockResponse(200, json=ok(ZONE)),
        respx.MockResponse(200, json=ok(ZONE)),
        respx.MockResponse(200, json=ok(ZONE)),
    ]
    first = session.client(TOKEN)
    second = session.client(TOKEN)  # another controller, same token: same budget
    other = session.client(OTHER_TOKEN)
    assert first.budget is second.budget
    assert other.budget is not first.budget

    with pytest.raises(RateLimited) as caught:
        await first.get_zone("z1")
    assert caught.value.retry_after == 30
    assert first.budget.stats().paused_for == 30

    held = [asyncio.create_task(second.get_zone("z1")), asyncio.create_task(first.get_zone("z1"))]
    await eventually(lambda: second.budget.stats().waiting == 2)
    assert route.call_count == 1  # nothing sent while paused

    zone = await other.get_zone("z1")  # another token is not held
    assert zone.id == "z1"
    assert route.call_count == 2

    clock.advance(29)
    for _ in range(200):
        await asyncio.sleep(0)
    assert not any(task.done() for task in held)
    assert route.call_count == 2

    clock.advance(1)
    zones = await asyncio.gather(*held)
    assert [z.id for z in zones] == ["z1", "z1"]
    assert route.call_count == 4
    stats = {s.token: s for s in session.budget_stats()}
    mine = stats[first.fingerprint]
    assert mine.calls["rate_limited"] == 1
    assert mine.calls["ok"] == 2
    assert mine.pauses == 1
    assert mine.waited_seconds == pytest.approx(60)  # two callers, 30 s each
    assert stats[other.fingerprint].waited_seconds == 0


async def test_429_for_a_product_limit_fails_only_its_call(session: CloudflareSession, api: respx.MockRouter) -> None:
    api.post("/accounts/a/rules/lists/l/items").respond(
        429, json=fail((10058, "a bulk operation is already in progress")), headers={"Retry-After": "5"}
    )
    client = session.client(TOKEN)
    with pytest.raises(RateLimited) as caught:
        await client.request("POST", "/accounts/a/rules/lists/l/items", json=[])
    assert caught.value.retry_after == 5
    assert client.budget.stats().paused_for == 0


async def test_server_saying_no_calls_left_pauses_the_token(
    session: CloudflareSession, api: respx.MockRouter, clock: FakeClock
) -> None:
    route = api.get("/zones/z1").respond(200, json=ok(ZONE), headers={"Ratelimit": '"default";r=0;t=12'})
    client = session.client(TOKEN)
    await client.get_zone("z1")
    assert client.budget.stats().server_remaining == 0
    assert client.budget.stats().paused_for == 12
    held = asyncio.create_task(client.get_zone("z1"))
    await eventually(lambda: client.budget.stats().waiting == 1)
    clock.advance(12)
    await held
    assert route.call_count == 2


async def test_budget_waits_when_spent(api: respx.MockRouter, clock: FakeClock) -> None:
    from app.cloudflare import BudgetConfig, HttpConfig

    api.get("/zones/z1").respond(200, json=ok(ZONE))
    config = HttpConfig(base_url="https://api.cloudflare.test/client/v4")
    async with CloudflareSession(config, BudgetConfig(limit=10, window=60, share=0.5), clock=clock) as session:
        client = session.client(TOKEN)
        for _ in range(5):
            await client.get_zone("z1")
        assert client.budget.stats().remaining == 0
        sixth = asyncio.create_task(client.get_zone("z1"))
        await eventually(lambda: client.budget.stats().waiting == 1)
        assert api.calls.call_count == 5
        clock.advance(60)
        await sixth
        assert api.calls.call_count == 6
        assert client.budget.stats().waited_seconds == pytest.approx(60)
