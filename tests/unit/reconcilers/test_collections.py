"""One listing per collection, fresh enough for the purpose, and kflare's own writes visible in it at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from reconcilers.collections import OBSERVE_TTL, Collections


@dataclass
class Item:
    id: str
    name: str


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Cloudflare:
    """A collection behind a lister that counts its calls and can be held mid-listing."""

    def __init__(self, *items: Item) -> None:
        self.items = list(items)
        self.lists = 0
        self.hold: asyncio.Event | None = None
        self.listing = asyncio.Event()

    def lister(self) -> AsyncIterator[Item]:
        async def listed() -> AsyncIterator[Item]:
            self.lists += 1
            snapshot = list(self.items)
            self.listing.set()
            if self.hold is not None:
                await self.hold.wait()
            for item in snapshot:
                yield item

        return listed()


def collections(clock: Clock) -> Collections[Item]:
    return Collections(id_of=lambda item: item.id, name_of=lambda item: item.name, clock=clock)


async def test_concurrent_readers_share_one_listing_until_it_is_too_old() -> None:
    clock, cloudflare = Clock(), Cloudflare(Item("1", "a"), Item("2", "b"))
    shared = collections(clock)
    results = await asyncio.gather(*(shared.items("zone:z", cloudflare.lister) for _ in range(50)))
    assert cloudflare.lists == 1
    assert all(set(r) == {"1", "2"} for r in results)
    clock.now += OBSERVE_TTL - 1
    await shared.items("zone:z", cloudflare.lister)
    assert cloudflare.lists == 1, "a listing younger than OBSERVE_TTL serves an ordinary reconcile"
    clock.now += 2
    await shared.items("zone:z", cloudflare.lister)
    assert cloudflare.lists == 2


async def test_a_drift_round_and_a_recovery_ask_for_a_newer_listing() -> None:
    clock, cloudflare = Clock(), Cloudflare(Item("1", "a"))
    shared = collections(clock)
    await shared.items("zone:z", cloudflare.lister)
    clock.now += 1
    shared.open_round("zone:z")
    for _ in range(10):  # every member checked in the round
        await shared.items("zone:z", cloudflare.lister)
    assert cloudflare.lists == 2, "one listing per round for all its members"
    clock.now += 1
    await shared.named("zone:z", "a", cloudflare.lister, newer_than=clock())
    assert cloudflare.lists == 3, "crash recovery reads a listing taken after it asked"


async def test_own_writes_show_at_once_and_survive_a_listing_they_raced_with() -> None:
    clock, cloudflare = Clock(), Cloudflare(Item("1", "a"), Item("2", "a"))
    shared = collections(clock)
    await shared.items("zone:z", cloudflare.lister)
    shared.put("zone:z", Item("3", "a"))
    shared.drop("zone:z", "1")
    assert [i.id for i in await shared.named("zone:z", "a", cloudflare.lister)] == ["2", "3"]

    # A listing that began before a create and a delete answered must not undo them.
    cloudflare.hold = asyncio.Event()
    cloudflare.listing.clear()
    clock.now += OBSERVE_TTL + 1
    reading = asyncio.create_task(shared.items("zone:z", cloudflare.lister))
    await cloudflare.listing.wait()
    shared.put("zone:z", Item("4", "b"))
    shared.drop("zone:z", "2")
    cloudflare.hold.set()
    seen = await reading
    assert set(seen) == {"1", "4"}, "the listing's snapshot had 1 and 2; the write of 4 and delete of 2 win"


async def test_lookups_by_name_follow_renames() -> None:
    clock, cloudflare = Clock(), Cloudflare(Item("1", "a"))
    shared = collections(clock)
    await shared.items("zone:z", cloudflare.lister)
    shared.put("zone:z", Item("1", "b"))
    assert await shared.named("zone:z", "a", cloudflare.lister) == []
    assert [i.id for i in await shared.named("zone:z", "b", cloudflare.lister)] == ["1"]
