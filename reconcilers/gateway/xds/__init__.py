"""The IR to Envoy's resources: JSON only, nothing decided (every status is the Gateway API stage's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconcilers.gateway import envoy
from reconcilers.gateway.ir import EnvoyRoute, PlaneIR
from reconcilers.gateway.shapes import JSON


def route_configuration(vhosts: Mapping[str, Sequence[EnvoyRoute]]) -> JSON:
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


def resources(plane: PlaneIR) -> dict[str, list[JSON]]:
    """A plane's resources by xDS type key (`envoy.TYPES`), the listeners excepted (they come from settings)."""
    configuration = route_configuration(plane.virtual_hosts)
    if not plane.own:
        return {"routes": [configuration], "clusters": list(plane.clusters), "endpoints": list(plane.endpoints)}
    used = _cluster_names(configuration)
    return {
        "routes": [configuration],
        "clusters": [c for c in plane.clusters if c["name"] in used],
        "endpoints": [e for e in plane.endpoints if e["cluster_name"] in used],
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


__all__ = ["resources", "route_configuration"]
