"""Which namespaces may use an account, and adopt through it: the accounts' policies read against the cache of
namespaces' labels."""

from __future__ import annotations

from pydantic import ValidationError

from app.api import CloudflareAccount
from app.api.tenancy import NO_NAMESPACES, HostnameGrant, NamespacePolicy
from app.kube.client import JSON
from reconcilers.context import AccountLink, Context

DOMAIN_INDEX = "domain"
"""Zone's index of the domain each Zone names (lower case): which Zone manages a host name is one lookup per label."""


def zone_domains(raw: JSON) -> list[str]:
    name = (raw.get("spec") or {}).get("name")
    return [str(name).lower().rstrip(".")] if name else []


def account_policies(ctx: Context, account: CloudflareAccount) -> tuple[NamespacePolicy, NamespacePolicy]:
    """Who may use the account, and who may adopt through it: its own policies, else the controller's default. An
    account that says who may use it and not who may adopt lets nobody adopt: adoption takes over what others made,
    and is granted on its own."""
    spec = account.spec
    users = spec.allowed_namespaces or ctx.default_account_namespaces
    if spec.adoption_namespaces is not None:
        adopters = spec.adoption_namespaces
    else:
        adopters = NO_NAMESPACES if spec.allowed_namespaces is not None else ctx.default_account_namespaces
    return users, adopters


def permits(ctx: Context, policy: NamespacePolicy, namespace: str | None) -> bool:
    """Whether `policy` lets `namespace` in (a cluster-scoped caller, None, is the administrator's own)."""
    return namespace is None or policy.admits(namespace, ctx.namespace_labels(namespace))


def may_adopt(ctx: Context, account: AccountLink, namespace: str | None) -> bool:
    """Whether a resource of `namespace` may adopt through the account: both of its policies let it in."""
    return permits(ctx, account.users, namespace) and permits(ctx, account.adopters, namespace)


def managing_zone(ctx: Context, hostname: str) -> JSON | None:
    """The Zone that manages the zone `hostname` is in: the one whose domain is its longest suffix, among Zones that
    hold a Cloudflare zone (a Zone refused as `ClaimedElsewhere` manages nothing)."""
    informer = ctx.informer_of("Zone")
    if informer is None:
        return None
    labels = hostname.lower().rstrip(".").removeprefix("*.").split(".")
    for start in range(len(labels) - 1):
        for raw in informer.by_index(DOMAIN_INDEX, ".".join(labels[start:])):
            if ((raw.get("status") or {}).get("cloudflareMetadata") or {}).get("zoneID"):
                return raw
    return None


def zone_grants(ctx: Context, zone: JSON, namespace: str, hostname: str) -> bool:
    """Whether the Zone lets `namespace` publish `hostname`: its own namespace, or one of its `hostnameGrants`."""
    if (zone["metadata"].get("namespace") or "") == namespace:
        return True
    grants = (zone.get("spec") or {}).get("hostnameGrants") or []
    labels = ctx.namespace_labels(namespace)
    for grant in grants:
        try:
            parsed = HostnameGrant.model_validate(grant)
        except ValidationError:
            continue  # refused at admission; a stored one that no longer parses grants nothing
        if parsed.grants(namespace, labels, hostname):
            return True
    return False


def hostname_refusal(ctx: Context, namespace: str, hostname: str) -> str | None:
    """Why `namespace` may not publish `hostname` (a tunnel ingress rule, a route), or None when it may: a name in
    a zone a Zone manages needs that Zone's namespace or one of its grants. The owner is not named to another
    namespace."""
    zone = managing_zone(ctx, hostname)
    if zone is None or zone_grants(ctx, zone, namespace, hostname):
        return None
    return (
        f"{hostname} is in zone {zone['spec']['name']}, which a Zone in another namespace manages and which grants"
        f" namespace {namespace} no such name (the Zone's spec.hostnameGrants)"
    )
