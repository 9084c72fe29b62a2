"""D1 databases of an account: create, list, get, change read replication (PUT/PATCH), delete.

A database: ``{uuid, name, created_at, version, num_tables, file_size, jurisdiction, read_replication}``, addressed by
its UUID (with dashes). Name, jurisdiction (``eu``, ``fedramp``, ``us``) and ``primary_location_hint`` are fixed at
creation; the hint is never shown again (the API does not return it) but the state file keeps it. Names are unique per
account: 400/7502 "A database with that name already exists" (the code as wrangler reports it). The Free plan holds
10 databases: the 11th is refused with 400/7406 "System limit reached: databases per account (10)" (as reported).
List: ``name`` (a substring), ``page``/``per_page`` (default 100, 10..10,000). Reading needs ``d1:read``, writing
``d1:edit``. Deleting a database deletes its data.

Unverified: the HTTP statuses of 7502 and 7406 (400), the not-found code (404/7404), the accepted name characters
(letters, digits, ``-`` and ``_``, at most 64), and the page bounds.

State-file entries: the create body plus ``uuid``, ``created_at`` and ``account_id`` (optional with one account).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from app.emulator.collection import Ctx, Kind, Unique
from app.emulator.envelope import CloudflareError, invalid_body
from app.emulator.ids import now_iso
from app.emulator.paging import PageNumbers, PageSpec, Predicate, sort_by
from app.emulator.state import Obj, Store

Hint = Literal["wnam", "enam", "weur", "eeur", "apac", "oc"]
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class ReadReplication(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mode: Literal["auto", "disabled"]


class DatabaseCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    primary_location_hint: Hint | None = None
    jurisdiction: Literal["eu", "fedramp", "us"] | None = None
    read_replication: ReadReplication | None = None


class DatabaseChange(BaseModel):
    model_config = ConfigDict(extra="ignore")

    read_replication: ReadReplication


def _duplicate(_obj: Obj) -> CloudflareError:
    return CloudflareError.single(400, 7502, "A database with that name already exists")


class D1Databases(Kind):
    name = "d1_databases"
    parent = "accounts"
    parent_field = "account_id"
    path = "/accounts/{account_id}/d1/database"
    scope_param = "account_id"
    item_param = "database_id"
    id_field = "uuid"
    resource = "d1"
    paging = PageNumbers(PageSpec(default=100, minimum=10, maximum=10_000))
    unique = (Unique(("name",), _duplicate),)
    limit = 10
    create_body = DatabaseCreate
    update_body = patch_body = DatabaseChange
    stamps = ("created_at",)
    hidden = ("primary_location_hint",)

    def new_id(self) -> str:
        return str(uuid.uuid4())

    def valid_id(self, value: str) -> bool:
        return _UUID.fullmatch(value) is not None

    def not_found(self) -> CloudflareError:
        return CloudflareError.single(404, 7404, "The database could not be found")

    def over_limit(self, parent: Obj | None, limit: int) -> CloudflareError:
        return CloudflareError.single(400, 7406, f"System limit reached: databases per account ({limit})")

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        if previous is not None:
            assert isinstance(body, DatabaseChange)
            return {**previous, "read_replication": body.read_replication.model_dump()}
        assert isinstance(body, DatabaseCreate)
        if not _NAME.fullmatch(body.name):
            raise invalid_body("name may hold letters, digits, '-' and '_', at most 64", pointer="/name")
        replication = body.read_replication.model_dump() if body.read_replication else {"mode": "disabled"}
        return {
            "uuid": self.new_id(),
            "name": body.name,
            "created_at": now_iso(),
            "version": "production",
            "num_tables": 0,
            "file_size": 0,
            "jurisdiction": body.jurisdiction,
            "read_replication": replication,
            "primary_location_hint": body.primary_location_hint,
        }

    def filters(self, ctx: Ctx) -> Predicate[Obj]:
        needle = (ctx.query.get("name") or "").casefold()
        return lambda d: needle in d["name"].casefold()

    def order(self, ctx: Ctx, items: Iterable[Obj]) -> list[Obj]:
        return sort_by(items, lambda d: (d["created_at"], d["uuid"]), "asc")

    def deleted(self, obj: Obj) -> JsonValue:
        return None


KIND = D1Databases()
