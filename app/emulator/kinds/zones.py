"""Zones: list (filters ``name``, ``status``, ``account.id``, ``account.name``, ``type``, ``match``; ``order``,
``direction``), create, get, edit (PATCH), delete; and a zone's plan subscription.

Reading needs ``zone:read``, writing ``zone:edit``, and the token must reach the zone's account (and the zone, when
restricted to some zones). A new zone is ``pending`` on the Free plan with two assigned name servers; the admin API
can activate it. PATCH changes exactly one of ``paused``, ``type``, ``vanity_name_servers`` per call; on Free only
``type: full`` is allowed and vanity name servers are refused (Business and up; codes unverified: 9207).
``per_page``: default 20, 5..50.

Errors: duplicate name in an account → 400/1061 (observed); unknown zone → 404/1001 "Invalid zone identifier"
(unverified: 7003, 1001 and 9109 are all reported; 404 lets clients tell "gone" from "refused"); a name that is not a
domain → 400/1049 (reported for unregistered domains).

Subscriptions: ``GET``, ``POST`` (first paid plan) and ``PUT`` (change) on ``/zones/{zone_id}/subscription``, with
``{"rate_plan": {"id": "free"|"pro"|"business"|...}, "frequency": ...}``. Billing semantics as Cloudflare documents
them, codes unverified: an upgrade applies at once; a downgrade is scheduled for the end of the billing period and
shows on the zone as ``plan_pending``; asking for the plan the zone already has, or has pending, changes nothing.
Enterprise is sold by contract and refused here (400/1004). Reading needs ``zone:read``, changing ``zone:edit``.

State-file entries: ``{id?, name, account_id?, status? ("active"), plan? ("free"), type?, paused?, created_on?,
modified_on?, activated_on?}``; seeded zones default to ``active`` (they stand for zones that already exist).
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from app.emulator.auth import Family
from app.emulator.collection import Ctx, Kind, check_stamp, parse_seed
from app.emulator.envelope import JSON, CloudflareError, invalid_body, ok, parse_model, read_json
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
from app.emulator.permissions import Token
from app.emulator.routes import route
from app.emulator.seed import SeedError
from app.emulator.state import Obj, Store

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

PlanName = Literal["free", "pro", "business", "enterprise"]
ZoneStatus = Literal["initializing", "pending", "active", "moved"]
ZoneType = Literal["full", "partial", "secondary", "internal"]

PLANS: dict[str, Obj] = {
    # The Free plan's ID is Cloudflare's; the others only need to be stable.
    "free": {"id": "0feeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "name": "Free Website", "price": 0},
    "pro": {"id": "94f3b7b768b0458b56d2cac4fe5ec0f9", "name": "Pro Website", "price": 25},
    "business": {"id": "6b2fd2a0ea7d4e9fbcb1b65d2d4e1e4b", "name": "Business Website", "price": 250},
    "enterprise": {"id": "e84d5d2a7a0a4bc9a1d2f1a7c3c3e5b9", "name": "Enterprise Website", "price": 0},
}

# Zones created from this day on get the smaller Free record quota.
_FREE_QUOTA_CUTOVER = "2024-09-01T00:00:00"

_NAME_SERVERS = ("ada", "bob", "cruz", "dana", "elle", "finn", "gina", "hugo", "ivan", "jill", "kurt", "lara")
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


@dataclass(frozen=True)
class PlanLimits:
    records: int
    batch_operations: int
    comment_length: int
    tags_per_record: int
    min_ttl: int


def plan_of(zone: Obj) -> PlanName:
    legacy: PlanName = zone["plan"]["legacy_id"]
    return legacy


def limits_of(zone: Obj) -> PlanLimits:
    plan = plan_of(zone)
    if plan == "free":
        records = 200 if zone["created_on"] >= _FREE_QUOTA_CUTOVER else 1000
        return PlanLimits(records, 200, 100, 0, 60)
    if plan == "enterprise":
        return PlanLimits(1_000_000, 3500, 500, 20, 30)
    return PlanLimits(3500, 3500, 500, 20, 60)


def plan_object(plan: PlanName) -> Obj:
    base = PLANS[plan]
    return {
        "id": base["id"],
        "name": base["name"],
        "price": base["price"],
        "currency": "USD",
        "frequency": "monthly" if base["price"] else "",
        "is_subscribed": plan != "free",
        "can_subscribe": plan == "free",
        "legacy_id": plan,
        "legacy_discount": False,
        "externally_managed": False,
    }


def normalise_zone_name(name: str) -> str:
    """Lowercase, no trailing dot, Punycode; refuse what is not a domain name."""
    candidate = name.strip().rstrip(".").lower()
    try:
        candidate = candidate.encode("idna").decode("ascii") if not candidate.isascii() else candidate
    except UnicodeError:
        raise not_a_domain(name) from None
    labels = candidate.split(".")
    if len(candidate) > 253 or len(labels) < 2 or not all(_LABEL.fullmatch(label) for label in labels):
        raise not_a_domain(name)
    if labels[-1].isdigit():
        raise not_a_domain(name)
    return candidate


def name_servers_for(account_id: str) -> list[str]:
    """Two name servers per account, stable across calls, as Cloudflare assigns them."""
    digest = hashlib.sha256(account_id.encode()).digest()
    first = digest[0] % len(_NAME_SERVERS)
    second = (first + 1 + digest[1] % (len(_NAME_SERVERS) - 1)) % len(_NAME_SERVERS)
    return [f"{_NAME_SERVERS[first]}.ns.cloudflare.com", f"{_NAME_SERVERS[second]}.ns.cloudflare.com"]


def new_zone(
    account: Obj,
    name: str,
    *,
    zone_id: str | None = None,
    zone_type: ZoneType = "full",
    status: ZoneStatus = "pending",
    plan: PlanName = "free",
    paused: bool = False,
    created_on: str | None = None,
    activated_on: str | None = None,
) -> Obj:
    created = created_on or now_iso()
    return {
        "id": zone_id or new_id(),
        "name": normalise_zone_name(name),
        "status": status,
        "paused": paused,
        "type": zone_type,
        "development_mode": 0,
        "name_servers": name_servers_for(account["id"]),
        "original_name_servers": None,
        "original_registrar": None,
        "original_dnshost": None,
        "vanity_name_servers": [],
        "created_on": created,
        "modified_on": created,
        "activated_on": activated_on if activated_on is not None else (created if status == "active" else None),
        "meta": {"step": 2, "custom_certificate_quota": 0, "page_rule_quota": 3, "phishing_detected": False},
        # As observed for a zone an account holds (cloudflare/cloudflare-rs#213): a user owner with null ID and
        # e-mail; OpenAPI's {id, name, type} is an organization owner's shape (cloudflare/cloudflare-go#180).
        "owner": {"id": None, "type": "user", "email": None},
        "account": {"id": account["id"], "name": account["name"]},
        "tenant": {"id": None, "name": None},
        "tenant_unit": {"id": None},
        "plan": plan_object(plan),
    }


def render_zone(zone: Obj, token: Token | None = None) -> Obj:
    out = copy.deepcopy(zone)
    if token is not None:
        out["permissions"] = [
            f"#{name}:{level}"
            for resource, name in (("zone", "zone"), ("dns", "dns_records"))
            for level in ("read", "edit")
            if token.can(resource, level)
        ]
    return out


def zone_not_found() -> CloudflareError:
    return CloudflareError.single(404, 1001, "Invalid zone identifier")


def zone_exists(name: str) -> CloudflareError:
    return CloudflareError.single(400, 1061, f"{name} already exists")


def not_a_domain(name: str) -> CloudflareError:
    return CloudflareError.single(400, 1049, f"{name} is not a registered domain", pointer="/name")


def find_by_name(zones: list[Obj], name: str) -> Obj | None:
    return next((zone for zone in zones if zone["name"] == name), None)


# The kind

_ORDER_KEYS: dict[str, Callable[[Obj], SupportsRichComparison]] = {
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
    type: ZoneType = "full"


class ZoneEdit(BaseModel):
    model_config = ConfigDict(extra="ignore")

    paused: bool | None = None
    type: ZoneType | None = None
    vanity_name_servers: list[str] | None = None


class ZoneSeed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    name: str
    account_id: str | None = None
    status: ZoneStatus = "active"
    plan: PlanName = "free"
    type: ZoneType = "full"
    paused: bool = False
    created_on: str | None = None
    modified_on: str | None = None
    activated_on: str | None = None


class Zones(Kind):
    name = "zones"
    parent = "accounts"
    parent_field = "account_id"
    path = "/zones"
    item_param = "zone_id"
    resource = "zone"
    family = Family.CORE
    self_scoped = True
    paging = PageNumbers(PageSpec(default=20, minimum=5, maximum=50))
    verbs = frozenset({"list", "create", "get", "patch", "delete"})
    patch_body = ZoneEdit

    def not_found(self) -> CloudflareError:
        return zone_not_found()

    def reach(self, ctx: Ctx, ident: str) -> Obj:
        """Used by every route under ``/zones/{zone_id}``."""
        require_id(ident, ctx.path, is_id)
        zone = ctx.store.zones.get(ident)
        token = ctx.principal.token
        if zone is None:
            # A token restricted to named zones cannot tell a missing zone from one outside its list.
            if token.zone_restricted:
                raise ctx.principal.denied()
            raise zone_not_found()
        if not token.reaches_zone(zone["id"], zone["name"], zone["account"]["id"]):
            raise ctx.principal.denied()
        return zone

    def rows(self, ctx: Ctx) -> list[Obj]:
        types = {t for raw in ctx.query.getlist("type") for t in raw.split(",") if t}
        token = ctx.principal.token

        def visible(zone: Obj) -> bool:
            wanted_type = zone["type"] in types if types else zone["type"] != "internal"
            return wanted_type and token.reaches_zone(zone["id"], zone["name"], zone["account"]["id"])

        return [zone for zone in ctx.store.zones if visible(zone)]

    def filters(self, ctx: Ctx) -> Predicate[Obj]:
        query = ctx.query
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
        return combine(predicates, query.get("match"))

    def order(self, ctx: Ctx, items: Iterable[Obj]) -> list[Obj]:
        order = _ORDER_KEYS.get(ctx.query.get("order") or "name", _ORDER_KEYS["name"])
        return sort_by(items, lambda z: (order(z), z["name"], z["id"]), direction_of(ctx.query))

    def render(self, ctx: Ctx, obj: Obj) -> Obj:
        return render_zone(obj, ctx.principal.token)

    async def create(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
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
        if account is None or token.zone_restricted:
            raise principal.denied()
        if body.type != "full":
            raise invalid_body(f"{body.type} zones are not available on the Free plan", pointer="/type")
        zone = new_zone(account, body.name, zone_type=body.type)
        if find_by_name(emulator.store.zones.under(account_id), zone["name"]) is not None:
            raise zone_exists(zone["name"])
        emulator.store.zones.add(zone, account_id)
        return ok(render_zone(zone, token))

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        assert isinstance(body, ZoneEdit)
        assert previous is not None
        changes = body.model_dump(exclude_unset=True)
        if len(changes) != 1:
            raise invalid_body("Only one zone property can be changed at a time")
        plan = plan_of(previous)
        if body.type is not None and body.type != "full" and plan == "free":
            raise invalid_body(f"{body.type} zones are not available on the Free plan", pointer="/type")
        if body.vanity_name_servers is not None and plan in ("free", "pro"):
            raise invalid_body("Vanity name servers are only available on Business and Enterprise plans")
        zone = dict(previous)
        for key, value in changes.items():
            if value is None:
                raise invalid_body(f"{key} must not be null", pointer=f"/{key}")
            zone[key] = value
        zone["modified_on"] = now_iso()
        return zone

    def seed(self, store: Store, entry: JSON, parent: Obj | None, parent_key: str | None, where: str) -> Obj:
        seed = parse_seed(ZoneSeed, entry, where)
        assert parent is not None
        assert parent_key is not None
        if seed.id is not None and not is_id(seed.id):
            raise SeedError(f"{where}: id {seed.id!r} is not 32 lowercase hex characters")
        stamps = {
            name: check_stamp(value, name, where)
            for name, value in (
                ("created_on", seed.created_on),
                ("activated_on", seed.activated_on),
                ("modified_on", seed.modified_on),
            )
        }
        zone = new_zone(
            parent,
            seed.name,
            zone_id=seed.id,
            zone_type=seed.type,
            status=seed.status,
            plan=seed.plan,
            paused=seed.paused,
            created_on=stamps["created_on"],
            activated_on=stamps["activated_on"],
        )
        if stamps["modified_on"] is not None:
            zone["modified_on"] = stamps["modified_on"]
        same_name = find_by_name(store.zones.under(parent_key), zone["name"])
        if same_name is not None and same_name["id"] != zone["id"]:
            raise SeedError(f"{where}: zone {zone['name']} already exists in account {parent_key}")
        return store.zones.add(zone, parent_key)

    def dump(self, store: Store, obj: Obj, parent_key: str | None) -> JSON:
        return {
            "id": obj["id"],
            "name": obj["name"],
            "account_id": obj["account"]["id"],
            "status": obj["status"],
            "plan": plan_of(obj),
            "type": obj["type"],
            "paused": obj["paused"],
            "created_on": obj["created_on"],
            "modified_on": obj["modified_on"],
            "activated_on": obj["activated_on"],
        }

    def summary(self, obj: Obj, parent_key: str | None) -> JSON:
        return {"id": obj["id"], "name": obj["name"]}

    def extra_routes(self, router: APIRouter) -> None:
        route(router, "GET", "/zones/{zone_id}/subscription", "zone_subscription_get", self.get_subscription)
        for method in ("POST", "PUT"):
            route(
                router,
                method,
                "/zones/{zone_id}/subscription",
                f"zone_subscription_{method.lower()}",
                self.change_subscription,
            )

    async def get_subscription(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        ctx = self.context(emulator, principal, request)
        zone = self.reach(ctx, ctx.param("zone_id"))
        principal.require("zone", "read")
        return ok(_subscription(zone))

    async def change_subscription(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        raw = await read_json(request)
        ctx = self.context(emulator, principal, request)
        zone = self.reach(ctx, ctx.param("zone_id"))
        principal.require("zone", "edit")
        body = parse_model(SubscriptionBody, raw)
        wanted = body.rate_plan.id
        if wanted not in _RANK:
            raise invalid_body(f"unknown rate plan {wanted!r}", pointer="/rate_plan/id")
        if wanted == "enterprise":
            raise invalid_body("Enterprise plans are sold by contract, not through the API", pointer="/rate_plan/id")
        current = plan_of(zone)
        pending = (zone.get("plan_pending") or {}).get("legacy_id")
        if wanted != current and wanted != pending:
            if _RANK[wanted] > _RANK[current]:
                zone["plan"] = plan_object(cast(PlanName, wanted))
                zone.pop("plan_pending", None)
            else:
                zone["plan_pending"] = plan_object(cast(PlanName, wanted))
            zone["modified_on"] = now_iso()
        return ok(_subscription(zone))


_RANK = {"free": 0, "pro": 1, "business": 2, "enterprise": 3}


class RatePlanRef(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str


class SubscriptionBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    rate_plan: RatePlanRef
    frequency: Literal["weekly", "monthly", "quarterly", "yearly"] = "monthly"


def _subscription(zone: Obj) -> Obj:
    plan = zone["plan"]
    return {
        "id": zone["id"],
        "rate_plan": {"id": plan["legacy_id"], "public_name": plan["name"], "currency": "USD", "scope": "zone"},
        "frequency": plan["frequency"] or "monthly",
        "price": plan["price"],
        "currency": "USD",
        "state": "Paid" if plan["legacy_id"] != "free" else "Provisioned",
    }


KIND = Zones()
