"""Accounts: list, get, create, update (PUT), delete.

Reading an account needs only a token that reaches it; changing or deleting it needs ``account:edit``; creating one
needs a user-owned token with ``account:edit`` over every account (Cloudflare reserves creation to tenant admins).
Listing with an account-owned token is refused with 400/1001, as observed. Deleting an account deletes its zones,
their records and its account-owned tokens. ``per_page``: default 20, 5..50 (unverified, as for zones).
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from app.emulator.auth import CorePrincipal, Principal
from app.emulator.context import Emulator, EmulatorDep
from app.emulator.envelope import CloudflareError, ok, parse_model, read_json
from app.emulator.ids import is_id
from app.emulator.objects.accounts import account_not_found, new_account, render_account
from app.emulator.paging import PageSpec, Predicate, combine, direction_of, page_of, require_id, sort_by, value_filter
from app.emulator.permissions import register_resource
from app.emulator.state import Obj

register_resource("account")

router = APIRouter(tags=["accounts"])

PAGE = PageSpec(default=20, minimum=5, maximum=50)


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


def account_for(emulator: Emulator, principal: Principal, account_id: str, path: str) -> Obj:
    """The account at ``account_id`` if the token reaches it; the scope check comes first so as not to leak IDs."""
    require_id(account_id, path, is_id)
    principal.require_account(account_id)
    account = emulator.store.accounts.get(account_id)
    if account is None:
        raise account_not_found(path)
    return account


@router.get("/accounts")
async def list_accounts(request: Request, principal: CorePrincipal, emulator: EmulatorDep) -> JSONResponse:
    if principal.token.owner == "account":
        raise CloudflareError.single(400, 1001, "List accounts endpoint does not support account owned tokens.")
    query = request.query_params
    predicates: list[Predicate[Obj]] = []
    if query.get("name"):
        predicates.append(value_filter(query["name"], lambda a: a["name"]))
    keep = combine(predicates, "all")
    visible = [a for a in emulator.store.accounts if principal.token.reaches_account(a["id"]) and keep(a)]
    ordered = sort_by(visible, lambda a: (a["name"].casefold(), a["id"]), direction_of(query))
    page, info = page_of(ordered, query, PAGE)
    return ok([render_account(a) for a in page], result_info=info)


@router.post("/accounts")
async def create_account(request: Request, principal: CorePrincipal, emulator: EmulatorDep) -> JSONResponse:
    raw = await read_json(request)
    token = principal.token
    if token.owner != "user" or token.accounts is not None or not token.can("account", "edit"):
        raise principal.denied()
    body = parse_model(AccountCreate, raw)
    account = emulator.store.accounts.add(new_account(body.name, account_type=body.type))
    return ok(render_account(account))


@router.get("/accounts/{account_id}")
async def get_account(
    account_id: str, request: Request, principal: CorePrincipal, emulator: EmulatorDep
) -> JSONResponse:
    return ok(render_account(account_for(emulator, principal, account_id, request.url.path)))


@router.put("/accounts/{account_id}")
async def update_account(
    account_id: str, request: Request, principal: CorePrincipal, emulator: EmulatorDep
) -> JSONResponse:
    # The body is read before the store is touched: nothing may await between checking and changing state.
    raw = await read_json(request)
    account = account_for(emulator, principal, account_id, request.url.path)
    principal.require("account", "edit")
    body = parse_model(AccountUpdate, raw)
    account["name"] = body.name
    if body.type is not None:
        account["type"] = body.type
    if body.settings is not None:
        account["settings"].update(body.settings.model_dump(exclude_unset=True))
    for zone in emulator.store.zones.under(account_id):
        zone["account"]["name"] = body.name
    return ok(render_account(account))


@router.delete("/accounts/{account_id}")
async def delete_account(
    account_id: str, request: Request, principal: CorePrincipal, emulator: EmulatorDep
) -> JSONResponse:
    account_for(emulator, principal, account_id, request.url.path)
    principal.require("account", "edit")
    emulator.store.accounts.remove(account_id)
    for token in emulator.store.tokens():
        if token.owner == "account" and token.account_id == account_id:
            emulator.store.remove_token(token.id)
    return ok({"id": account_id})
