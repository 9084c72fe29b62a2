"""The client against the emulator as a real server: the budget keeps a busy token under the server's limit, a 429
holds every caller, and with faults injected every call ends in a result or a typed error within its bounds."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from app.cloudflare import (
    BadResponse,
    BudgetConfig,
    CloudflareClient,
    CloudflareError,
    CloudflareSession,
    DeadlineExceeded,
    HttpConfig,
    NetworkError,
    RateLimited,
    Timeouts,
    Transient,
)
from tests.fixtures.emulator import EmulatorProcess

DEFAULT_LIMIT = (1200, 300.0, 300.0)


@pytest.fixture
def emu(fresh_emulator: EmulatorProcess) -> Iterator[EmulatorProcess]:
    fresh_emulator.clear_calls()
    yield fresh_emulator
    fresh_emulator.clear_faults()
    fresh_emulator.set_rate_limit(*DEFAULT_LIMIT)


async def _zone_with_records(client: CloudflareClient, account_id: str, records: int) -> str:
    zone = await client.create_zone("example.com", account_id)
    await client.batch_dns_records(
        zone.id,
        posts=[{"name": f"host{n}.example.com", "type": "A", "content": "192.0.2.1", "ttl": 1} for n in range(records)],
    )
    return zone.id


async def _run(workers: int, calls: int, call: Any) -> list[Any]:
    """`calls` calls of `call(n)` from `workers` concurrent callers; each outcome (result or exception) in order."""
    results: list[Any] = [None] * calls
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(calls):
        queue.put_nowait(n)

    async def worker() -> None:
        while not queue.empty():
            n = queue.get_nowait()
            try:
                results[n] = await call(n)
            except Exception as exc:  # collected and checked by the test
                results[n] = exc

    await asyncio.gather(*(worker() for _ in range(workers)))
    return results


@pytest.fixture
async def plain_session(emu: EmulatorProcess) -> AsyncIterator[CloudflareSession]:
    async with CloudflareSession(HttpConfig(base_url=emu.base_url)) as session:
        yield session


async def test_pagination_against_the_emulator(emu: EmulatorProcess, plain_session: CloudflareSession) -> None:
    client = plain_session.client(emu.token)
    zone_id = await _zone_with_records(client, emu.account_id, 120)
    emu.clear_calls()
    names = [record.name async for record in client.list_dns_records(zone_id, per_page=50)]
    assert len(names) == 120
    assert len(set(names)) == 120
    assert len(emu.calls(method="GET", path=r"/dns_records$")) == 3
    zones = [zone async for zone in client.list_zones(account_id=emu.account_id)]
    assert [zone.id for zone in zones] == [zone_id]


async def test_many_calls_through_one_token_never_trip_the_limit(emu: EmulatorProcess) -> None:
    """The emulator's limit scaled from 1,200 per 300 s to 60 per 2 s; the client's budget set to 100 % of it.
    180 calls (three windows' worth) from 50 concurrent callers must all succeed with not one 429 in the emulator's
    log.

    The limit is low enough (30 calls/s) for the budget to bind on a loaded machine too: at 300 per 2 s, a machine
    making fewer than 150 calls a second never reached it, and the test showed nothing."""
    limit, window, calls = 60, 2.0, 180
    async with CloudflareSession(HttpConfig(base_url=emu.base_url)) as setup_session:
        zone_id = await _zone_with_records(setup_session.client(emu.token), emu.account_id, 5)
    emu.set_rate_limit(limit, window, lockout=30.0)
    emu.clear_calls()
    budget = BudgetConfig(limit=limit, window=window, share=1.0)
    async with CloudflareSession(HttpConfig(base_url=emu.base_url), budget) as session:
        clients = [session.client(emu.token) for _ in range(5)]  # five "controllers" sharing the token

        async def call(n: int) -> object:
            client = clients[n % len(clients)]
            match n % 3:
                case 0:
                    return await client.verify_token()
                case 1:
                    return await client.get_zone(zone_id)
                case _:
                    return [record async for record in client.list_dns_records(zone_id)]

        results = await _run(50, calls, call)
        stats = session.budget_stats()[0]
    failures = [r for r in results if isinstance(r, Exception)]
    assert failures == []
    log = emu.calls()
    assert len(log) == calls
    assert Counter(entry["status"] for entry in log) == {200: calls}  # no 429 at all
    assert stats.calls["ok"] == calls
    assert stats.calls["rate_limited"] == 0
    assert stats.waited_seconds > 0  # the budget did bind
    # The server's view: no sliding window of its clock held more than the limit.
    arrivals = sorted(entry["time"] for entry in log)
    busiest = max(sum(1 for t in arrivals[i : i + limit + 1] if t < start + window) for i, start in enumerate(arrivals))
    assert busiest <= limit


async def test_a_429_holds_every_caller_of_the_token_until_retry_after(emu: EmulatorProcess) -> None:
    """Someone else spends the token's budget (20 per 60 s here, 2 s lockout): kflare's next call gets the 429, and
    it pauses the token: the callers waiting behind it send nothing during the lockout and all succeed after it."""
    emu.set_rate_limit(20, 60.0, lockout=2.0)
    auth = {"Authorization": f"Bearer {emu.token}"}
    async with httpx.AsyncClient(base_url=emu.base_url, headers=auth, timeout=30) as other:
        for _ in range(20):
            (await other.get("/user/tokens/verify")).raise_for_status()
    emu.clear_calls()
    async with CloudflareSession(HttpConfig(base_url=emu.base_url)) as session:
        client = session.client(emu.token)
        with pytest.raises(RateLimited) as caught:
            await client.verify_token()
        assert caught.value.retry_after == 2
        assert caught.value.codes == (971,)
        assert session.budget_stats()[0].paused_for > 0
        # The lockout also empties the emulator's window: these fit once it is over.
        results = await _run(10, 10, lambda n: session.client(emu.token).verify_token())
        stats = session.budget_stats()[0]
    assert [r for r in results if isinstance(r, Exception)] == []
    assert Counter(entry["status"] for entry in emu.calls()) == {429: 1, 200: 10}  # nothing sent into the lockout
    assert stats.pauses == 1
    assert stats.waited_seconds > 0


async def test_with_faults_every_call_ends_in_a_result_or_a_typed_error_within_its_bounds(
    emu: EmulatorProcess,
) -> None:
    bounds = Timeouts(connect=2.0, tls=1.0, response_start=0.5, request=1.5, ping_after=5.0, ping_timeout=2.0)
    never = 30.0  # a call no bound ended: far above every bound, it counts as a stray below instead of hanging
    async with CloudflareSession(HttpConfig(base_url=emu.base_url)) as setup_session:
        zone_id = await _zone_with_records(setup_session.client(emu.token), emu.account_id, 3)
    api = r"^GET /client/v4/zones/"
    emu.fault(api, "status", status=503, probability=0.1)
    emu.fault(api, "status", status=502, html=True, probability=0.1)
    emu.fault(api, "hang", probability=0.05)
    emu.fault(api, "drop", probability=0.05)
    emu.fault(api, "latency", latency_ms=700, probability=0.05)  # past the response-start bound
    emu.fault(api, "latency", latency_ms=50, probability=0.2)
    emu.clear_calls()
    async with CloudflareSession(HttpConfig(base_url=emu.base_url, timeouts=bounds)) as session:
        client = session.client(emu.token)

        async def call(n: int) -> object:
            async with asyncio.timeout(never):
                if n % 2:
                    return await client.get_zone(zone_id)
                return [record async for record in client.list_dns_records(zone_id)]

        results = await _run(20, 400, call)
        stats = session.budget_stats()[0]
    strays = [r for r in results if isinstance(r, BaseException) and not isinstance(r, CloudflareError)]
    assert strays == []
    errors = [r for r in results if isinstance(r, CloudflareError)]
    assert all(isinstance(error, Transient) for error in errors), {type(e).__name__ for e in errors}
    kinds = Counter(type(error).__name__ for error in errors)
    assert kinds["Transient"] > 0  # 503 envelopes
    assert kinds["BadResponse"] > 0  # HTML 502 pages
    assert kinds["DeadlineExceeded"] > 0  # hangs and slow answers
    assert kinds["NetworkError"] > 0  # dropped connections
    assert len(errors) < len(results)  # and most calls still succeed
    assert {e.phase for e in errors if isinstance(e, DeadlineExceeded)} <= {"response_start", "request"}
    assert all(isinstance(e, BadResponse) for e in errors if e.status == 502)
    assert all(e.status is None for e in errors if isinstance(e, NetworkError | DeadlineExceeded))
    assert sum(stats.calls.values()) == 400
    assert stats.calls["ok"] + stats.calls["transient"] == 400
