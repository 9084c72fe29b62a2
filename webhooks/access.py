"""Tenancy at admission: what a namespace may reach, refused at `kubectl apply` where the cluster already shows it.

The controller enforces every rule on every reconcile (`reconcilers.tenancy`, the lifecycle's claims); admission
refuses early what the controller is certain to refuse, so the user reads the reason at once rather than in a
condition. It decides only on what the objects named show: an account, a Zone or a Grant that does not exist yet (a
GitOps sync applies in any order) leaves the decision to the controller, and so does a cluster that cannot be read
within ACCESS_TIMEOUT. A rule is checked on creation and on an update that changes what it reads, so an object a
policy tightened later still takes other updates and its deletion.

Refused: a resource naming a CloudflareAccount that does not let its namespace in (`spec.allowedNamespaces`); the
`adopt` policy where the account does not let the namespace adopt; a DNSRecord in another namespace's Zone, and a
tunnel ingress hostname in a zone another namespace's Zone manages, that the Zone does not grant. Warned of: a Worker
binding another namespace's object that no Grant there lets it reference yet (the Grant may follow), and
`adopt-or-create` where adoption is not permitted (it still creates).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from pydantic import JsonValue, ValidationError

from app.api import FieldError, ResourceClass
from app.api.constants import ADOPTION_POLICY_ANNOTATION
from app.api.grant import Grant, grants
from app.api.links import reference_paths
from app.api.refs import AccountReference, BoundObjectReference, Reference, ZoneReference
from app.api.tenancy import (
    NamespacePolicy,
    NamespacesFrom,
    ZoneIndex,
    account_policies,
    grants_hostname,
    record_hostname,
)
from webhooks.review import AdmissionRequest

log = logging.getLogger(__name__)

ACCESS_TIMEOUT: Final = 2.0
"""Seconds the reads of these checks may take; the API server waits at most 30 s for a whole review (10 s by
default). Past it the object is allowed and the controller decides."""

JSON = Mapping[str, JsonValue]


class Cluster(Protocol):
    """What the checks read of the cluster: the controller's caches on the leader, the API server otherwise."""

    @property
    def default_account_namespaces(self) -> NamespacePolicy:
        """`--default-account-namespaces`: who may use an account that says nothing."""
        ...

    async def get(self, kind: str, name: str, namespace: str | None) -> JSON | None:
        """A kflare object (None: there is none)."""
        ...

    async def list(self, kind: str, namespace: str | None) -> list[JSON]:
        """A kflare kind's objects, in a namespace (None: all namespaces)."""
        ...

    async def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """A namespace's labels (None: not known)."""
        ...


@dataclass(frozen=True)
class Verdict:
    errors: tuple[FieldError, ...] = ()
    warnings: tuple[str, ...] = ()
    read: bool = True
    """False when the cluster could not be read in time: the review's other reads are not tried either."""


ALLOWED: Final = Verdict()
UNREAD: Final = Verdict(read=False)


def _dict(value: object) -> JSON:
    return value if isinstance(value, Mapping) else {}


def _spec(obj: object) -> JSON:
    return _dict(_dict(obj).get("spec"))


def _annotation(obj: object, key: str) -> JsonValue:
    return _dict(_dict(_dict(obj).get("metadata")).get("annotations")).get(key)


def _policy(raw: JsonValue) -> NamespacePolicy | None:
    if raw is None:
        return None
    try:
        return NamespacePolicy.model_validate(raw)
    except ValidationError:
        return None  # refused when the account was written; the controller reports one that no longer parses


@dataclass
class _Review:
    """One object's checks, reading each namespace's labels at most once."""

    cluster: Cluster
    namespace: str
    labels: dict[str, Mapping[str, str] | None] = field(default_factory=dict)

    async def labels_of(self, namespace: str) -> Mapping[str, str] | None:
        if namespace not in self.labels:
            self.labels[namespace] = await self.cluster.namespace_labels(namespace)
        return self.labels[namespace]

    async def admits(self, policy: NamespacePolicy) -> bool:
        if policy.from_ == NamespacesFrom.ALL:
            return True  # no look-up for the usual answer
        return policy.admits(self.namespace, await self.labels_of(self.namespace))

    async def account(self, ref: object) -> tuple[str, NamespacePolicy, NamespacePolicy] | None:
        """The CloudflareAccount `ref` names and its policies (None: another kind, or none of that name yet)."""
        ref = _dict(ref)
        name = ref.get("name")
        if not isinstance(name, str) or ref.get("kind") not in (None, "CloudflareAccount"):
            return None  # a namespaced Account serves its own namespace only: nothing to decide
        account = await self.cluster.get("CloudflareAccount", name, None)
        if account is None:
            return None
        spec = _spec(account)
        allowed, adoption = _policy(spec.get("allowedNamespaces")), _policy(spec.get("adoptionNamespaces"))
        return (name, *account_policies(allowed, adoption, self.cluster.default_account_namespaces))

    async def zone(self, ref: object) -> tuple[str, str, JSON] | None:
        """The Zone `ref` names: its namespace, how to show it here, and the object (None: not there yet)."""
        ref = _dict(ref)
        name = ref.get("name")
        if not isinstance(name, str):
            return None
        namespace = ref.get("namespace")
        where = namespace if isinstance(namespace, str) else self.namespace
        zone = await self.cluster.get("Zone", name, where)
        if zone is None:
            return None
        return where, name if where == self.namespace else f"{where}/{name}", zone

    async def use(self, new: JSON, old: JSON | None, field: str) -> list[FieldError]:
        """A CloudflareAccount, named by the spec's `field`, that does not let this namespace use it."""
        ref = _spec(new).get(field)
        if ref is None or (old is not None and _spec(old).get(field) == ref):
            return []
        found = await self.account(ref)
        if found is None or await self.admits(found[1]):
            return []
        name = found[0]
        return [
            FieldError(
                f"spec.{field}",
                f"CloudflareAccount {name} does not let namespace {self.namespace} use it (its"
                " spec.allowedNamespaces): ask its owner to let the namespace in, or use an Account of this namespace"
                " (accountRef kind: Account)",
            )
        ]

    async def adoption(self, new: JSON, old: JSON | None, links: Links) -> Verdict:
        """The adoption policy where the account does not let this namespace adopt: the account the spec names, or
        its Zone's."""
        policy = _annotation(new, ADOPTION_POLICY_ANNOTATION)
        if policy not in ("adopt", "adopt-or-create"):
            return ALLOWED
        if old is not None and _annotation(old, ADOPTION_POLICY_ANNOTATION) == policy:
            return ALLOWED
        spec = _spec(new)
        ref = next((spec[f] for f in links.accounts if spec.get(f) is not None), None)
        zone_ref = next((spec[f] for f in links.zones if spec.get(f) is not None), None)
        if ref is None and zone_ref is not None:
            zone = await self.zone(zone_ref)
            ref = None if zone is None else _spec(zone[2]).get("accountRef")
        found = None if ref is None else await self.account(ref)
        if found is None:
            return ALLOWED
        name, users, adopters = found
        if await self.admits(users) and await self.admits(adopters):
            return ALLOWED
        message = (
            f"CloudflareAccount {name} does not let namespace {self.namespace} adopt objects that exist in Cloudflare"
            " (its spec.adoptionNamespaces)"
        )
        path = f"metadata.annotations[{ADOPTION_POLICY_ANNOTATION}]"
        if policy == "adopt":
            return Verdict(errors=(FieldError(path, f"{message}; remove the annotation to create the object"),))
        return Verdict(warnings=(f"{path}: {message}: the object is created if none exists, else the resource waits",))

    async def record(self, new: JSON, old: JSON | None, field: str) -> list[FieldError]:
        """A name (the spec's `name`, as a DNSRecord gives it) in another namespace's Zone, named by the spec's
        `field`, that the Zone does not grant."""
        spec = _spec(new)
        ref, name = _dict(spec.get(field)), spec.get("name")
        if old is not None and _spec(old).get(field) == spec.get(field) and _spec(old).get("name") == name:
            return []
        if ref.get("namespace") in (None, self.namespace) or not isinstance(name, str):
            return []
        found = await self.zone(ref)
        if found is None:
            return []
        where, shown, zone = found
        hostname = record_hostname(name, str(_spec(zone).get("name", "")))
        labels = await self.labels_of(self.namespace)
        if grants_hostname(_spec(zone).get("hostnameGrants"), where, self.namespace, labels, hostname):
            return []
        return [
            FieldError(
                "spec.name",
                f"Zone {shown} grants namespace {self.namespace} no name {hostname} (its spec.hostnameGrants)",
            )
        ]

    async def ingress(self, new: JSON, old: JSON | None) -> list[FieldError]:
        """Tunnel ingress hostnames in a zone another namespace's Zone manages, that it does not grant. Names the
        object already had are left alone: the controller reports them."""
        # The API server stores `ingress` as a list (its schema says so): an old object holds no other.
        had = _spec(old).get("ingress") if old is not None else None
        before = {_dict(r).get("hostname") for r in had} if isinstance(had, list) else set()
        rules = _spec(new).get("ingress")
        wanted = [
            (i, hostname)
            for i, rule in enumerate(rules if isinstance(rules, list) else [])
            if isinstance(rule, Mapping)
            and isinstance(hostname := rule.get("hostname"), str)
            and hostname not in before
        ]
        if not wanted:
            return []
        zones = ZoneIndex(await self.cluster.list("Zone", None))
        errors: list[FieldError] = []
        for i, hostname in wanted:
            managing = zones.managing(hostname)
            if managing is None:
                continue
            where = str(_dict(managing.get("metadata")).get("namespace") or "")
            grants = _spec(managing).get("hostnameGrants")
            if grants_hostname(grants, where, self.namespace, await self.labels_of(self.namespace), hostname):
                continue
            errors.append(
                FieldError(
                    f"spec.ingress[{i}].hostname",
                    f"{hostname} is in zone {_spec(managing).get('name')}, which a Zone in another namespace manages"
                    f" and which grants namespace {self.namespace} no such name (the Zone's spec.hostnameGrants)",
                )
            )
        return errors

    async def bindings(self, new: JSON, old: JSON | None, field: str, bound: Mapping[str, str]) -> list[str]:
        """Bindings (the items of the spec's `field`, a Worker's) to another namespace's object, by their `bound`
        keys and the kind each names, that no Grant there lets this namespace reference."""
        warnings: list[str] = []
        before = _spec(old).get(field) if old is not None else None
        bindings = _spec(new).get(field)
        for i, binding in enumerate(bindings if isinstance(bindings, list) else []):
            for key, kind in bound.items():
                ref = _dict(_dict(binding).get(key))
                where, name = ref.get("namespace"), ref.get("name")
                if where in (None, self.namespace) or not isinstance(name, str) or not isinstance(where, str):
                    continue
                if isinstance(before, list) and binding in before:
                    continue
                if any(_grants(g, self.namespace, kind, name) for g in await self.cluster.list(Grant.info.kind, where)):
                    continue
                warnings.append(
                    f"spec.{field}[{i}].{key}: no Grant in namespace {where} lets WorkerScripts of namespace"
                    f" {self.namespace} reference {kind} {name}: the Worker waits until one does"
                )
        return warnings


@dataclass(frozen=True)
class Links:
    """Where a kind's spec holds the references admission checks, as its model declares them (`reference_paths`):
    the accounts it names, the Zones (any reference to one), the Zones that may be another namespace's
    (`ZoneReference`), and the lists of bindings to objects a Grant may let it reach, by each item's keys."""

    accounts: tuple[str, ...]
    zones: tuple[str, ...]
    foreign_zones: tuple[str, ...]
    bindings: Mapping[str, Mapping[str, str]]

    @classmethod
    @functools.cache
    def of(cls, model: ResourceClass) -> Links:
        bound: dict[str, dict[str, str]] = {}
        for path, kind in reference_paths(model, BoundObjectReference).items():
            container, _, key = path.partition("[].")
            if key and "[]" not in key:
                bound.setdefault(container, {})[key] = kind
        return cls(
            tuple(p for p, kind in reference_paths(model, AccountReference).items() if kind == "CloudflareAccount"),
            tuple(p for p, kind in reference_paths(model, Reference).items() if kind == "Zone" and "[]" not in p),
            tuple(reference_paths(model, ZoneReference)),
            bound,
        )


def _grants(raw: JSON, namespace: str, kind: str, name: str) -> bool:
    try:
        grant = Grant.model_validate(raw)
    except ValidationError:
        return False
    return not grant.metadata.deleting and grants(grant, "WorkerScript", namespace, kind, name)


async def _review(model: ResourceClass, request: AdmissionRequest, cluster: Cluster) -> Verdict:
    new = _dict(request.object)
    old = _dict(request.old_object) if request.operation.upper() == "UPDATE" else None
    check = _Review(cluster, request.namespace)
    links = Links.of(model)
    errors: list[FieldError] = []
    for path in links.accounts:
        errors += await check.use(new, old, path)
    adoption = await check.adoption(new, old, links)
    errors += adoption.errors
    warnings = list(adoption.warnings)
    for path in links.foreign_zones:
        errors += await check.record(new, old, path)
    for path, bound in links.bindings.items():
        warnings += await check.bindings(new, old, path, bound)
    if model.info.kind == "TunnelConfiguration":
        errors += await check.ingress(new, old)  # its ingress hostnames are names, not references
    return Verdict(tuple(errors), tuple(warnings))


async def review_access(model: ResourceClass, request: AdmissionRequest, cluster: Cluster | None) -> Verdict:
    """What tenancy refuses of an object the schema allows, and what it warns of; nothing when the cluster cannot be
    read in time (the controller decides then)."""
    if cluster is None or not request.namespace or not model.info.namespaced:
        return ALLOWED
    try:
        async with asyncio.timeout(ACCESS_TIMEOUT):
            return await _review(model, request, cluster)
    except Exception as exc:  # the controller enforces the same: never fail an admission for a read
        log.info("no tenancy checks at admission for %s %s: %r", model.info.kind, request.namespace, exc)
        return UNREAD
