"""WorkerRoute: a pattern of a zone that runs a Worker (`reconcilers.workers`), or none for an exclusion route.

`PatternOutsideZone` with no call when the host is not in the zone. One listing per zone. Found by pattern for
adoption and recovery; a route another WorkerRoute claims is `PatternConflict`. Pattern and Worker are corrected in
place (PUT); a route Cloudflare deleted with its Worker is created again.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from app.api.constants import Reason
from app.api.workers import WorkerRoute, WorkerRouteMetadata
from app.cloudflare.models import WorkerRoute as CloudflareRoute
from app.kube.client import JSON
from reconcilers.account_members import account_name
from reconcilers.capabilities import DriftGrouped
from reconcilers.collections import Collections
from reconcilers.context import AccountLink, Caches, Credentials
from reconcilers.credentials import ready_zone
from reconcilers.managed_kind import Changes, ManagedKind, pending_intent
from reconcilers.waiting import NotReady


def pattern_host(pattern: str) -> str:
    host = pattern.split("/", 1)[0].lower()
    return host.removeprefix("*.").removeprefix("*")


def in_zone(pattern: str, zone: str) -> bool:
    host, zone = pattern_host(pattern), zone.lower().rstrip(".")
    return host == zone or host.endswith("." + zone)


@dataclass(frozen=True)
class RouteLink:
    account: AccountLink
    zone_id: str
    script: str | None

    @property
    def collection(self) -> str:
        return f"zone:{self.zone_id}"


class WorkerRouteKind(ManagedKind[WorkerRoute, RouteLink, CloudflareRoute], DriftGrouped):
    model = WorkerRoute
    status_id = "route_id"

    def __init__(self, caches: Caches, credentials: Credentials) -> None:
        super().__init__(caches, credentials)
        self.listings: Collections[CloudflareRoute] = Collections(id_of=lambda r: r.id, name_of=lambda r: r.pattern)

    @classmethod
    def drift_group(cls, raw: JSON) -> str | None:
        zone_id = ((raw.get("status") or {}).get("cloudflareMetadata") or {}).get("zoneID")
        return f"zone:{zone_id}" if zone_id else None

    def open_drift_round(self, group: str) -> None:
        self.listings.open_round(group)

    async def connect(self, obj: WorkerRoute) -> RouteLink:
        namespace = obj.namespace or ""
        zone = await ready_zone(self.credentials, self.parent(obj, "zone_ref"), namespace)
        zone_account, zone_id, domain = zone.account_ref, zone.zone_id, zone.zone_name
        if obj.metadata.deleting:
            return RouteLink(zone.account, zone_id, None)
        if not in_zone(obj.spec.pattern, domain):
            raise NotReady(
                Reason.PATTERN_OUTSIDE_ZONE,
                f"the host of pattern {obj.spec.pattern!r} is not {domain} or one of its subdomains",
            )
        script = None
        if obj.spec.worker_script_ref is not None:
            shown = f"{namespace}/{obj.spec.worker_script_ref.name}"
            where = f"WorkerScript {shown}"
            found = self.parent(obj, "worker_script_ref", shown=shown, gone=False)
            worker = found.raw
            if account_name(worker) != zone_account:
                raise NotReady(
                    Reason.ACCOUNT_MISMATCH,
                    f"{where} uses CloudflareAccount {account_name(worker)}, the Zone {zone_account}",
                )
            found.serving(deleting_serves=False, unready="is not uploaded and Ready")
            script = worker["spec"]["name"]
        return RouteLink(zone.account, zone_id, script)

    def _lister(self, link: RouteLink) -> AsyncIterator[CloudflareRoute]:
        return link.account.client.list_worker_routes(link.zone_id)

    async def observe(self, link: RouteLink, obj: WorkerRoute, object_id: str) -> CloudflareRoute | None:
        # Missing from the listing: deleted with its Worker, most likely; one read makes sure before a new one.
        return await self.listings.member(
            link.collection,
            lambda: self._lister(link),
            object_id,
            lambda: link.account.client.get_worker_route(link.zone_id, object_id),
        )

    async def find(self, link: RouteLink, obj: WorkerRoute) -> CloudflareRoute | None:
        newer_than = time.monotonic() if pending_intent(self, obj) is not None else None
        named = await self.listings.named(
            link.collection, obj.spec.pattern, lambda: self._lister(link), newer_than=newer_than
        )
        return self.owners.first_unclaimed(
            named, obj, Reason.PATTERN_CONFLICT, lambda route: f"route {obj.spec.pattern} ({route.id})"
        )

    async def create(self, link: RouteLink, obj: WorkerRoute) -> CloudflareRoute:
        created = await link.account.client.create_worker_route(link.zone_id, obj.spec.pattern, link.script)
        self.listings.put(link.collection, created)
        return created

    def diff(self, link: RouteLink, obj: WorkerRoute, observed: CloudflareRoute) -> Changes:
        changes: Changes = {}
        if observed.pattern != obj.spec.pattern:
            changes["pattern"] = obj.spec.pattern
        if (observed.script or None) != link.script:
            changes["script"] = link.script
        return changes

    async def update(
        self, link: RouteLink, obj: WorkerRoute, observed: CloudflareRoute, changes: Changes
    ) -> CloudflareRoute:
        updated = await link.account.client.update_worker_route(
            link.zone_id, observed.id, obj.spec.pattern, link.script
        )
        self.listings.put(link.collection, updated)
        return updated

    async def delete(self, link: RouteLink, obj: WorkerRoute, object_id: str) -> None:
        await link.account.client.delete_worker_route(link.zone_id, object_id)
        self.listings.drop(link.collection, object_id)

    def record(self, link: RouteLink, obj: WorkerRoute, observed: CloudflareRoute) -> None:
        zone_id = link.zone_id
        obj.status.cloudflare_metadata = WorkerRouteMetadata(
            route_id=observed.id, zone_id=zone_id, script=observed.script or ""
        )
