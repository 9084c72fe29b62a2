"""Kinds whose Cloudflare objects are one collection of an account: zones, tunnels, KV namespaces, R2 buckets, D1
databases, Workers, IP lists.

Every member's observe, adoption lookup, crash recovery and drift check reads one listing per account
(`Collections`), with one GET to make sure before something missing from it is made anew; drift is checked per
account. A kind supplies the listing, the single read and the key adoption looks objects up by; a kind whose link
carries more than the account (a Worker's upload) or whose observed object is more than its listing entry (an IP
list's items) says how to build them (`AccountMemberBase`); the others are plain `AccountMember`s.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from app.api.resource import Resource
from app.cloudflare.errors import NotFound
from app.kube.client import JSON
from reconcilers.capabilities import DriftGrouped
from reconcilers.collections import Collections
from reconcilers.context import AccountLink, Caches, Credentials
from reconcilers.credentials import account_key, account_ref_key, ready_account
from reconcilers.managed_kind import ManagedKind, pending_intent

Member = TypeVar("Member", bound=Resource[Any, Any])
Listed = TypeVar("Listed")
Observed = TypeVar("Observed")


def account_name(raw: JSON) -> str | None:
    """The key of the object's account (`credentials.account_key`)."""
    return account_key(raw)


@dataclass(frozen=True)
class AccountScope:
    """A Ready account, and the collection of its objects of one kind (`partition`: the part of the account the
    collection is, when Cloudflare lists a kind's objects by part, as R2 lists buckets by jurisdiction)."""

    account: AccountLink
    collection: str
    partition: str = ""


def collection_name(account: str, partition: str = "") -> str:
    return f"account:{account}:{partition}" if partition else f"account:{account}"


def account_drift_group(raw: JSON) -> str | None:
    """Members of an account are drift-checked together: one listing of the account serves them all."""
    name = account_name(raw)
    return collection_name(name) if name else None


Scope = TypeVar("Scope", bound=AccountScope)


class AccountMemberBase(ManagedKind[Member, Scope, Observed], DriftGrouped, Generic[Member, Scope, Listed, Observed]):
    """A kind whose Cloudflare objects are one collection of the account: read from one listing per account for
    observe, adoption lookups, recovery and drift, with one GET to make sure before something missing from it is
    made anew. A kind supplies the listing, the single read, the key adoption looks objects up by, its link
    (`connect`, from `account_scope`) and what it observes of a listed object (`observed_from`)."""

    def __init__(self, caches: Caches, credentials: Credentials) -> None:
        super().__init__(caches, credentials)
        self.listings: Collections[Listed] = self.new_listings()

    def new_listings(self) -> Collections[Listed]:
        """The kind's listings (a kind that shares another engine's returns those)."""
        return Collections(id_of=self.listed_id, name_of=self.listed_key)

    @abstractmethod
    def list_members(self, link: Scope) -> AsyncIterator[Listed]: ...

    @abstractmethod
    async def get_member(self, link: Scope, object_id: str) -> Listed:
        """The object alone; NotFound when Cloudflare has no such object."""

    @abstractmethod
    def listed_key(self, listed: Listed) -> str:
        """An object's adoption key as Cloudflare lists it (a title, a name)."""

    def listed_id(self, listed: Listed) -> str:
        return str(getattr(listed, self.observed_id))

    @abstractmethod
    async def observed_from(self, link: Scope, listed: Listed) -> Observed:
        """What the kind observes of a listed object."""

    @classmethod
    def drift_group(cls, raw: JSON) -> str | None:
        return account_drift_group(raw)

    def open_drift_round(self, group: str) -> None:
        self.listings.open_round(group)

    def partition(self, obj: Member) -> str:
        """The part of the account the member's collection is ("": the whole account); a kind that partitions
        says so in its `drift_group` too."""
        return ""

    def collection_of(self, account_ref: str, account: AccountLink, partition: str) -> str:
        """The key of the member's collection in `listings`."""
        return collection_name(account_ref, partition)

    async def account_scope(self, obj: Member) -> AccountScope:
        name = account_ref_key(obj.spec.account_ref, obj.namespace)
        partition = self.partition(obj)
        account = await ready_account(self.credentials, name, obj.namespace)
        return AccountScope(account, self.collection_of(name, account, partition), partition)

    def gone(self, listed: Listed) -> bool:
        """Whether a listed object counts as deleted (a soft-deleted tunnel)."""
        return False

    async def observe(self, link: Scope, obj: Member, object_id: str) -> Observed | None:
        listed = await self.listings.member(
            link.collection,
            lambda: self.list_members(link),
            object_id,
            lambda: self.get_member(link, object_id),
            gone=self.gone,
        )
        return None if listed is None else await self.observed_from(link, listed)

    async def named(self, link: Scope, obj: Member, key: str) -> list[Listed]:
        """The listed objects of `key`; after a create that may have landed (an intent), from a fresh listing."""
        newer_than = time.monotonic() if pending_intent(self, obj) is not None else None
        return await self.listings.named(link.collection, key, lambda: self.list_members(link), newer_than=newer_than)

    async def fresh_member(self, link: Scope, object_id: str) -> Listed:
        """The object from a listing taken now: the single read of a kind Cloudflare reads only by listing."""
        items = await self.listings.items(link.collection, lambda: self.list_members(link), newer_than=time.monotonic())
        found = items.get(object_id)
        if found is None:
            raise NotFound(f"{self.kind} {object_id} is not in a fresh listing")
        return found


class AccountMember(AccountMemberBase[Member, AccountScope, Listed, Listed]):
    """A plain member: its link is the account and its collection, and it observes what the listing holds."""

    async def connect(self, obj: Member) -> AccountScope:
        return await self.account_scope(obj)

    async def observed_from(self, link: AccountScope, listed: Listed) -> Listed:
        return listed
