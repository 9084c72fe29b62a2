"""The Cloudflare side of the class, as pure functions of the caches: a tunnel's ingress document, the DNSRecords its
hostnames get, and what a route's and a Gateway's statuses say of them (`reconcilers.gateway.publish_status`, whose
conditions and reasons this module names too).

The ingress document of a tunnel has one rule per hostname published through it (exact hostnames first, then
wildcards from the narrowest), every one pointing at the data plane (gRPC hostnames as HTTP/2 origins), then the
`http_status:404` catch-all.

A hostname in a zone a kflare Zone of the tunnel's account manages (the Zone holding a Cloudflare zone whose domain is
the longest suffix of it, `owners`; only the routes of namespaces that Zone lets publish it publish it at all) gets a
DNSRecord in the Zone's namespace: a proxied CNAME to `<tunnel id>.cfargotunnel.com`, named
`gw.<hostname>` (`gw-wildcard.<domain>` for `*.<domain>`), labelled `kflare.dev/gateway-tunnel` (which tunnel's
class made it) and `kflare.dev/gateway-route` (the first route it serves, `<kind>.<namespace>.<name>`), annotated
`kflare.dev/gateway-routes` (all of them) and `kflare.dev/gateway-hostname`. A DNSRecord of that name or for that
record name which the class did not make is left alone and reported on the route.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import JsonValue

from app.api.account import effective_account_id
from app.api.tunnel import CATCH_ALL_404
from reconcilers.credentials import account_key
from reconcilers.gateway import raw, shapes
from reconcilers.gateway.kinds import Classes
from reconcilers.gateway.owners import ZoneIndex, holds_zone
from reconcilers.gateway.publish_status import (
    ALREADY_EXISTS,
    CERTIFICATE_CONDITION,
    CONFIGURATION_REFUSED,
    COVERED,
    DISABLED,
    DNS_CONDITION,
    PENDING,
    PUBLISHED,
    TOO_DEEP,
    TUNNEL_ALREADY_CONFIGURED,
    ZONE_NOT_MANAGED,
    certificate_condition,
    conflict_message,
    dns_condition,
    dns_disabled_condition,
)
from reconcilers.gateway.shapes import RouteKey
from reconcilers.gateway.translate import Hostname

TUNNEL_LABEL = "kflare.dev/gateway-tunnel"
ROUTE_LABEL = "kflare.dev/gateway-route"
ROUTES_ANNOTATION = "kflare.dev/gateway-routes"
HOSTNAME_ANNOTATION = "kflare.dev/gateway-hostname"
TUNNEL_ANNOTATION = "kflare.dev/gateway-tunnel"
"""`namespace/name` of the Tunnel whose class made a DNSRecord (the label of that key holds it as a label value)."""

TunnelKey = tuple[str, str]
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def _meta(obj: Mapping[str, object]) -> Mapping[str, object]:
    return raw.mapping(obj.get("metadata"))


def _spec(obj: Mapping[str, object]) -> Mapping[str, object]:
    return raw.mapping(obj.get("spec"))


def _object(value: JsonValue) -> dict[str, JsonValue]:
    return value if isinstance(value, dict) else {}


def label_value(text: str) -> str:
    """`text` as a label value: itself when it is one, else a readable head and a hash of the whole."""
    if _LABEL_VALUE.match(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    head = re.sub(r"[^-A-Za-z0-9_.]", "-", text)[:50].strip("-_.")
    return f"{head}-{digest}" if head else digest


def tunnel_label(tunnel: TunnelKey) -> str:
    return label_value(f"{tunnel[0]}.{tunnel[1]}")


def route_label(route: RouteKey) -> str:
    return label_value(".".join(route))


def record_object_name(hostname: str) -> str:
    """The DNSRecord's name for a hostname: readable, distinct for `*.a.com` and `wildcard.a.com`, at most 253."""
    name = f"gw-wildcard.{hostname[2:]}" if hostname.startswith("*.") else f"gw.{hostname}"
    name = name.lower()
    if len(name) <= 253:
        return name
    return f"{name[:236]}.{hashlib.sha256(name.encode()).hexdigest()[:16]}"


def _rule_order(hostname: Hostname) -> tuple[bool, int, str]:
    # cloudflared takes the first rule that matches: an exact hostname before a wildcard covering it, and a
    # narrower wildcard before a wider one.
    name = hostname.hostname
    return (name.startswith("*."), -name.count("."), name)


@dataclass(frozen=True)
class TLSOrigin:
    """The data plane's TLS listener as cloudflared reaches it: where gRPC hostnames are sent, over HTTP/2."""

    url: str
    """`https://localhost:<port>`: cloudflared and Envoy share the data plane's pod."""
    server_name: str
    """The name in the origin certificate, which cloudflared checks (`originServerName`)."""
    ca_file: str
    """The CA of the origin certificate, as a path in cloudflared's container (`caPool`)."""


def ingress_document(
    hostnames: Iterable[Hostname], origin: str, tls_origin: TLSOrigin | None = None
) -> dict[str, JsonValue]:
    """The tunnel's ingress document for the hostnames published through it. gRPC hostnames go to the TLS origin
    when there is one: cloudflared speaks HTTP/2 to an origin only over TLS (`http2Origin` on a plaintext origin
    gives HTTP/1.1, and gRPC's status trailer is lost), and checks its certificate, never `noTLSVerify`."""
    rules: list[JsonValue] = []
    for hostname in sorted(hostnames, key=_rule_order):
        rule: dict[str, JsonValue] = {"hostname": hostname.hostname, "service": origin}
        if hostname.grpc and tls_origin is not None:
            rule["service"] = tls_origin.url
            rule["originRequest"] = {
                "http2Origin": True,
                "originServerName": tls_origin.server_name,
                "caPool": tls_origin.ca_file,
            }
        elif hostname.grpc:
            rule["originRequest"] = {"http2Origin": True}
        rules.append(rule)
    return {"ingress": [*rules, {"service": CATCH_ALL_404}]}


def written_by_class(document: Mapping[str, object], origin: str, tls_origin: TLSOrigin | None) -> bool:
    """Whether a tunnel's ingress document holds rules the class wrote and nothing else: every rule but the
    catch-all sends its hostname to the data plane. A document with a rule of anyone else's is not the class's to
    clear."""
    rules = [r for r in raw.items(document.get("ingress")) if isinstance(r, Mapping) and r.get("hostname")]
    ours = {origin, *((tls_origin.url,) if tls_origin is not None else ())}
    return bool(rules) and all(r.get("service") in ours for r in rules)


# ---- the tunnel, its account and zones -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TunnelTarget:
    """What publishing through a kflare Tunnel needs of it."""

    key: TunnelKey
    tunnel_id: str | None
    account_ref: str
    account_id: str | None
    """The Cloudflare account ID of its CloudflareAccount (None until that is known)."""

    @property
    def cname(self) -> str | None:
        return f"{self.tunnel_id}.cfargotunnel.com" if self.tunnel_id else None


AccountLookup = Callable[[str], Mapping[str, object] | None]
"""Name of a CloudflareAccount (cluster-scoped) -> the object as cached."""


def _account_id(accounts: AccountLookup, name: str) -> str | None:
    return effective_account_id(accounts(name)) if name else None


def tunnel_target(key: TunnelKey, tunnel: Mapping[str, object], accounts: AccountLookup) -> TunnelTarget:
    account_ref = account_key(dict(tunnel)) or ""
    tunnel_id = raw.at(tunnel, "status", "cloudflareMetadata", "tunnelID")
    return TunnelTarget(key, str(tunnel_id) if tunnel_id else None, account_ref, _account_id(accounts, account_ref))


def _bare(name: str) -> str:
    return name.rstrip(".").lower()


@runtime_checkable
class ZoneLookup(Protocol):
    def managing(self, hostname: str) -> Mapping[str, object] | None:
        """The Zone that manages the zone `hostname` is in (`app.api.tenancy.ZoneIndex.managing`)."""


@runtime_checkable
class RecordLookup(Protocol):
    """The DNSRecords the plans read: one by its name, and those giving a record name."""

    def at(self, namespace: str, name: str) -> Mapping[str, object] | None: ...

    def naming(self, record_name: str) -> Iterable[Mapping[str, object]]:
        """The DNSRecords whose `spec.name` is `record_name` (lower case, no final dot)."""


class ListedRecords:
    """A RecordLookup over a listing of DNSRecords."""

    def __init__(self, records: Iterable[Mapping[str, object]]) -> None:
        self.by_key: dict[tuple[str, str], Mapping[str, object]] = {}
        self.by_name: dict[str, list[Mapping[str, object]]] = {}
        for record in records:
            meta = _meta(record)
            self.by_key[(str(meta.get("namespace")), str(meta.get("name")))] = record
            self.by_name.setdefault(_bare(str(_spec(record).get("name"))), []).append(record)

    def at(self, namespace: str, name: str) -> Mapping[str, object] | None:
        return self.by_key.get((namespace, name))

    def naming(self, record_name: str) -> Iterable[Mapping[str, object]]:
        return self.by_name.get(record_name, [])


def zone_of(
    hostname: str, zones: Iterable[Mapping[str, object]] | ZoneLookup, tunnel: TunnelTarget, accounts: AccountLookup
) -> dict[str, object] | None:
    """The kflare Zone a hostname's DNS record goes into: the Zone that manages its zone (`owners`: the one holding a
    Cloudflare zone whose domain is the longest suffix of it), when that Zone is of the tunnel's account and is not
    being deleted (its deletion waits for its records). None: the class makes no record for it."""
    index = zones if isinstance(zones, ZoneLookup) else ZoneIndex(zones)
    zone = index.managing(hostname)
    if zone is None or _meta(zone).get("deletionTimestamp"):
        return None
    account_ref = account_key(dict(zone)) or ""
    account_id = _account_id(accounts, account_ref)
    same_account = account_ref == tunnel.account_ref or (account_id is not None and account_id == tunnel.account_id)
    return dict(zone) if same_account else None


def configured_by(tunnel: TunnelKey, configurations: Iterable[Mapping[str, object]]) -> str | None:
    """The TunnelConfiguration (`namespace/name`, the oldest) that configures the tunnel, if any does."""
    found = sorted(
        (str(_meta(c).get("creationTimestamp") or ""), str(_meta(c).get("name")))
        for c in configurations
        if _meta(c).get("namespace") == tunnel[0] and raw.at(c, "spec", "tunnelRef", "name") == tunnel[1]
    )
    return f"{tunnel[0]}/{found[0][1]}" if found else None


# ---- DNS records ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordPlan:
    """What becomes of one published hostname's DNS record."""

    hostname: str
    routes: tuple[RouteKey, ...]
    zone: Mapping[str, object] | None
    """The kflare Zone it falls in; None: it is published in the ingress document only."""
    name: str = ""
    """The DNSRecord's name, in the Zone's namespace."""
    taken_by: str | None = None
    """A DNSRecord the class did not make that holds the name (`namespace/name`, or `in another namespace` when it is
    not the routes' namespace's): nothing is written."""
    body: dict[str, JsonValue] | None = None
    """The DNSRecord to have (apiVersion, kind, metadata, spec), when the class may make it."""

    @property
    def namespace(self) -> str:
        return str(_meta(self.zone or {}).get("namespace") or "")

    @property
    def domain(self) -> str:
        return str(_spec(self.zone or {}).get("name") or "")


def is_ours(record: Mapping[str, object], tunnel: TunnelKey) -> bool:
    return raw.at(record, "metadata", "labels", TUNNEL_LABEL) == tunnel_label(tunnel)


def record_hostname(record: Mapping[str, object]) -> str:
    """The hostname a DNSRecord of the class publishes."""
    annotated = raw.at(record, "metadata", "annotations", HOSTNAME_ANNOTATION)
    return _bare(str(annotated or _spec(record).get("name") or ""))


def keeps_cloudflare_record(
    record: Mapping[str, object], zone: Mapping[str, object] | None, published: Iterable[str]
) -> bool:
    """Whether a DNSRecord of the class that no plan keeps goes without its Cloudflare record: its Zone is being
    deleted, is gone or holds no zone (any more) while routes still publish its hostname through the tunnel. The
    Zone's deletion (which waits for its records) decides what becomes of the zone; the CNAME the routes still use is
    not the class's to delete on the way. A record the routes let go of (deleted, refused, DNS publishing turned off)
    goes with its Cloudflare record, as does one whose hostname another Zone manages now."""
    if zone is not None and not _meta(zone).get("deletionTimestamp") and holds_zone(zone):
        return False
    return record_hostname(record) in {_bare(h) for h in published}


def record_body(
    hostname: Hostname, zone: Mapping[str, object], tunnel: TunnelTarget, name: str
) -> dict[str, JsonValue]:
    routes = sorted(hostname.routes)
    return {
        "apiVersion": "kflare.dev/v1alpha1",
        "kind": "DNSRecord",
        "metadata": {
            "name": name,
            "namespace": shapes.ns(zone),
            "labels": {TUNNEL_LABEL: tunnel_label(tunnel.key), ROUTE_LABEL: route_label(routes[0])},
            "annotations": {
                ROUTES_ANNOTATION: ",".join(".".join(r) for r in routes),
                TUNNEL_ANNOTATION: f"{tunnel.key[0]}/{tunnel.key[1]}",
                HOSTNAME_ANNOTATION: hostname.hostname,
            },
        },
        "spec": {
            "zoneRef": {"name": shapes.name(zone)},
            "name": hostname.hostname,
            "type": "CNAME",
            "content": tunnel.cname,
            "proxied": True,
            "comment": f"cloudflare-tunnel Gateway class: {', '.join('/'.join(r[1:]) for r in routes)}"[:100],
        },
    }


def plan_records(
    tunnel: TunnelTarget,
    hostnames: Iterable[Hostname],
    zones: Iterable[Mapping[str, object]] | ZoneLookup,
    records: Iterable[Mapping[str, object]] | RecordLookup,
    accounts: AccountLookup,
) -> list[RecordPlan]:
    """The DNS record of each hostname published through the tunnel: each looked up by its name (the caches'
    indexes answer, as this runs on every change of what the class publishes)."""
    index = zones if isinstance(zones, ZoneLookup) else ZoneIndex(zones)
    lookup = records if isinstance(records, RecordLookup) else ListedRecords(records)

    def holder_of(zone: Mapping[str, object], hostname: str) -> Mapping[str, object] | None:
        """Another DNSRecord of the record name in the Zone (any type: a CNAME stands alone), the first by key."""
        zone_key = (str(_meta(zone).get("namespace")), str(_meta(zone)["name"]))
        for record in sorted(lookup.naming(_bare(hostname)), key=shapes.key):
            meta = _meta(record)
            if is_ours(record, tunnel.key) or meta.get("deletionTimestamp"):
                continue
            zone_ref = raw.mapping(_spec(record).get("zoneRef"))
            # A record may name another namespace's Zone.
            if (str(zone_ref.get("namespace") or meta.get("namespace")), str(zone_ref.get("name"))) == zone_key:
                return record
        return None

    plans = []
    for hostname in hostnames:
        zone = zone_of(hostname.hostname, index, tunnel, accounts) if hostname.dns else None
        if zone is None:
            plans.append(RecordPlan(hostname.hostname, hostname.routes, None))
            continue
        namespace, name = str(_meta(zone).get("namespace")), record_object_name(hostname.hostname)
        existing = lookup.at(namespace, name)
        holder = None if existing is not None and is_ours(existing, tunnel.key) else existing
        if existing is None:
            holder = holder_of(zone, hostname.hostname)
        if holder is not None:
            where = str(_meta(holder).get("namespace") or namespace)
            # Named to the routes' namespace only when it is theirs (the routes of one hostname share a namespace).
            mine = any(route[1] == where for route in hostname.routes)
            taken = f"{where}/{_meta(holder)['name']}" if mine else "in another namespace"
            plans.append(RecordPlan(hostname.hostname, hostname.routes, zone, name, taken_by=taken))
        elif tunnel.cname is not None:
            body = record_body(hostname, zone, tunnel, name)
            plans.append(RecordPlan(hostname.hostname, hostname.routes, zone, name, body=body))
        else:
            plans.append(RecordPlan(hostname.hostname, hostname.routes, zone, name))
    return plans


def record_changes(current: Mapping[str, object], wanted: Mapping[str, JsonValue]) -> dict[str, JsonValue] | None:
    """The merge patch that makes a DNSRecord of the class what it should be; None when it is."""
    patch: dict[str, JsonValue] = {}
    metadata: dict[str, JsonValue] = {}
    meta, want_meta = _meta(current), _object(wanted["metadata"])
    for part in ("labels", "annotations"):
        have = raw.mapping(meta.get(part))
        diff: dict[str, JsonValue] = {k: v for k, v in _object(want_meta[part]).items() if have.get(k) != v}
        if diff:
            metadata[part] = diff
    if metadata:
        patch["metadata"] = metadata
    spec = _spec(current)
    spec_diff: dict[str, JsonValue] = {k: v for k, v in _object(wanted["spec"]).items() if spec.get(k) != v}
    if spec_diff:
        patch["spec"] = spec_diff
    return patch or None


# ---- what a reconcile reads ---------------------------------------------------------------------------------------


def class_tunnel(cls: Mapping[str, object], classes: Classes) -> TunnelKey | None:
    """The Tunnel a GatewayClass of this controller publishes through, if it names one."""
    return classes.tunnel(cls)


def gateway_tunnels(
    classes: Iterable[Mapping[str, object]], gateways: Iterable[Mapping[str, object]], served: Classes
) -> dict[TunnelKey, TunnelKey]:
    """(namespace, name) of each Gateway -> the Tunnel its class publishes through."""
    of_class = {str(_meta(c).get("name")): class_tunnel(c, served) for c in classes}
    out = {}
    for gateway in gateways:
        tunnel = of_class.get(str(_spec(gateway).get("gatewayClassName") or ""))
        if tunnel is not None:
            out[(str(_meta(gateway).get("namespace") or ""), str(_meta(gateway).get("name")))] = tunnel
    return out


@dataclass(frozen=True)
class TunnelView:
    """One tunnel as the class publishes through it."""

    target: TunnelTarget | None
    """None while the Tunnel resource does not exist."""
    conflict: str | None
    """The TunnelConfiguration that configures the tunnel (`namespace/name`): the class writes nothing."""
    hostnames: list[Hostname]
    plans: list[RecordPlan]


def tunnel_view(
    key: TunnelKey,
    hostnames: Iterable[Hostname],
    tunnel: Mapping[str, object] | None,
    configurations: Iterable[Mapping[str, object]],
    zones: Iterable[Mapping[str, object]] | ZoneLookup,
    records: Iterable[Mapping[str, object]] | RecordLookup,
    accounts: AccountLookup,
) -> TunnelView:
    mine = [h for h in hostnames if h.tunnel == key]
    if tunnel is None:
        return TunnelView(None, None, mine, [])
    target = tunnel_target(key, tunnel, accounts)
    plans = plan_records(target, mine, zones, records, accounts)
    return TunnelView(target, configured_by(key, configurations), mine, plans)


# The conditions and reasons of `publish_status`, named here with the rest of the Cloudflare side.
__all__ = [
    "ALREADY_EXISTS",
    "CERTIFICATE_CONDITION",
    "CONFIGURATION_REFUSED",
    "COVERED",
    "DISABLED",
    "DNS_CONDITION",
    "PENDING",
    "PUBLISHED",
    "TOO_DEEP",
    "TUNNEL_ALREADY_CONFIGURED",
    "ZONE_NOT_MANAGED",
    "certificate_condition",
    "conflict_message",
    "dns_condition",
    "dns_disabled_condition",
]
