"""Gateway API objects in, Envoy resources and Gateway API statuses out: a pure function of what the caches hold.

The translation flows one way, in two stages joined by an intermediate representation:

    World (the caches' objects) --gatewayapi--> IR (planes' content, statuses) --xds--> Envoy resources

- `gatewayapi` decides everything a status says: which classes and Gateways are accepted and their listeners valid
  (`status`, `https_listeners` for the certificates), which routes attach where and with which hostnames
  (`gatewayapi.attach`), what their rules build to and which backends resolve (`gatewayapi.builds` over `rules`,
  `backends`, `policies`), the ListenerSets' and the BackendTLSPolicies' statuses, and the hostnames published
  (`gatewayapi.to_ir`).
- `ir` holds the result as plain values: per plane its virtual hosts and clusters, and the statuses.
- `xds` turns a plane into its route configuration, clusters and endpoints, deciding nothing.

This module composes them and keeps the result per cache revision (`World.revision`): the data plane's reconcile
and every tunnel's reconcile of one change share one translation. Each route's build is kept apart, per route
version (`gatewayapi.builds`), so a change to one route of a thousand builds that one.

The output also lists the hostnames the class publishes (and whether each carries gRPC), which is what the tunnel's
ingress document and the DNS records per hostname are computed from.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Hashable
from dataclasses import dataclass, field

from reconcilers.gateway import https_listeners, xds
from reconcilers.gateway.gatewayapi import (
    DNS_PUBLISHING_ANNOTATION,
    World,
    certificate_refs,
    class_statuses,
    hostname_matches,
    publishes_dns,
    to_ir,
)
from reconcilers.gateway.ir import Hostname, ParentStatus
from reconcilers.gateway.kinds import CLASS_NAME
from reconcilers.gateway.route_matches import regex_error
from reconcilers.gateway.shapes import JSON, ObjectKey, PolicyAncestorStatus, RouteKey
from reconcilers.gateway.status import ClassStatus, GatewayStatus, ListenerSetStatus, TunnelState


@dataclass
class Translation:
    resources: dict[str, list[JSON]]
    """Envoy resources by xDS type key (envoy.TYPES), the ingress listener excepted (it comes from settings): the
    shared data plane's."""
    class_status: dict[str, ClassStatus]
    gateway_status: dict[ObjectKey, GatewayStatus]
    route_parents: dict[RouteKey, list[ParentStatus]]
    """This controller's entries of each route's status.parents (others' entries are kept when writing)."""
    hostnames: list[Hostname]
    classes_in_use: set[str]
    policy_ancestors: dict[ObjectKey, list[PolicyAncestorStatus]] = field(default_factory=dict)
    """This controller's entries of each BackendTLSPolicy's status.ancestors (empty: no Gateway of the class uses
    it; others' entries are kept when writing)."""
    listener_set_status: dict[ObjectKey, ListenerSetStatus] = field(default_factory=dict)
    """The status of each ListenerSet whose parent is a Gateway of the class."""
    planes: dict[str, dict[str, list[JSON]]] = field(default_factory=dict)
    """The resources of each Gateway's own data plane, by its xDS cluster name (`Plane.cluster`)."""
    https_chains: dict[str, tuple[https_listeners.Chain, ...]] = field(default_factory=dict)
    """The certificates each data plane ("" the shared one) serves clients reaching it directly, by SNI."""


def published_hostnames(world: World) -> list[Hostname]:
    """The hostnames the tunnel's ingress document and the DNS records are computed from."""
    return translate(world).hostnames


_MEMO_SIZE = 4
_memo: dict[Hashable, Translation] = {}


def translate(world: World) -> Translation:
    """The translation of `world`, remembered per cache revision: the statuses are the caller's own copy (callers
    amend them), the rest is shared. The classes' statuses are the caller's world's own: they alone depend on the
    installed bundle, which only the class's reconcile reads, so the tunnels' reconcile shares the translation."""
    if world.revision is None:
        return _translate(world)
    memo_key = (world.revision, world.tenancy_label, world.ours, world.allow_external_name_services)
    found = _memo.get(memo_key)
    if found is None:
        found = _translate(world)
        # The data plane's reconcile and the tunnels' read the caches at the same revisions; older ones are not
        # asked for again.
        while len(_memo) >= _MEMO_SIZE:
            del _memo[next(iter(_memo))]
        _memo[memo_key] = found
    return dataclasses.replace(
        found,
        class_status=class_statuses(world)[0],
        gateway_status=copy.deepcopy(found.gateway_status),
        route_parents=_parents_copy(found.route_parents),
        classes_in_use=set(found.classes_in_use),
        policy_ancestors=copy.deepcopy(found.policy_ancestors),
        listener_set_status=copy.deepcopy(found.listener_set_status),
    )


def _parents_copy(parents: dict[RouteKey, list[ParentStatus]]) -> dict[RouteKey, list[ParentStatus]]:
    """The routes' parent entries, each with a list of conditions of its own (callers add conditions to an entry and
    set a condition's fields, nothing else): a deep copy of a thousand routes' entries took longer than translating
    them."""
    return {
        key: [
            {
                "parentRef": e["parentRef"],
                "controllerName": e["controllerName"],
                "conditions": [c.copy() for c in e["conditions"]],
            }
            for e in entries
        ]
        for key, entries in parents.items()
    }


def _translate(world: World) -> Translation:
    ir = to_ir(world)
    return Translation(
        resources=xds.resources(ir.planes[""]),
        planes={name: xds.resources(plane) for name, plane in ir.planes.items() if name},
        https_chains=ir.https_chains,
        class_status=ir.class_status,
        gateway_status=ir.gateway_status,
        route_parents=ir.route_parents,
        hostnames=ir.hostnames,
        classes_in_use=ir.classes_in_use,
        policy_ancestors=ir.policy_ancestors,
        listener_set_status=ir.listener_set_status,
    )


__all__ = [
    "CLASS_NAME",
    "DNS_PUBLISHING_ANNOTATION",
    "Hostname",
    "ParentStatus",
    "Translation",
    "TunnelState",
    "World",
    "certificate_refs",
    "hostname_matches",
    "published_hostnames",
    "publishes_dns",
    "regex_error",
    "translate",
]
