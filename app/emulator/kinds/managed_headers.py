"""A zone's managed transforms (managed request and response headers): one document per zone, turned on and off by ID.

``GET /zones/{zone_id}/managed_headers`` answers ``{managed_request_headers: [T], managed_response_headers: [T]}``
with ``T = {id, enabled, has_conflict, conflicts_with?}``, listing only the transforms the zone's plan offers.
``PATCH`` takes ``{managed_request_headers?: [{id, enabled}], managed_response_headers?: [...]}`` and changes only the
IDs sent; an ID of the wrong direction, unknown or not offered is refused, and so is turning on a transform that
conflicts with one that is on (``has_conflict``). ``DELETE`` turns every transform off and answers 204. Reading needs
``zone:read``, changing ``zone:edit`` (unverified: Cloudflare has a Transform Rules permission).

Offered on every plan (the six a Free zone has, inferred by elimination: unverified): request
``add_client_certificate_headers``, ``add_visitor_location_headers``, ``remove_visitor_ip_headers``,
``add_waf_credential_check_status_header``; response ``remove_x-powered-by_header``, ``add_security_headers``. On
Enterprise also ``add_true_client_ip_headers`` (conflicts with ``remove_visitor_ip_headers``),
``add_bot_protection_headers`` and ``add_waf_content_scan_status_header``. The refusal's code is unverified (400/20021).

State-file entries: ``{zone_id, enabled: [ids]}``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict

from app.emulator.auth import Family
from app.emulator.collection import Ctx, Kind
from app.emulator.envelope import JSON, CloudflareError, error, ok, parse_model, read_json
from app.emulator.kinds.zones import plan_of
from app.emulator.permissions import Level
from app.emulator.routes import route
from app.emulator.state import Obj, Store

REQUEST = "managed_request_headers"
RESPONSE = "managed_response_headers"
# id -> (direction, cheapest plan)
TRANSFORMS: dict[str, tuple[str, str]] = {
    "add_client_certificate_headers": (REQUEST, "free"),
    "add_visitor_location_headers": (REQUEST, "free"),
    "remove_visitor_ip_headers": (REQUEST, "free"),
    "add_waf_credential_check_status_header": (REQUEST, "free"),
    "add_true_client_ip_headers": (REQUEST, "enterprise"),
    "add_bot_protection_headers": (REQUEST, "enterprise"),
    "add_waf_content_scan_status_header": (REQUEST, "enterprise"),
    "remove_x-powered-by_header": (RESPONSE, "free"),
    "add_security_headers": (RESPONSE, "free"),
}
CONFLICTS = {
    "add_true_client_ip_headers": ("remove_visitor_ip_headers",),
    "remove_visitor_ip_headers": ("add_true_client_ip_headers",),
}
_RANK = {"free": 0, "pro": 1, "business": 2, "enterprise": 3}


def _refused(message: str, pointer: str) -> CloudflareError:
    return CloudflareError(400, [error(20021, message, pointer=pointer)])


class Switch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    enabled: bool


class HeadersPatch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    managed_request_headers: list[Switch] = []
    managed_response_headers: list[Switch] = []


class HeadersSeed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: list[str] = []


def offered(zone: Obj) -> list[str]:
    rank = _RANK[str(plan_of(zone))]
    return [tid for tid, (_d, since) in TRANSFORMS.items() if rank >= _RANK[since]]


class ManagedHeaders(Kind):
    name = "managed_headers"
    parent = "zones"
    parent_field = "zone_id"
    path = "/zones/{zone_id}/managed_headers"
    scope_param = "zone_id"
    resource = "zone"
    family = Family.CORE
    verbs = frozenset()
    create_body = HeadersSeed
    stamps = ()
    summary_fields = ("enabled",)

    def key_of(self, obj: Obj, parent_key: str | None) -> str:
        return str(parent_key)

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        assert isinstance(body, HeadersSeed)
        assert parent is not None
        unknown = [tid for tid in body.enabled if tid not in offered(parent)]
        if unknown:
            raise _refused(f"{unknown[0]} is not a managed transform of this zone", "/enabled")
        return {"id": parent["id"], "enabled": sorted(set(body.enabled))}

    def dump(self, store: Store, obj: Obj, parent_key: str | None) -> JSON:
        return {"zone_id": parent_key, "enabled": list(obj["enabled"])}

    def extra_routes(self, router: APIRouter) -> None:
        route(router, "GET", self.path, "managed_headers_get", self.read)
        route(router, "PATCH", self.path, "managed_headers_patch", self.change)
        route(
            router, "DELETE", self.path, "managed_headers_delete", self.clear, status_code=204, response_class=Response
        )

    def _enabled(self, ctx: Ctx) -> set[str]:
        row = self.table(ctx.store).get(str(ctx.parent_key))
        return set(row["enabled"]) if row else set()

    def _document(self, zone: Obj, enabled: set[str]) -> Obj:
        document: dict[str, list[Obj]] = {REQUEST: [], RESPONSE: []}
        for tid in offered(zone):
            conflicts = [other for other in CONFLICTS.get(tid, ()) if other in offered(zone)]
            entry: Obj = {"id": tid, "enabled": tid in enabled, "has_conflict": any(c in enabled for c in conflicts)}
            if conflicts:
                entry["conflicts_with"] = conflicts
            document[TRANSFORMS[tid][0]].append(entry)
        return dict(document)

    async def _scope(self, request: Request, level: Level) -> Ctx:
        emulator, principal = await self.principal(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, level)
        return ctx

    async def read(self, request: Request) -> JSONResponse:
        ctx = await self._scope(request, "read")
        assert ctx.parent is not None
        return ok(self._document(ctx.parent, self._enabled(ctx)))

    async def change(self, request: Request) -> JSONResponse:
        raw = await read_json(request)
        ctx = await self._scope(request, "edit")
        zone = ctx.parent
        assert zone is not None
        body = parse_model(HeadersPatch, raw)
        enabled = self._enabled(ctx)
        available = offered(zone)
        turning_on = []
        for direction in (REQUEST, RESPONSE):
            for switch in getattr(body, direction):
                if switch.id not in available or TRANSFORMS[switch.id][0] != direction:
                    raise _refused(f"{switch.id} is not a managed transform of {direction} here", f"/{direction}")
                if switch.enabled:
                    enabled.add(switch.id)
                    turning_on.append(switch.id)
                else:
                    enabled.discard(switch.id)
        for tid in turning_on:
            clash = next((other for other in CONFLICTS.get(tid, ()) if other in enabled), None)
            if clash is not None:
                raise _refused(f"{tid} conflicts with {clash}, which is on", f"/{TRANSFORMS[tid][0]}")
        self.table(ctx.store).add({"id": zone["id"], "enabled": sorted(enabled)}, zone["id"], key=zone["id"])
        return ok(self._document(zone, enabled))

    async def clear(self, request: Request) -> Response:
        ctx = await self._scope(request, "edit")
        self.table(ctx.store).remove(str(ctx.parent_key))
        return Response(status_code=204)


KIND = ManagedHeaders()
