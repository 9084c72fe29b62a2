"""Backends: a route's backendRefs resolved to Envoy clusters, from Services, their ports and EndpointSlices, the
ReferenceGrants that let a route reach into another namespace, and the BackendTLSPolicies that make Envoy speak TLS
to a backend.

ExternalName Services are not followed unless the route's Gateway allows them (CVE-2021-25740; Gateway API says
implementations SHOULD NOT follow them): the name is the Service owner's to choose, so it could point at another
namespace's Service past ReferenceGrant, or at the data plane's own loopback or a cloud's metadata endpoint. Even
allowed, a name inside the cluster is held to the ReferenceGrants a route's own backendRef would need, and loopback,
link-local and unspecified addresses are refused."""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from reconcilers.gateway import envoy, raw, shapes
from reconcilers.gateway.envoy import EnvoyJSON
from reconcilers.gateway.gatewayapi.policies import (
    SYSTEM_CA_FILE,
    BackendTLS,
    ClientCertificate,
    UpstreamTLS,
    backend_services,
)
from reconcilers.gateway.gatewayapi.route_shapes import BackendObjectReference, Route
from reconcilers.gateway.kinds import PACKAGE_GROUP
from reconcilers.gateway.shapes import (
    EndpointSlice,
    ObjectKey,
    ReferenceGrant,
    Service,
    ServiceSpec,
)

H2C = "kubernetes.io/h2c"
EXTERNAL_BACKEND = "ExternalBackend"
TLS_PORT = 443
"""An ExternalName Service's port that is spoken to over TLS without a BackendTLSPolicy, as
cloudflare-tunnel-gateway-controller infers it: the name is the SNI and the certificate must be for it."""
UNRESOLVED = "kflare-unresolved"
"""The cluster with no endpoints an unresolved backend's share of a weighted split goes to (Envoy answers 503)."""
EXTERNAL_NAMES_REFUSED = (
    "ExternalName Services are not followed unless the GatewayParameters allow them (allowExternalNameServices; for"
    " the class's shared data plane, the controller's --gateway-allow-external-name-services)"
)
"""Why a route's ExternalName backend is refused where its Gateway does not follow them (`ResolvedRefs=False,
InvalidKind`: Gateway API's reason for a backend the implementation does not support)."""


@dataclass(frozen=True)
class BackendContext:
    """What a route's backends resolve differently for the Gateway it is attached to: whether ExternalName Services
    are followed (`follows_external_names`), and the certificate presented to backends spoken to over TLS."""

    external_names: bool = False
    client: ClientCertificate | None = None


SHARED = BackendContext()


@dataclass
class Backend:
    cluster: str | None
    weight: int
    problem: tuple[str, str] | None = None
    """(reason, message) when it does not resolve."""
    path: str | None = None
    """An ExternalBackend's base path, prepended to each request's path."""


class Backends(Protocol):
    """What a route's build asks of a resolver: a `Resolver`, or one that records what it resolved for a replay."""

    def backend(self, kind: str, route_ns: str, ref: BackendObjectReference, weight: int, *, http2: bool) -> Backend:
        """The backend `ref` of a `kind` route in `route_ns` names."""
        ...


@dataclass
class Resolver:
    """Resolves backendRefs, and collects the clusters (and their endpoints) the resolved ones need."""

    services: list[Service]
    slices: list[EndpointSlice]
    grants: list[ReferenceGrant]
    tls: BackendTLS = field(default_factory=BackendTLS)
    external_backends: Sequence[Mapping[str, object]] | None = None
    """cloudflare-tunnel-gateway-controller's ExternalBackends, when the class reads that package's kinds; None: it
    does not, and a backendRef naming one is refused like any kind but Service."""
    clusters: dict[str, EnvoyJSON] = field(default_factory=dict)
    assignments: dict[str, EnvoyJSON] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._services = {shapes.key(s): s for s in self.services}
        self._external_backends = {shapes.key(b): b for b in self.external_backends or []}
        self._slices: dict[ObjectKey, list[EndpointSlice]] = defaultdict(list)
        for item in self.slices:
            service = shapes.labels(item).get("kubernetes.io/service-name")
            if service:
                self._slices[(shapes.ns(item), service)].append(item)

    def backend(
        self,
        kind: str,
        route_ns: str,
        ref: BackendObjectReference,
        weight: int,
        *,
        http2: bool,
        context: BackendContext = SHARED,
    ) -> Backend:
        """The backend `ref` of a `kind` route in `route_ns` names, for a Gateway of that `context`."""
        group, ref_kind, name = ref.get("group", ""), ref.get("kind", "Service"), ref["name"]
        if group == PACKAGE_GROUP and ref_kind == EXTERNAL_BACKEND and self.external_backends is not None:
            return self._external_backend(kind, route_ns, ref, weight, http2=http2, client=context.client)
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
            if not context.external_names:
                return Backend(None, weight, ("InvalidKind", f"Service {namespace}/{name}: {EXTERNAL_NAMES_REFUSED}"))
            return self._external(
                kind, route_ns, namespace, name, spec, port, weight, http2=http2, client=context.client
            )
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
        cluster = f"{namespace}/{name}:{port}" + _protocol_suffix(tls, h2, context.client)
        if cluster not in self.clusters:
            self.clusters[cluster] = _secured(envoy.eds_cluster(cluster, http2=h2), tls, h2, context.client)
            self.assignments[cluster] = envoy.load_assignment(
                cluster, self._addresses(namespace, name, service_port.get("name"))
            )
        return Backend(cluster, weight)

    def _external_backend(
        self,
        kind: str,
        route_ns: str,
        ref: BackendObjectReference,
        weight: int,
        *,
        http2: bool,
        client: ClientCertificate | None,
    ) -> Backend:
        """An ExternalBackend: its scheme, host and port (the backendRef's port is not read), and its base path."""
        name = ref["name"]
        namespace = ref.get("namespace") or route_ns
        where = f"{EXTERNAL_BACKEND} {namespace}/{name}"
        if namespace != route_ns and not shapes.reference_granted(
            self.grants, kind, route_ns, EXTERNAL_BACKEND, namespace, name, PACKAGE_GROUP
        ):
            return Backend(None, weight, ("RefNotPermitted", f"{where}: no ReferenceGrant lets {route_ns} in"))
        found = self._external_backends.get((namespace, name))
        if found is None:
            return Backend(None, weight, ("BackendNotFound", f"{where} not found"))
        spec = raw.mapping(found.get("spec"))
        scheme, host, port = spec.get("scheme"), str(spec.get("host") or ""), spec.get("port")
        if scheme not in ("http", "https") or not host or not isinstance(port, int):
            return Backend(None, weight, ("BackendNotFound", f"{where} has no scheme, host and port"))
        refused = self._external_refusal(kind, route_ns, host)
        if refused is not None:
            return Backend(None, weight, (refused[0], f"{where}: {refused[1]}"))
        tls = implied_tls(host) if scheme == "https" else None
        presented = client.suffix if tls is not None and client is not None else ""
        cluster = f"{namespace}/{name}/external/{scheme}:{host}:{port}" + ("/h2" if http2 else "") + presented
        if cluster not in self.clusters:
            self.clusters[cluster] = _secured(
                envoy.dns_cluster(cluster, host.strip("[]"), port, http2=http2), tls, http2, client
            )
        path = spec.get("path")
        return Backend(cluster, weight, path=path if isinstance(path, str) and path else None)

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
        self,
        kind: str,
        route_ns: str,
        namespace: str,
        name: str,
        spec: ServiceSpec,
        port: int,
        weight: int,
        *,
        http2: bool,
        client: ClientCertificate | None,
    ) -> Backend:
        """An ExternalName Service the route's Gateway follows: the name it gives, resolved by Envoy (there are no
        endpoints to watch), on the backendRef's port (the ports of such a Service are only documentation)."""
        host = spec.get("externalName", "")
        if not host:
            return Backend(None, weight, ("BackendNotFound", f"ExternalName Service {namespace}/{name} has no name"))
        refused = self._external_refusal(kind, route_ns, host)
        if refused is not None:
            return Backend(None, weight, (refused[0], f"ExternalName Service {namespace}/{name}: {refused[1]}"))
        listed = {p.get("appProtocol") for p in spec.get("ports", []) if p["port"] == port}
        h2 = http2 or H2C in listed
        applied = self.tls.applied(namespace, name, self._port_name(namespace, name, port))
        if applied is not None and applied.policy.tls is None:
            return Backend(None, weight)
        tls = applied.policy.tls if applied is not None else None
        if tls is None and port == TLS_PORT:
            tls = implied_tls(host)
        cluster = f"{namespace}/{name}:{port}/dns" + _protocol_suffix(tls, h2, client)
        if cluster not in self.clusters:
            self.clusters[cluster] = _secured(envoy.dns_cluster(cluster, host, port, http2=h2), tls, h2, client)
        return Backend(cluster, weight)

    def _external_refusal(self, kind: str, route_ns: str, host: str) -> tuple[str, str] | None:
        """(reason, message) when the name an ExternalName Service gives must not be followed for a route in
        `route_ns`: an address of the data plane's own pod or host (loopback, unspecified), or link-local (a
        cloud's metadata endpoint); a name inside the cluster outside `route_ns` that no ReferenceGrant lets the
        route reach."""
        name = host.strip().rstrip(".").lower()
        address = _address(name)
        if address is not None:
            if address.is_loopback or address.is_link_local or address.is_unspecified:
                return "InvalidKind", f"{host} is a loopback, link-local or unspecified address, never followed"
            return None
        if name.rpartition(".")[2].isdigit():
            # No top-level domain is all digits: a numeric form of an address some resolvers read (127.1).
            return "InvalidKind", f"{host} is neither a host name nor an IP address"
        target = in_cluster(name)
        if target is None or target[0] == route_ns:
            return None
        target_ns, service = target
        if target_ns is not None and service is not None:
            if shapes.reference_granted(self.grants, kind, route_ns, "Service", target_ns, service):
                return None
            return "RefNotPermitted", f"{host} is Service {target_ns}/{service}: no ReferenceGrant lets {route_ns} in"
        return "RefNotPermitted", (
            f"{host} is a name inside the cluster outside namespace {route_ns}, and not of a Service a ReferenceGrant"
            " could let it reach"
        )

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

    def resources(self, names_used: Iterable[str]) -> tuple[list[EnvoyJSON], list[EnvoyJSON]]:
        """The clusters and load assignments of every backend resolved, and the unresolved cluster when a weighted
        split names it."""
        clusters, assignments = dict(self.clusters), dict(self.assignments)
        if UNRESOLVED in names_used:
            clusters[UNRESOLVED] = envoy.eds_cluster(UNRESOLVED, http2=False)
            assignments[UNRESOLVED] = envoy.load_assignment(UNRESOLVED, [])
        return [clusters[n] for n in sorted(clusters)], [assignments[n] for n in sorted(assignments)]


def implied_tls(host: str) -> UpstreamTLS:
    """TLS to an origin outside the cluster that no BackendTLSPolicy describes (an ExternalName Service on 443, an
    https ExternalBackend): the host as SNI, a certificate for it, from a CA of the system's trust store."""
    bare = host.strip().strip("[]").rstrip(".").lower()
    san = "IP_ADDRESS" if _address(bare) is not None else "DNS"
    return UpstreamTLS(("", "implied"), bare, None, SYSTEM_CA_FILE, ((san, bare),))


def _address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """`name` as an IP address (an IPv4-mapped IPv6 one as its IPv4 address), None when it is not one."""
    try:
        address = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def in_cluster(name: str) -> tuple[str | None, str | None] | None:
    """Whether the cluster's DNS answers `name` (lower case, no final dot), as (namespace, Service): a name with
    an `svc` label, the cluster domain's (`<service>.<namespace>.svc`, then any cluster domain, or none: kflare is
    not told the cluster's domain), or one in `cluster.local`; a part that cannot be told is None (a pod's name
    `<address>.<namespace>.pod.cluster.local` has no Service). None: a name outside the cluster."""
    labels = name.split(".")
    if "svc" in labels[1:]:
        at = len(labels) - 1 - labels[::-1].index("svc")
        return labels[at - 1], (labels[at - 2] if at >= 2 else None)
    if name == "cluster.local" or name.endswith(".cluster.local"):
        pod = len(labels) >= 5 and labels[-3] == "pod"
        return (labels[-4] if pod else None), None
    return None


def _protocol_suffix(tls: UpstreamTLS | None, h2: bool, client: ClientCertificate | None) -> str:
    if tls is None:
        return "/h2c" if h2 else ""
    return tls.suffix + ("/h2" if h2 else "") + (client.suffix if client is not None else "")


def _secured(cluster: EnvoyJSON, tls: UpstreamTLS | None, h2: bool, client: ClientCertificate | None) -> EnvoyJSON:
    if tls is not None:
        cluster["transport_socket"] = tls.transport_socket(http2=h2, client=client)
    return cluster
