"""Zones: naming, plans and their limits, name servers, rendering.

Errors: duplicate name in an account → 400/1061 (observed); unknown zone → 404/1001 "Invalid zone identifier"
(unverified: 7003, 1001 and 9109 are all reported; 404 lets clients tell "gone" from "refused"); a name that is not a
domain → 400/1049 (reported for unregistered domains).
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass
from typing import Literal

from app.emulator.envelope import CloudflareError
from app.emulator.ids import new_id, now_iso
from app.emulator.permissions import Token
from app.emulator.state import Obj

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
        "owner": {"id": None, "type": "user", "name": None},
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
