"""Routes attached to listeners: which listeners admit a route (allowedRoutes, sectionName, port), the hostnames it
serves through each (the intersection with the listener's, listener isolation, the namespace's right to publish
them) and who owns a hostname several routes claim. Each refusal is the route's Accepted condition."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reconcilers.gateway import shapes
from reconcilers.gateway.gatewayapi.listener_sets import ServedListenerSet
from reconcilers.gateway.gatewayapi.route_shapes import Route
from reconcilers.gateway.gatewayapi.status import ServedGateway, ServedListener
from reconcilers.gateway.gatewayapi.world import World
from reconcilers.gateway.owners import Owners
from reconcilers.gateway.shapes import Condition, ObjectKey, ParentReference, RouteKey, condition

if TYPE_CHECKING:
    from reconcilers.gateway.gatewayapi.builds import Build


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


NOT_ALLOWED = "NotAllowedByListeners"
"""Accepted=False of a route the Gateway does not admit: its listeners' allowedRoutes, or a namespace that may not
publish any of its hostnames (`owners`): Gateway API's reason for a route the Gateway's policy does not let attach."""


@dataclass
class Attachment:
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
    claimed_by: dict[str, str] = field(default_factory=dict)
    """The namespace each hostname served is claimed for, when not the route's (`claimant`)."""
    accepted: bool = True
    key: RouteKey = field(init=False)
    build: Build = field(init=False)
    """The route's build its Gateway serves (`routes.attachments_of` sets it: it depends on what the Gateway allows)."""

    def __post_init__(self) -> None:
        self.key = (self.kind, *shapes.key(self.route))

    def claimant(self, hostname: str) -> str:
        """The namespace whose right to `hostname` this attachment serves it by: the route's, or the listener
        owner's for a listener's name the route inherits."""
        return self.claimed_by.get(hostname) or shapes.ns(self.route)

    def refuse(self, reason: str, message: str) -> Attachment:
        self.accepted = False
        self.conditions = [condition("Accepted", False, reason, message, shapes.generation(self.route))]
        return self


def attach(
    attachment: Attachment,
    gateway: ServedGateway,
    labels_of: Mapping[str, Mapping[str, str]],
    world: World,
    owners: Owners,
    listener_set: ServedListenerSet | None = None,
) -> Attachment:
    """The route attached to `gateway`'s own listeners, or to those of `listener_set` when its parentRef names it."""
    parent = attachment.parent
    if not gateway.usable:
        return attachment.refuse("Pending", f"Gateway {attachment.gateway[0]}/{attachment.gateway[1]} is not accepted")
    if listener_set is not None and listener_set.refused:
        key = shapes.key(listener_set.listener_set)
        return attachment.refuse(NOT_ALLOWED, f"ListenerSet {key[0]}/{key[1]} is not accepted by its Gateway")
    listeners = gateway.attachable_listeners if listener_set is None else listener_set.attachable_listeners
    candidates = [
        listener
        for listener in listeners
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
        claimant = namespace
        if declared:
            found = [h for h in (hostname_matches(listener.hostname, d) for d in declared) if h]
        else:
            found = [listener.hostname or "*"]
            if listener.hostname is not None:
                # The listener's own name, which the route only inherits: the listener's owner (its Gateway's or
                # ListenerSet's namespace) chose it and which namespaces' routes may take it (allowedRoutes), so
                # it is that namespace's to publish, and its routes share it whatever their namespaces.
                claimant = shapes.ns(listener.owner)
        found = [h for h in found if not _owned_elsewhere(h, listener, gateway.valid_listeners)]
        # Ownership: a hostname the namespace may not publish is dropped, the others served.
        mine = []
        for hostname in found:
            refusal = owners.refusal(claimant, hostname)
            if refusal is None:
                mine.append(hostname)
                attachment.claimed_by[hostname] = claimant
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
            return attachment.refuse(NOT_ALLOWED, not_served(attachment.dropped))
        return attachment.refuse("NoMatchingListenerHostname", "no route hostname intersects a listener hostname")
    attachment.hostnames = sorted(hostnames)
    return attachment


def not_served(dropped: Mapping[str, str]) -> str:
    return "hostnames not served: " + "; ".join(dropped[h] for h in sorted(dropped))


def _more_specific(a: str | None, b: str | None) -> bool:
    """Whether listener hostname `a` is narrower than `b` (no hostname is the widest, then wildcards)."""
    if a is None or a == b:
        return False
    return b is None or (b.startswith("*.") and a.endswith(b[1:]))


def _owned_elsewhere(hostname: str, listener: ServedListener, listeners: list[ServedListener]) -> bool:
    """Listener isolation: `hostname` falls within a narrower listener of the same Gateway on the same port, whose
    routes alone may answer it (a route of a wildcard or hostname-less listener never does). Listeners of other ports
    do not isolate: an HTTP listener without hostname still serves a name an HTTPS listener narrows (the redirect
    from http to https), as requests on one port never reach the other's listener."""
    return any(
        _more_specific(other.hostname, listener.hostname) and hostname_matches(other.hostname, hostname) == hostname
        for other in listeners
        if other is not listener and other.hostname is not None and _same_port(other, listener)
    )


def _same_port(a: ServedListener, b: ServedListener) -> bool:
    return a.spec.get("port") == b.spec.get("port")


def isolating_hosts(gateways: Mapping[ObjectKey, ServedGateway]) -> set[str]:
    """Hostnames of listeners narrower than another listener of their Gateway: each gets a virtual host even with
    no route, so that a request for it is answered 404 rather than by a wider listener's routes."""
    out: set[str] = set()
    for served in gateways.values():
        listeners = served.valid_listeners
        for listener in listeners:
            if listener.hostname and any(
                _more_specific(listener.hostname, o.hostname) and _same_port(listener, o) for o in listeners
            ):
                out.add(listener.hostname)
    return out


def settle_hostname_owners(attachments: list[Attachment], owners: Owners) -> None:
    """One namespace and one route kind own a hostname; routes of that namespace and kind share it (their rules
    merge). A route's claim is its namespace's, or the listener owner's for the listener's own name it inherits.
    Between namespaces the rules of `owners` decide (a managed zone's Zone, the suffix policy; the oldest route only
    where neither applies), between the kinds of one namespace the oldest route. Any other claimant drops the
    hostname; one left with no hostname is refused."""
    claimants: dict[str, list[Attachment]] = defaultdict(list)
    for attachment in attachments:
        if attachment.accepted:
            for hostname in attachment.hostnames:
                claimants[hostname].append(attachment)
    lost: dict[int, dict[str, str]] = defaultdict(dict)
    for hostname, found in claimants.items():
        if len(found) == 1:
            continue  # the one claimant owns it
        winner = min(
            found, key=lambda a: (owners.rank(a.claimant(hostname), hostname), shapes.age_key(a.route), a.kind)
        )
        owner = (winner.claimant(hostname), winner.kind)
        for attachment in found:
            if (attachment.claimant(hostname), attachment.kind) == owner:
                continue
            if attachment.claimant(hostname) == owner[0]:
                older = "/".join(shapes.key(winner.route))
                why = f"{hostname} is served by the older {winner.kind} {older}"
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
            attachment.refuse(NOT_ALLOWED if refused_by_policy else "HostnameConflict", not_served(attachment.dropped))
            attachment.conditions += others
