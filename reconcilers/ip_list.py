"""IPList: a custom list of an account, created or adopted by its name, its items replaced when they differ.

Reads: the account's lists come from one shared listing (`Collections`, one call for every list of the account, the
same the rule kinds read to know which `$name`s exist); the items of a list are read 500 a page, so a check costs two
calls plus one per 500 items past the first 500.

Writes: the items are replaced in one asynchronous bulk operation (PUT of every item), polled until Cloudflare says it
completed or failed. Cloudflare runs one operation at a time per account, so the operations of one account are
serialised here.

Ordering with rules: a rule that names a list the account lacks waits for it (`ListNotFound`), and is queued again
once the list exists; a list is deleted only once no rule uses it: kflare's rules that name it are waited for
(`ListInUse`, woken when each is done), and a list Cloudflare still counts rules for (rules made outside kflare, or
kept by a retain policy) waits too, looked at again every minute. Both ways go through indexes: the rule kinds' of
the lists their rules name, IPList's of its lists' names (`rulesets.LISTS_INDEX`, `LIST_NAME_INDEX`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from app.api.constants import Reason
from app.api.iplist import IPList, IPListMetadata, normal_ip
from app.cloudflare.errors import Terminal
from app.cloudflare.models import CustomList, ListItem
from app.kube.client import JSON
from app.kube.index import Ref
from app.kube.informer import Indexer, Key, key_of
from reconcilers.account_members import AccountMemberBase, AccountScope, collection_name
from reconcilers.capabilities import ChoosesDependants, Indexed, ServesChildren
from reconcilers.collections import Collections
from reconcilers.context import AccountLink, Caches, Credentials, RulesetEngine, lists_key
from reconcilers.credentials import account_id_of, account_key
from reconcilers.holders import done_with
from reconcilers.managed_kind import Changes
from reconcilers.rulesets import LIST_NAME_INDEX, LISTS_INDEX
from reconcilers.waiting import RETRY_PARENT, NotReady

OPERATION_TIMEOUT = 120.0
POLL_FIRST, POLL_MAX = 0.05, 2.0


@dataclass(frozen=True)
class ObservedList:
    list: CustomList
    items: tuple[tuple[str, str], ...]
    """(address as Cloudflare writes it, comment), sorted."""

    def described(self) -> str:
        return f"list {self.list.name} ({self.list.id})"


def _items_of(items: list[ListItem]) -> tuple[tuple[str, str], ...]:
    out = []
    for item in items:
        try:
            ip = normal_ip(item.ip or "")
        except ValueError:
            ip = item.ip or ""
        out.append((ip, item.comment or ""))
    return tuple(sorted(out))


class IPListKind(
    AccountMemberBase[IPList, AccountScope, CustomList, ObservedList], Indexed, ServesChildren, ChoosesDependants
):
    """A member of the account's lists, read from the listing the rule kinds share (keyed by the account's
    Cloudflare ID, as a rule knows its account); what it observes is the list with its items."""

    model = IPList
    status_id = "list_id"
    observed_id = "list.id"
    in_use_reason = Reason.LIST_IN_USE

    def __init__(self, caches: Caches, credentials: Credentials, rulesets: RulesetEngine) -> None:
        self.engine = rulesets
        super().__init__(caches, credentials)
        self.operations: dict[str, asyncio.Lock] = {}

    def new_listings(self) -> Collections[CustomList]:
        return self.engine.lists

    def collection_of(self, account_ref: str, account: AccountLink, partition: str) -> str:
        return lists_key(account.account_id)

    @classmethod
    def more_indexes(cls) -> dict[str, Indexer]:
        """Beside the claim: the list's name, which rules name it by."""

        def name(raw: JSON) -> list[str]:
            value = (raw.get("spec") or {}).get("name")
            return [value] if value else []

        return {LIST_NAME_INDEX: name}

    @classmethod
    def serving_state(cls, raw: JSON) -> object:
        """What the rules naming the list read of it: which list it is and whether Cloudflare has it (a change of its
        items wakes no rule)."""
        spec = raw.get("spec") or {}
        list_id = ((raw.get("status") or {}).get("cloudflareMetadata") or {}).get("listID")
        return spec.get("name"), account_key(raw), bool(list_id)

    def open_drift_round(self, group: str) -> None:
        """Lists are drift-checked per account, as every account member is; the round opens the listing the rules
        share, which is keyed by the account's Cloudflare ID."""
        account_id = account_id_of(self.caches, group.removeprefix(collection_name("")))
        if account_id:
            self.listings.open_round(lists_key(account_id))

    async def connect(self, obj: IPList) -> AccountScope:
        return await self.account_scope(obj)

    def list_members(self, link: AccountScope) -> AsyncIterator[CustomList]:
        return link.account.client.list_lists(link.account.account_id)

    async def get_member(self, link: AccountScope, object_id: str) -> CustomList:
        return await link.account.client.get_list(link.account.account_id, object_id)

    def listed_key(self, listed: CustomList) -> str:
        return listed.name

    async def observed_from(self, link: AccountScope, listed: CustomList) -> ObservedList:
        client = link.account.client
        items = [item async for item in client.list_items(link.account.account_id, listed.id)]
        return ObservedList(listed, _items_of(items))

    async def find(self, link: AccountScope, obj: IPList) -> ObservedList | None:
        named = await self.named(link, obj, obj.spec.name)
        candidates = [found for found in named if not self.owners.claimed_by_other(found.id, obj)]
        return await self.observed_from(link, candidates[0]) if candidates else None

    async def create(self, link: AccountScope, obj: IPList) -> ObservedList:
        client = link.account.client
        created = await client.create_list(
            link.account.account_id, obj.spec.name, description=obj.spec.description or ""
        )
        self.listings.put(link.collection, created)
        return ObservedList(created, ())

    @staticmethod
    def _wanted(obj: IPList) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((normal_ip(item.ip), item.comment or "") for item in obj.spec.items))

    def diff(self, link: AccountScope, obj: IPList, observed: ObservedList) -> Changes:
        changes: Changes = {}
        if (obj.spec.description or "") != (observed.list.description or ""):
            changes["description"] = obj.spec.description or ""
        if self._wanted(obj) != observed.items:
            changes["items"] = True
        return changes

    async def update(self, link: AccountScope, obj: IPList, observed: ObservedList, changes: Changes) -> ObservedList:
        client = link.account.client
        account_id = link.account.account_id
        current = observed.list
        if "description" in changes:
            current = await client.update_list(account_id, current.id, str(changes["description"]))
        items = observed.items
        if "items" in changes:
            wanted = self._wanted(obj)
            body = [{"ip": ip, **({"comment": comment} if comment else {})} for ip, comment in wanted]
            async with self.operations.setdefault(account_id, asyncio.Lock()):
                operation = await client.replace_list_items(account_id, current.id, body)
                await self._finished(link, operation)
            current = await client.get_list(account_id, current.id)
            items = wanted
        self.listings.put(link.collection, current)
        return ObservedList(current, items)

    async def _finished(self, link: AccountScope, operation_id: str) -> None:
        """Poll the bulk operation until Cloudflare says it is done; a failed one is Cloudflare's refusal."""
        client = link.account.client
        deadline = time.monotonic() + OPERATION_TIMEOUT
        pause = POLL_FIRST
        while True:
            state = await client.get_list_operation(link.account.account_id, operation_id)
            if state.status == "completed":
                return
            if state.status == "failed":
                raise Terminal(f"replacing the list's items failed: {state.error or 'no reason given'}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"list operation {operation_id} still {state.status} after {OPERATION_TIMEOUT}s")
            await asyncio.sleep(pause)
            pause = min(pause * 2, POLL_MAX)

    def dependants(self, key: Key, referencing: list[Ref]) -> list[Ref]:
        """kflare's rules that name the list in its account (and are not done with it), beside the usual dependants.

        The rule kinds' index is keyed by the list's name alone: a rule's account is its Zone's, not a field of the
        rule, and an index keyed by what another object says would go stale when that object changes. The few rules
        naming the name are told apart by their Zone's account here."""
        users = list(referencing)
        raw = self.caches.cached(self.kind, key[1], key[0] or None)
        spec = (raw or {}).get("spec") or {}
        name = spec.get("name")
        if not name:
            return users
        account = self._account_id(account_key(raw or {"metadata": {}}))
        for kind in sorted(self.engine.kinds):
            informer = self.caches.informer_of(kind)
            for rule in [] if informer is None else informer.by_index(LISTS_INDEX, name):
                theirs = self._account_id(self._zone_account(rule))
                if done_with(rule) or (account and theirs and theirs != account):
                    continue
                users.append(Ref(kind, *key_of(rule)))
        return users

    def _zone_account(self, rule: JSON) -> str | None:
        zone_name = ((rule.get("spec") or {}).get("zoneRef") or {}).get("name")
        zone = self.caches.cached("Zone", zone_name, rule["metadata"].get("namespace")) if zone_name else None
        return None if zone is None else account_key(zone)

    def _account_id(self, account: str | None) -> str | None:
        """None while it is not known: a rule whose account is not known counts as a user."""
        return account_id_of(self.caches, account)

    async def delete(self, link: AccountScope, obj: IPList, object_id: str) -> None:
        lists = await self.listings.items(link.collection, lambda: self.list_members(link), newer_than=time.monotonic())
        found = lists.get(object_id)
        if found is not None and found.num_referencing_filters > 0:
            raise NotReady(
                Reason.LIST_IN_USE,
                f"list {found.name} is used by {found.num_referencing_filters} rule(s) kflare does not manage",
                requeue_after=RETRY_PARENT,
            )
        await link.account.client.delete_list(link.account.account_id, object_id)
        self.listings.drop(link.collection, object_id)

    def record(self, link: AccountScope, obj: IPList, observed: ObservedList) -> None:
        obj.status.cloudflare_metadata = IPListMetadata(
            list_id=observed.list.id,
            num_items=len(observed.items),
            num_referencing_filters=observed.list.num_referencing_filters,
        )
