"""The class's Cloudflare side, one aggregate reconcile per tunnel (keyed `namespace/name` of the kflare Tunnel):
the tunnel's ingress document from all routes of all Gateways on it, and the DNSRecords of its hostnames.

The document is written only when it differs from what Cloudflare holds, read once and then remembered (see
`reconcilers.tunnel_document.KnownDocuments`), so an idle reconcile makes no call. A TunnelConfiguration of the same
tunnel owns its document: the class then writes nothing to that tunnel (neither document nor DNSRecords) and its
Gateways say so (`Programmed=False, TunnelAlreadyConfigured`). A tunnel no class names any more loses the class's
DNSRecords; its document is left as it was (another writer may own it now).

DNSRecords are ordinary kflare objects in the Zone's namespace (batched, adopted and deleted by the DNSRecord kind,
and listed by `kubectl get kflare`); owner references cannot cross namespaces, so this reconcile deletes the ones
no route claims any more. It never touches a DNSRecord it did not make.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.api.constants import DELETION_POLICY_ANNOTATION, DeletionPolicy
from app.cloudflare.errors import CloudflareError
from app.kube.client import JSON, MERGE_PATCH, KubeError, ResourceType
from app.kube.controller import Outcome
from app.kube.informer import Key
from app.kube.registrations import DocumentsOf, Input
from reconcilers.context import Context
from reconcilers.credentials import ready_account, zone_namespace
from reconcilers.gateway import class_records, publish, shapes
from reconcilers.gateway import raw as untyped
from reconcilers.gateway.caches import (
    ACCOUNTS,
    DNS_RECORDS,
    TUNNEL_CONFIGURATIONS,
    TUNNELS,
    ZONES,
    cached_tunnel,
    cached_world,
    read_referenced,
    tunnel_status_state,
    tunnel_view,
)
from reconcilers.gateway.data_planes import cached_choices
from reconcilers.gateway.kinds import (
    GATEWAY_CLASSES,
    GATEWAYS,
    GRPC_ROUTES,
    HTTP_ROUTES,
    LISTENER_SETS,
    NAMESPACES,
    Classes,
)
from reconcilers.gateway.package import GATEWAY_CONFIGS
from reconcilers.gateway.planes import PARAMETERS, Choice, Plane, PlanePolicy
from reconcilers.gateway.translate import Hostname, translate
from reconcilers.lifecycle import NotReady
from reconcilers.tunnel_document import KnownDocuments

log = logging.getLogger(__name__)

ACCOUNT_RETRY = 5.0
WRITE_INTERVAL = 1.0
"""Seconds between two writes of one tunnel's document: a burst of changes is written once a second."""


@dataclass
class TunnelOptions:
    origin: str
    """The data plane as cloudflared reaches it (`http://localhost:8080`: cloudflared and Envoy share a pod)."""
    tenancy_label: str | None = None
    tls_origin: publish.TLSOrigin | None = None
    """The data plane's TLS listener, for gRPC hostnames; None: there is none."""
    plane_policy: PlanePolicy | None = None
    """Which Gateways have a data plane (and tunnel) of their own; None: none does."""
    allow_external_name_services: bool = False
    """As the class's reconcile says it (`GatewayOptions`): both then share one translation per cache revision."""
    classes: Classes = field(default_factory=Classes)
    """Which GatewayClasses are this controller's, and the Tunnel each publishes through."""


class TunnelPublisher:
    """The aggregate reconciler of each tunnel's ingress document and DNSRecords."""

    name = "gateway-tunnels"

    def __init__(self, ctx: Context, options: TunnelOptions) -> None:
        self.ctx, self.options = ctx, options
        self.known = KnownDocuments()
        self.last_write: dict[str, float] = {}
        self._term: object = None
        self.writes = 0
        """Ingress documents written since start (the benchmark reads it)."""

    # ---- what feeds which tunnel ---------------------------------------------------------------------------------

    def _class_tunnel(self, name: str) -> str | None:
        cls = self.ctx.cached(GATEWAY_CLASSES.kind, name)
        key = None if cls is None else publish.class_tunnel(cls, self.options.classes)
        return None if key is None else f"{key[0]}/{key[1]}"

    def _choices(self) -> dict[tuple[str, str], Choice]:
        return cached_choices(self.ctx, self.options.plane_policy or PlanePolicy(classes=self.options.classes))

    def _gateway_tunnel(self, namespace: str, name: str) -> str | None:
        gateway = self.ctx.cached(GATEWAYS.kind, name, namespace)
        if gateway is None:
            return None
        plane = self._choices().get((namespace, name))
        if isinstance(plane, Plane):
            return f"{plane.namespace}/{plane.name}"
        return self._class_tunnel(str((gateway.get("spec") or {}).get("gatewayClassName") or ""))

    def _plane_tunnels(self) -> set[str]:
        """The tunnels of the Gateways' own data planes."""
        return {f"{p.namespace}/{p.name}" for p in self._choices().values() if isinstance(p, Plane)}

    def all_tunnels(self) -> list[str]:
        """Every tunnel a class or a Gateway's own plane publishes through, and every tunnel a DNSRecord of the class
        was made for."""
        named = {
            f"{k[0]}/{k[1]}"
            for c in self.ctx.cached_all(GATEWAY_CLASSES.kind)
            if (k := publish.class_tunnel(c, self.options.classes))
        } | self._plane_tunnels()
        named |= class_records.documents_with_records(self.ctx.informer_of(DNS_RECORDS.kind))
        return sorted(named)

    def inputs(self) -> Mapping[ResourceType, DocumentsOf | Input]:
        def of_class(raw: JSON) -> list[str]:
            key = publish.class_tunnel(raw, self.options.classes)
            return [f"{key[0]}/{key[1]}"] if key else []

        def of_gateway(raw: JSON) -> list[str]:
            meta = raw.get("metadata") or {}
            found = {self._class_tunnel(str((raw.get("spec") or {}).get("gatewayClassName") or ""))}
            # The plane's tunnel, whether the Gateway keeps it or just lost it (it then releases its hostnames).
            found.add(self._gateway_tunnel(str(meta.get("namespace") or ""), str(meta.get("name") or "")))
            return sorted(t for t in found if t)

        def of_listener_set(raw: JSON) -> list[str]:
            namespace = str((raw.get("metadata") or {}).get("namespace") or "")
            parent = (raw.get("spec") or {}).get("parentRef") or {}
            if parent.get("kind", "Gateway") != "Gateway":
                return []
            tunnel = self._gateway_tunnel(str(parent.get("namespace") or namespace), str(parent.get("name") or ""))
            return [tunnel] if tunnel else []

        def of_route(raw: JSON) -> list[str]:
            namespace = str((raw.get("metadata") or {}).get("namespace") or "")
            found = set()
            for parent in (raw.get("spec") or {}).get("parentRefs") or []:
                where, name = str(parent.get("namespace") or namespace), str(parent.get("name") or "")
                if parent.get("kind", "Gateway") == "ListenerSet":
                    # Published through the tunnel of the ListenerSet's Gateway.
                    listener_set = self.ctx.cached(LISTENER_SETS.kind, name, where)
                    found.update(of_listener_set(dict(listener_set)) if listener_set is not None else [])
                elif tunnel := self._gateway_tunnel(where, name):
                    found.add(tunnel)
            return sorted(found)

        def of_tunnel(raw: JSON) -> list[str]:
            meta = raw.get("metadata") or {}
            return [f"{meta.get('namespace')}/{meta.get('name')}"]

        def of_configuration(raw: JSON) -> list[str]:
            name = ((raw.get("spec") or {}).get("tunnelRef") or {}).get("name")
            return [f"{(raw.get('metadata') or {}).get('namespace')}/{name}"] if name else []

        def everywhere(raw: JSON) -> list[str]:
            return self.all_tunnels()

        def of_record(raw: JSON) -> list[str]:
            # A user's DNSRecord may take (or free) a hostname of any tunnel; one of the class's belongs to one.
            return class_records.record_documents(raw) or self.all_tunnels()

        inputs: dict[ResourceType, DocumentsOf | Input] = {
            GATEWAY_CLASSES: of_class,
            GATEWAYS: of_gateway,
            HTTP_ROUTES: of_route,
            GRPC_ROUTES: of_route,
            LISTENER_SETS: of_listener_set,
            NAMESPACES: everywhere,
            TUNNELS: Input(of_tunnel, tunnel_status_state),
            TUNNEL_CONFIGURATIONS: of_configuration,
            PARAMETERS: everywhere,
            ZONES: everywhere,
            DNS_RECORDS: Input(
                of_record,
                indexes={
                    class_records.TUNNEL_INDEX: class_records.tunnel_labels,
                    class_records.DOCUMENT_INDEX: class_records.record_documents,
                },
            ),
            ACCOUNTS: everywhere,
        }
        if self.options.classes.package_namespace is not None:
            inputs[GATEWAY_CONFIGS] = everywhere
        return inputs

    # ---- the reconcile -------------------------------------------------------------------------------------------

    def view(self, key: tuple[str, str], hostnames: Iterable[Hostname]) -> publish.TunnelView:
        return tunnel_view(self.ctx, key, hostnames)

    async def reconcile(self, key: Key) -> Outcome:
        term = self.ctx.informer_of(TUNNELS.kind)
        if term is not self._term:
            # A new term as leader (the manager makes new caches for each): another leader may have written the
            # documents meanwhile, so what this process knew of them is forgotten.
            self.known, self.last_write, self._term = KnownDocuments(), {}, term
        namespace, _, name = key[1].partition("/")
        tunnel_key = (namespace, name)
        named = key[1] in self._plane_tunnels() or any(
            publish.class_tunnel(c, self.options.classes) == tunnel_key
            for c in self.ctx.cached_all(GATEWAY_CLASSES.kind)
        )
        hostnames: list[Hostname] = []
        if named:
            world = cached_world(
                self.ctx,
                cached_tunnel(self.ctx),
                self.options.tenancy_label,
                plane_policy=self.options.plane_policy,
                allow_external_name_services=self.options.allow_external_name_services,
                classes=self.options.classes,
            )
            read_referenced(self.ctx, world)
            hostnames = translate(world).hostnames
        view = self.view(tunnel_key, hostnames)
        if view.conflict is not None:
            if view.target is not None and view.target.tunnel_id:
                self.known.forget(view.target.tunnel_id)  # the TunnelConfiguration writes it meanwhile
            log.info(
                "tunnel configured by a TunnelConfiguration: the Gateway class writes nothing to it",
                extra={"tunnel": key[1], "configuration": view.conflict},
            )
            return Outcome.done()
        if not named:
            # No class names the tunnel any more (its class changed or went): what the class wrote into its
            # ingress document goes with its DNS records.
            return await self.release(tunnel_key, view)
        if view.target is None or view.target.tunnel_id is None:
            return Outcome.done()  # the Tunnel's status feeds this document once it has an ID
        failed = False
        later: Outcome | None = None
        if named:
            try:
                link = await ready_account(self.ctx.credentials, view.target.account_ref)
            except NotReady as wait:
                log.info("tunnel's account not ready", extra={"tunnel": key[1], "reason": wait.reason})
                return Outcome(requeue_after=wait.requeue_after or ACCOUNT_RETRY)
            document = publish.ingress_document(view.hostnames, self.options.origin, self.options.tls_origin)
            tunnel_id = view.target.tunnel_id
            try:
                if not await self.known.holds(link.client, link.account_id, tunnel_id, document):
                    # A burst of route changes (an apply of many routes) is one write a second, not one each.
                    pause = self.last_write.get(tunnel_id, -WRITE_INTERVAL) + WRITE_INTERVAL - time.monotonic()
                    if pause > 0:
                        later = Outcome(requeue_after=pause)
                    elif await self.known.sync(link.client, link.account_id, tunnel_id, document):
                        self.last_write[tunnel_id] = time.monotonic()
                        self.writes += 1
                        log.info(
                            "tunnel ingress document written",
                            extra={
                                "tunnel": key[1],
                                "rules": len(untyped.items(document["ingress"])),
                                "writes": self.writes,
                            },
                        )
            except CloudflareError as exc:
                self.known.forget(view.target.tunnel_id)
                log.warning("tunnel ingress document not written", extra={"tunnel": key[1], "error": str(exc)})
                failed = True
        published = {h.hostname for h in view.hostnames if h.dns} if named else set()
        outcome = await self._records(tunnel_key, view.plans if named else [], published)
        if failed or outcome.retry:
            return Outcome(retry=True)
        return later or outcome

    async def release(self, tunnel: tuple[str, str], view: publish.TunnelView | None = None) -> Outcome:
        """Take what the class published through `tunnel` off Cloudflare: its rules in the ingress document (unless a
        TunnelConfiguration owns it) and its DNSRecords. The deletion of a Gateway's own plane waits for this before
        its cloudflared goes."""
        view = view or self.view(tunnel, [])
        released = Outcome.done()
        if view.conflict is None and view.target is not None and view.target.tunnel_id is not None:
            released = await self._release_document(f"{tunnel[0]}/{tunnel[1]}", view.target)
        outcome = await self._records(tunnel, [])
        return released if released.retry or released.requeue_after else outcome

    async def _release_document(self, tunnel: str, target: publish.TunnelTarget) -> Outcome:
        """Clear the class's rules from the ingress document of a tunnel no class names: the catch-all alone is
        left. A document holding any rule the class did not write (someone configured the tunnel meanwhile) is left
        as it is."""
        assert target.tunnel_id is not None
        try:
            link = await ready_account(self.ctx.credentials, target.account_ref)
        except NotReady as wait:
            return Outcome(requeue_after=wait.requeue_after or ACCOUNT_RETRY)
        try:
            current = await self.known.current(link.client, link.account_id, target.tunnel_id)
            if not publish.written_by_class(current, self.options.origin, self.options.tls_origin):
                return Outcome.done()
            empty = publish.ingress_document([], self.options.origin, self.options.tls_origin)
            if await self.known.sync(link.client, link.account_id, target.tunnel_id, empty):
                self.writes += 1
                log.info("tunnel no class names: the class's ingress rules removed", extra={"tunnel": tunnel})
        except CloudflareError as exc:
            self.known.forget(target.tunnel_id)
            log.warning("tunnel ingress document not cleared", extra={"tunnel": tunnel, "error": str(exc)})
            return Outcome(retry=True)
        return Outcome.done()

    async def _records(
        self, tunnel: tuple[str, str], plans: list[publish.RecordPlan], published: Iterable[str] = ()
    ) -> Outcome:
        """Make the DNSRecords the plans ask for, and delete the class's that no plan keeps: with their Cloudflare
        records, unless their Zone is going while routes still publish their hostnames (`published`) through the
        tunnel (`publish.keeps_cloudflare_record`)."""
        wanted = {(p.namespace, p.name): p.body for p in plans if p.body is not None}
        kept = {(p.namespace, p.name) for p in plans if p.zone is not None}
        failed = False
        ours = {shapes.key(r): r for r in class_records.records_of(self.ctx.informer_of(DNS_RECORDS.kind), tunnel)}
        for (namespace, name), body in sorted(wanted.items()):
            assert body is not None
            current = ours.get((namespace, name))
            try:
                if current is None:
                    await self.ctx.kube.create(DNS_RECORDS, body, namespace)
                    log.info("DNSRecord made for a route", extra={"namespace": namespace, "record": name})
                elif (patch := publish.record_changes(current, body)) is not None:
                    version = untyped.at(current, "metadata", "resourceVersion")
                    metadata = patch.get("metadata")
                    patch["metadata"] = {
                        **(metadata if isinstance(metadata, dict) else {}),
                        "resourceVersion": version if isinstance(version, str) else None,
                    }
                    await self.ctx.kube.patch(DNS_RECORDS, name, patch, namespace, content_type=MERGE_PATCH)
            except KubeError as exc:
                if not exc.conflict:
                    log.warning(
                        "DNSRecord not written", extra={"namespace": namespace, "record": name, "reason": exc.reason}
                    )
                failed = True
        for (namespace, name), record in sorted(ours.items()):
            if (namespace, name) in kept or untyped.at(record, "metadata", "deletionTimestamp"):
                continue
            zone_ref = untyped.mapping(untyped.at(record, "spec", "zoneRef"))
            zone = self.ctx.cached(ZONES.kind, str(zone_ref.get("name") or ""), zone_namespace(dict(record)) or None)
            try:
                if publish.keeps_cloudflare_record(record, zone, published):
                    retain = {
                        "metadata": {
                            "annotations": {DELETION_POLICY_ANNOTATION: DeletionPolicy.RETAIN.value},
                            "resourceVersion": untyped.at(record, "metadata", "resourceVersion"),
                        }
                    }
                    await self.ctx.kube.patch(DNS_RECORDS, name, retain, namespace, content_type=MERGE_PATCH)
                    log.info(
                        "DNSRecord of a Zone being deleted let go; its Cloudflare record stays for the routes",
                        extra={"namespace": namespace, "record": name},
                    )
                await self.ctx.kube.delete(DNS_RECORDS, name, namespace)
                log.info("DNSRecord no route claims deleted", extra={"namespace": namespace, "record": name})
            except KubeError as exc:
                if not exc.not_found:
                    failed = True
        return Outcome(retry=True) if failed else Outcome.done()

    async def timed_out(self, key: Key, seconds: float) -> None:
        log.warning("a tunnel's reconcile timed out", extra={"tunnel": key[1], "seconds": seconds})
