"""Accounts: ``{id, name, type, created_on, settings}``; list, get, create, update (PUT), delete.

Reading an account needs only a token that reaches it; changing or deleting it needs ``account:edit``; creating one
needs a user-owned token with ``account:edit`` over every account (Cloudflare reserves creation to tenant admins).
Listing with an account-owned token is refused with 400/1001, as observed. Deleting an account deletes everything it
holds and its account-owned tokens. ``per_page``: default 20, 5..50 (unverified, as for zones).

Unverified: Cloudflare's answer for a well-formed unknown account ID (7003 and 9109 are both reported); 404/7003 here.

State-file entries: ``{id?, name, type?, created_on?, settings?}``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from app.emulator.auth import Family
from app.emulator.collection import Ctx, Kind, check_stamp, parse_seed
from app.emulator.envelope import JSON, CloudflareError, ok, parse_model, read_json
from app.emulator.ids import is_id, new_id, now_iso
from app.emulator.paging import (
    PageNumbers,
    PageSpec,
    Predicate,
    combine,
    direction_of,
    require_id,
    sort_by,
    value_filter,
)
from app.emulator.permissions import Level
from app.emulator.seed import SeedError
from app.emulator.state import Obj, Store


class AccountCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1)
    type: Literal["standard", "enterprise"] = "standard"


class AccountSettings(BaseModel):
    model_config = ConfigDict(extra="ignore")

    enforce_twofactor: bool | None = None
    abuse_contact_email: str | None = None


class AccountUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1)
    type: Literal["standard", "enterprise"] | None = None
    settings: AccountSettings | None = None


class AccountSeed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    name: str
    type: Literal["standard", "enterprise"] = "standard"
    created_on: str | None = None
    settings: dict[str, JsonValue] | None = None


def new_account(
    name: str,
    *,
    account_id: str | None = None,
    account_type: str = "standard",
    created_on: str | None = None,
    settings: dict[str, JsonValue] | None = None,
) -> Obj:
    return {
        "id": account_id or new_id(),
        "name": name,
        "type": account_type,
        "created_on": created_on or now_iso(),
        "settings": {
            "enforce_twofactor": False,
            "api_access_enabled": None,
            "abuse_contact_email": None,
            **(settings or {}),
        },
    }


def account_not_found(path: str) -> CloudflareError:
    return CloudflareError.single(404, 7003, f"Could not route to {path}, perhaps your object identifier is invalid?")


class Accounts(Kind):
    name = "accounts"
    path = "/accounts"
    item_param = "account_id"
    resource = "account"
    family = Family.CORE
    self_scoped = True
    paging = PageNumbers(PageSpec(default=20, minimum=5, maximum=50))
    update_body = AccountUpdate
    verbs = frozenset({"list", "create", "get", "update", "delete"})

    def reach(self, ctx: Ctx, ident: str) -> Obj:
        # The scope check comes first so as not to leak which IDs exist.
        require_id(ident, ctx.path, is_id)
        ctx.principal.require_account(ident)
        account = ctx.store.accounts.get(ident)
        if account is None:
            raise account_not_found(ctx.path)
        return account

    def require(self, ctx: Ctx, level: Level) -> None:
        if level == "edit":
            ctx.principal.require("account", "edit")

    def rows(self, ctx: Ctx) -> list[Obj]:
        if ctx.principal.token.owner == "account":
            raise CloudflareError.single(400, 1001, "List accounts endpoint does not support account owned tokens.")
        return [a for a in ctx.store.accounts if ctx.principal.token.reaches_account(a["id"])]

    def filters(self, ctx: Ctx) -> Predicate[Obj]:
        predicates: list[Predicate[Obj]] = []
        if ctx.query.get("name"):
            predicates.append(value_filter(ctx.query["name"], lambda a: a["name"]))
        return combine(predicates, "all")

    def order(self, ctx: Ctx, items: Iterable[Obj]) -> list[Obj]:
        return sort_by(items, lambda a: (a["name"].casefold(), a["id"]), direction_of(ctx.query))

    async def create(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        raw = await read_json(request)
        token = principal.token
        if token.owner != "user" or token.accounts is not None or not token.can("account", "edit"):
            raise principal.denied()
        body = parse_model(AccountCreate, raw)
        account = emulator.store.accounts.add(new_account(body.name, account_type=body.type))
        return ok(account)

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        assert isinstance(body, AccountUpdate)
        assert previous is not None
        account = {**previous, "name": body.name, "settings": dict(previous["settings"])}
        if body.type is not None:
            account["type"] = body.type
        if body.settings is not None:
            account["settings"].update(body.settings.model_dump(exclude_unset=True))
        return account

    def after_write(self, ctx: Ctx, obj: Obj, previous: Obj | None) -> None:
        for zone in ctx.store.zones.under(obj["id"]):
            zone["account"]["name"] = obj["name"]

    def after_delete(self, ctx: Ctx, obj: Obj) -> None:
        for token in ctx.store.tokens():
            if token.owner == "account" and token.account_id == obj["id"]:
                ctx.store.remove_token(token.id)

    def seed(self, store: Store, entry: JSON, parent: Obj | None, parent_key: str | None, where: str) -> Obj:
        seed = parse_seed(AccountSeed, entry, where)
        if seed.id is not None and not is_id(seed.id):
            raise SeedError(f"{where}: id {seed.id!r} is not 32 lowercase hex characters")
        account = new_account(seed.name, account_id=seed.id, account_type=seed.type, settings=seed.settings)
        if seed.created_on is not None:
            account["created_on"] = check_stamp(seed.created_on, "created_on", where)
        return store.accounts.add(account)


KIND = Accounts()
