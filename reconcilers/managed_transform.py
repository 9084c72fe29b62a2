"""ManagedTransform: the managed transforms of a zone, one document per Cloudflare zone, turned on and off by ID.

The object is the zone's managed-headers document, its ID the zone's, claimed with the zone ID as label: one
ManagedTransform configures a Cloudflare zone, across namespaces (Zones of two namespaces may name the same
domain). Another one for the same zone reports `AlreadyConfigured` until the first is gone; of two unclaimed ones,
the older goes first. A zone with any transform on is configured outside kflare: it is found (`find`) and so is
taken over only with an adoption policy; one with all off is "created" by writing the spec's switches.

Only the listed transforms are written; the others keep their state. Deleting a ManagedTransform turns all of the
zone's transforms off (`DELETE`), unless it adopted them or the retain policy is set (the lifecycle's policy).
Cloudflare cannot list the documents of many zones at once, so each check is one GET of its zone's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.api.constants import Reason
from app.api.managedtransform import ManagedTransform, ManagedTransformMetadata
from app.cloudflare.models import ManagedHeaders
from app.kube.client import JSON
from app.kube.index import Ref
from reconcilers.context import Context
from reconcilers.credentials import ZoneLink, ready_zone
from reconcilers.lifecycle import CLAIM_INDEX, RETRY_PARENT, ManagedKind, NotReady

DIRECTIONS = (("managed_request_headers", "request"), ("managed_response_headers", "response"))


@dataclass(frozen=True)
class Observed:
    zone_id: str
    document: ManagedHeaders

    def state(self) -> dict[str, bool]:
        doc = self.document
        return {t.id: t.enabled for t in (*doc.managed_request_headers, *doc.managed_response_headers)}


class ManagedTransformKind(ManagedKind[ManagedTransform, ZoneLink, Observed]):
    model = ManagedTransform
    observed_id = "zone_id"
    status_id = "zone_id"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.released_uids: set[str] = set()
        """ManagedTransforms done with their zone (deleted in Cloudflare, finalizer about to go): no longer first."""

    @classmethod
    def parents_of(cls, raw: JSON) -> list[Ref]:
        name = ((raw.get("spec") or {}).get("zoneRef") or {}).get("name")
        return [Ref("Zone", raw["metadata"].get("namespace") or "", name)] if name else []

    async def connect(self, obj: ManagedTransform) -> ZoneLink:
        zone = await ready_zone(self.ctx, obj.namespace, obj.spec.zone_ref.name)
        if not obj.metadata.deleting:
            first = self._configured_by(zone.zone_id, obj)
            if first is not None:
                raise NotReady(
                    Reason.ALREADY_CONFIGURED,
                    f"ManagedTransform {first} already configures zone {zone.zone_name} ({zone.zone_id})",
                    requeue_after=RETRY_PARENT,
                )
        return zone

    def _configured_by(self, zone_id: str, obj: ManagedTransform) -> str | None:
        """Another ManagedTransform that configures the zone: the one claiming it, or an older one not yet there."""
        informer = self.ctx.informer_of(self.kind)
        if informer is None:
            return None
        uid = obj.metadata.uid
        claimed = [
            o
            for o in informer.by_index(CLAIM_INDEX, zone_id)
            if o["metadata"].get("uid") not in (uid, *self.released_uids)
        ]
        if claimed:
            return _name(claimed[0])
        if obj.metadata.labels.get(self.claim_label) == zone_id:
            return None
        created = obj.metadata.creation_timestamp
        mine = (created.strftime("%Y-%m-%dT%H:%M:%SZ") if created else "", obj.namespace or "", obj.metadata.name)
        for other in informer.list():
            meta = other["metadata"]
            if meta.get("uid") == uid or meta.get("deletionTimestamp") or meta.get("uid") in self.released_uids:
                continue
            if self._zone_id_of(other) != zone_id:
                continue
            theirs = (meta.get("creationTimestamp") or "", meta.get("namespace") or "", meta["name"])
            if theirs < mine:
                return _name(other)
        return None

    def _zone_id_of(self, raw: JSON) -> str | None:
        name = ((raw.get("spec") or {}).get("zoneRef") or {}).get("name")
        zone = self.ctx.cached("Zone", name, raw["metadata"].get("namespace")) if name else None
        value = (((zone or {}).get("status") or {}).get("cloudflareMetadata") or {}).get("zoneID")
        return str(value) if value else None

    def describe(self, observed: Observed) -> str:
        return f"managed transforms {', '.join(observed.document.enabled())} of zone {observed.zone_id}"

    async def observe(self, link: ZoneLink, obj: ManagedTransform, object_id: str) -> Observed | None:
        if object_id != link.zone_id:
            return None
        return Observed(link.zone_id, await link.account.client.get_managed_headers(link.zone_id))

    async def find(self, link: ZoneLink, obj: ManagedTransform) -> Observed | None:
        current = Observed(link.zone_id, await link.account.client.get_managed_headers(link.zone_id))
        return current if current.document.enabled() else None

    def _wanted(self, obj: ManagedTransform) -> dict[str, list[dict[str, Any]]]:
        spec = obj.spec
        out: dict[str, list[dict[str, Any]]] = {}
        for field, _ in DIRECTIONS:
            switches = getattr(spec, field) or []
            if switches:
                out[field] = [{"id": s.id, "enabled": s.enabled} for s in switches]
        return out

    async def create(self, link: ZoneLink, obj: ManagedTransform) -> Observed:
        wanted = self._wanted(obj)
        client = link.account.client
        document = await client.patch_managed_headers(link.zone_id, wanted) if wanted else None
        return Observed(link.zone_id, document or await client.get_managed_headers(link.zone_id))

    def diff(self, link: ZoneLink, obj: ManagedTransform, observed: Observed) -> dict[str, Any]:
        state = observed.state()
        changes: dict[str, Any] = {}
        for field, switches in self._wanted(obj).items():
            differing = [s for s in switches if state.get(s["id"]) != s["enabled"]]
            if differing:
                changes[field] = differing
        return changes

    async def update(
        self, link: ZoneLink, obj: ManagedTransform, observed: Observed, changes: dict[str, Any]
    ) -> Observed:
        return Observed(link.zone_id, await link.account.client.patch_managed_headers(link.zone_id, changes))

    async def delete(self, link: ZoneLink, obj: ManagedTransform, object_id: str) -> None:
        await link.account.client.delete_managed_headers(object_id)

    async def released(self, obj: ManagedTransform) -> None:
        """The zone is free: the next ManagedTransform for it goes on now rather than at its next retry."""
        self.released_uids.add(obj.metadata.uid or "")
        zone_id = self.object_id(obj) or obj.metadata.labels.get(self.claim_label)
        for other in self.ctx.cached_all(self.kind):
            meta = other["metadata"]
            if meta.get("uid") != obj.metadata.uid and zone_id and self._zone_id_of(other) == zone_id:
                self.ctx.enqueue(Ref(self.kind, meta.get("namespace") or "", meta["name"]))

    def record(self, link: ZoneLink, obj: ManagedTransform, observed: Observed) -> None:
        obj.status.cloudflare_metadata = ManagedTransformMetadata(
            zone_id=observed.zone_id, enabled=observed.document.enabled()
        )


def _name(raw: JSON) -> str:
    meta = raw["metadata"]
    return f"{meta.get('namespace')}/{meta['name']}"
