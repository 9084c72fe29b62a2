"""R2 buckets of an account (create, list, get, delete) and the objects in them, which only the admin API writes.

Buckets: ``{name, creation_date, location, jurisdiction, storage_class}``, addressed by name within a jurisdiction:
the ``cf-r2-jurisdiction`` header (``default`` when absent; ``eu``, ``fedramp``, ``us``, ``fedramp-high``) is part of
the bucket's identity on every call, so an ``eu`` bucket is invisible to calls without the header. The create body
is camelCase: ``{name, locationHint?, storageClass?}``; the location is fixed at creation.

Names: 3 to 63 characters of lowercase letters, digits and hyphens, starting and ending with a letter or digit, else
400/10005 (documented). A second bucket of the same name and jurisdiction: 409/10004 (observed; the docs also list
10073). Unknown bucket: 404/10006 (documented). Deleting a bucket that holds objects: 409/10008 (documented): R2 never
deletes objects with their bucket.

Listing answers ``{"buckets": [...]}`` with ``result_info {cursor, per_page}``; ``per_page`` 1..1000 (default 20),
``name_contains``, ``start_after``, ``order=name``, ``direction``. Reading needs ``workers_r2:read``, writing
``workers_r2:edit``.

Unverified: the location given to a bucket without a hint (``enam``; ``weur`` in the ``eu`` jurisdiction), the lower
case of ``location``, the codes for an unknown jurisdiction (10029) or location hint (10001); the 1,000,000-bucket
limit is not enforced.

State-file entries: ``r2_buckets`` ``{name, account_id?, jurisdiction?, locationHint?, storageClass?,
creation_date?}``; ``r2_objects`` ``{key, value? (text), value_base64?, content_type?}`` nested under their bucket,
or at the top level with ``bucket`` (its name), ``jurisdiction`` and ``account_id`` (optional with one account).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable
from typing import Literal

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from app.emulator.collection import Ctx, Kind, Unique, Verb
from app.emulator.envelope import JSON, CloudflareError, pointer_of
from app.emulator.ids import now_iso
from app.emulator.paging import Cursor, Predicate, direction_of, sort_by
from app.emulator.seed import SeedError
from app.emulator.state import Obj, Store

Jurisdiction = Literal["default", "eu", "us", "fedramp", "fedramp-high"]
Location = Literal["apac", "eeur", "enam", "weur", "wnam", "oc"]
JURISDICTIONS: tuple[str, ...] = ("default", "eu", "us", "fedramp", "fedramp-high")
_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{1,61})[a-z0-9]")


class BucketCreate(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str
    location_hint: str | None = Field(default=None, alias="locationHint")
    storage_class: Literal["Standard", "InfrequentAccess"] = Field(default="Standard", alias="storageClass")
    jurisdiction: Jurisdiction = "default"


def _jurisdiction(request: Request) -> str:
    value = (request.headers.get("cf-r2-jurisdiction") or "default").lower()
    if value not in JURISDICTIONS:
        raise CloudflareError.single(400, 10029, f"Invalid jurisdiction {value!r}")
    return value


def _invalid_name() -> CloudflareError:
    return CloudflareError.single(400, 10005, "The specified bucket name is not valid.")


class R2Buckets(Kind):
    name = "r2_buckets"
    parent = "accounts"
    parent_field = "account_id"
    path = "/accounts/{account_id}/r2/buckets"
    scope_param = "account_id"
    item_param = "bucket_name"
    id_field = "name"
    resource = "workers_r2"
    verbs = frozenset({"list", "create", "get", "delete"})
    paging = Cursor(default=20, minimum=1, maximum=1000, wrap="buckets")
    unique = (
        Unique(
            ("name", "jurisdiction"),
            lambda _o: CloudflareError.single(
                409, 10004, "The bucket you tried to create already exists, and you own it."
            ),
        ),
    )
    create_body = BucketCreate
    stamps = ("creation_date",)
    summary_fields = ("jurisdiction",)

    def valid_id(self, value: str) -> bool:
        return bool(value)

    def key_of(self, obj: Obj, parent_key: str | None) -> str:
        return f"{parent_key}/{obj['jurisdiction']}/{obj['name']}"

    def key_for(self, ctx: Ctx, ident: str) -> str:
        return f"{ctx.parent_key}/{_jurisdiction(ctx.request)}/{ident}"

    def not_found(self) -> CloudflareError:
        return CloudflareError.single(404, 10006, "The specified bucket does not exist.")

    def parse(self, ctx: Ctx | None, raw: JsonValue, verb: Verb) -> BaseModel:
        if not isinstance(raw, dict):
            raise _invalid_name()
        fields = dict(raw)
        if ctx is not None:
            fields["jurisdiction"] = _jurisdiction(ctx.request)
        try:
            return BucketCreate.model_validate(fields)
        except ValidationError as exc:
            message, pointer = pointer_of(exc)
            if pointer == "/name":
                raise _invalid_name() from None
            raise self.body_error(message, pointer) from None

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        assert isinstance(body, BucketCreate)
        if not _NAME.fullmatch(body.name):
            raise _invalid_name()
        location = (body.location_hint or ("weur" if body.jurisdiction == "eu" else "enam")).lower()
        if location not in ("apac", "eeur", "enam", "weur", "wnam", "oc"):
            raise CloudflareError.single(400, 10001, f"Invalid location hint {body.location_hint!r}")
        return {
            "name": body.name,
            "creation_date": now_iso(),
            "location": location,
            "jurisdiction": body.jurisdiction,
            "storage_class": body.storage_class,
        }

    def rows(self, ctx: Ctx) -> list[Obj]:
        jurisdiction = _jurisdiction(ctx.request)
        return [b for b in self.siblings(ctx.store, ctx.parent_key) if b["jurisdiction"] == jurisdiction]

    def filters(self, ctx: Ctx) -> Predicate[Obj]:
        contains, after = ctx.query.get("name_contains") or "", ctx.query.get("start_after") or ""
        return lambda b: contains in b["name"] and b["name"] > after

    def order(self, ctx: Ctx, items: Iterable[Obj]) -> list[Obj]:
        return sort_by(items, lambda b: b["name"], direction_of(ctx.query))

    def before_delete(self, ctx: Ctx, obj: Obj) -> None:
        if ctx.store.table("r2_objects").count_under(self.key_of(obj, ctx.parent_key)):
            raise CloudflareError.single(409, 10008, "The bucket you tried to delete is not empty.")

    def deleted(self, obj: Obj) -> JsonValue:
        return {}

    def dump(self, store: Store, obj: Obj, parent_key: str | None) -> JSON:
        return {
            "account_id": parent_key,
            "name": obj["name"],
            "jurisdiction": obj["jurisdiction"],
            "locationHint": obj["location"],
            "storageClass": obj["storage_class"],
            "creation_date": obj["creation_date"],
        }


class ObjectSeed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=1024)
    value: str | None = None
    value_base64: str | None = None
    content_type: str = "application/octet-stream"


class R2Objects(Kind):
    """Objects, for the buckets' sake only: the emulator serves no object API, so kflare cannot delete one."""

    name = "r2_objects"
    parent = "r2_buckets"
    parent_field = "bucket"
    path = "/accounts/{account_id}/r2/buckets/{bucket_name}/objects"
    id_field = "key"
    resource = "workers_r2"
    verbs = frozenset()
    create_body = ObjectSeed
    stamps = ("uploaded",)
    summary_fields = ("size",)

    def key_of(self, obj: Obj, parent_key: str | None) -> str:
        return f"{parent_key}/{obj['key']}"

    def valid_id(self, value: str) -> bool:
        return bool(value)

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        assert isinstance(body, ObjectSeed)
        encoded = body.value_base64
        data = base64.b64decode(encoded) if encoded is not None else (body.value or "").encode()
        return {
            "key": body.key,
            "size": len(data),
            "etag": hashlib.md5(data, usedforsecurity=False).hexdigest(),
            "uploaded": now_iso(),
            "content_type": body.content_type,
            "value_base64": base64.b64encode(data).decode(),
        }

    def seed_fields(self, entry: JSON) -> JSON:
        return {k: v for k, v in entry.items() if k not in ("bucket", "jurisdiction", "account_id")}

    def find_parent(self, store: Store, entry: JSON, where: str) -> tuple[Obj, str]:
        buckets = store.table("r2_buckets")
        account = entry.get("account_id")
        if account is None:
            accounts = list(store.accounts)
            if len(accounts) != 1:
                raise SeedError(f"{where}: account_id is needed unless there is exactly one account")
            account = accounts[0]["id"]
        key = f"{account}/{entry.get('jurisdiction') or 'default'}/{entry.get('bucket')}"
        bucket = buckets.get(key)
        if bucket is None:
            raise SeedError(f"{where}: no bucket {entry.get('bucket')!r} in that account and jurisdiction")
        return bucket, key

    def dump(self, store: Store, obj: Obj, parent_key: str | None) -> JSON:
        account, jurisdiction, bucket = str(parent_key).split("/", 2)
        return {
            "account_id": account,
            "jurisdiction": jurisdiction,
            "bucket": bucket,
            "key": obj["key"],
            "value_base64": obj["value_base64"],
            "content_type": obj["content_type"],
            "uploaded": obj["uploaded"],
        }


BUCKETS = R2Buckets()
OBJECTS = R2Objects()
