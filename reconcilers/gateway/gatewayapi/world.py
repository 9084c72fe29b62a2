"""What the translation reads, as the caches hold it, and which of it the caches are asked for."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from reconcilers.gateway import shapes
from reconcilers.gateway.gatewayapi.client_certificates import (
    frontend_config_maps,
    listener_set_secret_refs,
    secret_refs,
)
from reconcilers.gateway.gatewayapi.policies import ConfigMapLookup, config_map_refs
from reconcilers.gateway.gatewayapi.route_shapes import Route
from reconcilers.gateway.gatewayapi.status import TunnelLookup
from reconcilers.gateway.kinds import GATEWAY_GROUP, Classes
from reconcilers.gateway.planes import Choice
from reconcilers.gateway.shapes import (
    BackendTLSPolicy,
    EndpointSlice,
    Gateway,
    GatewayClass,
    ListenerSet,
    Namespace,
    ObjectKey,
    ReferenceGrant,
    Secret,
    Service,
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
    zones: Sequence[Mapping[str, object]] = field(default_factory=list)
    """The kflare Zones: a hostname in a zone one manages is published only for the Zone's namespace and the
    namespaces it grants the name to (`owners`)."""
    allow_external_name_services: bool = False
    """Whether the routes of Gateways on the shared plane may send to ExternalName Services
    (`--gateway-allow-external-name-services`); a Gateway with a plane of its own follows its GatewayParameters'
    `allowExternalNameServices`."""
    planes: Mapping[ObjectKey, Choice] = field(default_factory=dict)
    """The Gateways that asked for a data plane of their own: the plane, or why they cannot have it
    (`planes.choose`)."""
    every_gateway_own_plane: bool = False
    """Whether every Gateway naming no parameters gets a plane of its own (`--gateway-default-parameters`): what the
    class claims depends on it (`features.OWN_PLANE_ONLY`)."""
    external_backends: Sequence[Mapping[str, object]] | None = None
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


DNS_PUBLISHING_ANNOTATION = "kflare.dev/dns-publishing"
"""On a Gateway: `disabled` keeps the class from making DNS records for its hostnames, which stay in the tunnel's
ingress document (their DNS is then the user's to point at the tunnel)."""


def publishes_dns(gateway: Gateway) -> bool:
    annotations = gateway["metadata"].get("annotations") or {}
    return str(annotations.get(DNS_PUBLISHING_ANNOTATION, "")).strip().lower() != "disabled"


def _our_gateways(world: World) -> list[Gateway]:
    ours = {shapes.name(c) for c in world.classes if world.ours.ours(c)}
    return [gateway for gateway in world.gateways if gateway["spec"]["gatewayClassName"] in ours]


def certificate_refs(world: World) -> set[ObjectKey]:
    """The Secrets the class's Gateways name as certificates, their listeners' and the one presented to TLS backends
    (what `World.secret` is asked)."""
    gateways = _our_gateways(world)
    keys = {shapes.key(gateway) for gateway in gateways}
    out = {key for gateway in gateways for key in secret_refs(gateway)}
    for listener_set in world.listener_sets:
        if listener_set_parent(listener_set) in keys:
            out |= listener_set_secret_refs(listener_set)
    return out


def listener_set_parent(listener_set: ListenerSet) -> ObjectKey | None:
    """The Gateway a ListenerSet names as its parent; None for a parent of another kind."""
    ref = listener_set["spec"]["parentRef"]
    if ref.get("group", GATEWAY_GROUP) != GATEWAY_GROUP or ref.get("kind", "Gateway") != "Gateway":
        return None
    return (ref.get("namespace") or shapes.ns(listener_set), ref["name"])


def ca_refs(world: World) -> set[ObjectKey]:
    """The ConfigMaps the translation reads as CAs (what `World.config_map` is asked): those BackendTLSPolicies name,
    and those the class's Gateways check their clients' certificates against."""
    out = config_map_refs(world.backend_tls_policies)
    for gateway in _our_gateways(world):
        out |= frontend_config_maps(gateway)
    return out
