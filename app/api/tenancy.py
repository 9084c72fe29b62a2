"""Who may use what: namespace policies (Gateway API's `from: All | Selector | None` shape) and the label selectors
they select namespaces with. Pure: the caller brings the namespace's labels."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Annotated, Final, Generic, Literal

from pydantic import ConfigDict, Field, model_validator
from typing_extensions import TypeVar

from app.api.base import KflareModel, Problems

NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"
"""The label the API server sets on every namespace to its name, which no one can change: selecting on it (or on
labels only an administrator sets) is what makes a selector safe against a tenant relabelling its own namespace."""

LABEL_KEY_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
LABEL_VALUE_PATTERN: Final = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LabelKey = Annotated[str, Field(min_length=1, max_length=317, pattern=LABEL_KEY_PATTERN)]
"""A label's key, as Kubernetes spells one: an optional DNS-subdomain prefix and `/`, then a name."""
LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]


class NamespacesFrom(StrEnum):
    ALL = "All"
    SELECTOR = "Selector"
    NONE = "None"


class LabelSelectorRequirement(KflareModel):
    """A requirement on one label (as Kubernetes' `LabelSelectorRequirement`)."""

    key: LabelKey
    """The label's key."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the label's value is compared with `values`."""
    values: Annotated[list[LabelValue], Field(max_length=64)] | None = None
    """The values for `In` and `NotIn` (at least one); none for `Exists` and `DoesNotExist`."""

    @model_validator(mode="after")
    def _values_fit_the_operator(self) -> LabelSelectorRequirement:
        problems = Problems()
        if self.operator in ("In", "NotIn") and not self.values:
            problems.add("values", f"{self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            problems.add("values", f"{self.operator} takes no values")
        problems.raise_if_any("LabelSelectorRequirement")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        found = present and labels[self.key] in (self.values or [])
        return found if self.operator == "In" else not found


class LabelSelector(KflareModel):
    """Selects namespaces by their labels (as Kubernetes' `LabelSelector`); every requirement must hold. An empty
    selector selects every namespace."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    match_labels: Annotated[dict[str, LabelValue], Field(max_length=64)] | None = None
    """Labels a namespace must carry, with these values."""
    match_expressions: Annotated[list[LabelSelectorRequirement], Field(max_length=64)] | None = None
    """Requirements on a namespace's labels."""

    @model_validator(mode="after")
    def _label_keys(self) -> LabelSelector:
        # The keys are checked here: a pattern on a map's keys makes no structural schema.
        problems = Problems()
        for key in self.match_labels or {}:
            if not 0 < len(key) <= 317 or re.fullmatch(LABEL_KEY_PATTERN, key) is None:
                problems.add(("matchLabels", key), "is not a label key (`[prefix/]name`, as Kubernetes spells one)")
        problems.raise_if_any("LabelSelector")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(key) != value for key, value in (self.match_labels or {}).items()):
            return False
        return all(requirement.matches(labels) for requirement in self.match_expressions or [])


class NamespacePolicy(KflareModel):
    """Which namespaces a policy lets in (Gateway API's `from`/`selector` shape)."""

    from_: NamespacesFrom
    """`All`: every namespace; `Selector`: the namespaces `selector` selects; `None`: no namespace."""
    selector: LabelSelector | None = None
    """With `from: Selector`: the namespaces let in. Select on `kubernetes.io/metadata.name` (set by the API server
    to the namespace's name) or on labels only a cluster administrator may set: a tenant can label its own
    namespace."""

    @model_validator(mode="after")
    def _selector_with_selector(self) -> NamespacePolicy:
        problems = Problems()
        if self.from_ == NamespacesFrom.SELECTOR and self.selector is None:
            problems.add("selector", "required with from: Selector")
        if self.from_ != NamespacesFrom.SELECTOR and self.selector is not None:
            problems.add("selector", f"only with from: Selector (from is {self.from_})")
        problems.raise_if_any("NamespacePolicy")
        return self

    def admits(self, namespace: str, labels: Mapping[str, str] | None) -> bool:
        """Whether the policy lets `namespace` in; `labels` are its labels (None: not known, then only its name
        label is)."""
        if self.from_ == NamespacesFrom.ALL:
            return True
        if self.from_ == NamespacesFrom.NONE or self.selector is None:
            return False
        known = dict(labels or {})
        known[NAMESPACE_NAME_LABEL] = namespace  # the API server's own label, whatever the cache holds
        return self.selector.matches(known)


ALL_NAMESPACES: Final = NamespacePolicy.model_validate({"from": "All"})
NO_NAMESPACES: Final = NamespacePolicy.model_validate({"from": "None"})


HOSTNAME_PATTERN: Final = r"^(\*\.)?([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)*[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A host name, or `*.` and a host name for every name below it."""
Hostname = Annotated[str, Field(min_length=1, max_length=253, pattern=HOSTNAME_PATTERN)]


def hostname_matches(pattern: str, hostname: str) -> bool:
    """Whether `hostname` is `pattern`, or below it when the pattern is `*.<name>` (one or more labels deeper, as
    Gateway API's wildcards)."""
    pattern, hostname = pattern.lower().rstrip("."), hostname.lower().rstrip(".")
    if pattern.startswith("*."):
        return hostname.endswith(pattern[1:]) and len(hostname) > len(pattern) - 1
    return hostname == pattern


class HostnameGrant(KflareModel):
    """Lets the resources of other namespaces publish names under the zone: DNSRecords that name this Zone,
    tunnel ingress rules and the Gateway class's routes."""

    namespaces: NamespacePolicy
    """The namespaces granted (`from: All | Selector`)."""
    hostnames: Annotated[list[Hostname], Field(min_length=1, max_length=64)] | None = None
    """The names granted: a host name, or `*.<name>` for every name below it. Unset: every name in the zone."""

    def grants(self, namespace: str, labels: Mapping[str, str] | None, hostname: str) -> bool:
        if not self.namespaces.admits(namespace, labels):
            return False
        return self.hostnames is None or any(hostname_matches(p, hostname) for p in self.hostnames)


def account_policies(
    allowed: NamespacePolicy | None, adoption: NamespacePolicy | None, default: NamespacePolicy
) -> tuple[NamespacePolicy, NamespacePolicy]:
    """Who may use an account, and who may adopt through it: its own policies, else the controller's default. An
    account that says who may use it and not who may adopt lets nobody adopt: adoption takes over what others made,
    and is granted on its own."""
    users = allowed or default
    if adoption is not None:
        return users, adoption
    return users, NO_NAMESPACES if allowed is not None else default


def grants_hostname(
    grants: object, zone_namespace: str, namespace: str, labels: Mapping[str, str] | None, hostname: str
) -> bool:
    """Whether a Zone of `zone_namespace` whose `spec.hostnameGrants` are `grants` (as stored: JSON) lets `namespace`
    publish `hostname`: its own namespace, or one of its grants."""
    if zone_namespace == namespace:
        return True
    for grant in grants if isinstance(grants, list) else []:
        try:
            parsed = HostnameGrant.model_validate(grant)
        except ValueError:
            continue  # refused at admission; a stored one that no longer parses grants nothing
        if parsed.grants(namespace, labels, hostname):
            return True
    return False


def record_hostname(name: str, zone: str) -> str:
    """A DNS record's name as a full host name: `@` is the zone's apex, a name outside the zone is taken as relative
    to it (as Cloudflare takes it)."""
    name, zone = name.lower().rstrip("."), zone.lower().rstrip(".")
    if name == "@":
        return zone
    return name if name == zone or name.endswith("." + zone) else f"{name}.{zone}"


def _bare(name: str) -> str:
    return name.lower().rstrip(".")


def _part(obj: Mapping[str, object], key: str) -> Mapping[str, object]:
    """The object under `key` of a stored object, empty when there is none."""
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def zone_domain(zone: Mapping[str, object]) -> str:
    return _bare(str(_part(zone, "spec").get("name") or ""))


def holds_zone(zone: Mapping[str, object]) -> bool:
    """Whether the Zone holds a Cloudflare zone (one refused as `ClaimedElsewhere`, or not made yet, manages
    nothing)."""
    return bool(_part(_part(zone, "status"), "cloudflareMetadata").get("zoneID"))


def creation_order(obj: Mapping[str, object]) -> tuple[str, str, str]:
    meta = _part(obj, "metadata")
    return (str(meta.get("creationTimestamp") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def suffixes(hostname: str) -> list[str]:
    """The domains a hostname may be in, longest first: itself (a zone's apex), then each parent but the top-level
    label (a leading `*.` stripped)."""
    labels = _bare(hostname).removeprefix("*.").split(".")
    return [".".join(labels[start:]) for start in range(len(labels) - 1)]


ZoneT = TypeVar("ZoneT", bound=Mapping[str, object], default=Mapping[str, object])
"""What the index holds the Zones as: it hands back the very objects it was given."""


class ZoneIndex(Generic[ZoneT]):
    """The Zones that manage a zone, by domain: what the Gateway class and admission read (the controller's
    `reconcilers.tenancy.managing_zone` answers the same from its cache's index)."""

    def __init__(self, zones: Iterable[ZoneT]) -> None:
        by_domain: dict[str, list[ZoneT]] = defaultdict(list)
        for zone in zones:
            domain = zone_domain(zone)
            if domain and holds_zone(zone):
                by_domain[domain].append(zone)
        # Two Zones holding a zone of one domain (in two Cloudflare accounts): the oldest decides, whatever the order
        # the cache lists them in.
        self.by_domain = {domain: min(found, key=creation_order) for domain, found in by_domain.items()}

    def managing(self, hostname: str) -> ZoneT | None:
        """The Zone that manages the zone `hostname` is in: the one whose domain is its longest suffix."""
        for domain in suffixes(hostname):
            found = self.by_domain.get(domain)
            if found is not None:
                return found
        return None
