"""The intermediate representation between the two stages of the translation: what each data plane serves and every
status decided, as the Gateway API stage (`gatewayapi`) leaves them and the xDS stage (`xds`) reads them.

Nothing here decides: these are plain values, in no data plane's terms but the clusters' (`routes` holds a route's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from reconcilers.gateway.envoy import EnvoyJSON
from reconcilers.gateway.ir.routes import RouteIR
from reconcilers.gateway.ir.status import ClassStatus, GatewayStatus, ListenerSetStatus
from reconcilers.gateway.shapes import Condition, ObjectKey, ParentReference, PolicyAncestorStatus, RouteKey


@dataclass(frozen=True)
class ClientValidation:
    """How a chain checks its clients' certificates: against `ca` (PEM certificates); `required` False lets in a
    client without one, or with one the CAs did not sign (the Gateway's `AllowInsecureFallback`)."""

    ca: str
    required: bool = True


@dataclass(frozen=True)
class Chain:
    """One certificate the listener serves, for the clients whose SNI is `server_name` (None: any other client)."""

    server_name: str | None
    certificate: str
    """PEM, as the Secret's tls.crt holds it."""
    key: str
    """PEM of the private key: it goes into the xDS stream (authenticated, over TLS) and nowhere else."""
    gateway: str
    """`namespace/name/listener` it is the certificate of (what a status or a test can tell it by)."""
    validation: ClientValidation | None = None
    """The listener's client certificate validation (`spec.tls.frontend` of its Gateway), if it has one."""

    def __repr__(self) -> str:  # the key is never printed, whatever prints a chain
        return f"Chain({self.server_name!r}, {self.gateway})"


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

    virtual_hosts: Mapping[str, Sequence[RouteIR]]
    """Each hostname's routes, in no order (the xDS stage orders them by precedence); an isolated listener's
    hostname with none answers 404, `*` is the catch-all."""
    clusters: Sequence[EnvoyJSON]
    """The clusters of the backends resolved, by name."""
    endpoints: Sequence[EnvoyJSON]
    """Their load assignments, by cluster name."""
    own: bool = False
    """A Gateway's own plane, told of the clusters its routes name only (not of other Gateways' backends); the
    shared plane is told of every one resolved."""
    server_names: tuple[str | None, ...] = ()
    """The server names of its TLS listener's chains (None: the default chain): a request of one chain for a
    hostname another chain's listener serves is misdirected (421)."""


@dataclass(frozen=True)
class IR:
    """The Gateway API stage's output: the planes' content and the statuses, each decided."""

    planes: Mapping[str, PlaneIR]
    """By plane: "" the shared one, else a Gateway's own plane's xDS cluster (`Plane.cluster`)."""
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
    https_chains: dict[str, tuple[Chain, ...]] = field(default_factory=dict)
    """The certificates each data plane serves clients reaching it directly, by SNI."""
