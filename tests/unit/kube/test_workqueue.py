"""The work queue keeps controller-runtime's promises."""

from __future__ import annotations

import asyncio

import pytest

from app.kube.workqueue import MAX_DELAY, ShutDown, WorkQueue


async def test_a_key_waiting_is_queued_once() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    for _ in range(3):
        queue.add("a")
    queue.add("b")
    assert queue.depth == 2
    assert [await queue.get(), await queue.get()] == ["a", "b"]


async def test_a_key_is_never_handed_to_two_workers() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    queue.add("a")
    key = await queue.get()
    queue.add("a")  # changed while being processed
    assert queue.depth == 0, "not handed out again while in flight"
    second = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    assert not second.done()
    queue.done(key)
    assert await asyncio.wait_for(second, 1) == "a"
    queue.done("a")


async def test_back_off_doubles_from_5ms_to_about_16_minutes_and_resets() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    delays = [queue.add_rate_limited("a") for _ in range(20)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[-1] == MAX_DELAY == 1000.0
    queue.forget("a")
    assert queue.add_rate_limited("a") == 0.005
    queue.shut_down()


async def test_add_after_releases_the_key_later_and_the_earliest_schedule_wins() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    queue.add_after("a", 60)
    queue.add_after("a", 0.01)
    assert queue.depth == 0
    assert await asyncio.wait_for(queue.get(), 2) == "a"
    queue.done("a")
    queue.shut_down()


async def test_shutdown_wakes_waiting_workers() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    waiter = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.shut_down()
    with pytest.raises(ShutDown):
        await asyncio.wait_for(waiter, 1)


async def test_a_key_backing_off_is_not_queued_until_its_time_comes() -> None:
    queue: WorkQueue[str] = WorkQueue("t")
    queue.add("now")
    queue.add_rate_limited("later")
    queue.add_rate_limited("later")
    assert queue.is_queued("now")
    assert not queue.is_queued("later"), "a key waiting out its back-off is not about to run"
    assert await asyncio.wait_for(queue.get(), 1) == "now"
    assert not queue.is_queued("now"), "handed out"
    assert await asyncio.wait_for(queue.get(), 2) == "later"
    queue.done("now")
    queue.done("later")
    queue.shut_down()
