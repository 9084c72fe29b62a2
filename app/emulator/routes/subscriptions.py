"""A zone's plan subscription: ``GET``, ``POST`` (first paid plan) and ``PUT`` (change) on
``/zones/{zone_id}/subscription``, with ``{"rate_plan": {"id": "free"|"pro"|"business"|...}, "frequency": ...}``.

Behaviour (billing semantics as Cloudflare documents them; codes unverified): an upgrade applies at once; a downgrade
is scheduled for the end of the billing period and shows on the zone as ``plan_pending``; asking for the plan the
zone already has, or has pending, changes nothing. Enterprise is sold by contract and refused here (400/1004).
Reading needs ``zone:read``, changing ``zone:edit``.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from app.emulator.auth import CorePrincipal
from app.emulator.context import EmulatorDep
from app.emulator.envelope import invalid_body, ok, parse_model, read_json
from app.emulator.ids import now_iso
from app.emulator.objects import zones
from app.emulator.routes.zones import zone_for
from app.emulator.state import Obj

router = APIRouter(tags=["zones"])

_RANK = {"free": 0, "pro": 1, "business": 2, "enterprise": 3}


class RatePlanRef(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str


class SubscriptionBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    rate_plan: RatePlanRef
    frequency: Literal["weekly", "monthly", "quarterly", "yearly"] = "monthly"


def _render(zone: Obj) -> Obj:
    plan = zone["plan"]
    return {
        "id": zone["id"],
        "rate_plan": {"id": plan["legacy_id"], "public_name": plan["name"], "currency": "USD", "scope": "zone"},
        "frequency": plan["frequency"] or "monthly",
        "price": plan["price"],
        "currency": "USD",
        "state": "Paid" if plan["legacy_id"] != "free" else "Provisioned",
    }


@router.get("/zones/{zone_id}/subscription")
async def get_subscription(
    zone_id: str, request: Request, principal: CorePrincipal, emulator: EmulatorDep
) -> JSONResponse:
    zone = zone_for(emulator, principal, zone_id, request.url.path)
    principal.require("zone", "read")
    return ok(_render(zone))


@router.post("/zones/{zone_id}/subscription")
@router.put("/zones/{zone_id}/subscription")
async def change_subscription(
    zone_id: str, request: Request, principal: CorePrincipal, emulator: EmulatorDep
) -> JSONResponse:
    raw = await read_json(request)
    zone = zone_for(emulator, principal, zone_id, request.url.path)
    principal.require("zone", "edit")
    body = parse_model(SubscriptionBody, raw)
    wanted = body.rate_plan.id
    if wanted not in _RANK:
        raise invalid_body(f"unknown rate plan {wanted!r}", pointer="/rate_plan/id")
    if wanted == "enterprise":
        raise invalid_body("Enterprise plans are sold by contract, not through the API", pointer="/rate_plan/id")
    current = zones.plan_of(zone)
    pending = (zone.get("plan_pending") or {}).get("legacy_id")
    if wanted != current and wanted != pending:
        if _RANK[wanted] > _RANK[current]:
            zone["plan"] = zones.plan_object(wanted)  # type: ignore[arg-type]
            zone.pop("plan_pending", None)
        else:
            zone["plan_pending"] = zones.plan_object(wanted)  # type: ignore[arg-type]
        zone["modified_on"] = now_iso()
    return ok(_render(zone))
