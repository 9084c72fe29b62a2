"""Gateway API objects in, Envoy resources and Gateway API statuses out: a pure function of what the caches hold.

The translation flows one way, in two stages joined by an intermediate representation:

    World (the caches' objects) --gatewayapi--> IR (planes' content, statuses) --xds--> Envoy resources

- `gatewayapi` reads the Gateway API objects and decides everything a status says: which classes and Gateways are
  accepted and their listeners valid (`gatewayapi.status`), which certificates each plane serves by SNI
  (`gatewayapi.https_listeners`), which routes attach where and with which hostnames (`gatewayapi.attach`), what
  their rules build to and which backends resolve (`gatewayapi.builds` over `gatewayapi.rules`,
  `gatewayapi.backends`, `gatewayapi.policies`), the ListenerSets' and the BackendTLSPolicies' statuses, and the
  hostnames published (`gatewayapi.to_ir`).
- `ir` holds the result as plain values: per plane its virtual hosts (their routes in no data plane's terms,
  `ir.routes`) and clusters, the certificates, the statuses.
- `xds` turns a plane into its route configuration (each route as Envoy's, `xds.routes`), clusters and endpoints,
  and a plane's certificates into its TLS listener (`xds.https_listeners`), deciding nothing.

`Translation` is the IR with the xDS stage's resources beside it.

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

from reconcilers.gateway import xds
from reconcilers.gateway.envoy import EnvoyJSON
from reconcilers.gateway.gatewayapi import (
    DNS_PUBLISHING_ANNOTATION,
    World,
    certificate_refs,
    class_statuses,
    hostname_matches,
    publishes_dns,
    to_ir,
)
from reconcilers.gateway.gatewayapi.route_matches import regex_error
from reconcilers.gateway.gatewayapi.status import TunnelState
from reconcilers.gateway.ir import IR, Chain, Hostname, ParentStatus
from reconcilers.gateway.ir.status import ClassStatus, GatewayStatus, ListenerSetStatus
from reconcilers.gateway.kinds import CLASS_NAME
from reconcilers.gateway.shapes import ObjectKey, PolicyAncestorStatus, RouteKey


@dataclass(frozen=True)
class Translation:
    """The IR, with the xDS stage's resources of every plane; the IR's statuses and hostnames read through."""

    ir: IR
    resources: dict[str, list[EnvoyJSON]]
    """Envoy resources by xDS type key (envoy.TYPES), the ingress listener excepted (it comes from settings): the
    shared data plane's."""
    planes: dict[str, dict[str, list[EnvoyJSON]]] = field(default_factory=dict)
    """The resources of each Gateway's own data plane, by its xDS cluster name (`Plane.cluster`)."""

    @property
    def class_status(self) -> dict[str, ClassStatus]:
        return self.ir.class_status

    @property
    def gateway_status(self) -> dict[ObjectKey, GatewayStatus]:
        return self.ir.gateway_status

    @property
    def route_parents(self) -> dict[RouteKey, list[ParentStatus]]:
        return self.ir.route_parents

    @property
    def hostnames(self) -> list[Hostname]:
        return self.ir.hostnames

    @property
    def classes_in_use(self) -> set[str]:
        return self.ir.classes_in_use

    @property
    def policy_ancestors(self) -> dict[ObjectKey, list[PolicyAncestorStatus]]:
        return self.ir.policy_ancestors

    @property
    def listener_set_status(self) -> dict[ObjectKey, ListenerSetStatus]:
        return self.ir.listener_set_status

    @property
    def https_chains(self) -> dict[str, tuple[Chain, ...]]:
        return self.ir.https_chains


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
    ir = found.ir
    copied = dataclasses.replace(
        ir,
        class_status=class_statuses(world)[0],
        gateway_status=copy.deepcopy(ir.gateway_status),
        route_parents=_parents_copy(ir.route_parents),
        classes_in_use=set(ir.classes_in_use),
        policy_ancestors=copy.deepcopy(ir.policy_ancestors),
        listener_set_status=copy.deepcopy(ir.listener_set_status),
    )
    return dataclasses.replace(found, ir=copied)


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
    resources = xds.planes(ir.planes)
    return Translation(ir, resources.pop(""), resources)


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
