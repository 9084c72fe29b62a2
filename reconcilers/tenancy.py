"""Which namespaces may use an account, and adopt through it: the accounts' policies read against the cache of
namespaces' labels."""

from __future__ import annotations

from pydantic import ValidationError

from app.api import CloudflareAccount
from app.api.base import GROUP, VERSION
from app.api.grant import Grant, grants
from app.api.tenancy import (
    NAMESPACE_NAME_LABEL,
    NamespacePolicy,
    NamespacesFrom,
    creation_order,
    grants_hostname,
    holds_zone,
    suffixes,
)
from app.api.tenancy import account_policies as policies_of
from app.kube.client import JSON, ResourceType
from app.kube.index import Ref
from reconcilers.context import AccountLink, Caches

GRANTS = ResourceType(GROUP, VERSION, Grant.info.plural, Grant.info.kind)
DOMAIN_INDEX = "domain"
"""Zone's index of the domain each Zone names (lower case): which Zone manages a host name is one lookup per label."""


def zone_domains(raw: JSON) -> list[str]:
    name = (raw.get("spec") or {}).get("name")
    return [str(name).lower().rstrip(".")] if name else []


RECORD_NAME_INDEX = "record-name"
"""DNSRecord's index of the name each record gives (lower case, no final dot): whether a record names a host is one
lookup."""


def record_names(raw: JSON) -> list[str]:
    name = (raw.get("spec") or {}).get("name")
    return [str(name).rstrip(".").lower()] if name else []


def account_policies(account: CloudflareAccount, default: NamespacePolicy) -> tuple[NamespacePolicy, NamespacePolicy]:
    """Who may use the account, and who may adopt through it (`app.api.tenancy.account_policies`); `default` where it
    says nothing (`--default-account-namespaces`)."""
    spec = account.spec
    return policies_of(spec.allowed_namespaces, spec.adoption_namespaces, default)


def only_namespace(namespace: str) -> NamespacePolicy:
    """The policy that lets in `namespace` alone."""
    requirement = {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": [namespace]}
    return NamespacePolicy.model_validate({"from": "Selector", "selector": {"matchExpressions": [requirement]}})


def permits(caches: Caches, policy: NamespacePolicy, namespace: str | None) -> bool:
    """Whether `policy` lets `namespace` in (a cluster-scoped caller, None, is the administrator's own)."""
    if namespace is None or policy.from_ == NamespacesFrom.ALL:
        return True  # every reconcile of every resource asks: the usual answer costs no look-up
    return policy.admits(namespace, caches.namespace_labels(namespace))


def may_adopt(caches: Caches, account: AccountLink, namespace: str | None) -> bool:
    """Whether a resource of `namespace` may adopt through the account: both of its policies let it in."""
    return permits(caches, account.users, namespace) and permits(caches, account.adopters, namespace)


def managing_zone(caches: Caches, hostname: str) -> JSON | None:
    """The Zone that manages the zone `hostname` is in: the one whose domain is its longest suffix, among Zones that
    hold a Cloudflare zone (a Zone refused as `ClaimedElsewhere` manages nothing); of two such Zones of one domain
    (in two accounts), the oldest, as `app.api.tenancy.ZoneIndex` decides for the Gateway class and admission."""
    informer = caches.informer_of("Zone")
    if informer is None:
        return None
    for domain in suffixes(hostname):
        found = [raw for raw in informer.by_index(DOMAIN_INDEX, domain) if holds_zone(raw)]
        if found:
            return min(found, key=creation_order)
    return None


def zone_grants(caches: Caches, zone: JSON, namespace: str, hostname: str) -> bool:
    """Whether the Zone lets `namespace` publish `hostname`: its own namespace, or one of its `hostnameGrants`."""
    zone_namespace = zone["metadata"].get("namespace") or ""
    if zone_namespace == namespace:
        return True
    grants = (zone.get("spec") or {}).get("hostnameGrants")
    return grants_hostname(grants, zone_namespace, namespace, caches.namespace_labels(namespace), hostname)


def hostname_refusal(caches: Caches, namespace: str, hostname: str) -> str | None:
    """Why `namespace` may not publish `hostname` (a tunnel ingress rule, a route), or None when it may: a name in
    a zone a Zone manages needs that Zone's namespace or one of its grants. The owner is not named to another
    namespace."""
    zone = managing_zone(caches, hostname)
    if zone is None or zone_grants(caches, zone, namespace, hostname):
        return None
    return (
        f"{hostname} is in zone {zone['spec']['name']}, which a Zone in another namespace manages and which grants"
        f" namespace {namespace} no such name (the Zone's spec.hostnameGrants)"
    )


def grants_of(namespace: str) -> Ref:
    """What a resource reading `namespace`'s grants names as a parent: any grant's change there reconciles it."""
    return Ref(Grant.info.kind, namespace, "")


def reference_granted(caches: Caches, from_kind: str, from_namespace: str, to_kind: str, to: Ref) -> bool:
    """Whether a `from_kind` of `from_namespace` may reference `to`: the same namespace, or a Grant in `to`'s."""
    if from_namespace == to.namespace:
        return True
    informer = caches.informer_of(Grant.info.kind)
    for raw in [] if informer is None else informer.list(to.namespace):
        try:
            grant = Grant.model_validate(raw)
        except ValidationError:
            continue  # a stored one that no longer parses grants nothing
        if not grant.metadata.deleting and grants(grant, from_kind, from_namespace, to_kind, to.name):
            return True
    return False
