"""Gateway API objects in, Envoy resources and Gateway API statuses out: a pure function of what the caches hold.

The output also lists the hostnames the class publishes (and whether each carries gRPC), which is what the tunnel's
ingress document and the DNS records per hostname are computed from. The parts: `status` (the class and its
Gateways, and the ListenerSets on them), `rules` (a route's matches and filters), `backends` (Services and their
endpoints), `policies` (the BackendTLSPolicies of those Services); this module attaches routes to listeners, settles
who owns each hostname and assembles the route configuration.

A translation is remembered per cache revision (`World.revision`): the data plane's reconcile and every tunnel's
reconcile of one change share one translation.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from reconcilers.gateway import envoy, shapes
from reconcilers.gateway.backends import UNRESOLVED, Backend, Resolver
from reconcilers.gateway.kinds import CLASS_NAME, GATEWAY_GROUP, Classes
from reconcilers.gateway.owners import Owners
from reconcilers.gateway.planes import Choice, Plane, finalized
from reconcilers.gateway.policies import BackendTLS, ConfigMapLookup
from reconcilers.gateway.route_matches import Unsupported, regex_error
from reconcilers.gateway.route_shapes import Route
from reconcilers.gateway.rules import BuiltRoute, EnvoyRoute, build_route, for_scheme
from reconcilers.gateway.shapes import (
    JSON,
    BackendTLSPolicy,
    Condition,
    EndpointSlice,
    Gateway,
    GatewayClass,
    ListenerSet,
    Namespace,
    ObjectKey,
    ParentReference,
    PolicyAncestorStatus,
    ReferenceGrant,
    RouteKey,
    Secret,
    Service,
    condition,
)
from reconcilers.gateway.status import (
    GRPC_ROUTE,
    HTTP_ROUTE,
    LISTENER_SETS_UNSUPPORTED,
    Certificates,
    ClassStatus,
    GatewayStatus,
    ListenerSetStatus,
    ServedClass,
    ServedGateway,
    ServedListener,
    TunnelLookup,
    TunnelState,
    class_status,
    gateway_status,
    listener_set_status,
)


@dataclass
class World:
    """Everything the translation reads, as the caches hold it."""

    classes: list[GatewayClass] = field(default_factory=list)
    gateways: list[Gateway] = field(default_factory=list)
    http_routes: list[Route] = field(default_factory=list)
    grpc_routes: list[Route] = field(default_factory=list)
    grants: list[ReferenceGrant] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    slices: list[EndpointSlice] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    backend_tls_policies: list[BackendTLSPolicy] = field(default_factory=list)
    listener_sets: list[ListenerSet] = field(default_factory=list)
    tunnel: TunnelLookup = lambda namespace, name: None
    secret: Callable[[str, str], Secret | None] = lambda namespace, name: None
    """(namespace, name) -> the Secret, of those listeners' certificateRefs name (`certificate_refs`)."""
    config_map: ConfigMapLookup = lambda namespace, name: None
    """(namespace, name) -> the ConfigMap, of those BackendTLSPolicies name as CAs (`policies.config_map_refs`)."""
    installed_bundle: str | None = None
    installed_channel: str | None = None
    """The installed CRDs' channel (`standard`, `experimental`): what the class may claim depends on it."""
    tenancy_label: str | None = None
    """The class's per-namespace suffix policy (`--gateway-namespace-label`): outside the zones kflare Zones manage,
    a namespace publishes only hostnames under its label's value, and nothing without the label (`owners`)."""
    zones: list[JSON] = field(default_factory=list)
    """The kflare Zones: a hostname in a zone one manages is published only for the Zone's namespace and the
    namespaces it grants the name to (`owners`)."""
    allow_external_name_services: bool = False
    """Whether the routes of Gateways on the shared plane may send to ExternalName Services
    (`--gateway-allow-external-name-services`); a Gateway with a plane of its own follows its GatewayParameters'
    `allowExternalNameServices`."""
    planes: Mapping[ObjectKey, Choice] = field(default_factory=dict)
    """The Gateways that asked for a data plane of their own: the plane, or why they cannot have it
    (`planes.choose`)."""
    external_backends: list[JSON] | None = None
    """cloudflare-tunnel-gateway-controller's ExternalBackends, when the package's kinds are read (None: they are
    not, and a route naming one gets InvalidKind)."""
    ours: Classes = field(default_factory=Classes)
    """Which GatewayClasses are this controller's (by controllerName), and the Tunnel each names."""
    revision: Hashable | None = None
    resolver_revision: Hashable | None = None
    """What identifies the Services, ReferenceGrants, BackendTLSPolicies and CA ConfigMaps the routes resolve
    against (None: not known, no route's build is remembered)."""
    resolver_base: Hashable | None = None
    """The caches' part of it (the Services, ReferenceGrants and BackendTLSPolicies), which `tunnels.read_referenced`
    completes with the CA ConfigMaps' into `resolver_revision` once it has read them."""
    """What identifies this content of the caches (None: not known, never remembered)."""


@dataclass(frozen=True)
class Hostname:
    """A hostname the class publishes: the tunnel's ingress document gets a rule for it (an HTTP/2 origin when it
    carries gRPC) and the zone a proxied CNAME."""

    hostname: str
    grpc: bool
    tunnel: ObjectKey | None
    """(namespace, name) of the Tunnel of the class serving it; None for a class with no Tunnel."""
    routes: tuple[RouteKey, ...]
    dns: bool = True
    """Whether the class makes its DNS record: False when every Gateway serving it says
    `kflare.dev/dns-publishing: disabled`."""


DNS_PUBLISHING_ANNOTATION = "kflare.dev/dns-publishing"
"""On a Gateway: `disabled` keeps the class from making DNS records for its hostnames, which stay in the tunnel's
ingress document (their DNS is then the user's to point at the tunnel)."""


def publishes_dns(gateway: Mapping[str, Any]) -> bool:
    annotations = (gateway.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(DNS_PUBLISHING_ANNOTATION, "")).strip().lower() != "disabled"


class ParentStatus(TypedDict):
    parentRef: ParentReference
    controllerName: str
    conditions: list[Condition]


@dataclass
class Translation:
    resources: dict[str, list[JSON]]
    """Envoy resources by xDS type key (envoy.TYPES), the ingress listener excepted (it comes from settings): the
    shared data plane's."""
    class_status: dict[str, ClassStatus]
    gateway_status: dict[ObjectKey, GatewayStatus]
    route_parents: dict[RouteKey, list[ParentStatus]]
    """This controller's entries of each route's status.parents (others' entries are kept when writing)."""
    hostnames: list[Hostname]
    classes_in_use: set[str]
    policy_ancestors: dict[ObjectKey, list[PolicyAncestorStatus]] = field(default_factory=dict)
    """This controller's entries of each BackendTLSPolicy's status.ancestors (empty: no Gateway of the class uses
    it; others' entries are kept when writing)."""
    listener_set_status: dict[ObjectKey, ListenerSetStatus] = field(default_factory=dict)
    """The status of each ListenerSet whose parent is a Gateway of the class."""
    planes: dict[str, dict[str, list[JSON]]] = field(default_factory=dict)
    """The resources of each Gateway's own data plane, by its xDS cluster name (`Plane.cluster`)."""


def certificate_refs(world: World) -> set[ObjectKey]:
    """The Secrets the listeners of the class's Gateways name as certificates (what `World.secret` is asked)."""
    ours = {shapes.name(c) for c in world.classes if world.ours.ours(c)}
    out: set[ObjectKey] = set()
    for gateway in world.gateways:
        if gateway["spec"]["gatewayClassName"] not in ours:
            continue
        for listener in gateway["spec"].get("listeners", []):
            for ref in listener.get("tls", {}).get("certificateRefs", []):
                if ref.get("group", "") == "" and ref.get("kind", "Secret") == "Secret":
                    out.add((ref.get("namespace") or shapes.ns(gateway), ref["name"]))
    return out


def published_hostnames(world: World) -> list[Hostname]:
    """The hostnames the tunnel's ingress document and the DNS records are computed from."""
    return translate(world).hostnames


def hostname_matches(listener: str | None, route: str) -> str | None:
    """The intersection of a listener hostname and a route hostname (both may be wildcards), None when empty."""
    if listener is None or listener == route:
        return route
    if listener.startswith("*."):
        if route.startswith("*."):
            # The narrower wildcard wins: *.example.com and *.a.example.com intersect in *.a.example.com.
            if route.endswith(listener[1:]):
                return route
            if listener.endswith(route[1:]):
                return listener
            return None
        return route if route.endswith(listener[1:]) else None
    if route.startswith("*."):
        return listener if listener.endswith(route[1:]) else None
    return None


# ---- routes attached to listeners -----------------------------------------------------------------------------------

NOT_ALLOWED = "NotAllowedByListeners"
"""Accepted=False of a route the Gateway does not admit: its listeners' allowedRoutes, or a namespace that may not
publish any of its hostnames (`owners`): Gateway API's reason for a route the Gateway's policy does not let attach."""


@dataclass
class _Attachment:
    kind: str
    route: Route
    parent: ParentReference
    gateway: ObjectKey
    listeners: list[ServedListener] = field(default_factory=list)
    counted: list[ServedListener] = field(default_factory=list)
    """Listeners the route attaches to without being served there (see `ServedListener.attach_only`)."""
    hostnames: list[str] = field(default_factory=list)
    served: dict[str, list[str]] = field(default_factory=dict)
    """The hostnames served through each listener (by name) of `listeners`."""
    dropped: dict[str, str] = field(default_factory=dict)
    """Hostnames of the route not served, each with why: the namespace may not publish it (`owners`), or a route of
    another namespace (or of the other kind) owns it."""
    conditions: list[Condition] = field(default_factory=list)
    accepted: bool = True
    key: RouteKey = field(init=False)
    build: _Build = field(init=False)
    """The route's build its Gateway serves (`_routes` sets it: it depends on what the Gateway allows)."""

    def __post_init__(self) -> None:
        self.key = (self.kind, *shapes.key(self.route))

    def refuse(self, reason: str, message: str) -> _Attachment:
        self.accepted = False
        self.conditions = [condition("Accepted", False, reason, message, shapes.generation(self.route))]
        return self


def _attach(
    attachment: _Attachment,
    gateway: ServedGateway,
    labels_of: Mapping[str, Mapping[str, str]],
    world: World,
    owners: Owners,
) -> _Attachment:
    parent = attachment.parent
    if not gateway.usable:
        return attachment.refuse("Pending", f"Gateway {attachment.gateway[0]}/{attachment.gateway[1]} is not accepted")
    candidates = [
        listener
        for listener in gateway.attachable_listeners
        if parent.get("sectionName") in (None, listener.name) and parent.get("port") in (None, listener.spec["port"])
    ]
    if not candidates:
        return attachment.refuse("NoMatchingParent", "no served listener matches the parentRef's sectionName and port")
    namespace = shapes.ns(attachment.route)
    labels = labels_of.get(namespace, {})
    kind = attachment.kind
    allowed = [c for c in candidates if kind in c.kinds and c.allows_namespace(namespace, labels)]
    if not allowed:
        return attachment.refuse(NOT_ALLOWED, f"the listeners' allowedRoutes do not admit a {kind} from {namespace}")
    declared = attachment.route["spec"].get("hostnames", [])
    if world.tenancy_label and world.tenancy_label in labels and not declared:
        domain = labels[world.tenancy_label]
        return attachment.refuse(
            NOT_ALLOWED,
            f"namespace {namespace} is labelled {world.tenancy_label}={domain}: its routes must declare hostnames",
        )
    hostnames: set[str] = set()
    for listener in allowed:
        if declared:
            found = [h for h in (hostname_matches(listener.hostname, d) for d in declared) if h]
        else:
            found = [listener.hostname or "*"]
        found = [h for h in found if not _owned_elsewhere(h, listener, gateway.valid_listeners)]
        # Ownership: a hostname the namespace may not publish is dropped, the others served.
        mine = []
        for hostname in found:
            refusal = owners.refusal(namespace, hostname)
            if refusal is None:
                mine.append(hostname)
            else:
                attachment.dropped.setdefault(hostname, refusal)
        if mine and listener.attach_only:
            attachment.counted.append(listener)
        elif mine:
            attachment.listeners.append(listener)
            attachment.served[listener.name] = mine
            hostnames.update(mine)
    if not attachment.listeners and not attachment.counted:
        if attachment.dropped:
            return attachment.refuse(NOT_ALLOWED, _not_served(attachment.dropped))
        return attachment.refuse("NoMatchingListenerHostname", "no route hostname intersects a listener hostname")
    attachment.hostnames = sorted(hostnames)
    return attachment


def _not_served(dropped: Mapping[str, str]) -> str:
    return "hostnames not served: " + "; ".join(dropped[h] for h in sorted(dropped))


def _more_specific(a: str | None, b: str | None) -> bool:
    """Whether listener hostname `a` is narrower than `b` (no hostname is the widest, then wildcards)."""
    if a is None or a == b:
        return False
    return b is None or (b.startswith("*.") and a.endswith(b[1:]))


def _owned_elsewhere(hostname: str, listener: ServedListener, listeners: list[ServedListener]) -> bool:
    """Listener isolation: `hostname` falls within a narrower listener of the same Gateway, whose routes alone may
    answer it (a route of a wildcard or hostname-less listener never does)."""
    return any(
        _more_specific(other.hostname, listener.hostname) and hostname_matches(other.hostname, hostname) == hostname
        for other in listeners
        if other is not listener and other.hostname is not None
    )


def _isolating_hosts(gateways: Mapping[ObjectKey, ServedGateway]) -> set[str]:
    """Hostnames of listeners narrower than another listener of their Gateway: each gets a virtual host even with
    no route, so that a request for it is answered 404 rather than by a wider listener's routes."""
    out: set[str] = set()
    for served in gateways.values():
        listeners = served.valid_listeners
        for listener in listeners:
            if listener.hostname and any(_more_specific(listener.hostname, o.hostname) for o in listeners):
                out.add(listener.hostname)
    return out


def _settle_hostname_owners(attachments: list[_Attachment], owners: Owners) -> None:
    """One namespace and one route kind own a hostname; routes of that namespace and kind share it (their rules
    merge). Between namespaces the rules of `owners` decide (a managed zone's Zone, the suffix policy; the oldest route
    only where neither applies), between the kinds of one namespace the oldest route. Any other claimant drops the
    hostname; one left with no hostname is refused."""
    claimants: dict[str, list[_Attachment]] = defaultdict(list)
    for attachment in attachments:
        if attachment.accepted:
            for hostname in attachment.hostnames:
                claimants[hostname].append(attachment)
    lost: dict[int, dict[str, str]] = defaultdict(dict)
    for hostname, found in claimants.items():
        winner = min(found, key=lambda a: (owners.rank(shapes.ns(a.route), hostname), shapes.age_key(a.route), a.kind))
        owner = (shapes.ns(winner.route), winner.kind)
        for attachment in found:
            if (shapes.ns(attachment.route), attachment.kind) == owner:
                continue
            if shapes.ns(attachment.route) == owner[0]:
                why = f"{hostname} is served by the older {winner.kind} {owner[0]}/{shapes.name(winner.route)}"
            else:
                why = owners.conflict(hostname)
            lost[id(attachment)][hostname] = why
    for attachment in attachments:
        dropped = lost.get(id(attachment))
        if not dropped:
            continue
        attachment.dropped.update(dropped)
        attachment.hostnames = [h for h in attachment.hostnames if h not in dropped]
        for listener, served in list(attachment.served.items()):
            attachment.served[listener] = [h for h in served if h not in dropped]
        attachment.listeners = [x for x in attachment.listeners if attachment.served.get(x.name)]
        if not attachment.listeners and not attachment.counted:
            others = [c for c in attachment.conditions if c["type"] != "Accepted"]
            refused_by_policy = any(h not in dropped for h in attachment.dropped)
            attachment.refuse(NOT_ALLOWED if refused_by_policy else "HostnameConflict", _not_served(attachment.dropped))
            attachment.conditions += others


def _listener_set_parent(listener_set: ListenerSet) -> ObjectKey | None:
    """The Gateway a ListenerSet names as its parent; None for a parent of another kind."""
    ref = listener_set["spec"]["parentRef"]
    if ref.get("group", GATEWAY_GROUP) != GATEWAY_GROUP or ref.get("kind", "Gateway") != "Gateway":
        return None
    return (ref.get("namespace") or shapes.ns(listener_set), ref["name"])


def _routes(
    world: World,
    gateways: Mapping[ObjectKey, ServedGateway],
    resolver: Resolver,
    listener_sets: Mapping[ObjectKey, ObjectKey],
) -> list[_Attachment]:
    """Every route's attachments to Gateways of the class (accepted or refused), each with the build of its Envoy
    routes and the hostnames it serves (those its namespace owns); `listener_sets` maps each ListenerSet on a Gateway
    of the class to that Gateway."""
    labels_of = {shapes.name(n): shapes.labels(n) for n in world.namespaces}
    owners = Owners.of(world.zones, world.namespaces, world.tenancy_label)
    attachments: list[_Attachment] = []
    for kind, routes in ((HTTP_ROUTE, world.http_routes), (GRPC_ROUTE, world.grpc_routes)):
        for route in routes:
            ours: list[_Attachment] = []
            for parent in route["spec"].get("parentRefs", []):
                if parent.get("group", GATEWAY_GROUP) != GATEWAY_GROUP:
                    continue
                pkey = (parent.get("namespace") or shapes.ns(route), parent["name"])
                parent_kind = parent.get("kind", "Gateway")
                if parent_kind == "ListenerSet" and pkey in listener_sets:
                    message = f"parentRef ListenerSet {pkey[0]}/{pkey[1]}: {LISTENER_SETS_UNSUPPORTED}"
                    refused = _Attachment(kind, route, parent, listener_sets[pkey]).refuse("UnsupportedValue", message)
                    ours.append(refused)
                elif parent_kind == "Gateway" and pkey in gateways:
                    # Else not a Gateway of this class: another controller's business.
                    ours.append(
                        _attach(_Attachment(kind, route, parent, pkey), gateways[pkey], labels_of, world, owners)
                    )
            if not ours:
                continue
            observed = shapes.generation(route)
            # One build per answer to whether ExternalName Services are followed (the Gateways of one route may
            # differ: their own planes' GatewayParameters, the shared plane's setting), usually one.
            builds: dict[bool, _Build] = {}
            for attachment in ours:
                external_names = _follows_external_names(world, attachment.gateway)
                if external_names not in builds:
                    builds[external_names] = _built_route(
                        kind, route, resolver, world.resolver_revision, external_names=external_names
                    )
                attachment.build = build = builds[external_names]
                unsupported, result = build.unsupported, build.result
                if result.invalid and len(result.invalid) == result.rules:
                    unsupported = result.invalid[0]  # no rule left to serve: the route is refused
                if attachment.accepted and unsupported:
                    attachment.refuse("UnsupportedValue", unsupported)
                if result.problems:
                    reason, message = result.problems[0]
                    attachment.conditions.append(condition("ResolvedRefs", False, reason, message, observed))
                else:
                    attachment.conditions.append(condition("ResolvedRefs", True, "ResolvedRefs", "", observed))
                if result.invalid and not unsupported:
                    # The spec's PartiallyInvalid: the rules left out are named, the others are served.
                    message = "rules not served: " + "; ".join(result.invalid)
                    attachment.conditions.append(
                        condition("PartiallyInvalid", True, "UnsupportedValue", message, observed)
                    )
            attachments += ours
    _settle_hostname_owners([a for a in attachments if a.accepted], owners)
    _forget_built(
        {
            (kind, shapes.ns(r), shapes.name(r))
            for kind, rs in ((HTTP_ROUTE, world.http_routes), (GRPC_ROUTE, world.grpc_routes))
            for r in rs
        }
    )
    return attachments


def _follows_external_names(world: World, gateway: ObjectKey) -> bool:
    """Whether the routes of `gateway` may send to ExternalName Services: its own plane's GatewayParameters say
    (`allowExternalNameServices`), else (the shared plane, or a GatewayConfig's plane, which has no such field) the
    controller's setting."""
    choice = world.planes.get(gateway)
    if isinstance(choice, Plane) and choice.token is None:
        return choice.parameters.get("allowExternalNameServices") is True
    return world.allow_external_name_services


@dataclass
class _Recording:
    """A resolver that remembers the backends a route's build resolved (with the cluster each resolved to), so that a
    later build of the same route against the same Services can be replayed instead of done again."""

    resolver: Resolver
    external_names: bool
    """Whether the Gateways this build serves follow ExternalName Services."""
    calls: list[tuple[tuple[str, str, Any, int, bool], str | None]] = field(default_factory=list)

    def backend(self, kind: str, route_ns: str, ref: Any, weight: int, *, http2: bool) -> Backend:
        found = self.resolver.backend(kind, route_ns, ref, weight, http2=http2, external_names=self.external_names)
        self.calls.append(((kind, route_ns, ref, weight, http2), found.cluster))
        return found


@dataclass
class _Build:
    """A route's build against one revision of what it resolves against."""

    version: str
    revision: Hashable | None
    unsupported: str | None
    """Why the route is refused whole, if it is."""
    result: BuiltRoute
    resolutions: list[tuple[tuple[str, str, Any, int, bool], str | None]]
    """The backends it resolved, and the cluster each resolved to."""
    policies: set[ObjectKey]
    """The BackendTLSPolicies that decide (or contend to decide) the TLS of its backends."""
    unresolved: bool
    """Whether a weighted split of its sends a share to the unresolved cluster."""
    external_names: bool = False
    """Whether it was built following ExternalName Services."""

    def replay(self, resolver: Resolver) -> None:
        """Register the build's clusters with this translation's resolver: the clusters' endpoints are not part of
        the build, so a cluster new to the resolver is resolved again (and gets the Services' current endpoints)."""
        for (kind, route_ns, ref, weight, http2), cluster in self.resolutions:
            if cluster is not None and cluster not in resolver.clusters:
                resolver.backend(kind, route_ns, ref, weight, http2=http2, external_names=self.external_names)


_built: dict[tuple[str, str, str, bool], _Build] = {}
"""(kind, namespace, name, whether ExternalName Services are followed) -> the route's last build: a route's Envoy
routes are a function of the route and of the Services, ReferenceGrants and BackendTLSPolicies it resolves against,
so a change to one route of a thousand builds that one (the endpoints are not part of it: the replay registers the
Services' current ones)."""


def _built_route(
    kind: str, route: Route, resolver: Resolver, revision: Hashable | None, *, external_names: bool = False
) -> _Build:
    """The route's build, done once per route version, resolver revision and answer to whether ExternalName Services
    are followed."""
    version = str(route["metadata"].get("resourceVersion") or "")
    key = (kind, shapes.ns(route), shapes.name(route), external_names)
    found = _built.get(key) if revision is not None and version else None
    if found is not None and found.version == version and found.revision == revision:
        found.replay(resolver)
        return found
    recording = _Recording(resolver, external_names)
    unsupported: str | None = None
    try:
        result = build_route(kind, route, cast(Resolver, recording))
    except Unsupported as exc:
        unsupported, result = str(exc), BuiltRoute()
    unresolved = UNRESOLVED in _weighted_in(r.entry for r in result.routes)
    build = _Build(
        version,
        revision,
        unsupported,
        result,
        recording.calls,
        resolver.policies_used(route),
        unresolved,
        external_names,
    )
    if revision is not None and version:
        _built[key] = build
    return build


def _forget_built(present: set[tuple[str, str, str]]) -> None:
    """Drop the builds of routes that are gone (checked when there are many more builds than routes)."""
    if len(_built) > 2 * len(present) + 100:
        for key in [k for k in _built if k[:3] not in present]:
            del _built[key]


def _scheme(attachment: _Attachment, gateway: ServedGateway) -> str | None:
    """The visitor's scheme (`http`, `https`) an attachment serves, when its Gateway has both HTTP and HTTPS
    listeners and it attaches to listeners of one of them; None: either scheme."""
    if {listener.spec["protocol"] for listener in gateway.valid_listeners} != {"HTTP", "HTTPS"}:
        return None
    protocols = {listener.spec["protocol"] for listener in attachment.listeners}
    return protocols.pop().lower() if len(protocols) == 1 else None


# ---- assembly -------------------------------------------------------------------------------------------------------


def _route_configuration(vhosts: Mapping[str, list[EnvoyRoute]]) -> JSON:
    virtual_hosts = [
        {
            "name": hostname,
            "domains": [hostname],
            "routes": [route.entry for route in sorted(vhosts[hostname], key=lambda item: item.precedence)],
        }
        for hostname in sorted(vhosts, key=lambda h: (h == "*", h))
    ]
    return {
        "@type": envoy.ROUTE_CONFIGURATION,
        "name": envoy.INGRESS,
        "virtual_hosts": virtual_hosts,
        # The Host header keeps its port on the way to the backend; only matching ignores it.
        "ignore_port_in_host_matching": True,
        # Envoy adds the peer's address for an external request; the peer is cloudflared on loopback, which says
        # nothing, and backends must see no x-envoy-* header at all.
        "request_headers_to_remove": ["x-envoy-external-address"],
    }


def _weighted_names(configuration: JSON) -> set[str]:
    return _weighted_in(r for vh in configuration["virtual_hosts"] for r in vh["routes"])


def _weighted_in(entries: Iterable[JSON]) -> set[str]:
    """The clusters the routes' weighted splits name."""
    return {c["name"] for r in entries for c in r.get("route", {}).get("weighted_clusters", {}).get("clusters", [])}


_MEMO_SIZE = 4
_memo: dict[Hashable, Translation] = {}


def translate(world: World) -> Translation:
    """The translation of `world`, remembered per cache revision: the statuses are the caller's own copy (callers
    amend them), the rest is shared. The classes' statuses are the caller's world's own: they alone depend on the
    installed bundle, which only the class's reconcile reads, so the tunnels' reconcile shares the translation."""
    if world.revision is None:
        return _translate(world)
    memo_key = (world.revision, world.tenancy_label, world.ours, world.allow_external_name_services)
    found = _memo.get(memo_key)
    if found is None:
        found = _translate(world)
        # The data plane's reconcile and the tunnels' read the caches at the same revisions; older ones are not
        # asked for again.
        while len(_memo) >= _MEMO_SIZE:
            del _memo[next(iter(_memo))]
        _memo[memo_key] = found
    return dataclasses.replace(
        found,
        class_status=_class_statuses(world)[0],
        gateway_status=copy.deepcopy(found.gateway_status),
        route_parents=_parents_copy(found.route_parents),
        classes_in_use=set(found.classes_in_use),
        policy_ancestors=copy.deepcopy(found.policy_ancestors),
        listener_set_status=copy.deepcopy(found.listener_set_status),
    )


def _parents_copy(parents: dict[RouteKey, list[ParentStatus]]) -> dict[RouteKey, list[ParentStatus]]:
    """The routes' parent entries, each with a list of conditions of its own (callers add conditions to an entry and
    set a condition's fields, nothing else): a deep copy of a thousand routes' entries took longer than translating
    them."""
    return {
        key: [
            {
                "parentRef": e["parentRef"],
                "controllerName": e["controllerName"],
                "conditions": [cast(Condition, dict(c)) for c in e["conditions"]],
            }
            for e in entries
        ]
        for key, entries in parents.items()
    }


def _class_statuses(world: World) -> tuple[dict[str, ClassStatus], dict[str, ServedClass | None]]:
    """The status of each class of this controller, and what serving each takes (None: it is not accepted)."""
    status_of: dict[str, ClassStatus] = {}
    served: dict[str, ServedClass | None] = {}
    for cls in world.classes:
        if world.ours.ours(cls):
            status_of[shapes.name(cls)], served[shapes.name(cls)] = class_status(
                cls, world.tunnel, world.installed_bundle, world.installed_channel, world.ours
            )
    return status_of, served


def _translate(world: World) -> Translation:
    class_status_of, served_classes = _class_statuses(world)

    gateways: dict[ObjectKey, ServedGateway] = {}
    for gateway in world.gateways:
        class_name = gateway["spec"]["gatewayClassName"]
        if gateway["metadata"].get("deletionTimestamp") and finalized(gateway):
            continue  # its own plane is being taken down: nothing of it is served or published any more
        if class_name in served_classes:
            certificates = Certificates(world.secret, world.grants)
            served, choice = served_classes[class_name], world.planes.get(shapes.key(gateway))
            if isinstance(choice, Plane) and served is not None:
                served = ServedClass(_plane_tunnel(world, choice), choice.tunnel_key)
            gateways[shapes.key(gateway)] = gateway_status(
                gateway,
                class_name,
                served,
                certificates,
                plane=choice.cluster if isinstance(choice, Plane) else "",
                refusal=choice if isinstance(choice, str) else None,
            )

    listener_sets = {
        shapes.key(ls): gkey
        for ls in world.listener_sets
        if (gkey := _listener_set_parent(ls)) is not None and gkey in gateways
    }
    labels_of = {shapes.name(n): shapes.labels(n) for n in world.namespaces}
    listener_set_status_of = {
        shapes.key(ls): listener_set_status(ls, gateways[listener_sets[shapes.key(ls)]], labels_of)
        for ls in world.listener_sets
        if shapes.key(ls) in listener_sets
    }
    tls = BackendTLS(world.backend_tls_policies, world.config_map)
    resolver = Resolver(world.services, world.slices, world.grants, tls, world.external_backends)
    attachments = _routes(world, gateways, resolver, listener_sets)
    ancestors: dict[ObjectKey, set[ObjectKey]] = defaultdict(set)
    # Gateway API: a route's (and a policy's) entry carries the controllerName of its Gateway's class.
    controller_of_class = {shapes.name(c): world.ours.controller_of(c) for c in world.classes}
    controller_of = {
        gkey: controller_of_class.get(g.gateway["spec"]["gatewayClassName"], "") for gkey, g in gateways.items()
    }

    vhosts: dict[str, dict[str, list[EnvoyRoute]]] = defaultdict(lambda: defaultdict(list))
    published: dict[str, tuple[bool, ObjectKey | None, set[RouteKey], list[bool]]] = {}
    route_parents: dict[RouteKey, list[ParentStatus]] = {}
    unresolved = False
    """Whether the shared plane's routes send a share to the unresolved cluster (asked of the builds: a walk of a
    thousand routes' configuration took longer than the rest of a change)."""
    for attachment in attachments:
        rkey = attachment.key
        if attachment.accepted:
            # A route partly refused (hostnames its namespace may not publish, or that another's route owns) is
            # accepted for the others, and says which it is not served for.
            note = _not_served(attachment.dropped) if attachment.dropped else ""
            attachment.conditions.insert(
                0, condition("Accepted", True, "Accepted", note, shapes.generation(attachment.route))
            )
            for listener in attachment.listeners + attachment.counted:
                listener.attached += 1
            for policy in attachment.build.policies:
                ancestors[policy].add(attachment.gateway)
            parent = gateways[attachment.gateway]
            unresolved |= not parent.plane and attachment.build.unresolved
            scheme = _scheme(attachment, parent)
            envoy_routes = attachment.build.result.routes
            routes = envoy_routes if scheme is None else [for_scheme(r, scheme) for r in envoy_routes]
            plane_vhosts = vhosts[parent.plane]
            for hostname in attachment.hostnames:
                existing = {route.entry["name"] for route in plane_vhosts[hostname]}
                plane_vhosts[hostname] += [r for r in routes if r.entry["name"] not in existing]
                if hostname != "*":
                    entry = published.setdefault(
                        hostname, (attachment.kind == GRPC_ROUTE, parent.tunnel_key, set(), [False])
                    )
                    entry[2].add(rkey)
                    entry[3][0] = entry[3][0] or publishes_dns(parent.gateway)
        route_parents.setdefault(rkey, []).append(
            {
                "parentRef": attachment.parent,
                "controllerName": controller_of[attachment.gateway],
                "conditions": attachment.conditions,
            }
        )

    for plane in {"", *(g.plane for g in gateways.values() if g.usable)}:
        for hostname in _isolating_hosts({k: g for k, g in gateways.items() if g.plane == plane}):
            vhosts[plane].setdefault(hostname, [])
    configuration = _route_configuration(vhosts[""])
    clusters, endpoints = resolver.resources({UNRESOLVED} if unresolved else set())
    planes = {g.plane: _plane_resources(vhosts[g.plane], resolver) for g in gateways.values() if g.plane}
    return Translation(
        resources={"routes": [configuration], "clusters": clusters, "endpoints": endpoints},
        planes=planes,
        class_status=class_status_of,
        gateway_status={key: served.status() for key, served in gateways.items()},
        route_parents=route_parents,
        hostnames=[
            Hostname(name, grpc, tunnel, tuple(sorted(routes)), dns[0])
            for name, (grpc, tunnel, routes, dns) in sorted(published.items())
        ],
        classes_in_use={gateway["spec"]["gatewayClassName"] for gateway in (g.gateway for g in gateways.values())},
        policy_ancestors=tls.statuses(ancestors, controller_of),
        listener_set_status=listener_set_status_of,
    )


def _plane_tunnel(world: World, plane: Plane) -> TunnelState:
    found = world.tunnel(*plane.tunnel_key)
    if found is not None:
        return found
    if plane.token is not None:
        return TunnelState(
            False,
            f"the Tunnel {plane.namespace}/{plane.name} of the Gateway's own data plane is not made yet: it adopts the"
            f" tunnel of the connector token in Secret {plane.namespace}/{plane.token[0]} (the Gateway's"
            " TunnelNotAdopted events say what keeps it)",
        )
    return TunnelState(
        False, f"the Tunnel {plane.namespace}/{plane.name} of the Gateway's own data plane is being made"
    )


def _plane_resources(vhosts: Mapping[str, list[EnvoyRoute]], resolver: Resolver) -> dict[str, list[JSON]]:
    """A Gateway's own plane's resources: its routes, and of the clusters only those they name (a plane is not told
    of other Gateways' backends)."""
    configuration = _route_configuration(vhosts)
    clusters, endpoints = resolver.resources(_weighted_names(configuration))
    used = _cluster_names(configuration)
    return {
        "routes": [configuration],
        "clusters": [c for c in clusters if c["name"] in used],
        "endpoints": [e for e in endpoints if e["cluster_name"] in used],
    }


def _cluster_names(value: Any) -> set[str]:
    """Every cluster a route configuration names (a route's `cluster`, a weighted split's, a mirror's)."""
    out: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "cluster" and isinstance(item, str):
                out.add(item)
            elif key == "clusters" and isinstance(item, list):
                out.update(str(c.get("name")) for c in item if isinstance(c, dict))
            out |= _cluster_names(item)
    elif isinstance(value, list):
        for item in value:
            out |= _cluster_names(item)
    return out


__all__ = [
    "CLASS_NAME",
    "Hostname",
    "Translation",
    "TunnelState",
    "World",
    "hostname_matches",
    "published_hostnames",
    "regex_error",
    "translate",
]
