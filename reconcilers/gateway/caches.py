"""What the Gateway class reads of the manager's caches: the translation's input (`cached_world`, with the Secrets and
ConfigMaps it names: `read_referenced`), what of a Tunnel and of a DNSRecord its watches follow, and a tunnel as the
class publishes through it (`tunnel_view`). The class's reconcile (`reconcilers.gateway.controller`) and the
tunnels' (`reconcilers.gateway.tunnels`) read them alike, so both translate the same inputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeGuard, TypeVar

from app.kube.client import JSON
from app.kube.index import Ref
from app.kube.informer import Informer
from reconcilers.cloudflare_account import CloudflareAccountKind
from reconcilers.context import Context
from reconcilers.credentials import account_object
from reconcilers.dns_record import DNSRecordKind
from reconcilers.gateway import publish
from reconcilers.gateway.data_planes import cached_choices
from reconcilers.gateway.gatewayapi.route_shapes import Route
from reconcilers.gateway.gatewayapi.status import TunnelLookup, TunnelState
from reconcilers.gateway.gatewayapi.world import ca_refs
from reconcilers.gateway.kinds import (
    BACKEND_TLS_POLICIES,
    ENDPOINT_SLICES,
    GATEWAY_CLASSES,
    GATEWAYS,
    GRPC_ROUTES,
    HTTP_ROUTES,
    LISTENER_SETS,
    NAMESPACES,
    REFERENCE_GRANTS,
    SERVICES,
    TUNNEL_KIND,
    Classes,
)
from reconcilers.gateway.owners import zones_revision
from reconcilers.gateway.package import EXTERNAL_BACKENDS, GATEWAY_CONFIGS
from reconcilers.gateway.planes import PARAMETERS, PlanePolicy
from reconcilers.gateway.shapes import (
    BackendTLSPolicy,
    ConfigMap,
    EndpointSlice,
    Gateway,
    GatewayClass,
    ListenerSet,
    Namespace,
    ReferenceGrant,
    Secret,
    Service,
)
from reconcilers.gateway.translate import Hostname, World, certificate_refs
from reconcilers.managed_kind import resource_type
from reconcilers.tenancy import DOMAIN_INDEX, RECORD_NAME_INDEX, managing_zone
from reconcilers.tunnel import TunnelKind
from reconcilers.tunnel_configuration import TunnelConfigurationKind
from reconcilers.zone import ZoneKind

T = TypeVar("T")

TUNNELS = resource_type(TunnelKind)
TUNNEL_CONFIGURATIONS = resource_type(TunnelConfigurationKind)
ZONES = resource_type(ZoneKind)
DNS_RECORDS = resource_type(DNSRecordKind)
ACCOUNTS = resource_type(CloudflareAccountKind)


def shaped(objects: Iterable[JSON], shape: type[T]) -> list[T]:
    """A cache's objects as `shape` (a TypedDict) types them: those with every key it requires. The API server's
    schema guarantees them, so none is left out but an object no reader of the shape could read."""
    return [obj for obj in objects if _fits(obj, shape)]


def one_shaped(obj: JSON | None, shape: type[T]) -> T | None:
    return obj if obj is not None and _fits(obj, shape) else None


def _fits(obj: JSON, shape: type[T]) -> TypeGuard[T]:
    required: frozenset[str] = getattr(shape, "__required_keys__", frozenset())
    return required <= obj.keys()


def tunnel_state(raw: JSON) -> TunnelState:
    """What the class reads of a kflare Tunnel: Ready, and the ID its CNAME target is made of."""
    status = raw.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    tunnel_id = (status.get("cloudflareMetadata") or {}).get("tunnelID")
    return TunnelState(
        ready=bool(ready and ready.get("status") == "True"),
        message=str((ready or {}).get("message") or "Tunnel not ready"),
        address=f"{tunnel_id}.cfargotunnel.com" if tunnel_id else None,
    )


def cached_tunnel(ctx: Context) -> TunnelLookup:
    def lookup(namespace: str, name: str) -> TunnelState | None:
        raw = ctx.cached(TUNNEL_KIND, name, namespace)
        return None if raw is None else tunnel_state(raw)

    return lookup


WORLD_KINDS = (
    # What the translation reads (besides the Tunnels its classes name).
    GATEWAY_CLASSES,
    GATEWAYS,
    HTTP_ROUTES,
    GRPC_ROUTES,
    REFERENCE_GRANTS,
    SERVICES,
    ENDPOINT_SLICES,
    NAMESPACES,
    BACKEND_TLS_POLICIES,
    LISTENER_SETS,
)


def cached_world(
    ctx: Context,
    tunnels: TunnelLookup,
    tenancy_label: str | None,
    installed_bundle: str | None = None,
    installed_channel: str | None = None,
    plane_policy: PlanePolicy | None = None,
    *,
    allow_external_name_services: bool = False,
    classes: Classes | None = None,
) -> World:
    """The translation's input from the caches, with their revisions (the Tunnels' and GatewayParameters' too: the
    class reads them; of the Zones, what decides who owns a hostname). `plane_policy`: which Gateways get a data
    plane of their own (None: none does); `allow_external_name_services`: whether the shared plane follows
    ExternalName Services."""
    cached = ctx.cached_all
    classes = classes or Classes()
    package = (EXTERNAL_BACKENDS,) if classes.package_namespace is not None else ()
    # GatewayConfigs decide which Gateways have a plane (and tunnel) of their own, as GatewayParameters do.
    configs = (GATEWAY_CONFIGS,) if package else ()
    informers = [ctx.informer_of(rt.kind) for rt in (*WORLD_KINDS, TUNNELS, PARAMETERS, *package, *configs)]
    zones = cached(ZONES.kind)
    # Of the Zones, what decides who owns a hostname (a Zone's status changes leave the translation alone).
    revision = (*(i.revision for i in informers if i is not None), zones_revision(zones)) if all(informers) else None
    resolved = [ctx.informer_of(rt.kind) for rt in (SERVICES, REFERENCE_GRANTS, BACKEND_TLS_POLICIES, *package)]
    resolver_base = tuple(i.revision for i in resolved if i is not None) if all(resolved) else None
    return World(
        classes=shaped(cached(GATEWAY_CLASSES.kind), GatewayClass),
        gateways=shaped(cached(GATEWAYS.kind), Gateway),
        http_routes=shaped(cached(HTTP_ROUTES.kind), Route),
        grpc_routes=shaped(cached(GRPC_ROUTES.kind), Route),
        grants=shaped(cached(REFERENCE_GRANTS.kind), ReferenceGrant),
        services=shaped(cached(SERVICES.kind), Service),
        slices=shaped(cached(ENDPOINT_SLICES.kind), EndpointSlice),
        namespaces=shaped(cached(NAMESPACES.kind), Namespace),
        backend_tls_policies=shaped(cached(BACKEND_TLS_POLICIES.kind), BackendTLSPolicy),
        listener_sets=shaped(cached(LISTENER_SETS.kind), ListenerSet),
        tunnel=tunnels,
        installed_bundle=installed_bundle,
        installed_channel=installed_channel,
        tenancy_label=tenancy_label,
        zones=zones,
        allow_external_name_services=allow_external_name_services,
        planes=cached_choices(ctx, plane_policy or PlanePolicy(classes=classes)),
        every_gateway_own_plane=plane_policy is not None and plane_policy.default is not None and plane_policy.cap > 0,
        external_backends=cached(EXTERNAL_BACKENDS.kind) if package else None,
        ours=classes,
        revision=revision,
        resolver_base=resolver_base,
    )


def read_referenced(ctx: Context, world: World) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """Let the translation read the Secrets its listeners name as certificates and the ConfigMaps its
    BackendTLSPolicies name as CAs, as the watches of them hold them (the class's reconcile keeps those watches),
    with their revisions folded into the world's: the class's reconcile and the tunnels' then translate the same
    inputs, and share one translation per revision. Returns the keys of both."""
    keys = certificate_refs(world)
    ca_keys = ca_refs(world)
    secrets, configmaps = ctx.secrets, ctx.configmaps
    world.secret = lambda namespace, name: one_shaped(secrets.get((namespace, name)), Secret)
    if configmaps is not None:
        world.config_map = lambda namespace, name: one_shaped(configmaps.get((namespace, name)), ConfigMap)
    if world.revision is not None:
        world.revision = (
            world.revision,
            secrets.revision(keys),
            configmaps.revision(ca_keys) if configmaps is not None else (),
        )
    if world.resolver_base is not None and configmaps is not None:
        # What the routes' builds read: a new cache (a new term) or a change of any of them builds every route again.
        world.resolver_revision = (world.resolver_base, configmaps.revision(ca_keys))
    return keys, ca_keys


def tunnel_status_state(raw: JSON) -> object:
    """What of a Tunnel the class reads: its spec, its ID and whether it is Ready (not the rest of its status)."""
    status = raw.get("status") or {}
    ready = [(c.get("status"), c.get("message")) for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    meta = raw.get("metadata") or {}
    return repr(
        (
            raw.get("spec"),
            (status.get("cloudflareMetadata") or {}).get("tunnelID"),
            ready,
            meta.get("deletionTimestamp"),
        )
    )


def record_status_state(raw: JSON) -> object:
    """What of a DNSRecord a route's status reads: its spec, labels and Ready condition."""
    ready = [
        (c.get("status"), c.get("reason"), c.get("message"))
        for c in (raw.get("status") or {}).get("conditions") or []
        if c.get("type") == "Ready"
    ]
    meta = raw.get("metadata") or {}
    return repr((raw.get("spec"), meta.get("labels"), meta.get("deletionTimestamp"), ready))


def tunnel_view(ctx: Context, key: tuple[str, str], hostnames: Iterable[Hostname]) -> publish.TunnelView:
    """The tunnel as the caches hold it, with the hostnames published through it."""
    return publish.tunnel_view(
        key,
        hostnames,
        ctx.cached(TUNNEL_KIND, key[1], key[0]),
        _configurations_of(ctx, key),
        _zones(ctx),
        _records(ctx),
        lambda key: ctx.cached(*_account_at(key)),
    )


class _CachedZones:
    """The Zone that manages a hostname's zone, from the Zones' cache's domain index."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def managing(self, hostname: str) -> JSON | None:
        return managing_zone(self.ctx.caches, hostname)


class _CachedRecords:
    """DNSRecords by name and by record name, from the cache and its record-name index."""

    def __init__(self, informer: Informer) -> None:
        self.informer = informer

    def at(self, namespace: str, name: str) -> JSON | None:
        return self.informer.get(name, namespace)

    def naming(self, record_name: str) -> list[JSON]:
        return self.informer.by_index(RECORD_NAME_INDEX, record_name)


def _zones(ctx: Context) -> publish.ZoneLookup | list[JSON]:
    informer = ctx.informer_of(ZONES.kind)
    if informer is not None and DOMAIN_INDEX in informer.indexers:
        return _CachedZones(ctx)
    return ctx.cached_all(ZONES.kind)  # a cache without the index (tests' stand-ins): listed


def _records(ctx: Context) -> publish.RecordLookup | list[JSON]:
    informer = ctx.informer_of(DNS_RECORDS.kind)
    if informer is not None and RECORD_NAME_INDEX in informer.indexers:
        return _CachedRecords(informer)
    return ctx.cached_all(DNS_RECORDS.kind)


def _configurations_of(ctx: Context, tunnel: tuple[str, str]) -> list[JSON]:
    """The TunnelConfigurations naming the tunnel, from the dependency index (each names its Tunnel)."""
    found = []
    for child in ctx.index.children(Ref(TUNNEL_KIND, tunnel[0], tunnel[1]), kind=TUNNEL_CONFIGURATIONS.kind):
        raw = ctx.cached(child.kind, child.name, child.namespace or None)
        if raw is not None:
            found.append(raw)
    return found


def _account_at(key: str) -> tuple[str, str, str | None]:
    """The kind, name and namespace an account key names, as `Context.cached` takes them."""
    kind, namespace, name = account_object(key)
    return kind, name, namespace or None
