"""The IR to Envoy's resources: JSON only, nothing decided (every status is the Gateway API stage's)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pydantic import JsonValue

from reconcilers.gateway import envoy
from reconcilers.gateway.envoy import EnvoyJSON
from reconcilers.gateway.ir import PlaneIR
from reconcilers.gateway.ir.routes import Forward, RouteIR
from reconcilers.gateway.xds import https_listeners
from reconcilers.gateway.xds.routes import route_entry


class Entries:
    """Each route's entry, made once: a route served on several hostnames (or planes) is one entry, shared by them,
    and a route the Gateway API stage kept from the previous translation (its build remembered) keeps its entry, so
    that a change to one route of a thousand makes one entry."""

    def __init__(self, previous: Entries | None = None) -> None:
        self._made: dict[int, tuple[RouteIR, EnvoyJSON]] = {}
        """By the route's identity, the route kept beside its entry so that the identity stays its own."""
        self._previous = previous._made if previous is not None else {}

    def entry(self, route: RouteIR) -> EnvoyJSON:
        found = self._made.get(id(route))
        if found is None:
            found = self._previous.get(id(route))
            if found is None or found[0] is not route:
                found = (route, route_entry(route))
            self._made[id(route)] = found
        return found[1]


_previous: Entries | None = None
"""The last translation's entries (the routes it served, no more)."""


def route_configuration(
    vhosts: Mapping[str, Sequence[RouteIR]], entries: Entries | None = None, server_names: Sequence[str | None] = ()
) -> EnvoyJSON:
    """The route configuration of a plane's virtual hosts; `server_names`, those of its TLS listener's chains, whose
    requests for another chain's hostnames are misdirected (`https_listeners.misdirected`)."""
    made = Entries() if entries is None else entries
    names = sorted(vhosts, key=lambda h: (h == "*", h))
    if server_names and "*" not in vhosts:
        names.append("*")  # a named chain's request for a hostname no route has is misdirected too
    virtual_hosts: list[JsonValue] = [
        {
            "name": hostname,
            "domains": [hostname],
            "routes": [
                *https_listeners.misdirected(hostname, server_names),
                *(made.entry(route) for route in sorted(vhosts.get(hostname, ()), key=lambda item: item.precedence)),
            ],
        }
        for hostname in names
    ]
    return {
        "@type": envoy.ROUTE_CONFIGURATION,
        "name": envoy.INGRESS,
        "virtual_hosts": virtual_hosts,
        # The Host header keeps its port on the way to the backend; only matching ignores it.
        "ignore_port_in_host_matching": True,
        # Envoy adds the peer's address for an external request; the peer is cloudflared on loopback, which says
        # nothing, and backends must see no x-envoy-* header at all.
        "request_headers_to_remove": ["x-envoy-external-address", envoy.SERVER_NAME_HEADER],
    }


def resources(plane: PlaneIR, entries: Entries | None = None) -> dict[str, list[EnvoyJSON]]:
    """A plane's resources by xDS type key (`envoy.TYPES`), the listeners excepted (they come from settings)."""
    configuration = route_configuration(plane.virtual_hosts, entries, plane.server_names)
    if not plane.own:
        return {"routes": [configuration], "clusters": list(plane.clusters), "endpoints": list(plane.endpoints)}
    used = _cluster_names(route for routes in plane.virtual_hosts.values() for route in routes)
    return {
        "routes": [configuration],
        "clusters": [c for c in plane.clusters if c["name"] in used],
        "endpoints": [e for e in plane.endpoints if e["cluster_name"] in used],
    }


def planes(planes: Mapping[str, PlaneIR]) -> dict[str, dict[str, list[EnvoyJSON]]]:
    """Every plane's resources, by plane as the IR names them."""
    global _previous
    entries = Entries(_previous)
    out = {name: resources(plane, entries) for name, plane in planes.items()}
    _previous = entries
    return out


def _cluster_names(routes: Iterable[RouteIR]) -> set[str]:
    """Every cluster the routes name (a route's, a weighted split's, a mirror's)."""
    out: set[str] = set()
    for route in routes:
        if isinstance(route.action, Forward):
            out.update(b.cluster for b in route.action.backends)
            out.update(m.cluster for m in route.action.mirrors)
    return out


__all__ = ["planes", "resources", "route_configuration"]
