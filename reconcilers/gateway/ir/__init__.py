"""The intermediate representation between the two stages of the translation: what each data plane serves and every
status decided, as the Gateway API stage (`gatewayapi`) leaves them and the xDS stage (`xds`) reads them.

Nothing here decides: these are plain values. A route is kept as the Envoy route entry its rule and match build (with
what orders it on its hostname), since that build is what the per-route cache remembers across translations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypedDict

from reconcilers.gateway.https_listeners import Chain
from reconcilers.gateway.shapes import JSON, Condition, ObjectKey, ParentReference, PolicyAncestorStatus, RouteKey
from reconcilers.gateway.status import ClassStatus, GatewayStatus, ListenerSetStatus


class EnvoyRoute(NamedTuple):
    """One Envoy route (a rule x one of its matches) with what orders it among the others on its hostname."""

    entry: JSON
    precedence: tuple[Any, ...]


@dataclass(frozen=True)
class Hostname:
    """A hostname the class publishes: the tunnel's ingress document gets a rule for it (an HTTP/2 origin when it
    carries gRPC) and the zone a proxied CNAME."""

    hostname: str
    grpc: bool
    tunnel: ObjectKey | None
    """(namespace, name) of the Tunnel of the class serving it; None for a class with no Tunnel."""
    routes: tuple[RouteKey, ...]
    dns: bool = True
    """Whether the class makes its DNS record: False when every Gateway serving it says
    `kflare.dev/dns-publishing: disabled`."""


class ParentStatus(TypedDict):
    parentRef: ParentReference
    controllerName: str
    conditions: list[Condition]


@dataclass(frozen=True)
class PlaneIR:
    """What one data plane serves."""

    virtual_hosts: Mapping[str, Sequence[EnvoyRoute]]
    """Each hostname's routes, in no order (the xDS stage orders them by precedence); an isolated listener's
    hostname with none answers 404, `*` is the catch-all."""
    clusters: Sequence[JSON]
    """The clusters of the backends resolved, by name."""
    endpoints: Sequence[JSON]
    """Their load assignments, by cluster name."""
    own: bool = False
    """A Gateway's own plane, told of the clusters its routes name only (not of other Gateways' backends); the
    shared plane is told of every one resolved."""


@dataclass(frozen=True)
class IR:
    """The Gateway API stage's output: the planes' content and the statuses, each decided."""

    planes: Mapping[str, PlaneIR]
    """By plane: "" the shared one, else a Gateway's own plane's xDS cluster (`Plane.cluster`)."""
    class_status: dict[str, ClassStatus]
    gateway_status: dict[ObjectKey, GatewayStatus]
    route_parents: dict[RouteKey, list[ParentStatus]]
    hostnames: list[Hostname]
    classes_in_use: set[str]
    policy_ancestors: dict[ObjectKey, list[PolicyAncestorStatus]] = field(default_factory=dict)
    listener_set_status: dict[ObjectKey, ListenerSetStatus] = field(default_factory=dict)
    https_chains: dict[str, tuple[Chain, ...]] = field(default_factory=dict)
    """The certificates each data plane serves clients reaching it directly, by SNI."""
