"""The per-token budget: waits instead of sending when spent, never lets the server's window see more than its
capacity, pauses on the server's word, and reports what it did. Driven by a fake clock: nothing here sleeps."""

from __future__ import annotations

import asyncio
import random

import pytest

from app.cloudflare import BudgetConfig, BudgetRegistry, RateLimited, TokenBudget
from tests.unit.cloudflare.helpers import FakeClock, eventually


def test_capacity_is_the_configured_share() -> None:
    assert BudgetConfig().capacity == 960
    assert BudgetConfig(share=1.0).capacity == 1200
    assert BudgetConfig(limit=300, window=3, share=0.9).capacity == 270
    assert BudgetConfig(limit=1, share=0.5).capacity == 1
    with pytest.raises(ValueError, match="share"):
        BudgetConfig(share=1.5)
    with pytest.raises(ValueError, match="positive"):
        BudgetConfig(limit=0)


def budget(clock: FakeClock, **config: float) -> TokenBudget:
    return BudgetRegistry(BudgetConfig(**config), clock).get("k", name="abc123")  # type: ignore[arg-type]


async def test_waits_instead_of_sending_when_spent(clock: FakeClock) -> None:
    tokens = budget(clock, limit=3, window=10, share=1.0)
    for _ in range(3):
        tokens.release(await tokens.acquire())
    assert tokens.stats().remaining == 0

    fourth = asyncio.create_task(tokens.acquire())
    await eventually(lambda: tokens.stats().waiting == 1)
    clock.advance(9.5)
    for _ in range(100):
        await asyncio.sleep(0)
    assert not fourth.done()
    clock.advance(0.5)
    slot = await fourth
    tokens.release(slot)
    stats = tokens.stats()
    assert stats.waiting == 0
    assert stats.waited_seconds == pytest.approx(10.0)


async def test_a_call_in_flight_counts_until_it_ends(clock: FakeClock) -> None:
    tokens = budget(clock, limit=2, window=10, share=1.0)
    first = await tokens.acquire()
    second = await tokens.acquire()
    third = asyncio.create_task(tokens.acquire())
    await eventually(lambda: tokens.stats().waiting == 1)
    clock.advance(100)  # the window has long passed, but both calls are still in flight
    for _ in range(100):
        await asyncio.sleep(0)
    assert not third.done()
    tokens.release(first)  # it may have reached the server just now: it counts for another full window
    clock.advance(9)
    for _ in range(100):
        await asyncio.sleep(0)
    assert not third.done()
    clock.advance(1)
    tokens.release(await third)
    tokens.release(second)


async def test_the_server_never_sees_more_than_capacity_in_any_window(clock: FakeClock) -> None:
    """A simulation: 600 calls from 40 callers with random latencies; each call reaches the server at a random
    moment between being sent and being answered. No window of the server's clock may hold more than capacity."""
    capacity, window = 25, 10.0
    tokens = budget(clock, limit=capacity, window=window, share=1.0)
    rng = random.Random(7)
    arrivals: list[float] = []

    async def caller(calls: int) -> None:
        for _ in range(calls):
            async with tokens.slot() as slot:
                latency = rng.choice([0.01, 0.2, 1.0, 4.0, 12.0])
                arrivals.append(clock.now() + rng.random() * latency)
                await clock.sleep(latency)
                slot.outcome = "ok"

    tasks = [asyncio.create_task(caller(15)) for _ in range(40)]
    await clock.run(tasks)
    arrivals.sort()
    assert len(arrivals) == 600
    worst = max(sum(1 for t in arrivals[i:] if t < start + window) for i, start in enumerate(arrivals))
    assert worst <= capacity
    assert tokens.stats().calls["ok"] == 600


async def test_callers_are_served_in_order(clock: FakeClock) -> None:
    tokens = budget(clock, limit=1, window=1, share=1.0)
    tokens.release(await tokens.acquire())
    order: list[int] = []

    async def caller(number: int) -> None:
        async with tokens.slot():
            order.append(number)

    tasks = []
    for number in range(5):
        tasks.append(asyncio.create_task(caller(number)))
        await eventually(lambda n=number: tokens.stats().waiting == n + 1)  # type: ignore[misc]
    await clock.run(tasks)
    assert order == [0, 1, 2, 3, 4]


async def test_a_pause_holds_every_caller(clock: FakeClock) -> None:
    tokens = budget(clock, limit=100, window=10)
    tokens.pause(30, reason="test")
    assert tokens.stats().paused_for == 30
    assert tokens.stats().remaining == 0
    waiting = asyncio.create_task(tokens.acquire())
    await eventually(lambda: tokens.stats().waiting == 1)
    clock.advance(29)
    for _ in range(100):
        await asyncio.sleep(0)
    assert not waiting.done()
    tokens.pause(0.5, reason="a pause ending sooner does not shorten the one in force")
    clock.advance(1)
    tokens.release(await waiting)
    assert tokens.stats().pauses == 1


async def test_server_reporting_no_calls_left_pauses(clock: FakeClock) -> None:
    tokens = budget(clock, limit=100, window=10)
    tokens.observe_remaining(5, 20)
    assert tokens.stats().server_remaining == 5
    assert tokens.stats().paused_for == 0
    tokens.observe_remaining(0, 20)
    assert tokens.stats().paused_for == 20


async def test_max_wait_refuses_without_sending(clock: FakeClock) -> None:
    tokens = budget(clock, limit=1, window=60, share=1.0, max_wait=5)
    tokens.release(await tokens.acquire())
    with pytest.raises(RateLimited) as caught:
        await tokens.acquire()
    assert caught.value.retry_after == pytest.approx(60)
    assert caught.value.status is None
    assert tokens.stats().refused == 1


async def test_disabled_budget_counts_but_never_waits(clock: FakeClock) -> None:
    tokens = budget(clock, limit=1, window=60, share=1.0, enabled=False)
    slots = [await tokens.acquire() for _ in range(10)]
    for slot in slots:
        slot.outcome = "ok"
        tokens.release(slot)
    stats = tokens.stats()
    assert stats.calls["ok"] == 10
    assert stats.waited_seconds == 0


async def test_a_call_never_sent_gives_its_slot_back(clock: FakeClock) -> None:
    tokens = budget(clock, limit=2, window=60, share=1.0)
    slot = await tokens.acquire()
    slot.sent = False
    slot.outcome = "transient"
    tokens.release(slot)
    tokens.release(slot)  # releasing twice is harmless
    assert tokens.stats().remaining == 2
    assert tokens.stats().calls["transient"] == 1


async def test_cancelled_waiter_leaves_the_queue(clock: FakeClock) -> None:
    tokens = budget(clock, limit=1, window=10, share=1.0)
    tokens.release(await tokens.acquire())
    waiting = asyncio.create_task(tokens.acquire())
    await eventually(lambda: tokens.stats().waiting == 1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert tokens.stats().waiting == 0
    clock.advance(10)
    tokens.release(await tokens.acquire())


def test_registry_is_keyed_and_reports_every_budget(clock: FakeClock) -> None:
    registry = BudgetRegistry(BudgetConfig(), clock)
    first = registry.get("a", name="aaa")
    assert registry.get("a", name="ignored") is first
    registry.get("b", name="bbb", config=BudgetConfig(share=0.5))
    assert [(s.token, s.capacity) for s in registry.stats()] == [("aaa", 960), ("bbb", 600)]
