"""DNSRecord: one record of a Zone, one of possibly several with the same name (a record set).

Key for adoption: name and type, and the content (or data): a record set (several MX, TXT, A... at one name) may hold
records of others beside ours, so a record whose content differs from every existing one is created, not reported as
already there. CNAME is the exception: a name holds at most one, so the unclaimed one is the one. The Cloudflare ID
is recorded in the `kflare.dev/record-id` label and in status, so adoption never takes a record another DNSRecord
owns.

Compared fields and Cloudflare's defaults, so that nothing flaps: `ttl` unset means 1 (automatic, and always 1 on a
proxied record); `proxied` unset means false and is always sent; `priority` is compared only when set; `comment`
unset means none; tags compare as sets; `data` compares only the keys the spec gives (Cloudflare adds derived
ones), and when `data` is set, `content` is Cloudflare's rendering of it and is not compared. Content compares after
the normalisation Cloudflare applies: IP addresses canonical, host names without the final dot and case-insensitive.

Reads come from one listing per zone (`Collections`): observing, adoption lookups, crash recovery and drift checks
of all the zone's records share it. Writes go through the zone's batcher (`dns_batch`): the creates, updates and
deletes due together are one call.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

from pydantic import JsonValue

from app.api import DNSRecord
from app.api.constants import FINALIZER, Reason
from app.api.dnsrecord import DNSRecordMetadata
from app.api.tenancy import record_hostname
from app.cloudflare.calls import JsonBody
from app.cloudflare.client import CloudflareClient
from app.cloudflare.models import DNSRecord as CloudflareRecord
from app.kube.client import JSON
from app.kube.index import Ref
from app.kube.informer import Indexer, Key, key_of
from reconcilers.capabilities import DriftGrouped, HoldsReconciles, Indexed, MatchesIntent
from reconcilers.collections import Collections
from reconcilers.context import AccountLink, Caches, Credentials, Queue
from reconcilers.credentials import account_key, ready_account, zone_namespace, zone_ref_key
from reconcilers.dns_batch import Batches, ZoneBatcher
from reconcilers.managed_kind import Changes, ManagedKind, pending_intent
from reconcilers.tenancy import RECORD_NAME_INDEX, record_names, zone_grants
from reconcilers.waiting import RETRY_PARENT, NotReady

HOST_TYPES = frozenset({"CNAME", "MX", "NS", "PTR"})
PRIORITY_TYPES = frozenset({"MX", "SRV", "URI"})
EXCLUSIVE_TYPES = frozenset({"CNAME"})  # a name holds at most one record of these types


@dataclass(frozen=True)
class RecordLink:
    account: AccountLink
    zone_id: str
    zone_name: str
    plan: str | None = None
    tunnel_target: str | None = None
    """`<tunnel-id>.cfargotunnel.com` for a record with `tunnelRef`: its content, whatever the spec says."""

    @property
    def client(self) -> CloudflareClient:
        return self.account.client

    @property
    def collection(self) -> str:
        return f"zone:{self.zone_id}"


ZONE_INDEX = "zone"


def _needs_work(raw: JSON) -> bool:
    meta = raw["metadata"]
    if meta.get("deletionTimestamp"):
        return FINALIZER in (meta.get("finalizers") or [])
    for condition in (raw.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("observedGeneration") != meta.get("generation"))
    return True


READ_FIELDS = ("id", "name", "type", "content", "ttl", "proxied", "proxiable", "priority", "comment", "tags", "data")
"""What kflare reads of a record in Cloudflare (to observe, diff, adopt and describe it)."""


_READ_SET = set(READ_FIELDS)


def _kept(record: CloudflareRecord) -> CloudflareRecord:
    """A listed record without what kflare never reads: its settings, meta and timestamps, and a set of the fields
    it was given of its own (the model is frozen, so every kept record shares one). That was half of what a zone's
    listing held per record."""
    values = {name: getattr(record, name) for name in READ_FIELDS}
    return CloudflareRecord.model_construct(_READ_SET, **values)


def _lookup_key(record_type: str, name: str) -> str:
    return f"{record_type} {name.rstrip('.').lower()}"


def fqdn(name: str, zone: str) -> str:
    """The record's full name as Cloudflare reports it: `@` is the apex, a relative name gets the zone appended."""
    name, zone = name.rstrip(".").lower(), zone.rstrip(".").lower()
    if name in ("@", zone):
        return zone
    return name if name.endswith("." + zone) else f"{name}.{zone}"


def normal_content(record_type: str, content: str | None) -> str:
    if content is None:
        return ""
    text = content.strip()
    if record_type in ("A", "AAAA"):
        try:
            return str(ipaddress.ip_address(text))
        except ValueError:
            return text
    if record_type in HOST_TYPES:
        return text.rstrip(".").lower()
    if record_type == "TXT" and len(text) >= 2 and text[0] == text[-1] == '"' and '" "' not in text:
        return text[1:-1]  # a single quoted string reads the same quoted or not
    return text


class ContentKey(TypedDict, total=False):
    """What tells a record of the resource's name apart from the others: its `data`, or else its content."""

    data: dict[str, JsonValue]
    content: str


def _data_matches(wanted: Mapping[str, object], actual: Mapping[str, object] | None) -> bool:
    actual = actual or {}
    for key, value in wanted.items():
        have = actual.get(key)
        if isinstance(value, dict):
            if not isinstance(have, dict) or not _data_matches(value, have):
                return False
        elif isinstance(value, int | float) and isinstance(have, int | float):
            if float(value) != float(have):
                return False
        elif key == "target":  # a host name: the final dot and case do not matter
            if str(value).rstrip(".").lower() != str(have).rstrip(".").lower():
                return False
        elif value != have:
            return False
    return True


class DNSRecordKind(
    ManagedKind[DNSRecord, RecordLink, CloudflareRecord],
    Indexed,
    DriftGrouped,
    MatchesIntent[DNSRecord],
    HoldsReconciles,
):
    model = DNSRecord
    status_id = "record_id"

    # A reconcile mostly awaits its batch, holding its worker: with fewer workers than the records a bulk apply
    # brings to the zones it fills at once (200 a zone on Free), batches go out part full (256 made 14 calls of
    # 1,000 records in 5 zones where 5 do). Waiting workers are cheap tasks.
    concurrency = 1024

    def __init__(self, caches: Caches, credentials: Credentials, queue: Queue, dns_batch_size: int) -> None:
        super().__init__(caches, credentials)
        self.queue, self.dns_batch_size = queue, dns_batch_size
        self.listings: Collections[CloudflareRecord] = Collections(
            id_of=lambda record: record.id, name_of=lambda record: _lookup_key(record.type, record.name), kept=_kept
        )
        self.batches = Batches(waiting_of=self._waiting_in, capacity=self.concurrency or 1, applied=self._applied)
        self._zones: dict[str, tuple[str, str]] = {}  # zone ID -> (namespace, Zone name), as records name it
        # Records this process created, by the UID of the resource that owns each: another worker creating a
        # member of the same record set must not take one for unclaimed before its owner has labelled it.
        self.created_for: dict[str, str] = {}

    def reconciling(self, key: Key) -> contextlib.AbstractContextManager[object]:
        # The zone's batch may wait for this reconcile's write (it knows who may still join).
        raw = self.caches.cached(self.kind, key[1], key[0] or None)
        uid = ((raw or {}).get("metadata") or {}).get("uid", "")
        return self.batches.taking_part(self._zone_id_of(key), uid)

    def _zone_id_of(self, key: Key) -> str | None:
        raw = self.caches.cached(self.kind, key[1], key[0] or None)
        zone_name = ((raw or {}).get("spec") or {}).get("zoneRef", {}).get("name")
        where = zone_namespace(raw) if raw is not None else key[0]
        zone = self.caches.cached("Zone", zone_name, where or None) if zone_name else None
        zone_id = ((zone or {}).get("status") or {}).get("cloudflareMetadata", {}).get("zoneID")
        if not isinstance(zone_id, str):
            return None
        self._zones[zone_id] = (where, zone_name)
        return zone_id

    def _waiting_in(self, zone_id: str) -> set[str]:
        """UIDs of the zone's records that wait for work (not reconciled at their generation, or being deleted) and
        will get it soon: queued for a worker. One backing off after a failure may not run for minutes."""
        where = self._zones.get(zone_id)
        informer = self.caches.informer_of(self.kind)
        if where is None or informer is None:
            return set()
        return {
            raw["metadata"].get("uid", "")
            for raw in informer.by_index(ZONE_INDEX, f"{where[0]}/{where[1]}")
            if _needs_work(raw) and self.queue.queued(Ref(self.kind, *key_of(raw)))
        }

    @classmethod
    def more_indexes(cls) -> dict[str, Indexer]:
        return {ZONE_INDEX: zone_ref_key, RECORD_NAME_INDEX: record_names}

    @classmethod
    def drift_group(cls, raw: JSON) -> str | None:
        """Records are drift-checked per zone: one listing serves them all."""
        zone_id = ((raw.get("status") or {}).get("cloudflareMetadata") or {}).get("zoneID")
        return f"zone:{zone_id}" if zone_id else None

    def open_drift_round(self, group: str) -> None:
        self.listings.open_round(group)

    async def connect(self, obj: DNSRecord) -> RecordLink:
        zone_name = obj.spec.zone_ref.name
        where = obj.spec.zone_ref.namespace or obj.namespace
        shown = zone_name if where == obj.namespace else f"{where}/{zone_name}"
        zone = self.parent(obj, "zone_ref", shown=shown)
        raw = zone.raw
        if where != obj.namespace and not obj.metadata.deleting:
            # Another namespace's Zone: only the names it grants this one (said before anything else of it is).
            hostname = record_hostname(obj.spec.name, str((raw.get("spec") or {}).get("name", "")))
            if not zone_grants(self.caches, raw, obj.namespace or "", hostname):
                raise NotReady(
                    Reason.HOSTNAME_NOT_GRANTED,
                    f"Zone {shown} grants namespace {obj.namespace} no name {hostname} (its spec.hostnameGrants)",
                    requeue_after=RETRY_PARENT,
                )
        zone_id = zone.serving()  # one being deleted waits for its records
        status = raw.get("status") or {}
        target = None if obj.spec.tunnel_ref is None else self._tunnel_target(obj)
        account_name = account_key(raw) or ""
        plan = (status.get("cloudflareMetadata") or {}).get("plan")
        # The Zone's namespace uses the account: a grant is its owner's word that this record may use it too.
        account = await ready_account(self.credentials, account_name, where)
        return RecordLink(account, zone_id, raw["spec"]["name"], plan, target)

    def _tunnel_target(self, obj: DNSRecord) -> str | None:
        """The CNAME target of a record pointing at a tunnel. A record being deleted needs none: it goes anyway."""
        assert obj.spec.tunnel_ref is not None
        name = obj.spec.tunnel_ref.name
        raw = self.caches.cached("Tunnel", name, obj.namespace)
        if raw is None:
            if obj.metadata.deleting:
                return None
            raise NotReady(Reason.TUNNEL_NOT_FOUND, f"Tunnel {name} not found")
        tunnel_id = ((raw.get("status") or {}).get("cloudflareMetadata") or {}).get("tunnelID")
        if not tunnel_id:
            if obj.metadata.deleting:
                return None
            raise NotReady(Reason.TUNNEL_NOT_READY, f"Tunnel {name} has no tunnel in Cloudflare yet")
        return f"{tunnel_id}.cfargotunnel.com"

    async def observe(self, link: RecordLink, obj: DNSRecord, object_id: str) -> CloudflareRecord | None:
        return await self.listings.member(
            link.collection,
            lambda: link.client.list_dns_records(link.zone_id),
            object_id,
            lambda: link.client.get_dns_record(link.zone_id, object_id),
        )

    def _claimed_elsewhere(self, record_id: str, obj: DNSRecord) -> bool:
        """Whether another DNSRecord (in any namespace) owns the record, or is creating it in this process."""
        owner = self.created_for.get(record_id)
        return (owner is not None and owner != obj.metadata.uid) or self.owners.claimed_by_other(record_id, obj)

    async def find(self, link: RecordLink, obj: DNSRecord) -> CloudflareRecord | None:
        spec = obj.spec
        name = fqdn(spec.name, link.zone_name)
        await self._batcher(link).settled(obj.metadata.uid or "")  # what an abandoned write of ours did counts
        intent = pending_intent(self, obj)
        wanted = self._content_key(obj)
        newer_than = None
        if intent is not None:
            # What was sent then, not what the spec says now: it may have changed while the controller was down.
            wanted = json.loads(intent["match"]) if "match" in intent else wanted
            # A create may have reached Cloudflare just before a crash or a timeout: only a listing taken from now
            # on is sure to show it (the records recovering together share it).
            newer_than = time.monotonic()
        named = await self.listings.named(
            link.collection,
            _lookup_key(spec.type, name),
            lambda: link.client.list_dns_records(link.zone_id),
            newer_than=newer_than,
        )
        candidates = [r for r in named if not self._claimed_elsewhere(r.id, obj)]
        for record in candidates:
            if "data" in wanted:
                if _data_matches(wanted["data"], record.data):
                    return record
            elif normal_content(spec.type, record.content) == wanted["content"]:
                return record
        return candidates[0] if spec.type in EXCLUSIVE_TYPES and len(candidates) == 1 else None

    @staticmethod
    def _content_key(obj: DNSRecord) -> ContentKey:
        spec = obj.spec
        if spec.data is not None:
            return {"data": spec.data}
        return {"content": normal_content(spec.type, spec.content)}

    def intent_match(self, obj: DNSRecord) -> str | None:
        return json.dumps(self._content_key(obj), sort_keys=True)

    def desired(self, obj: DNSRecord, zone_name: str, tunnel_target: str | None = None) -> dict[str, JsonBody]:
        spec = obj.spec
        body: dict[str, JsonBody] = {
            "name": fqdn(spec.name, zone_name),
            "type": spec.type,
            "ttl": spec.ttl if spec.ttl is not None else 1,
            "comment": spec.comment or "",
            "tags": sorted(spec.tags or []),
        }
        if spec.data is not None:
            body["data"] = spec.data
        else:
            body["content"] = tunnel_target or spec.content or ""
        if spec.type in ("A", "AAAA", "CNAME"):
            body["proxied"] = bool(spec.proxied) or tunnel_target is not None
        if spec.priority is not None:
            body["priority"] = spec.priority
        return body

    async def create(self, link: RecordLink, obj: DNSRecord) -> CloudflareRecord:
        body = self.desired(obj, link.zone_name, link.tunnel_target)
        if not body["tags"]:
            del body["tags"]  # not on the Free plan: sending an empty list is refused there
        if not body["comment"]:
            del body["comment"]
        created = await self._batcher(link).create(obj.metadata.uid or "", body)
        self.created_for[created.id] = obj.metadata.uid or ""
        return created

    def _batcher(self, link: RecordLink) -> ZoneBatcher:
        return self.batches.of(link.client, link.zone_id, link.plan, self.dns_batch_size or None)

    def _applied(self, zone_id: str, kind: str, body: Mapping[str, JsonBody], record: CloudflareRecord | None) -> None:
        """Cloudflare applied a write, perhaps after its reconcile stopped waiting: the listing shows it at once."""
        if record is not None:
            self.listings.put(f"zone:{zone_id}", record)
        elif kind == "delete":
            self.listings.drop(f"zone:{zone_id}", str(body["id"]))

    def diff(self, link: RecordLink, obj: DNSRecord, observed: CloudflareRecord) -> Changes:
        spec = obj.spec
        changes: Changes = {}
        target = None if spec.tunnel_ref is None or obj.metadata.deleting else self._tunnel_target(obj)
        content = target or spec.content
        if spec.data is not None:
            if not _data_matches(spec.data, observed.data):
                changes["data"] = spec.data
        elif (
            spec.type != "SRV"
            and content != observed.content  # the same text reads the same: no parse of addresses in the usual case
            and normal_content(spec.type, content) != normal_content(spec.type, observed.content)
        ):
            changes["content"] = content or ""
        proxied = bool(spec.proxied) or target is not None
        if spec.type in ("A", "AAAA", "CNAME") and proxied != bool(observed.proxied):
            changes["proxied"] = proxied
        # A proxied record's TTL is always automatic; Cloudflare reports 1 whatever was asked.
        ttl = 1 if proxied else (spec.ttl if spec.ttl is not None else 1)
        if ttl != observed.ttl:
            changes["ttl"] = ttl
        if spec.priority is not None and spec.type in PRIORITY_TYPES and spec.priority != observed.priority:
            changes["priority"] = spec.priority
        if (spec.comment or "") != (observed.comment or ""):
            changes["comment"] = spec.comment or ""
        if sorted(spec.tags or []) != sorted(observed.tags or []):
            changes["tags"] = sorted(spec.tags or [])
        return changes

    async def update(
        self, link: RecordLink, obj: DNSRecord, observed: CloudflareRecord, changes: Changes
    ) -> CloudflareRecord:
        body = dict(changes)
        if obj.spec.type in ("A", "AAAA", "CNAME"):
            # Always explicit: PATCH leaves an omitted field as it was.
            body["proxied"] = bool(obj.spec.proxied) or link.tunnel_target is not None
        return await self._batcher(link).patch(obj.metadata.uid or "", observed.id, body)

    async def delete(self, link: RecordLink, obj: DNSRecord, object_id: str) -> None:
        await self._batcher(link).delete(obj.metadata.uid or "", object_id)
        self.created_for.pop(object_id, None)

    def record(self, link: RecordLink, obj: DNSRecord, observed: CloudflareRecord) -> None:
        zone_id = link.zone_id
        obj.status.cloudflare_metadata = DNSRecordMetadata(
            record_id=observed.id, zone_id=zone_id, proxiable=observed.proxiable
        )
