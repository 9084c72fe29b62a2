"""Shared listings of Cloudflare collections (a zone's DNS records, an account's zones...), read once for all members.

Cloudflare's budget is counted in calls, and a collection of N objects lists in about N/page calls where reading each
costs N. So every member of a collection is observed, looked up for adoption, recovered after a crash and checked
for drift from one listing that is fresh enough for the purpose:

- `OBSERVE_TTL` for an ordinary reconcile (a restart, a failover or a resync of N objects in Z collections costs
  about Z listings, not N reads);
- newer than the start of the collection's drift round, for a drift check (one listing per round);
- newer than the moment the caller asks, for crash recovery (a create whose reply was lost must be visible).

kflare's own writes update the listing at once, including writes that finish while a listing is being taken (they
are applied over it when it arrives, so a listing never undoes a write it raced with).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from app import multimap
from app.cloudflare.errors import NotFound

T = TypeVar("T")

OBSERVE_TTL = 60.0
"""How old a listing may be to serve an ordinary reconcile; drift rounds and recovery ask for newer ones."""


@dataclass
class _Listing(Generic[T]):
    taken_at: float
    items: dict[str, T]
    by_name: multimap.MultiMap[str, str] = field(default_factory=dict)  # a member's lookup key -> IDs

    def add(self, item_id: str, item: T, name: str | None) -> None:
        self.items[item_id] = item
        if name is not None:
            multimap.add(self.by_name, name, item_id)

    def remove(self, item_id: str, name_of: Callable[[T], str] | None) -> None:
        old = self.items.pop(item_id, None)
        if old is not None and name_of is not None:
            multimap.discard(self.by_name, name_of(old), item_id)


@dataclass
class Collections(Generic[T]):
    """The listings of one kind's collections, by collection key (e.g. `zone:<id>`)."""

    id_of: Callable[[T], str]
    name_of: Callable[[T], str] | None = None
    """The key adoption and recovery look members up by (a DNS record's type and name), indexed per listing."""
    kept: Callable[[T], T] = lambda item: item
    """What of a member the listing holds: a listing lives as long as the process, for every member at once."""
    clock: Callable[[], float] = time.monotonic
    listings: dict[str, _Listing[T]] = field(default_factory=dict)
    rounds: dict[str, float] = field(default_factory=dict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    _during: dict[str, dict[str, T | None]] = field(default_factory=dict)
    lists: int = 0

    def open_round(self, key: str) -> None:
        """A drift round begins: the next read of the collection lists it anew (once for all its members)."""
        self.rounds[key] = self.clock()

    def forget(self, key: str) -> None:
        self.listings.pop(key, None)
        self.rounds.pop(key, None)

    async def items(
        self, key: str, lister: Callable[[], AsyncIterator[T]], *, newer_than: float | None = None
    ) -> dict[str, T]:
        """The collection, from a listing taken after `newer_than` (default: its drift round's start, or no older
        than OBSERVE_TTL), listing it anew when needed. Concurrent callers share one listing."""
        if newer_than is None:
            newer_than = max(self.rounds.get(key, 0.0), self.clock() - OBSERVE_TTL)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            listing = self.listings.get(key)
            if listing is None or listing.taken_at < newer_than:
                listing = await self._list(key, lister)
        return listing.items

    async def _list(self, key: str, lister: Callable[[], AsyncIterator[T]]) -> _Listing[T]:
        taken = self.clock()
        during: dict[str, T | None] = {}
        self._during[key] = during
        try:
            items = {self.id_of(item): self.kept(item) async for item in lister()}
        finally:
            self._during.pop(key, None)
        for item_id, item in during.items():  # kflare's writes that raced with the listing win
            if item is None:
                items.pop(item_id, None)
            else:
                items[item_id] = item
        self.lists += 1
        listing = _Listing[T](taken, {})
        for item_id, item in items.items():
            listing.add(item_id, item, self._name(item))
        self.listings[key] = listing
        return listing

    def _name(self, item: T) -> str | None:
        return None if self.name_of is None else self.name_of(item)

    async def named(
        self, key: str, name: str, lister: Callable[[], AsyncIterator[T]], *, newer_than: float | None = None
    ) -> list[T]:
        """The members whose lookup key is `name`, from a listing as fresh as `items` gives (O(1) per call)."""
        await self.items(key, lister, newer_than=newer_than)
        listing = self.listings[key]
        return [listing.items[i] for i in sorted(multimap.members(listing.by_name, name)) if i in listing.items]

    async def member(
        self,
        key: str,
        lister: Callable[[], AsyncIterator[T]],
        item_id: str,
        read_one: Callable[[], Awaitable[T]],
        *,
        gone: Callable[[T], bool] = lambda item: False,
    ) -> T | None:
        """One member, from the listing; when the listing lacks it (deleted outside kflare, most likely), one read
        makes sure before anything is made in its place. `read_one` raises NotFound for an object that is gone."""
        found = (await self.items(key, lister)).get(item_id)
        if found is not None:
            return found
        try:
            found = await read_one()
        except NotFound:
            found = None
        if found is None or gone(found):
            self.drop(key, item_id)
            return None
        self.put(key, found)
        return found

    def put(self, key: str, item: T) -> None:
        """kflare wrote `item` (created or changed it): the listing shows it at once."""
        self._write(key, self.id_of(item), self.kept(item))

    def drop(self, key: str, item_id: str) -> None:
        """kflare deleted the item, or Cloudflare said it is gone."""
        self._write(key, item_id, None)

    def _write(self, key: str, item_id: str, item: T | None) -> None:
        during = self._during.get(key)
        if during is not None:
            during[item_id] = item
        listing = self.listings.get(key)
        if listing is None:
            return
        if item is None:
            listing.remove(item_id, self.name_of)
        else:
            listing.remove(item_id, self.name_of)
            listing.add(item_id, item, self._name(item))
