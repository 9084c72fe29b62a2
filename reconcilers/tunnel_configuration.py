"""TunnelConfiguration: the whole ingress configuration of a Tunnel, a document kflare owns entirely.

The oldest TunnelConfiguration of a Tunnel (by creation time, then name; one being deleted included) owns its
configuration; any other reports `TunnelAlreadyConfigured` and looks again every minute. The document is the rules in
order, then `defaultService` as the catch-all rule. It is compared with what Cloudflare holds after normalisation
(host names without case, empty `originRequest`s and false switches left out, a top-level `originRequest` or
`warp-routing` counted only when they say something), so an idle reconcile writes nothing and Cloudflare's
`version` stays put; when it differs, one PUT replaces it.

"Exists" for adoption: the tunnel holds a configuration that says something (anything but nothing, or the single
`http_status:404` rule a deletion leaves). Deletion, unless retained, resets the tunnel to that single rule
(Cloudflare refuses an empty configuration); skipped if the Tunnel resource is gone.

Cloudflare cannot list configurations across tunnels, so each is read with one GET (there is one per tunnel).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import JsonValue

from app.api.constants import Reason
from app.api.tenancy import suffixes
from app.api.tunnel import (
    IngressRule,
    TunnelConfiguration,
    TunnelConfigurationMetadata,
)
from app.cloudflare.errors import NotFound, Terminal
from app.cloudflare.models import TunnelConfiguration as CloudflareConfiguration
from app.kube.index import Ref
from reconcilers import tunnel_document
from reconcilers.capabilities import KeepsBeside, QualifiesReady
from reconcilers.context import AccountLink, Caches, Credentials, Queue
from reconcilers.credentials import account_key, ready_account
from reconcilers.managed_kind import Changes, ManagedKind
from reconcilers.tenancy import DOMAIN_INDEX, RECORD_NAME_INDEX, hostname_refusal
from reconcilers.tunnel_document import RESET, normalise, says_something
from reconcilers.waiting import RETRY_PARENT, NotReady

__all__ = ["RESET", "TunnelConfigurationKind", "desired", "normalise", "says_something"]

TUNNEL_DELETED = 1014  # Cloudflare's answer to a write to a deleted tunnel
RELEASE_RETRY = 1.0


@dataclass(frozen=True)
class ConfigLink:
    account: AccountLink
    tunnel_id: str
    account_ref: str


def rule_document(rule: IngressRule) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {"hostname": rule.hostname, "service": rule.service}
    if rule.path is not None:
        out["path"] = rule.path
    if rule.origin_request is not None:
        origin = rule.origin_request.to_wire()
        if origin:
            out["originRequest"] = origin
    return out


def desired(obj: TunnelConfiguration) -> dict[str, JsonValue]:
    spec = obj.spec
    return {"ingress": [*(rule_document(rule) for rule in spec.ingress), {"service": spec.default_service}]}


class TunnelConfigurationKind(
    ManagedKind[TunnelConfiguration, ConfigLink, CloudflareConfiguration],
    KeepsBeside[TunnelConfiguration, ConfigLink, CloudflareConfiguration],
    QualifiesReady[TunnelConfiguration, CloudflareConfiguration],
):
    model = TunnelConfiguration
    observed_id = "tunnel_id"
    status_id = "tunnel_id"

    def __init__(self, caches: Caches, credentials: Credentials, queue: Queue) -> None:
        super().__init__(caches, credentials)
        self.queue = queue  # the Tunnel's other configurations follow the one that owns its document

    def _owner(self, obj: TunnelConfiguration) -> str:
        """The name of the configuration of the same Tunnel created first (it owns the tunnel's document)."""
        namespace = obj.namespace or ""
        tunnel = Ref("Tunnel", namespace, obj.spec.tunnel_ref.name)
        created = obj.metadata.creation_timestamp
        candidates: list[tuple[str, str]] = [(created.strftime("%Y-%m-%dT%H:%M:%SZ") if created else "", obj.name)]
        for child in self.caches.index.children(tunnel, kind=self.kind):
            raw = self.caches.cached(self.kind, child.name, namespace)
            if raw is not None and child.name != obj.name:
                candidates.append((raw["metadata"].get("creationTimestamp") or "", child.name))
        return min(candidates)[1]

    async def connect(self, obj: TunnelConfiguration) -> ConfigLink:
        if not obj.metadata.deleting:
            for rule in obj.spec.ingress:
                hostname = getattr(rule, "hostname", None)
                refusal = hostname_refusal(self.caches, obj.namespace or "", hostname) if hostname else None
                if refusal is not None:
                    # Traffic for another team's names would reach this tunnel: nothing of it is written.
                    raise NotReady(Reason.HOSTNAME_NOT_GRANTED, refusal, requeue_after=RETRY_PARENT)
        name = obj.spec.tunnel_ref.name
        tunnel = self.parent(obj, "tunnel_ref")
        tunnel_id, raw = tunnel.serving(), tunnel.raw  # one being deleted waits for its configurations
        owner = self._owner(obj)
        if owner != obj.name:
            owner_raw = self.caches.cached(self.kind, owner, obj.namespace) or {"metadata": {}}
            going = bool(owner_raw["metadata"].get("deletionTimestamp"))
            raise NotReady(
                Reason.TUNNEL_ALREADY_CONFIGURED,
                f"TunnelConfiguration {owner}, created earlier, configures Tunnel {name}; a tunnel has one"
                + ("; it is being deleted, this one takes over once it is gone" if going else ""),
                # The owner's release enqueues this one while it still exists: look again soon after.
                requeue_after=RELEASE_RETRY if going else RETRY_PARENT,
            )
        account_ref = account_key(raw) or ""
        return ConfigLink(await ready_account(self.credentials, account_ref, obj.namespace), tunnel_id, account_ref)

    async def _read(self, link: ConfigLink) -> CloudflareConfiguration:
        return await link.account.client.get_tunnel_configuration(link.account.account_id, link.tunnel_id)

    async def observe(
        self, link: ConfigLink, obj: TunnelConfiguration, object_id: str
    ) -> CloudflareConfiguration | None:
        if object_id != link.tunnel_id:
            return None  # the Tunnel now has another tunnel (recreated): configure that one
        try:
            return await self._read(link)
        except NotFound:
            return None

    async def find(self, link: ConfigLink, obj: TunnelConfiguration) -> CloudflareConfiguration | None:
        try:
            current = await self._read(link)
        except NotFound:
            return None
        return current if says_something(current.config) else None

    async def create(self, link: ConfigLink, obj: TunnelConfiguration) -> CloudflareConfiguration:
        return await self._put(link, desired(obj))

    async def _put(self, link: ConfigLink, config: Mapping[str, JsonValue]) -> CloudflareConfiguration:
        return await tunnel_document.put(link.account.client, link.account.account_id, link.tunnel_id, config)

    def diff(self, link: ConfigLink, obj: TunnelConfiguration, observed: CloudflareConfiguration) -> Changes:
        wanted = desired(obj)
        return {} if normalise(wanted) == normalise(observed.config) else {"config": wanted}

    async def update(
        self, link: ConfigLink, obj: TunnelConfiguration, observed: CloudflareConfiguration, changes: Changes
    ) -> CloudflareConfiguration:
        return await self._put(link, desired(obj))

    async def delete(self, link: ConfigLink, obj: TunnelConfiguration, object_id: str) -> None:
        if object_id != link.tunnel_id:
            return  # that tunnel is gone; the current one was never configured by this resource
        try:
            await self._put(link, RESET)
        except Terminal as exc:
            if TUNNEL_DELETED not in exc.codes:
                raise

    async def released(self, obj: TunnelConfiguration) -> None:
        """The next oldest configuration of the tunnel takes it over now, not at its next minutely look."""
        tunnel = Ref("Tunnel", obj.namespace or "", obj.spec.tunnel_ref.name)
        for sibling in self.caches.index.children(tunnel, kind=self.kind):
            if sibling.name != obj.name:
                self.queue.enqueue(sibling)

    def record(self, link: ConfigLink, obj: TunnelConfiguration, observed: CloudflareConfiguration) -> None:
        obj.status.cloudflare_metadata = TunnelConfigurationMetadata(
            tunnel_id=observed.tunnel_id, version=observed.version
        )

    def ready_state(self, obj: TunnelConfiguration, observed: CloudflareConfiguration) -> tuple[str, str]:
        missing = self.uncovered(obj)
        if missing:
            return (
                Reason.HOSTNAME_NOT_COVERED,
                f"in sync with Cloudflare, but no DNSRecord or Zone of the tunnel's account covers "
                f"{', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}: requests for them cannot reach the "
                "tunnel (add a DNSRecord with tunnelRef)",
            )
        return self.ready_reason, self.ready_message

    def uncovered(self, obj: TunnelConfiguration) -> list[str]:
        """The hostnames no Zone of the tunnel's account contains and no DNSRecord of the namespace names: looked up
        in the caches' indexes (the Zones by each domain the name may be in, the records by name), as this runs at
        the end of every reconcile."""
        tunnel = self.caches.cached("Tunnel", obj.spec.tunnel_ref.name, obj.namespace)
        account = None if tunnel is None else account_key(tunnel)
        zones, records = self.caches.informer_of("Zone"), self.caches.informer_of("DNSRecord")
        out = []
        for host in obj.spec.hostnames():
            name = host.rstrip(".").lower()
            in_zone = zones is not None and any(
                account_key(zone) == account
                for domain in dict.fromkeys([name, *suffixes(name)])
                for zone in zones.by_index(DOMAIN_INDEX, domain)
            )
            named = records is not None and any(
                record["metadata"].get("namespace") == obj.namespace
                for record in records.by_index(RECORD_NAME_INDEX, name)
            )
            if not (in_zone or named):
                out.append(host)
        return out
