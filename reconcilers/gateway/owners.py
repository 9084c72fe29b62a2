"""Who may publish a hostname through the class, and which namespace serves it when several may: pure functions of
the Zones, the namespaces and the class's per-namespace suffix policy, as the caches hold them.

- A hostname in a zone a kflare Zone manages (the Zone holding a Cloudflare zone whose domain is the hostname's
  longest suffix, as `reconcilers.tenancy.managing_zone` finds it) belongs to the Zone's namespace and to the
  namespaces its `hostnameGrants` grant it to.
- A hostname in no managed zone, with the suffix policy set (`--gateway-namespace-label`): to the namespaces whose
  label's value is the hostname or a suffix of it (a leading `*.` is stripped first); a namespace without the label
  gets none (fail closed).
- Otherwise anyone's.

Between namespaces that may all publish one hostname, the owner is decided by the namespaces, never by the routes'
age (deleting and re-creating the owner's route hands nothing over): in a managed zone the Zone's own namespace, then
the namespace of its earliest grant that admits it; under the suffix policy the namespace whose label is the longest
suffix; then the namespace created first, then by name. Only without either policy does the oldest route win, as
Gateway API breaks ties. A refusal never names the other namespace.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from app.api.tenancy import HostnameGrant, ZoneIndex, holds_zone, suffixes, zone_domain
from app.api.tenancy import creation_order as _age
from reconcilers.credentials import account_key
from reconcilers.gateway import raw

ZONE_RULE = "zone"
SUFFIX_RULE = "suffix"
NO_RULE = ""
_last: dict[Hashable, Owners] = {}
"""The last `Owners.of`, by what it read."""
RULES_KEPT = 100_000
"""Hostnames whose rule an `Owners` remembers (it lives as long as the Zones and namespaces stay as they are)."""


def _bare(name: str) -> str:
    return name.lower().rstrip(".")


def managing_zone(zones: Iterable[Mapping[str, object]], hostname: str) -> Mapping[str, object] | None:
    return ZoneIndex(zones).managing(hostname)


def _grants(zone: Mapping[str, object]) -> list[HostnameGrant]:
    out = []
    for grant in raw.items(raw.at(zone, "spec", "hostnameGrants")):
        try:
            out.append(HostnameGrant.model_validate(grant))
        except ValidationError:
            continue  # refused at admission; a stored one that no longer parses grants nothing
    return out


def _within(hostname: str, domain: str) -> bool:
    name = _bare(hostname).removeprefix("*.")
    domain = _bare(domain)
    return name == domain or name.endswith("." + domain)


def zones_revision(zones: Iterable[Mapping[str, object]]) -> str:
    """What the class reads of the Zones (which manage what, and whom they grant it): a Zone's other status changes
    leave it alone, so they do not translate the routes again."""
    read = sorted(
        (
            *_age(zone),
            zone_domain(zone),
            holds_zone(zone),
            bool(raw.at(zone, "metadata", "deletionTimestamp")),
            account_key(dict(zone)) or "",
            json.dumps(raw.at(zone, "spec", "hostnameGrants"), sort_keys=True),
        )
        for zone in zones
    )
    return hashlib.sha256(json.dumps(read).encode()).hexdigest()


@dataclass
class Owners:
    """The ownership rules of one translation."""

    zones: ZoneIndex
    labels_of: Mapping[str, Mapping[str, str]]
    """Each namespace's labels (a namespace the cache does not hold is known by its name alone)."""
    created_of: Mapping[str, str] = field(default_factory=dict)
    """Each namespace's creationTimestamp."""
    tenancy_label: str | None = None
    """The per-namespace suffix policy's label; None: no such policy."""
    _grants: dict[tuple[str, str], list[HostnameGrant]] = field(default_factory=dict)
    _rules: dict[str, tuple[str, Mapping[str, object] | None]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        zones: Iterable[Mapping[str, object]],
        namespaces: Iterable[Mapping[str, object]],
        tenancy_label: str | None,
    ) -> Owners:
        zones = list(zones)
        labels_of: dict[str, Mapping[str, str]] = {}
        created_of: dict[str, str] = {}
        for namespace in namespaces:
            meta = raw.mapping(namespace.get("metadata"))
            labels_of[str(meta.get("name"))] = {str(k): str(v) for k, v in raw.mapping(meta.get("labels")).items()}
            created_of[str(meta.get("name"))] = str(meta.get("creationTimestamp") or "")
        # The last translation's rules, when nothing they read has changed: what each hostname's rule is, looked up
        # once rather than once per translation (a route change looked up a thousand routes' zones again).
        key = (zones_revision(zones), repr(sorted(labels_of.items())), repr(sorted(created_of.items())), tenancy_label)
        found = _last.get(key)
        if found is None:
            _last.clear()
            found = _last[key] = cls(ZoneIndex(zones), labels_of, created_of, tenancy_label or None)
        return found

    def grants_of(self, zone: Mapping[str, object]) -> list[HostnameGrant]:
        meta = raw.mapping(zone.get("metadata"))
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if key not in self._grants:
            self._grants[key] = _grants(zone)
        return self._grants[key]

    def _grant_rank(self, zone: Mapping[str, object], namespace: str, hostname: str) -> int | None:
        """0 for the Zone's own namespace, 1 + the index of its first grant that grants `namespace` the hostname,
        None when none does."""
        if raw.text(zone, "metadata", "namespace") == namespace:
            return 0
        labels = self.labels_of.get(namespace)
        for index, grant in enumerate(self.grants_of(zone)):
            if grant.grants(namespace, labels, hostname):
                return 1 + index
        return None

    def rule(self, hostname: str) -> tuple[str, Mapping[str, object] | None]:
        """Which rule decides who owns `hostname` (ZONE_RULE, SUFFIX_RULE, NO_RULE), with the managing Zone."""
        found = self._rules.get(hostname)
        if found is None:
            zone = self.zones.managing(hostname) if hostname != "*" else None
            other = SUFFIX_RULE if self.tenancy_label else NO_RULE
            found = (ZONE_RULE, zone) if zone is not None else (other, None)
            if len(self._rules) >= RULES_KEPT:
                self._rules.clear()  # names of routes long gone: the memo is not a record
            self._rules[hostname] = found
        return found

    def refusal(self, namespace: str, hostname: str) -> str | None:
        """Why `namespace` may not publish `hostname`; None when it may."""
        rule, zone = self.rule(hostname)
        if rule == ZONE_RULE:
            assert zone is not None
            if self._grant_rank(zone, namespace, hostname) is not None:
                return None
            return (
                f"{hostname} is in zone {zone_domain(zone)}, which a Zone in another namespace manages and which"
                f" grants namespace {namespace} no such name (the Zone's spec.hostnameGrants)"
            )
        if rule == SUFFIX_RULE:
            label = str(self.tenancy_label)
            suffix = self.labels_of.get(namespace, {}).get(label)
            if not suffix:
                return (
                    f"{hostname} is in no zone a kflare Zone manages, and namespace {namespace} has no {label} label:"
                    " outside managed zones a namespace publishes only names under its label's value"
                )
            if hostname == "*" or not _within(hostname, suffix):
                return f"{hostname} is not {suffix} or under it (the {label} label of namespace {namespace})"
        return None

    def rank(self, namespace: str, hostname: str) -> tuple[int | str, ...]:
        """Orders the namespaces that may publish `hostname`, the owner first (compare only ranks of one hostname:
        with no rule every namespace ranks alike, and the oldest route decides)."""
        rule, zone = self.rule(hostname)
        created = self.created_of.get(namespace, "")
        if rule == ZONE_RULE:
            assert zone is not None
            grant = self._grant_rank(zone, namespace, hostname)
            return (grant if grant is not None else 1 << 30, created, namespace)
        if rule == SUFFIX_RULE:
            suffix = self.labels_of.get(namespace, {}).get(str(self.tenancy_label)) or ""
            return (-len(_bare(suffix)), created, namespace)
        return ()

    def conflict(self, hostname: str) -> str:
        """Why a route of another namespace serves `hostname` (not naming it)."""
        rule, zone = self.rule(hostname)
        if rule == ZONE_RULE:
            assert zone is not None
            return (
                f"{hostname} is served by a route of another namespace, which the Zone managing zone"
                f" {zone_domain(zone)} puts first (its own namespace, then the namespaces of its hostnameGrants in"
                " their order)"
            )
        if rule == SUFFIX_RULE:
            return (
                f"{hostname} is served by a route of another namespace, whose {self.tenancy_label} label is a longer"
                " suffix of it (or as long, on an older namespace)"
            )
        return f"{hostname} is served by an older route of another namespace"


__all__ = ["Owners", "ZoneIndex", "holds_zone", "managing_zone", "suffixes", "zone_domain", "zones_revision"]
