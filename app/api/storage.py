"""The account's storage: KVNamespace, R2Bucket and D1Database."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from app.api.base import KflareModel, KindInfo, Permission, PrinterColumn
from app.api.meta import Status
from app.api.refs import AccountReference
from app.api.resource import Resource
from app.api.text import TEXT_SCHEMA, TextCheck

CloudflareValue = Annotated[str, Field(max_length=256)]
LocationHint = Literal["wnam", "enam", "weur", "eeur", "apac", "oc"]


class KVNamespaceSpec(KflareModel):
    """The namespace's title in the account."""

    account_ref: AccountReference
    """The CloudflareAccount the namespace belongs to."""
    title: Annotated[str, Field(min_length=1, max_length=512, json_schema_extra=TEXT_SCHEMA), TextCheck]
    """The namespace's title, unique in the account. Changing it renames the namespace in place (ID and data kept)."""


class KVNamespaceMetadata(KflareModel):
    """What Cloudflare reported of the namespace."""

    namespace_id: CloudflareValue | None = None
    """Cloudflare KV namespace ID."""


class KVNamespaceStatus(Status):
    """What kflare last observed of the namespace."""

    cloudflare_metadata: KVNamespaceMetadata | None = None
    """IDs and read-only data from Cloudflare."""


class KVNamespace(Resource[KVNamespaceSpec, KVNamespaceStatus]):
    """KVNamespace manages a Workers KV namespace. Deleting it deletes the namespace and all its data."""

    info = KindInfo(
        kind="KVNamespace",
        rank=50,
        permissions=(
            Permission(
                "Account · Workers KV Storage · Edit",
                "to create, rename and delete namespaces (deleting one deletes its data)",
            ),
        ),
        claim_label="kflare.dev/kv-namespace-id",
        plural="kvnamespaces",
        short_names=("cfkv",),
        columns=(
            PrinterColumn("Title", ".spec.title"),
            PrinterColumn("Namespace ID", ".status.cloudflareMetadata.namespaceID"),
        ),
        immutable=("accountRef",),
    )


class R2BucketSpec(KflareModel):
    """The bucket's name, jurisdiction and location, all fixed at creation."""

    account_ref: AccountReference
    """The CloudflareAccount the bucket belongs to."""
    name: Annotated[str, Field(min_length=3, max_length=63, pattern=r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")]
    """The bucket's name: 3 to 63 lower-case letters, digits and hyphens."""
    location_hint: LocationHint | None = None
    """Where Cloudflare should place the bucket; used only at creation."""
    jurisdiction: Literal["default", "eu", "fedramp"] = "default"
    """The jurisdiction the bucket's data stays in."""


class R2BucketMetadata(KflareModel):
    """What Cloudflare reported of the bucket."""

    location: CloudflareValue | None = None
    """Where the bucket is (such as `WEUR`)."""
    creation_date: CloudflareValue | None = None
    """When the bucket was created; changes if it is recreated."""
    jurisdiction: CloudflareValue | None = None
    """The bucket's jurisdiction."""


class R2BucketStatus(Status):
    """What kflare last observed of the bucket."""

    cloudflare_metadata: R2BucketMetadata | None = None
    """IDs and read-only data from Cloudflare."""


class R2Bucket(Resource[R2BucketSpec, R2BucketStatus]):
    """R2Bucket manages an R2 bucket. kflare never deletes objects: a bucket that holds any is not deleted."""

    info = KindInfo(
        kind="R2Bucket",
        rank=60,
        permissions=(
            Permission(
                "Account · Workers R2 Storage · Edit", "to create and delete buckets (kflare never deletes an object)"
            ),
        ),
        claim_label="kflare.dev/r2-bucket-name",
        plural="r2buckets",
        short_names=("cfr2",),
        columns=(
            PrinterColumn("Bucket", ".spec.name"),
            PrinterColumn("Location", ".status.cloudflareMetadata.location"),
        ),
        immutable=("accountRef", "name", "locationHint", "jurisdiction"),
    )


class D1DatabaseSpec(KflareModel):
    """The database's name, jurisdiction and location, all fixed at creation."""

    account_ref: AccountReference
    """The CloudflareAccount the database belongs to."""
    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
    """The database's name, unique in the account."""
    jurisdiction: Literal["eu", "fedramp"] | None = None
    """The jurisdiction the database's data stays in; unset: none."""
    location_hint: LocationHint | None = None
    """Where Cloudflare should place the primary; used only at creation."""


class D1DatabaseMetadata(KflareModel):
    """What Cloudflare reported of the database."""

    database_id: CloudflareValue | None = None
    """Cloudflare D1 database UUID."""
    created_at: CloudflareValue | None = None
    """When the database was created."""
    version: CloudflareValue | None = None
    """The database's storage backend version."""


class D1DatabaseStatus(Status):
    """What kflare last observed of the database."""

    cloudflare_metadata: D1DatabaseMetadata | None = None
    """IDs and read-only data from Cloudflare."""


class D1Database(Resource[D1DatabaseSpec, D1DatabaseStatus]):
    """D1Database manages a D1 database. Deleting it deletes the database and all its data."""

    info = KindInfo(
        kind="D1Database",
        rank=70,
        permissions=(
            Permission("Account · D1 · Edit", "to create and delete databases (deleting one deletes its data)"),
        ),
        claim_label="kflare.dev/d1-database-id",
        plural="d1databases",
        short_names=("cfd1",),
        columns=(
            PrinterColumn("Database", ".spec.name"),
            PrinterColumn("Database ID", ".status.cloudflareMetadata.databaseID"),
        ),
        immutable=("accountRef", "name", "jurisdiction", "locationHint"),
    )
