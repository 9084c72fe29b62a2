"""A route's build (its routes in the IR, the backends they resolved, the policies deciding their TLS), remembered per
route version and resolver revision: the incremental rebuild, a change to one route of a thousand building that one."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from reconcilers.gateway import shapes
from reconcilers.gateway.gatewayapi.backends import SHARED, UNRESOLVED, Backend, BackendContext, Resolver
from reconcilers.gateway.gatewayapi.route_matches import Unsupported
from reconcilers.gateway.gatewayapi.route_shapes import BackendObjectReference, Route
from reconcilers.gateway.gatewayapi.rules import BuiltRoute, build_route
from reconcilers.gateway.gatewayapi.world import World
from reconcilers.gateway.ir.routes import Forward, RouteIR
from reconcilers.gateway.planes import Plane
from reconcilers.gateway.shapes import ObjectKey


def follows_external_names(world: World, gateway: ObjectKey) -> bool:
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
    context: BackendContext
    """What the Gateways this build serves resolve backends with."""
    calls: list[tuple[tuple[str, str, BackendObjectReference, int, bool], str | None]] = field(default_factory=list)

    def backend(self, kind: str, route_ns: str, ref: BackendObjectReference, weight: int, *, http2: bool) -> Backend:
        found = self.resolver.backend(kind, route_ns, ref, weight, http2=http2, context=self.context)
        self.calls.append(((kind, route_ns, ref, weight, http2), found.cluster))
        return found


@dataclass
class Build:
    """A route's build against one revision of what it resolves against."""

    version: str
    revision: Hashable | None
    unsupported: str | None
    """Why the route is refused whole, if it is."""
    result: BuiltRoute
    resolutions: list[tuple[tuple[str, str, BackendObjectReference, int, bool], str | None]]
    """The backends it resolved, and the cluster each resolved to."""
    policies: set[ObjectKey]
    """The BackendTLSPolicies that decide (or contend to decide) the TLS of its backends."""
    unresolved: bool
    """Whether a weighted split of its sends a share to the unresolved cluster."""
    context: BackendContext = SHARED
    """What it was built for: whether ExternalName Services are followed, the client certificate presented."""

    def replay(self, resolver: Resolver) -> None:
        """Register the build's clusters with this translation's resolver: the clusters' endpoints are not part of
        the build, so a cluster new to the resolver is resolved again (and gets the Services' current endpoints)."""
        for (kind, route_ns, ref, weight, http2), cluster in self.resolutions:
            if cluster is not None and cluster not in resolver.clusters:
                resolver.backend(kind, route_ns, ref, weight, http2=http2, context=self.context)


_built: dict[tuple[str, str, str, BackendContext], Build] = {}
"""(kind, namespace, name, the Gateway's backend context) -> the route's last build: a route's
routes are a function of the route and of the Services, ReferenceGrants and BackendTLSPolicies it resolves against,
so a change to one route of a thousand builds that one (the endpoints are not part of it: the replay registers the
Services' current ones)."""


def built_route(
    kind: str, route: Route, resolver: Resolver, revision: Hashable | None, *, context: BackendContext = SHARED
) -> Build:
    """The route's build, done once per route version, resolver revision and backend context."""
    version = str(route["metadata"].get("resourceVersion") or "")
    key = (kind, shapes.ns(route), shapes.name(route), context)
    found = _built.get(key) if revision is not None and version else None
    if found is not None and found.version == version and found.revision == revision:
        found.replay(resolver)
        return found
    recording = _Recording(resolver, context)
    unsupported: str | None = None
    try:
        result = build_route(kind, route, recording)
    except Unsupported as exc:
        unsupported, result = str(exc), BuiltRoute()
    unresolved = UNRESOLVED in weighted_in(result.routes)
    build = Build(
        version,
        revision,
        unsupported,
        result,
        recording.calls,
        resolver.policies_used(route),
        unresolved,
        context,
    )
    if revision is not None and version:
        _built[key] = build
    return build


def forget_built(present: set[tuple[str, str, str]]) -> None:
    """Drop the builds of routes that are gone (checked when there are many more builds than routes)."""
    if len(_built) > 2 * len(present) + 100:
        for key in [k for k in _built if k[:3] not in present]:
            del _built[key]


def weighted_in(routes: Iterable[RouteIR]) -> set[str]:
    """The clusters the routes forward to (a backend that does not resolve is the unresolved cluster's share)."""
    return {b.cluster for r in routes if isinstance(r.action, Forward) for b in r.action.backends}
