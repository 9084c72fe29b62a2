"""Backends: a route's backendRefs resolved to Envoy clusters, from Services, their ports and EndpointSlices, the
ReferenceGrants that let a route reach into another namespace, and the BackendTLSPolicies that make Envoy speak TLS
to a backend."""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from reconcilers.gateway import envoy, shapes
from reconcilers.gateway.policies import BackendTLS, UpstreamTLS, backend_services
from reconcilers.gateway.shapes import (
    JSON,
    BackendObjectReference,
    EndpointSlice,
    ObjectKey,
    ReferenceGrant,
    Route,
    Service,
    ServiceSpec,
)

H2C = "kubernetes.io/h2c"
UNRESOLVED = "kflare-unresolved"
"""The cluster with no endpoints an unresolved backend's share of a weighted split goes to (Envoy answers 503)."""


@dataclass
class Backend:
    cluster: str | None
    weight: int
    problem: tuple[str, str] | None = None
    """(reason, message) when it does not resolve."""


@dataclass
class Resolver:
    """Resolves backendRefs, and collects the clusters (and their endpoints) the resolved ones need."""

    services: list[Service]
    slices: list[EndpointSlice]
    grants: list[ReferenceGrant]
    tls: BackendTLS = field(default_factory=BackendTLS)
    clusters: dict[str, JSON] = field(default_factory=dict)
    assignments: dict[str, JSON] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._services = {shapes.key(s): s for s in self.services}
        self._slices: dict[ObjectKey, list[EndpointSlice]] = defaultdict(list)
        for item in self.slices:
            service = shapes.labels(item).get("kubernetes.io/service-name")
            if service:
                self._slices[(shapes.ns(item), service)].append(item)

    def backend(self, kind: str, route_ns: str, ref: BackendObjectReference, weight: int, *, http2: bool) -> Backend:
        group, ref_kind, name = ref.get("group", ""), ref.get("kind", "Service"), ref["name"]
        if group != "" or ref_kind != "Service":
            return Backend(
                None, weight, ("InvalidKind", f"backendRef {ref_kind}.{group or 'core'} {name}: only Services")
            )
        namespace = ref.get("namespace") or route_ns
        if namespace != route_ns and not shapes.reference_granted(
            self.grants, kind, route_ns, "Service", namespace, name
        ):
            return Backend(
                None, weight, ("RefNotPermitted", f"Service {namespace}/{name}: no ReferenceGrant lets {route_ns} in")
            )
        service = self._services.get((namespace, name))
        if service is None:
            return Backend(None, weight, ("BackendNotFound", f"Service {namespace}/{name} not found"))
        port = ref.get("port")
        if port is None:
            return Backend(None, weight, ("BackendNotFound", f"backendRef to Service {namespace}/{name} has no port"))
        spec = service.get("spec", {})
        if spec.get("type") == "ExternalName":
            return self._external(namespace, name, spec, port, weight, http2=http2)
        ports = [p for p in spec.get("ports", []) if p["port"] == port]
        if not ports:
            return Backend(None, weight, ("BackendNotFound", f"Service {namespace}/{name} has no port {port}"))
        service_port = ports[0]
        h2 = http2 or service_port.get("appProtocol") == H2C
        applied = self.tls.applied(namespace, name, service_port.get("name"))
        if applied is not None and applied.policy.tls is None:
            # The policy's own status says why; its traffic gets a 5xx, never plaintext.
            return Backend(None, weight)
        tls = applied.policy.tls if applied is not None else None
        cluster = f"{namespace}/{name}:{port}" + _protocol_suffix(tls, h2)
        if cluster not in self.clusters:
            self.clusters[cluster] = _secured(envoy.eds_cluster(cluster, http2=h2), tls, h2)
            self.assignments[cluster] = envoy.load_assignment(
                cluster, self._addresses(namespace, name, service_port.get("name"))
            )
        return Backend(cluster, weight)

    def _port_name(self, namespace: str, name: str, port: int | None) -> str | None:
        service = self._services.get((namespace, name))
        if service is None:
            return None
        listed = [p for p in service.get("spec", {}).get("ports", []) if p["port"] == port]
        return listed[0].get("name") if listed else None

    def policies_used(self, route: Route) -> set[tuple[str, str]]:
        """The BackendTLSPolicies that decide (or contend to decide) the TLS of a backend `route` sends to."""
        out: set[tuple[str, str]] = set()
        for namespace, name, port in backend_services(route):
            applied = self.tls.applied(namespace, name, self._port_name(namespace, name, port))
            if applied is not None:
                out.update(c.key for c in applied.contenders)
        return out

    def _external(
        self, namespace: str, name: str, spec: ServiceSpec, port: int, weight: int, *, http2: bool
    ) -> Backend:
        """An ExternalName Service: the name it gives, resolved by Envoy (there are no endpoints to watch), on the
        backendRef's port (the ports of such a Service are only documentation)."""
        host = spec.get("externalName", "")
        if not host:
            return Backend(None, weight, ("BackendNotFound", f"ExternalName Service {namespace}/{name} has no name"))
        listed = {p.get("appProtocol") for p in spec.get("ports", []) if p["port"] == port}
        h2 = http2 or H2C in listed
        applied = self.tls.applied(namespace, name, self._port_name(namespace, name, port))
        if applied is not None and applied.policy.tls is None:
            return Backend(None, weight)
        tls = applied.policy.tls if applied is not None else None
        cluster = f"{namespace}/{name}:{port}/dns" + _protocol_suffix(tls, h2)
        if cluster not in self.clusters:
            self.clusters[cluster] = _secured(envoy.dns_cluster(cluster, host, port, http2=h2), tls, h2)
        return Backend(cluster, weight)

    def _addresses(self, namespace: str, service: str, port_name: str | None) -> list[tuple[str, int]]:
        """Ready endpoints of every slice of the Service, FQDN-type slices included when they hold IP literals
        (how loopback backends are written where the API server refuses loopback in IP slices)."""
        out: set[tuple[str, int]] = set()
        for item in self._slices.get((namespace, service), []):
            # The API server writes a slice without ports or endpoints (a Service before its pods) as null lists.
            ports = [p for p in item.get("ports") or [] if (p.get("name") or None) == (port_name or None)]
            if not ports or ports[0].get("port") is None:
                continue
            target = ports[0]["port"]
            for endpoint in item.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready") is False:
                    continue
                for address in endpoint["addresses"]:
                    try:
                        ipaddress.ip_address(address)
                    except ValueError:
                        continue  # a DNS name in an FQDN slice: EDS takes addresses only
                    out.add((address, target))
        return sorted(out)

    def resources(self, names_used: Iterable[str]) -> tuple[list[JSON], list[JSON]]:
        """The clusters and load assignments of every backend resolved, and the unresolved cluster when a weighted
        split names it."""
        clusters, assignments = dict(self.clusters), dict(self.assignments)
        if UNRESOLVED in names_used:
            clusters[UNRESOLVED] = envoy.eds_cluster(UNRESOLVED, http2=False)
            assignments[UNRESOLVED] = envoy.load_assignment(UNRESOLVED, [])
        return [clusters[n] for n in sorted(clusters)], [assignments[n] for n in sorted(assignments)]


def _protocol_suffix(tls: UpstreamTLS | None, h2: bool) -> str:
    if tls is None:
        return "/h2c" if h2 else ""
    return tls.suffix + ("/h2" if h2 else "")


def _secured(cluster: JSON, tls: UpstreamTLS | None, h2: bool) -> JSON:
    if tls is not None:
        cluster["transport_socket"] = tls.transport_socket(http2=h2)
    return cluster
