"""The control plane of the `cloudflare-tunnel` class (leader only): one aggregate reconcile, fed by every Gateway
API object, Service, EndpointSlice and Namespace (and the Secrets and ConfigMaps those name), computes the
translation, publishes it to the xDS snapshot and writes the statuses that changed (GatewayClass, Gateways,
ListenerSets on them, this controller's entries of the routes' parents and of the BackendTLSPolicies' ancestors).

The Tunnel a GatewayClass names is looked up by name in the cache of the Tunnel kind; until that kind exists (or
while the Tunnel is absent) the class reports `Accepted=False, InvalidParameters` naming it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import NamedTuple

from app.kube.client import KubeError, ResourceType
from app.kube.controller import Outcome
from app.kube.index import Ref
from app.kube.informer import Key
from app.kube.manager import CONFIGMAP_KIND, SECRET_KIND, Manager
from app.kube.registrations import DocumentsOf, Input
from reconcilers.context import Context
from reconcilers.gateway import envoy, publish, publish_status, raw, shapes
from reconcilers.gateway.caches import (
    ACCOUNTS,
    DNS_RECORDS,
    TUNNEL_CONFIGURATIONS,
    TUNNELS,
    WORLD_KINDS,
    ZONES,
    cached_tunnel,
    cached_world,
    read_referenced,
    record_status_state,
    tunnel_status_state,
    tunnel_view,
)
from reconcilers.gateway.data_planes import PlaneReconciler
from reconcilers.gateway.envoy import EnvoyJSON
from reconcilers.gateway.gatewayapi.route_shapes import Route
from reconcilers.gateway.gatewayapi.status import TunnelState
from reconcilers.gateway.gatewayapi.world import ca_refs
from reconcilers.gateway.ir import Chain
from reconcilers.gateway.kinds import (
    BACKEND_TLS_POLICIES,
    BUNDLE_VERSION_ANNOTATION,
    CHANNEL_ANNOTATION,
    CRDS,
    GATEWAY_CLASSES,
    GATEWAY_EXISTS_FINALIZER,
    GATEWAYS,
    GRPC_ROUTES,
    HTTP_ROUTES,
    LISTENER_SETS,
    ORIGIN_SERVER_NAME,
    Classes,
)
from reconcilers.gateway.package import EXTERNAL_BACKENDS, GATEWAY_CONFIGS, PackageReconciler
from reconcilers.gateway.planes import PARAMETERS, Plane, PlanePolicy, PlaneSettings
from reconcilers.gateway.shapes import BackendTLSPolicy, Condition, GatewayClass, ObjectKey
from reconcilers.gateway.snapshot import SnapshotStore
from reconcilers.gateway.status_stamps import stamp, stamped
from reconcilers.gateway.translate import ParentStatus, Translation, World, certificate_refs, publishes_dns, translate
from reconcilers.gateway.tunnels import TunnelOptions, TunnelPublisher
from reconcilers.gateway.xds import https_listeners

log = logging.getLogger(__name__)

DOCUMENT = "data-plane"
BUNDLE_TTL = 60.0


class Bundle(NamedTuple):
    """The installed Gateway API CRDs, as their annotations say."""

    version: str | None
    channel: str | None


CERTIFICATE_WAIT = 5.0
"""Seconds a reconcile waits for the watch of a newly named certificate Secret (or CA ConfigMap) to list it."""
ROUTE_TYPES: Mapping[str, ResourceType] = {"HTTPRoute": HTTP_ROUTES, "GRPCRoute": GRPC_ROUTES}


@dataclass
class GatewayOptions:
    data_plane_host: str
    data_plane_port: int
    tenancy_label: str | None = None
    origin: str | None = None
    """The data plane as cloudflared reaches it, for the tunnel's ingress rules; None: `http://localhost:<port>`
    (cloudflared and Envoy share the data plane's pod)."""

    tls_port: int | None = None
    """Port of the data plane's TLS listener (same host), which gRPC hostnames are sent to; None: no such listener."""
    tls_dir: str = "/etc/kflare/origin-tls"
    """Directory in the data plane's pod of the origin certificate: tls.crt and tls.key (Envoy's), ca.crt
    (cloudflared's caPool)."""
    server_name: str = ORIGIN_SERVER_NAME
    """The name the origin certificate is for."""
    https_port: int | None = None
    """Port of the data plane's TLS listener for clients reaching it directly (same host); None: no such listener."""
    planes: PlaneSettings | None = None
    """What a Gateway's own data plane is made of; None: no Gateway gets one."""
    allow_external_name_services: bool = False
    """Whether the routes of Gateways on the shared plane may send to ExternalName Services (a Gateway with a plane
    of its own asks its GatewayParameters)."""
    classes: Classes = field(default_factory=Classes)
    """The controllerNames answered to, and whether a class may name a GatewayClassConfig of the package."""

    def __post_init__(self) -> None:
        if self.planes is not None:
            # The planes' choice and the translation's must agree on which classes are ours.
            self.planes = replace(self.planes, classes=self.classes)

    @property
    def plane_policy(self) -> PlanePolicy:
        return self.planes.policy if self.planes is not None else PlanePolicy(classes=self.classes)

    @property
    def origin_url(self) -> str:
        if self.origin:
            return self.origin.rstrip("/")
        return f"http://{self._dial_host}:{self.data_plane_port}"

    @property
    def _dial_host(self) -> str:
        host = self.data_plane_host
        if host in ("", "0.0.0.0", "::", "[::]"):  # noqa: S104 (a listen address, turned into one to dial)
            return "localhost"
        return f"[{host}]" if ":" in host else host

    @property
    def tls_origin(self) -> publish.TLSOrigin | None:
        if self.tls_port is None:
            return None
        return publish.TLSOrigin(
            f"https://{self._dial_host}:{self.tls_port}", self.server_name, f"{self.tls_dir}/ca.crt"
        )

    def listeners(self, chains: Sequence[Chain] = ()) -> list[EnvoyJSON]:
        """The listeners of a data plane: plaintext for cloudflared's HTTP/1.1, TLS for its HTTP/2 (gRPC), and the
        one serving the plane's HTTPS listeners' certificates (`chains`) to clients reaching it directly."""
        out = [envoy.ingress_listener(self.data_plane_host, self.data_plane_port)]
        if self.tls_port is not None:
            origin = (f"{self.tls_dir}/tls.crt", f"{self.tls_dir}/tls.key")
            out.append(envoy.ingress_tls_listener(self.data_plane_host, self.tls_port, *origin))
        return out + https_listeners.listeners(self.data_plane_host, self.https_port, chains)


class GatewayClassReconciler:
    """The aggregate reconciler of the class's one document: the data plane's configuration."""

    name = "gateway-class"

    def __init__(
        self,
        ctx: Context,
        store: SnapshotStore,
        options: GatewayOptions,
        tunnels: Callable[[str, str], TunnelState | None] | None = None,
    ) -> None:
        self.ctx, self.store, self.options = ctx, store, options
        self.tunnels = tunnels or cached_tunnel(ctx)
        self._bundle: tuple[float, Bundle] | None = None
        self.last: Translation | None = None
        self.publisher: TunnelPublisher | None = None
        self.planes: PlaneReconciler | None = None
        self._routes_current: dict[tuple[str, str, str], tuple[str, list[ParentStatus]]] = {}
        """Per route, the resourceVersion and this controller's entries it was last found to hold: a reconcile
        compares a thousand routes' entries with what they hold only for those whose route or entries changed."""

    def inputs(self) -> Mapping[ResourceType, DocumentsOf | Input]:
        def feeds(_: object) -> list[str]:
            return [DOCUMENT]

        inputs: dict[ResourceType, DocumentsOf | Input] = {
            rt: feeds for rt in (*WORLD_KINDS, TUNNEL_CONFIGURATIONS, ZONES, ACCOUNTS, PARAMETERS)
        }
        # The statuses read these objects' statuses too: the Tunnel's ID and readiness, each DNSRecord's Ready.
        inputs[TUNNELS] = Input(feeds, tunnel_status_state)
        inputs[DNS_RECORDS] = Input(feeds, record_status_state)
        if self.options.classes.package_namespace is not None:
            inputs.update({rt: feeds for rt in (GATEWAY_CONFIGS, EXTERNAL_BACKENDS)})
        return inputs

    async def _installed_bundle(self) -> Bundle:
        """The installed bundle's version and channel, read again at most once a minute (the CRDs are not
        watched). The HTTPRoute CRD is the one read: the channel decides which of its fields exist."""
        now = time.monotonic()
        if self._bundle is not None and now - self._bundle[0] < BUNDLE_TTL:
            return self._bundle[1]
        try:
            crd = await self.ctx.kube.get(CRDS, "httproutes.gateway.networking.k8s.io")
            annotations = (crd.get("metadata") or {}).get("annotations") or {}
            bundle = Bundle(annotations.get(BUNDLE_VERSION_ANNOTATION), annotations.get(CHANNEL_ANNOTATION))
        except KubeError:
            bundle = Bundle(None, None)
        self._bundle = (now, bundle)
        return bundle

    def world(self, bundle: Bundle) -> World:
        return cached_world(
            self.ctx,
            self.tunnels,
            self.options.tenancy_label,
            bundle.version,
            bundle.channel,
            plane_policy=self.options.plane_policy,
            allow_external_name_services=self.options.allow_external_name_services,
            classes=self.options.classes,
        )

    def cloudflare_statuses(self, world: World, result: Translation) -> None:
        """What the Cloudflare side and the data plane say, into the translation's statuses: a Gateway is not
        Programmed while its tunnel belongs to a TunnelConfiguration or Envoy refuses the configuration, and each
        accepted parent entry of a route publishing through a tunnel says what became of its DNS records."""
        tunnel_of = publish.gateway_tunnels(world.classes, world.gateways, world.ours)
        tunnel_of.update({gkey: p.tunnel_key for gkey, p in world.planes.items() if isinstance(p, Plane)})
        views = {key: tunnel_view(self.ctx, key, result.hostnames) for key in sorted(set(tunnel_of.values()))}
        refusals: dict[str, str | None] = {}
        for gkey, gstatus in result.gateway_status.items():
            own = world.planes.get(gkey)
            plane = own.cluster if isinstance(own, Plane) else ""
            if plane not in refusals:
                refusals[plane] = self.store.refusal(plane)  # only what its own plane's Envoys refuse
            refusal = refusals[plane]
            programmed = next((c for c in gstatus["conditions"] if c["type"] == "Programmed"), None)
            if programmed is None or programmed["status"] != "True":
                continue
            view = views.get(tunnel_of[gkey]) if gkey in tunnel_of else None
            if view is not None and view.conflict is not None:
                message = publish_status.conflict_message(tunnel_of[gkey], view.conflict)
                programmed.update(
                    {"status": "False", "reason": publish_status.TUNNEL_ALREADY_CONFIGURED, "message": message}
                )
            elif refusal is not None:
                programmed.update(
                    {"status": "False", "reason": publish_status.CONFIGURATION_REFUSED, "message": refusal}
                )
        records = {
            (plan.namespace, plan.name): record
            for view in views.values()
            for plan in view.plans
            if (record := self.ctx.cached(DNS_RECORDS.kind, plan.name, plan.namespace)) is not None
        }
        dns_of = {shapes.key(g): publishes_dns(g) for g in world.gateways}
        for rkey, entries in result.route_parents.items():
            for entry in entries:
                accepted = next((c for c in entry["conditions"] if c["type"] == "Accepted"), None)
                if accepted is None or accepted["status"] != "True":
                    continue
                parent = entry["parentRef"]
                gkey = (parent.get("namespace") or rkey[1], parent["name"])
                tunnel = tunnel_of.get(gkey)
                view = views.get(tunnel) if tunnel is not None else None
                if view is None:
                    continue
                plans = [p for p in view.plans if rkey in p.routes]
                generation = accepted["observedGeneration"]
                found: Condition | None
                if plans and view.target is not None and not dns_of.get(gkey, True):
                    found = publish_status.dns_disabled_condition(f"{gkey[0]}/{gkey[1]}", generation)
                else:
                    found = publish_status.dns_condition(plans, records, view.target, generation, view.conflict)
                if found is not None:
                    entry["conditions"].append(found)
                covered = publish_status.certificate_condition(
                    ((p.hostname, p.domain) for p in plans if p.zone is not None), generation
                )
                if covered is not None:
                    entry["conditions"].append(covered)

    async def _read_certificates(self, world: World) -> None:
        """Watch the Secrets the listeners name as certificates and the ConfigMaps BackendTLSPolicies name as CAs
        (only those: the controller does not watch every Secret or ConfigMap), and let the translation read them; a
        change of one reconciles the class again."""
        keys = certificate_refs(world)
        ca_keys: set[ObjectKey] = ca_refs(world)
        configmaps = self.ctx.configmaps
        self.ctx.secrets.reference(self.name, keys)
        if configmaps is not None:
            configmaps.reference(self.name, ca_keys)
        self.ctx.index.set_parents(
            Ref(self.name, "", DOCUMENT),
            [Ref(SECRET_KIND, *k) for k in keys] + [Ref(CONFIGMAP_KIND, *k) for k in ca_keys],
        )
        waits = [self.ctx.secrets.wait_synced(k, CERTIFICATE_WAIT) for k in sorted(keys)]
        if configmaps is not None:
            waits += [configmaps.wait_synced(k, CERTIFICATE_WAIT) for k in sorted(ca_keys)]
        for wait in waits:
            with contextlib.suppress(TimeoutError):
                await wait
        read_referenced(self.ctx, world)

    async def reconcile(self, key: Key) -> Outcome:
        world = self.world(await self._installed_bundle())
        await self._read_certificates(world)
        result = translate(world)
        self.cloudflare_statuses(world, result)
        listeners, chains = self.options.listeners(result.https_chains.get("", ())), result.https_chains
        planes = {c: {**r, "listeners": self.options.listeners(chains.get(c, ()))} for c, r in result.planes.items()}
        if self.store.publish({**result.resources, "listeners": listeners}, planes):
            log.info(
                "data plane configuration published",
                extra={"generation": self.store.generation, "hostnames": len(result.hostnames), "planes": len(planes)},
            )
        self.last = result
        failed = False
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for cls in world.classes:
            name = str(cls["metadata"]["name"])
            if name in result.class_status:
                failed |= not await self._write_class(cls, result, now)
        for gateway in world.gateways:
            gkey = (gateway["metadata"].get("namespace", ""), gateway["metadata"]["name"])
            if gkey in result.gateway_status:
                failed |= not await self._write_status(
                    GATEWAYS, gateway, stamp(result.gateway_status[gkey], gateway.get("status") or {}, now)
                )
        for kind, routes in (("HTTPRoute", world.http_routes), ("GRPCRoute", world.grpc_routes)):
            for route in routes:
                failed |= not await self._write_route(kind, route, result, now)
        if len(self._routes_current) > 2 * len(result.route_parents) + 100:
            self._routes_current = {k: v for k, v in self._routes_current.items() if k in result.route_parents}
        for policy in world.backend_tls_policies:
            failed |= not await self._write_policy(policy, result, now)
        for listener_set in world.listener_sets:
            lkey = (listener_set["metadata"].get("namespace", ""), listener_set["metadata"]["name"])
            if lkey in result.listener_set_status:
                written = stamp(result.listener_set_status[lkey], listener_set.get("status") or {}, now)
                failed |= not await self._write_status(LISTENER_SETS, listener_set, written)
        return Outcome(retry=True) if failed else Outcome.done()

    async def timed_out(self, key: Key, seconds: float) -> None:
        log.warning("the Gateway class's reconcile timed out", extra={"seconds": seconds})

    async def _write_status(self, rt: ResourceType, obj: Mapping[str, object], status: Mapping[str, object]) -> bool:
        current = raw.mapping(obj.get("status"))
        if current == {**current, **status}:
            return True
        meta = raw.mapping(obj["metadata"])
        namespace = meta.get("namespace")
        try:
            await self.ctx.kube.patch(
                rt,
                str(meta["name"]),
                {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": status},
                namespace if isinstance(namespace, str) else None,
                subresource="status",
            )
        except KubeError as exc:
            if exc.not_found:
                return True
            log.info("status write deferred", extra={"kind": rt.kind, "object": meta["name"], "reason": exc.reason})
            return False
        return True

    async def _write_class(self, cls: GatewayClass, result: Translation, now: str) -> bool:
        name = str(cls["metadata"]["name"])
        ok = await self._write_status(
            GATEWAY_CLASSES, cls, stamp(result.class_status[name], cls.get("status") or {}, now)
        )
        finalizers = list(cls["metadata"].get("finalizers") or [])
        in_use = name in result.classes_in_use
        if in_use == (GATEWAY_EXISTS_FINALIZER in finalizers):
            return ok
        wanted = (
            [*finalizers, GATEWAY_EXISTS_FINALIZER]
            if in_use
            else [f for f in finalizers if f != GATEWAY_EXISTS_FINALIZER]
        )
        try:
            await self.ctx.kube.patch(
                GATEWAY_CLASSES,
                name,
                {"metadata": {"finalizers": wanted, "resourceVersion": cls["metadata"].get("resourceVersion")}},
            )
        except KubeError as exc:
            return exc.not_found and ok
        return ok

    async def _write_route(self, kind: str, route: Route, result: Translation, now: str) -> bool:
        meta = route["metadata"]
        key = (kind, meta.get("namespace", ""), meta["name"])
        ours = result.route_parents.get(key, [])
        version = str(meta.get("resourceVersion") or "")
        if self._routes_current.get(key) == (version, ours):
            return True
        status = route.get("status")
        current = (status.get("parents") if status else None) or []
        entries = stamped(current, ours, "parentRef", now, self.options.classes.names)
        if entries is None:
            if version:
                self._routes_current[key] = (version, ours)
            return True
        self._routes_current.pop(key, None)
        return await self._write_status(ROUTE_TYPES[kind], route, {"parents": entries})

    async def _write_policy(self, policy: BackendTLSPolicy, result: Translation, now: str) -> bool:
        """This controller's status.ancestors entries of a BackendTLSPolicy, keyed by ancestorRef as the spec
        says; other controllers' entries are kept, and ours for Gateways no longer using the policy removed."""
        meta = policy["metadata"]
        ours = result.policy_ancestors.get((meta.get("namespace", ""), meta["name"]), [])
        status = policy.get("status")
        entries = stamped(status["ancestors"] if status else [], ours, "ancestorRef", now, self.options.classes.names)
        if entries is None:
            return True
        return await self._write_status(BACKEND_TLS_POLICIES, policy, {"ancestors": entries})


def register_gateway(
    manager: Manager, ctx: Context, store: SnapshotStore, options: GatewayOptions
) -> GatewayClassReconciler:
    """Wire the class into the manager: its inputs are watched (cached, leader only) and feed one document."""
    reconciler = GatewayClassReconciler(ctx, store, options)
    store.serving = lambda: manager.leading and manager.synced

    def refusals_changed() -> None:
        workers = manager.aggregates.get(reconciler.name)
        if workers is not None:
            workers.enqueue(("", DOCUMENT))

    store.on_change = refusals_changed
    manager.register_aggregate(reconciler)
    reconciler.publisher = TunnelPublisher(
        ctx,
        TunnelOptions(
            options.origin_url,
            options.tenancy_label,
            options.tls_origin,
            options.plane_policy,
            options.allow_external_name_services,
            options.classes,
        ),
    )
    manager.register_aggregate(reconciler.publisher)
    if options.planes is not None:
        reconciler.planes = PlaneReconciler(ctx, options.planes, reconciler.publisher.release)
        manager.register_aggregate(reconciler.planes)
    if options.classes.package_namespace is not None:
        manager.register_aggregate(PackageReconciler(ctx, options.classes))
    return reconciler
