"""ManagedTransform: the managed transforms of a zone, one document per Cloudflare zone, turned on and off by ID.

The object is the zone's managed-headers document, its ID the zone's, claimed with the zone ID as label: one
ManagedTransform configures a Cloudflare zone, across namespaces (Zones of two namespaces may name the same
domain). Another one for the same zone reports `AlreadyConfigured` until the first is gone; of two unclaimed ones,
the older goes first. Both are read from indexes: ManagedTransforms by the zone ID they claim, and by the Zone they
reference (`ZONE_INDEX`) for each Zone naming that Cloudflare zone (Zone's `ZONE_ID_INDEX`). A zone with any
transform on is configured outside kflare: it is found (`find`) and so is taken over only with an adoption policy;
one with all off is "created" by writing the spec's switches.

Only the listed transforms are written; the others keep their state. Deleting a ManagedTransform turns all of the
zone's transforms off (`DELETE`), unless it adopted them or the retain policy is set (the lifecycle's policy).
Cloudflare cannot list the documents of many zones at once, so each check is one GET of its zone's.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.api.constants import Reason
from app.api.managedtransform import ManagedTransform, ManagedTransformMetadata, TransformSwitch
from app.cloudflare.models import ManagedHeaders
from app.kube.client import JSON
from app.kube.index import Ref
from app.kube.informer import Indexer, key_of
from reconcilers.capabilities import Indexed, KeepsBeside
from reconcilers.claims import holder_of
from reconcilers.context import Caches, Credentials, Queue
from reconcilers.credentials import ZoneLink, ready_zone, zone_ref_key, zones_of
from reconcilers.holders import CLAIM_INDEX, done_with
from reconcilers.managed_kind import Changes, ManagedKind, object_id
from reconcilers.waiting import RETRY_PARENT, NotReady

ZONE_INDEX = "zone"
"""ManagedTransforms by the Zone they reference (`namespace/name`)."""
DIRECTIONS = (("managed_request_headers", "request"), ("managed_response_headers", "response"))


def _body(switches: dict[str, list[TransformSwitch]]) -> Changes:
    """Switches by field, as Cloudflare takes them."""
    return {field: [{"id": s.id, "enabled": s.enabled} for s in listed] for field, listed in switches.items()}


@dataclass(frozen=True)
class Observed:
    zone_id: str
    document: ManagedHeaders

    def state(self) -> dict[str, bool]:
        doc = self.document
        return {t.id: t.enabled for t in (*doc.managed_request_headers, *doc.managed_response_headers)}

    def described(self) -> str:
        return f"managed transforms {', '.join(self.document.enabled())} of zone {self.zone_id}"


class ManagedTransformKind(
    ManagedKind[ManagedTransform, ZoneLink, Observed], Indexed, KeepsBeside[ManagedTransform, ZoneLink, Observed]
):
    model = ManagedTransform
    observed_id = "zone_id"
    status_id = "zone_id"
    claim_in_status = False  # the label says which ManagedTransform holds the zone (`_configured_by`)

    def __init__(self, caches: Caches, credentials: Credentials, queue: Queue) -> None:
        super().__init__(caches, credentials)
        self.queue = queue  # the zone's other ManagedTransforms wait for the one that holds it

    @classmethod
    def more_indexes(cls) -> dict[str, Indexer]:
        return {ZONE_INDEX: zone_ref_key}

    async def connect(self, obj: ManagedTransform) -> ZoneLink:
        zone = await ready_zone(self.credentials, self.parent(obj, "zone_ref"), obj.namespace)
        if not obj.metadata.deleting:
            first = self._configured_by(zone.zone_id, obj)
            if first is not None:
                raise NotReady(
                    Reason.ALREADY_CONFIGURED,
                    f"{first} already configures zone {zone.zone_name} ({zone.zone_id})",
                    requeue_after=RETRY_PARENT,
                )
        return zone

    def _configured_by(self, zone_id: str, obj: ManagedTransform) -> str | None:
        """Another ManagedTransform that configures the zone (the one claiming it, or an older one not yet there), as
        `obj`'s namespace may be told of it. One that is done with the zone (deleted in Cloudflare, its finalizer
        gone) configures nothing."""
        informer = self.caches.informer_of(self.kind)
        if informer is None:
            return None
        uid = obj.metadata.uid
        for other in informer.by_index(CLAIM_INDEX, zone_id):
            if other["metadata"].get("uid") != uid and not done_with(other):
                return holder_of(other).described_to(obj.namespace)
        if obj.metadata.labels.get(self.claim_label) == zone_id:
            return None
        created = obj.metadata.creation_timestamp
        mine = (created.strftime("%Y-%m-%dT%H:%M:%SZ") if created else "", obj.namespace or "", obj.metadata.name)
        for other in self._of_zone(zone_id, obj.namespace or "", obj.spec.zone_ref.name):
            meta = other["metadata"]
            if meta.get("uid") == uid or meta.get("deletionTimestamp"):
                continue
            theirs = (meta.get("creationTimestamp") or "", meta.get("namespace") or "", meta["name"])
            if theirs < mine:
                return holder_of(other).described_to(obj.namespace)
        return None

    def _of_zone(self, zone_id: str | None, namespace: str, zone: str) -> list[JSON]:
        """The ManagedTransforms of the Zone `namespace/zone` and of every other Zone claiming the same Cloudflare
        zone (Zones of two namespaces may name one domain)."""
        zones = {(namespace, zone), *(zones_of(self.caches, zone_id) if zone_id else ())}
        informer = self.caches.informer_of(self.kind)
        if informer is None:
            return []
        return [found for ns, name in sorted(zones) for found in informer.by_index(ZONE_INDEX, f"{ns}/{name}")]

    async def observe(self, link: ZoneLink, obj: ManagedTransform, object_id: str) -> Observed | None:
        if object_id != link.zone_id:
            return None
        return Observed(link.zone_id, await link.account.client.get_managed_headers(link.zone_id))

    async def find(self, link: ZoneLink, obj: ManagedTransform) -> Observed | None:
        current = Observed(link.zone_id, await link.account.client.get_managed_headers(link.zone_id))
        return current if current.document.enabled() else None

    def _wanted(self, obj: ManagedTransform) -> dict[str, list[TransformSwitch]]:
        spec = obj.spec
        out: dict[str, list[TransformSwitch]] = {}
        for field, _ in DIRECTIONS:
            switches: list[TransformSwitch] = getattr(spec, field) or []
            if switches:
                out[field] = switches
        return out

    async def create(self, link: ZoneLink, obj: ManagedTransform) -> Observed:
        wanted = self._wanted(obj)
        client = link.account.client
        document = await client.patch_managed_headers(link.zone_id, _body(wanted)) if wanted else None
        return Observed(link.zone_id, document or await client.get_managed_headers(link.zone_id))

    def diff(self, link: ZoneLink, obj: ManagedTransform, observed: Observed) -> Changes:
        state = observed.state()
        changes: dict[str, list[TransformSwitch]] = {}
        for field, switches in self._wanted(obj).items():
            differing = [s for s in switches if state.get(s.id) != s.enabled]
            if differing:
                changes[field] = differing
        return _body(changes)

    async def update(self, link: ZoneLink, obj: ManagedTransform, observed: Observed, changes: Changes) -> Observed:
        return Observed(link.zone_id, await link.account.client.patch_managed_headers(link.zone_id, changes))

    async def delete(self, link: ZoneLink, obj: ManagedTransform, object_id: str) -> None:
        await link.account.client.delete_managed_headers(object_id)

    async def released(self, obj: ManagedTransform) -> None:
        """The zone is free: the next ManagedTransform for it goes on now rather than at its next retry."""
        zone_id = object_id(self, obj) or obj.metadata.labels.get(self.claim_label)
        for other in self._of_zone(zone_id, obj.namespace or "", obj.spec.zone_ref.name):
            if other["metadata"].get("uid") != obj.metadata.uid:
                self.queue.enqueue(Ref(self.kind, *key_of(other)))

    def record(self, link: ZoneLink, obj: ManagedTransform, observed: Observed) -> None:
        obj.status.cloudflare_metadata = ManagedTransformMetadata(
            zone_id=observed.zone_id, enabled=observed.document.enabled()
        )
