"""Zones: list (filters ``name``, ``status``, ``account.id``, ``account.name``, ``type``, ``match``; ``order``,
``direction``), create, get, edit (PATCH), delete.

Reading needs ``zone:read``, writing ``zone:edit``, and the token must reach the zone's account (and the zone, when
restricted to some zones). A new zone is ``pending`` on the Free plan with two assigned name servers; the admin API
can activate it. PATCH changes exactly one of ``paused``, ``type``, ``vanity_name_servers`` per call; on Free only
``type: full`` is allowed and vanity name servers are refused (Business and up; codes unverified: 9207).
``per_page``: default 20, 5..50.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from app.emulator.auth import CorePrincipal, Principal
from app.emulator.context import Emulator, EmulatorDep
from app.emulator.envelope import invalid_body, ok, parse_model, read_json
from app.emulator.ids import is_id, now_iso
from app.emulator.objects import zones
from app.emulator.paging import (
    PageSpec,
    Predicate,
    combine,
    direction_of,
    page_of,
    require_id,
    sort_by,
    value_filter,
)
from app.emulator.permissions import Level, register_resource
from app.emulator.state import Obj

register_resource("zone")

router = APIRouter(tags=["zones"])

PAGE = PageSpec(default=20, minimum=5, maximum=50)

_ORDER_KEYS: dict[str, Any] = {
    "name": lambda z: z["name"],
    "status": lambda z: z["status"],
    "account.id": lambda z: z["account"]["id"],
    "account.name": lambda z: z["account"]["name"].casefold(),
    "plan.id": lambda z: z["plan"]["id"],
}


class AccountRef(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str


class ZoneCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    account: AccountRef | None = None
    type: zones.ZoneType = "full"


class ZoneEdit(BaseModel):
    model_config = ConfigDict(extra="ignore")

    paused: bool | None = None
    type: zones.ZoneType | None = None
    vanity_name_servers: list[str] | None = None


def zone_for(emulator: Emulator, principal: Principal, zone_id: str, path: str) -> Obj:
    """The zone at ``zone_id`` if the token reaches it. Used by every route under ``/zones/{zone_id}``."""
    require_id(zone_id, path, is_id)
    zone = emulator.store.zones.get(zone_id)
    token = principal.token
    if zone is None:
        # A token restricted to named zones cannot tell a missing zone from one outside its list.
        if token.zone_restricted:
            raise principal.denied()
        raise zones.zone_not_found()
    if not token.reaches_zone(zone["id"], zone["name"], zone["account"]["id"]):
        raise principal.denied()
    return zone


def _readable_zone(emulator: Emulator, principal: Principal, zone_id: str, path: str, level: Level) -> Obj:
    zone = zone_for(emulator, principal, zone_id, path)
    principal.require("zone", level)
    return zone


@router.get("/zones")
async def list_zones(request: Request, principal: CorePrincipal, emulator: EmulatorDep) -> JSONResponse:
    principal.require("zone", "read")
    query = request.query_params
    predicates: list[Predicate[Obj]] = []
    if query.get("name"):
        predicates.append(value_filter(query["name"], lambda z: z["name"]))
    if query.get("status"):
        status = query["status"]
        predicates.append(lambda z: z["status"] == status)
    if query.get("account.id"):
        account_id = query["account.id"]
        predicates.append(lambda z: z["account"]["id"] == account_id)
    if query.get("account.name"):
        predicates.append(value_filter(query["account.name"], lambda z: z["account"]["name"]))
    keep = combine(predicates, query.get("match"))
    types = {t for raw in query.getlist("type") for t in raw.split(",") if t}
    token = principal.token

    def visible(zone: Obj) -> bool:
        wanted_type = zone["type"] in types if types else zone["type"] != "internal"
        return wanted_type and token.reaches_zone(zone["id"], zone["name"], zone["account"]["id"])

    order = _ORDER_KEYS.get(query.get("order") or "name", _ORDER_KEYS["name"])
    ordered = sort_by(
        (z for z in emulator.store.zones if visible(z) and keep(z)),
        lambda z: (order(z), z["name"], z["id"]),
        direction_of(query),
    )
    page, info = page_of(ordered, query, PAGE)
    return ok([zones.render_zone(z, token) for z in page], result_info=info)


@router.post("/zones")
async def create_zone(request: Request, principal: CorePrincipal, emulator: EmulatorDep) -> JSONResponse:
    raw = await read_json(request)
    body = parse_model(ZoneCreate, raw)
    token = principal.token
    account_id = body.account.id if body.account else token.account_id
    if account_id is None:
        raise invalid_body("account.id is required", pointer="/account/id")
    if not is_id(account_id):
        raise invalid_body("account.id is not a valid account identifier", pointer="/account/id")
    principal.require_account(account_id)
    principal.require("zone", "edit")
    account = emulator.store.accounts.get(account_id)
    if account is None:
        raise principal.denied()
    if token.zone_restricted:
        raise principal.denied()
    if body.type != "full":
        raise invalid_body(f"{body.type} zones are not available on the Free plan", pointer="/type")
    zone = zones.new_zone(account, body.name, zone_type=body.type)
    if zones.find_by_name(emulator.store.zones.under(account_id), zone["name"]) is not None:
        raise zones.zone_exists(zone["name"])
    emulator.store.zones.add(zone, account_id)
    return ok(zones.render_zone(zone, token))


@router.get("/zones/{zone_id}")
async def get_zone(zone_id: str, request: Request, principal: CorePrincipal, emulator: EmulatorDep) -> JSONResponse:
    zone = _readable_zone(emulator, principal, zone_id, request.url.path, "read")
    return ok(zones.render_zone(zone, principal.token))


@router.patch("/zones/{zone_id}")
async def edit_zone(zone_id: str, request: Request, principal: CorePrincipal, emulator: EmulatorDep) -> JSONResponse:
    raw = await read_json(request)
    zone = _readable_zone(emulator, principal, zone_id, request.url.path, "edit")
    body = parse_model(ZoneEdit, raw)
    changes = body.model_dump(exclude_unset=True)
    if len(changes) != 1:
        raise invalid_body("Only one zone property can be changed at a time")
    plan = zones.plan_of(zone)
    if body.type is not None and body.type != "full" and plan == "free":
        raise invalid_body(f"{body.type} zones are not available on the Free plan", pointer="/type")
    if body.vanity_name_servers is not None and plan in ("free", "pro"):
        raise invalid_body("Vanity name servers are only available on Business and Enterprise plans")
    for key, value in changes.items():
        if value is None:
            raise invalid_body(f"{key} must not be null", pointer=f"/{key}")
        zone[key] = value
    zone["modified_on"] = now_iso()
    return ok(zones.render_zone(zone, principal.token))


@router.delete("/zones/{zone_id}")
async def delete_zone(zone_id: str, request: Request, principal: CorePrincipal, emulator: EmulatorDep) -> JSONResponse:
    _readable_zone(emulator, principal, zone_id, request.url.path, "edit")
    emulator.store.zones.remove(zone_id)
    return ok({"id": zone_id})
