"""Every kind kflare reconciles, wired into the manager: adding a kind is one line here."""

from __future__ import annotations

from app.kube.manager import Manager, Registration
from reconcilers.cloudflare_account import CloudflareAccountKind
from reconcilers.context import Context
from reconcilers.dns_record import DNSRecordKind
from reconcilers.ip_list import IPListKind
from reconcilers.lifecycle import ManagedKind
from reconcilers.managed_transform import ManagedTransformKind
from reconcilers.rules import RULE_KINDS
from reconcilers.storage import D1DatabaseKind, KVNamespaceKind, R2BucketKind
from reconcilers.tunnel import TunnelKind
from reconcilers.tunnel_configuration import TunnelConfigurationKind
from reconcilers.workers import WorkerRouteKind, WorkerScriptKind
from reconcilers.zone import ZoneKind

KINDS: tuple[type[ManagedKind], ...] = (  # type: ignore[type-arg]
    CloudflareAccountKind,
    ZoneKind,
    DNSRecordKind,
    KVNamespaceKind,
    R2BucketKind,
    D1DatabaseKind,
    WorkerScriptKind,
    WorkerRouteKind,
    TunnelKind,
    TunnelConfigurationKind,
    IPListKind,
    *RULE_KINDS,
    ManagedTransformKind,
)


def register_all(manager: Manager, ctx: Context) -> None:
    for kind in KINDS:
        reconciler = kind(ctx)
        manager.register(
            Registration(
                reconciler,
                drift_group=reconciler.drift_group,
                open_drift_round=reconciler.open_drift_round,
                workers=reconciler.concurrency,
            )
        )
