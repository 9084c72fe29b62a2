"""Routes of a zone that run a Worker: ``WorkerRoutes``, beside the scripts of ``app.emulator.kinds.workers``.

Routes: ``{id, pattern, script?}`` under ``/zones/{zone_id}/workers/routes`` (list as one page, create, get, PUT,
delete); no ``script`` makes an exclusion route. A pattern is ``host/path`` with optional wildcards, no scheme, and a
host in the zone; one route per pattern per zone (10020, "A route with the same pattern already exists"). The script
must exist in the zone's account. Reading needs ``workers_routes:read``, writing ``workers_routes:edit``.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from app.emulator.collection import Ctx, Kind, Unique
from app.emulator.envelope import CloudflareError
from app.emulator.kinds.workers import script_not_found
from app.emulator.paging import sort_by
from app.emulator.state import Obj, Store


class RouteBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    pattern: str = Field(min_length=1)
    script: str | None = None


def _pattern_in_zone(pattern: str, zone_name: str) -> bool:
    host = pattern.split("/", 1)[0].lower()
    if "://" in pattern or ":" in host:
        return False
    bare = host.removeprefix("*.").removeprefix("*")
    return bare == zone_name or bare.endswith("." + zone_name) or (host.startswith("*") and zone_name.endswith(bare))


class WorkerRoutes(Kind):
    name = "worker_routes"
    refers_to = ("workers_scripts",)
    parent = "zones"
    parent_field = "zone_id"
    path = "/zones/{zone_id}/workers/routes"
    scope_param = "zone_id"
    item_param = "route_id"
    resource = "workers_routes"
    verbs = frozenset({"list", "create", "get", "update", "delete"})
    unique = (
        Unique(
            ("pattern",),
            lambda _o: CloudflareError.single(409, 10020, "A route with the same pattern already exists"),
        ),
    )
    create_body = update_body = RouteBody
    stamps = ()
    summary_fields = ("pattern", "script")

    def not_found(self) -> CloudflareError:
        return CloudflareError.single(404, 10007, "workers.api.error.route_not_found")

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        assert isinstance(body, RouteBody)
        assert parent is not None
        pattern = body.pattern.strip()
        if not _pattern_in_zone(pattern, parent["name"]):
            raise CloudflareError.single(
                400, 10022, f"Route pattern {pattern!r} must be a host of zone {parent['name']}."
            )
        if body.script and store.table("workers_scripts").get(f"{parent['account']['id']}/{body.script}") is None:
            raise script_not_found()
        return {"id": previous["id"] if previous else self.new_id(), "pattern": pattern, "script": body.script or None}

    def order(self, ctx: Ctx, items: Iterable[Obj]) -> list[Obj]:
        return sort_by(items, lambda r: (r["pattern"], r["id"]), "asc")


ROUTES = WorkerRoutes()
