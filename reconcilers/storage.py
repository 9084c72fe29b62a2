"""The account's storage: KVNamespace, R2Bucket and D1Database.

Each is a member of one of its account's collections, read from one listing per account (per jurisdiction for R2)
that every member's observe, adoption lookup, crash recovery and drift check shares (`Collections`). Adoption keys:
a namespace's title, a bucket's name (within its jurisdiction), a database's name; an object another resource of the
kind claims is never adopted (`TitleConflict`, `NameConflict`). Deleting waits (`InUse`) while a WorkerScript binds
the object: the dependency index holds the bindings.

- KVNamespace: the title is corrected in place (a rename keeps the ID and the data); deleting a namespace deletes
  its data, as Cloudflare does.
- R2Bucket: name, jurisdiction and location are fixed at creation; nothing to correct. kflare never deletes objects:
  a bucket that holds some reports `BucketNotEmpty` and is tried again every minute, until it is empty or the
  resource says `kflare.dev/deletion-policy: retain`.
- D1Database: name, jurisdiction and location are fixed at creation; Cloudflare's quota (10 on the Free plan) is
  reported as TerminalError with Cloudflare's own message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from app.api.constants import Reason
from app.api.storage import (
    D1Database,
    D1DatabaseMetadata,
    KVNamespace,
    KVNamespaceMetadata,
    R2Bucket,
    R2BucketMetadata,
)
from app.cloudflare.errors import CloudflareError
from app.cloudflare.models import D1Database as CloudflareDatabase
from app.cloudflare.models import KVNamespace as CloudflareNamespace
from app.cloudflare.models import R2Bucket as CloudflareBucket
from app.kube.client import JSON
from reconcilers.account_members import AccountMember, AccountScope, account_name, collection_name
from reconcilers.capabilities import RecordsIdElsewhere
from reconcilers.claims import holder_of
from reconcilers.credentials import account_id_of, account_ref_key
from reconcilers.holders import CLAIM_INDEX
from reconcilers.managed_kind import Changes
from reconcilers.waiting import RETRY_PARENT, NotReady

BUCKET_NOT_EMPTY_CODE = 10008


class KVNamespaceKind(AccountMember[KVNamespace, CloudflareNamespace]):
    model = KVNamespace
    status_id = "namespace_id"

    def list_members(self, link: AccountScope) -> AsyncIterator[CloudflareNamespace]:
        return link.account.client.list_kv_namespaces(link.account.account_id)

    async def get_member(self, link: AccountScope, object_id: str) -> CloudflareNamespace:
        return await link.account.client.get_kv_namespace(link.account.account_id, object_id)

    def listed_key(self, observed: CloudflareNamespace) -> str:
        return observed.title

    async def find(self, link: AccountScope, obj: KVNamespace) -> CloudflareNamespace | None:
        return self.owners.first_unclaimed(
            await self.named(link, obj, obj.spec.title),
            obj,
            Reason.TITLE_CONFLICT,
            lambda namespace: f"KV namespace {obj.spec.title!r} ({namespace.id})",
        )

    async def create(self, link: AccountScope, obj: KVNamespace) -> CloudflareNamespace:
        created = await link.account.client.create_kv_namespace(link.account.account_id, obj.spec.title)
        self.listings.put(link.collection, created)
        return created

    def diff(self, link: AccountScope, obj: KVNamespace, observed: CloudflareNamespace) -> Changes:
        return {"title": obj.spec.title} if observed.title != obj.spec.title else {}

    async def update(
        self, link: AccountScope, obj: KVNamespace, observed: CloudflareNamespace, changes: Changes
    ) -> CloudflareNamespace:
        await link.account.client.rename_kv_namespace(link.account.account_id, observed.id, obj.spec.title)
        renamed = observed.model_copy(update={"title": obj.spec.title})
        self.listings.put(link.collection, renamed)
        return renamed

    async def delete(self, link: AccountScope, obj: KVNamespace, object_id: str) -> None:
        await link.account.client.delete_kv_namespace(link.account.account_id, object_id)
        self.listings.drop(link.collection, object_id)

    def record(self, link: AccountScope, obj: KVNamespace, observed: CloudflareNamespace) -> None:
        obj.status.cloudflare_metadata = KVNamespaceMetadata(namespace_id=observed.id)


class R2BucketKind(AccountMember[R2Bucket, CloudflareBucket], RecordsIdElsewhere[R2Bucket]):
    """Buckets are listed per jurisdiction (each is a namespace of names of its own): the account's collection of
    buckets is one per jurisdiction, and so are their drift checks."""

    model = R2Bucket
    serves_once = "creation_date"  # a bucket's ID is its name: it exists once Cloudflare dated it
    observed_id = "name"

    def partition(self, obj: R2Bucket) -> str:
        return f"r2:{obj.spec.jurisdiction or 'default'}"

    @classmethod
    def drift_group(cls, raw: JSON) -> str | None:
        name = account_name(raw)
        jurisdiction = (raw.get("spec") or {}).get("jurisdiction") or "default"
        return collection_name(name, f"r2:{jurisdiction}") if name else None

    def list_members(self, link: AccountScope) -> AsyncIterator[CloudflareBucket]:
        return link.account.client.list_r2_buckets(link.account.account_id, link.partition.removeprefix("r2:"))

    async def get_member(self, link: AccountScope, object_id: str) -> CloudflareBucket:
        jurisdiction = link.partition.removeprefix("r2:")
        return await link.account.client.get_r2_bucket(link.account.account_id, object_id, jurisdiction)

    def listed_key(self, observed: CloudflareBucket) -> str:
        return observed.name

    def owner_of(self, name: str, obj: R2Bucket) -> str | None:
        """Another R2Bucket claiming the bucket of that name in the same jurisdiction of the same Cloudflare
        account (even through another CloudflareAccount object); claims whose account is gone do not count."""
        informer = self.caches.informer_of(self.kind)
        mine = self._account_id(account_ref_key(obj.spec.account_ref, obj.namespace))
        for other in [] if informer is None else informer.by_index(CLAIM_INDEX, name):
            if other["metadata"].get("uid") == obj.metadata.uid:
                continue
            spec = other.get("spec") or {}
            if (spec.get("jurisdiction") or "default") != obj.spec.jurisdiction:
                continue
            theirs = self._account_id(account_name(other) or "")
            if theirs is not None and theirs == mine:
                return holder_of(other).described_to(obj.metadata.namespace)
        return None

    def _account_id(self, account: str) -> str | None:
        return account_id_of(self.caches, account)

    def _check_claim(self, obj: R2Bucket) -> None:
        owner = self.owners.owner_of(obj.spec.name, obj)
        if owner is not None:
            raise NotReady(
                Reason.NAME_CONFLICT,
                f"R2 bucket {obj.spec.name} ({obj.spec.jurisdiction}) is managed by {owner}",
                requeue_after=RETRY_PARENT,
            )

    def object_id(self, obj: R2Bucket) -> str | None:
        meta = obj.status.cloudflare_metadata
        return obj.spec.name if meta is not None and meta.creation_date else None

    async def observe(self, link: AccountScope, obj: R2Bucket, object_id: str) -> CloudflareBucket | None:
        self._check_claim(obj)
        return await super().observe(link, obj, object_id)

    async def find(self, link: AccountScope, obj: R2Bucket) -> CloudflareBucket | None:
        self._check_claim(obj)
        named = await self.named(link, obj, obj.spec.name)
        return named[0] if named else None

    async def create(self, link: AccountScope, obj: R2Bucket) -> CloudflareBucket:
        spec = obj.spec
        created = await link.account.client.create_r2_bucket(
            link.account.account_id, spec.name, location_hint=spec.location_hint, jurisdiction=spec.jurisdiction
        )
        self.listings.put(link.collection, created)
        return created

    async def delete(self, link: AccountScope, obj: R2Bucket, object_id: str) -> None:
        try:
            await link.account.client.delete_r2_bucket(link.account.account_id, object_id, obj.spec.jurisdiction)
        except CloudflareError as exc:
            if BUCKET_NOT_EMPTY_CODE in exc.codes:
                raise NotReady(
                    Reason.BUCKET_NOT_EMPTY,
                    f"R2 bucket {object_id} still holds objects and kflare never deletes objects: empty it, or set"
                    " kflare.dev/deletion-policy: retain to keep it; checked again every minute",
                    requeue_after=RETRY_PARENT,
                ) from None
            raise
        self.listings.drop(link.collection, object_id)

    def record(self, link: AccountScope, obj: R2Bucket, observed: CloudflareBucket) -> None:
        obj.status.cloudflare_metadata = R2BucketMetadata(
            location=(observed.location or "").upper() or None,
            creation_date=observed.creation_date,
            jurisdiction=observed.jurisdiction or obj.spec.jurisdiction,
        )


class D1DatabaseKind(AccountMember[D1Database, CloudflareDatabase]):
    model = D1Database
    observed_id = "uuid"
    status_id = "database_id"

    def list_members(self, link: AccountScope) -> AsyncIterator[CloudflareDatabase]:
        return link.account.client.list_d1_databases(link.account.account_id)

    async def get_member(self, link: AccountScope, object_id: str) -> CloudflareDatabase:
        return await link.account.client.get_d1_database(link.account.account_id, object_id)

    def listed_key(self, observed: CloudflareDatabase) -> str:
        return observed.name

    async def find(self, link: AccountScope, obj: D1Database) -> CloudflareDatabase | None:
        return self.owners.first_unclaimed(
            await self.named(link, obj, obj.spec.name),
            obj,
            Reason.NAME_CONFLICT,
            lambda database: f"D1 database {obj.spec.name} ({database.uuid})",
        )

    async def create(self, link: AccountScope, obj: D1Database) -> CloudflareDatabase:
        spec = obj.spec
        created = await link.account.client.create_d1_database(
            link.account.account_id, spec.name, jurisdiction=spec.jurisdiction, location_hint=spec.location_hint
        )
        self.listings.put(link.collection, created)
        return created

    async def delete(self, link: AccountScope, obj: D1Database, object_id: str) -> None:
        await link.account.client.delete_d1_database(link.account.account_id, object_id)
        self.listings.drop(link.collection, object_id)

    def record(self, link: AccountScope, obj: D1Database, observed: CloudflareDatabase) -> None:
        obj.status.cloudflare_metadata = D1DatabaseMetadata(
            database_id=observed.uuid, created_at=observed.created_at, version=observed.version
        )
