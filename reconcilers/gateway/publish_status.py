"""What a route's and a Gateway's statuses say of publishing them through a tunnel (`reconcilers.gateway.publish`):
a route's `DNSPublished` (its hostnames' DNS records) and `UniversalSSL` (Cloudflare's certificate over them) of each
parent, and the reasons a Gateway is not Programmed on the Cloudflare side.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from app.api.constants import Reason
from reconcilers.gateway import raw
from reconcilers.gateway.shapes import Condition, condition

if TYPE_CHECKING:
    # Annotations only: `publish` names this module's conditions and reasons too, so it cannot be imported here.
    from reconcilers.gateway.publish import RecordPlan, TunnelKey, TunnelTarget

DNS_CONDITION = "DNSPublished"
"""The condition of a route's parent entry that says what became of its hostnames' DNS records."""
DISABLED = "Disabled"
"""`DNSPublished` of a route on a Gateway that says `kflare.dev/dns-publishing: disabled`."""
CERTIFICATE_CONDITION = "UniversalSSL"
"""The condition of a route's parent entry that says whether Cloudflare's Universal SSL certificate (the zone's apex
and one label below it) covers its hostnames in kflare Zones."""
COVERED = "Covered"
TOO_DEEP = "BeyondUniversalSSL"
PUBLISHED = "Published"
PENDING = "Pending"
ZONE_NOT_MANAGED = "ZoneNotManaged"
ALREADY_EXISTS = Reason.ALREADY_EXISTS.value
TUNNEL_ALREADY_CONFIGURED = Reason.TUNNEL_ALREADY_CONFIGURED.value
"""Programmed=False of a Gateway whose tunnel a TunnelConfiguration configures: the class writes nothing to it."""
CONFIGURATION_REFUSED = "ConfigurationRefused"
"""Programmed=False of a Gateway while the data plane refuses its configuration."""


def conflict_message(tunnel: TunnelKey, configuration: str) -> str:
    return (
        f"TunnelConfiguration {configuration} configures Tunnel {tunnel[0]}/{tunnel[1]}: a tunnel has one ingress "
        "document, so this class writes nothing to it (no ingress rules, no DNS records) until that "
        "TunnelConfiguration is gone or the class names another Tunnel"
    )


def dns_disabled_condition(gateway: str, generation: int) -> Condition:
    """`DNSPublished` of a route's entry for a Gateway that publishes no DNS."""
    message = (
        f"Gateway {gateway} says kflare.dev/dns-publishing: disabled: its hostnames are in the tunnel's ingress "
        "only, and their DNS is yours to point at the tunnel"
    )
    return condition(DNS_CONDITION, False, DISABLED, message, generation)


def certificate_condition(hostnames: Iterable[tuple[str, str]], generation: int) -> Condition | None:
    """`UniversalSSL` of a route's entry from its (hostname, zone domain) pairs in kflare Zones; None when there are
    none. Universal SSL covers the apex and `*.<apex>`: a hostname two labels or more below the zone gets Cloudflare's
    certificate error until an Advanced Certificate (or Total TLS) covers it."""
    pairs = sorted(set(hostnames))
    if not pairs:
        return None
    deep = [host for host, domain in pairs if host.count(".") - domain.count(".") > 1]
    if not deep:
        return condition(
            CERTIFICATE_CONDITION, True, COVERED, "the zone's Universal SSL certificate covers them", generation
        )
    message = (
        f"more than one label below their zone, which Universal SSL (the apex and *.<apex>) does not cover: "
        f"{', '.join(deep)}; visitors get a certificate error until an Advanced Certificate or Total TLS covers them"
    )
    return condition(CERTIFICATE_CONDITION, False, TOO_DEEP, message, generation)


def _ready(record: Mapping[str, object]) -> Mapping[str, object] | None:
    conditions = raw.items(raw.at(record, "status", "conditions"))
    return next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == "Ready"), None)


def dns_condition(
    plans: list[RecordPlan],
    records: Mapping[tuple[str, str], Mapping[str, object]],
    tunnel: TunnelTarget | None,
    generation: int,
    conflict: str | None = None,
) -> Condition | None:
    """The route's `DNSPublished` condition for the hostnames it publishes through one tunnel; None when it
    publishes none (or the class has no tunnel)."""
    if not plans or tunnel is None:
        return None
    if conflict is not None:
        return condition(
            DNS_CONDITION, False, TUNNEL_ALREADY_CONFIGURED, conflict_message(tunnel.key, conflict), generation
        )
    target = tunnel.cname or "the tunnel"
    taken, failing, waiting, done, elsewhere = [], [], [], [], []
    for plan in sorted(plans, key=lambda p: p.hostname):
        if plan.zone is None:
            elsewhere.append(plan.hostname)
            continue
        if plan.taken_by is not None:
            taken.append(f"{plan.hostname}: DNSRecord {plan.taken_by} already publishes it, and is not overwritten")
            continue
        record = records.get((plan.namespace, plan.name))
        ready = _ready(record) if record is not None else None
        where = f"DNSRecord {plan.namespace}/{plan.name}"
        if ready is not None and ready.get("reason") == ALREADY_EXISTS:
            taken.append(
                f"{plan.hostname}: zone {plan.domain} already has a record of that name that kflare does not own "
                f"({where}); it is not overwritten"
            )
        elif ready is not None and ready.get("status") == "True":
            done.append(f"{plan.hostname} ({where})")
        elif ready is not None and ready.get("status") == "False" and ready.get("reason") not in (None, PENDING):
            failing.append(f"{plan.hostname}: {where} is not Ready: {ready.get('message') or ready.get('reason')}")
        else:
            waiting.append(f"{plan.hostname} ({where})")
    note = ""
    if elsewhere:
        note = (
            f"; in no kflare Zone of the tunnel's account, so published in the tunnel's ingress only (their DNS is "
            f"yours to point at {target}): {', '.join(elsewhere)}"
        )
    if taken:
        return condition(DNS_CONDITION, False, ALREADY_EXISTS, "; ".join(taken) + note, generation)
    if failing:
        return condition(DNS_CONDITION, False, PENDING, "; ".join(failing) + note, generation)
    if waiting:
        return condition(DNS_CONDITION, False, PENDING, "waiting for " + ", ".join(waiting) + note, generation)
    if done:
        return condition(
            DNS_CONDITION, True, PUBLISHED, f"proxied CNAME to {target}: {', '.join(done)}{note}", generation
        )
    # Unknown, not False: nothing is wrong, kflare just cannot tell whether the DNS elsewhere points at the tunnel.
    unknown = condition(
        DNS_CONDITION,
        False,
        ZONE_NOT_MANAGED,
        f"in no kflare Zone of the tunnel's account: {', '.join(elsewhere)} published in the tunnel's "
        f"ingress only; their DNS is managed elsewhere (a proxied CNAME to {target} makes them reachable)",
        generation,
    )
    unknown["status"] = "Unknown"
    return unknown
