"""Workers KV: namespaces of an account (create by title, rename in place, list, delete with their data) and the
values in them (write, read, list keys, delete), enough to show what a namespace holds.

Namespaces: ``{id, title, supports_url_encoding, jurisdiction?}``; ``jurisdiction`` (``eu``, ``fedramp``, ``us``) is
fixed at creation. Titles are unique per account: 400/10014 "a namespace with this account ID and title already
exists" (observed). List: ``order`` (``id`` or ``title``), ``direction``, ``page``/``per_page`` (default 20, 1..1000:
the bounds are unverified). Deleting a namespace deletes every key in it.

Values: ``PUT .../values/{key}`` takes the value as the raw body or as a form with a ``value`` part and an optional
JSON ``metadata`` part, with ``expiration`` / ``expiration_ttl`` (seconds, at least 60) in the query; ``GET`` answers
the raw bytes, not an envelope. Keys list with ``prefix``, ``cursor`` and ``limit`` (10..1000, default 1000), sorted
by name. Reading and listing need ``workers_kv:read``, writing ``workers_kv:edit``.

Unverified: the not-found codes (10013 for a namespace, 10009 for a key), the Free-plan namespace limit (1,000) and
its code (10016), and that an expired key disappears only when read (it does here).

State-file entries: ``kv_namespaces`` take the create body (``account_id`` optional with one account) and may nest
``kv_values`` entries ``{name, value? (text), value_base64?, metadata?, expiration?}``.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from app.emulator.collection import Ctx, Kind, Unique
from app.emulator.envelope import CloudflareError, invalid_body, ok
from app.emulator.multipart import is_multipart, parse_form
from app.emulator.paging import Cursor, PageNumbers, PageSpec, direction_of, require_id, sort_by
from app.emulator.routes import route
from app.emulator.state import Obj, Store

RESOURCE = "workers_kv"


class NamespaceCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: str = Field(min_length=1, max_length=512)
    jurisdiction: Literal["eu", "fedramp", "us"] | None = None


class NamespaceRename(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: str = Field(min_length=1, max_length=512)


def _duplicate(_obj: Obj) -> CloudflareError:
    return CloudflareError.single(400, 10014, "a namespace with this account ID and title already exists")


class KVNamespaces(Kind):
    name = "kv_namespaces"
    parent = "accounts"
    parent_field = "account_id"
    path = "/accounts/{account_id}/storage/kv/namespaces"
    scope_param = "account_id"
    item_param = "namespace_id"
    resource = RESOURCE
    verbs = frozenset({"list", "create", "get", "update", "delete"})
    paging = PageNumbers(PageSpec(default=20, minimum=1, maximum=1000))
    unique = (Unique(("title",), _duplicate),)
    limit = 1000
    create_body = NamespaceCreate
    update_body = NamespaceRename
    stamps = ()
    summary_fields = ("title",)

    def not_found(self) -> CloudflareError:
        return CloudflareError.single(404, 10013, "namespace not found")

    def over_limit(self, parent: Obj | None, limit: int) -> CloudflareError:
        return CloudflareError.single(400, 10016, f"the account has reached its limit of {limit} namespaces")

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        if previous is not None:
            return {**previous, "title": getattr(body, "title", previous["title"])}
        assert isinstance(body, NamespaceCreate)
        namespace: Obj = {"id": self.new_id(), "title": body.title, "supports_url_encoding": True}
        if body.jurisdiction is not None:
            namespace["jurisdiction"] = body.jurisdiction
        return namespace

    def order(self, ctx: Ctx, items: Iterable[Obj]) -> list[Obj]:
        field = "title" if ctx.query.get("order") == "title" else "id"
        return sort_by(items, lambda n: (n[field], n["id"]), direction_of(ctx.query))

    def deleted(self, obj: Obj) -> JsonValue:
        return {}


class ValueSeed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=512)
    value: str | None = None
    value_base64: str | None = None
    metadata: JsonValue = None
    expiration: int | None = None


class KVValues(Kind):
    name = "kv_values"
    parent = "kv_namespaces"
    parent_field = "namespace_id"
    path = "/accounts/{account_id}/storage/kv/namespaces/{namespace_id}/values"
    scope_param = "namespace_id"
    item_param = "key_name"
    id_field = "name"
    resource = RESOURCE
    verbs = frozenset()
    create_body = ValueSeed
    stamps = ()
    summary_fields = ()
    keys = Cursor(default=1000, minimum=10, maximum=1000, size_param="limit")

    def valid_id(self, value: str) -> bool:
        return 0 < len(value.encode()) <= 512 and value not in (".", "..")

    def key_of(self, obj: Obj, parent_key: str | None) -> str:
        return f"{parent_key}/{obj['name']}"

    def key_for(self, ctx: Ctx, ident: str) -> str:
        return f"{ctx.parent_key}/{ident}"

    def not_found(self) -> CloudflareError:
        return CloudflareError.single(404, 10009, "get: 'key not found'")

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        assert isinstance(body, ValueSeed)
        encoded = body.value_base64
        data = base64.b64decode(encoded) if encoded is not None else (body.value or "").encode()
        return _value(body.name, data, body.metadata, body.expiration)

    def extra_routes(self, router: APIRouter) -> None:
        item = self.item_path().replace("{key_name}", "{key_name:path}")
        route(router, "PUT", item, "kv_values_put", self.write)
        route(router, "GET", item, "kv_values_get", self.read, response_class=Response)
        route(router, "DELETE", item, "kv_values_delete", self.remove)
        route(
            router, "GET", "/accounts/{account_id}/storage/kv/namespaces/{namespace_id}/keys", "kv_keys", self.keys_of
        )

    def _live(self, ctx: Ctx, key: str) -> Obj:
        require_id(key, ctx.path, self.valid_id)
        table = self.table(ctx.store)
        value = table.get(self.key_for(ctx, key))
        if value is not None and _expired(value):
            table.remove(self.key_for(ctx, key))
            value = None
        if value is None:
            raise self.not_found()
        return value

    async def write(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        content_type = request.headers.get("content-type", "")
        raw = await request.body()
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "edit")
        key = ctx.param("key_name")
        require_id(key, ctx.path, self.valid_id)
        metadata: JsonValue = None
        if is_multipart(content_type):
            parts = {part.name: part for part in parse_form(content_type, raw)}
            if "value" not in parts:
                raise invalid_body("value is a required part", pointer="/value")
            data = parts["value"].data
            if "metadata" in parts:
                try:
                    metadata = json.loads(parts["metadata"].data or b"null")
                except ValueError:
                    raise invalid_body("metadata is not JSON", pointer="/metadata") from None
        else:
            data = raw
        value = _value(key, data, metadata, _expiration(ctx))
        self.table(ctx.store).add(value, ctx.parent_key, key=self.key_of(value, ctx.parent_key))
        return ok({})

    async def read(self, request: Request) -> Response:
        emulator, principal = await self.principal(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "read")
        value = self._live(ctx, ctx.param("key_name"))
        return Response(base64.b64decode(value["value_base64"]), media_type="application/octet-stream")

    async def remove(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "edit")
        key = ctx.param("key_name")
        require_id(key, ctx.path, self.valid_id)
        # Deleting a key that is not there succeeds, as KV's delete is idempotent.
        self.table(ctx.store).remove(self.key_for(ctx, key))
        return ok({})

    async def keys_of(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "read")
        prefix = ctx.query.get("prefix") or ""
        live = [v for v in self.rows(ctx) if v["name"].startswith(prefix) and not _expired(v)]
        return self.keys.respond(sort_by(live, lambda v: v["name"], "asc"), ctx.query, _key_entry)


def _value(name: str, data: bytes, metadata: JsonValue, expiration: int | None) -> Obj:
    value: Obj = {"name": name, "value_base64": base64.b64encode(data).decode()}
    if metadata is not None:
        value["metadata"] = metadata
    if expiration is not None:
        value["expiration"] = expiration
    return value


def _expiration(ctx: Ctx) -> int | None:
    ttl, at = ctx.query.get("expiration_ttl"), ctx.query.get("expiration")
    try:
        if ttl:
            seconds = int(float(ttl))
            if seconds < 60:
                raise invalid_body("expiration_ttl must be at least 60 seconds", pointer="/expiration_ttl")
            return int(time.time()) + seconds
        return int(float(at)) if at else None
    except ValueError:
        raise invalid_body("expiration and expiration_ttl are numbers of seconds") from None


def _expired(value: Obj) -> bool:
    expiration = value.get("expiration")
    return expiration is not None and expiration <= time.time()


def _key_entry(value: Obj) -> Obj:
    entry: Obj = {"name": value["name"]}
    for field in ("expiration", "metadata"):
        if field in value:
            entry[field] = value[field]
    return entry


NAMESPACES = KVNamespaces()
VALUES = KVValues()
