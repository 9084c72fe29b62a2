"""Data planes of their own: a Gateway of the class whose `spec.infrastructure.parametersRef` names a kflare
GatewayParameters gets its own Tunnel (a kflare Tunnel kflare creates in the Gateway's namespace), Envoy + cloudflared
Deployment, PodDisruptionBudget, ServiceAccount and Service, instead of the class's shared data plane.

With the package's kinds read, a parametersRef may name a cloudflare-tunnel-gateway-controller GatewayConfig instead
(same namespace): the plane is the same but for its Tunnel, which adopts the user's existing tunnel (the one its
connector token names) under the account of the class's GatewayClassConfig and keeps it in Cloudflare whatever
happens (`plane_manifests.adopting_tunnel_object`): the tunnel is the user's, made outside kflare, so kflare never
makes or deletes it. What of a GatewayConfig the plane takes is `reconcilers.gateway.gateway_configs`.

Which Gateways get one is a pure function of the caches (`choose`), read the same way by the translation (which
serves such a Gateway's routes to its own plane and publishes its hostnames through its own tunnel) and by the
reconcile here (which makes the plane's objects). A namespace holds at most `cap` dedicated planes, given to its
oldest Gateways that ask; the others are refused (`Accepted=False, InvalidParameters`) and keep nothing new.

Each object carries the Gateway's `spec.infrastructure.labels` and `annotations` and an owner reference to it (they
are rendered by `reconcilers.gateway.plane_manifests`); the reconcile that makes and removes them is
`reconcilers.gateway.data_planes`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from app.api.base import GROUP, VERSION
from app.api.gateway_parameters import GatewayParameters
from app.api.tunnel_gateway_package import GatewayConfig
from app.kube.client import ResourceType
from reconcilers.gateway import raw, shapes
from reconcilers.gateway.gateway_configs import config_parameters
from reconcilers.gateway.kinds import PACKAGE_GROUP, Classes
from reconcilers.gateway.shapes import ObjectKey

PARAMETERS: Final = ResourceType(
    GROUP, VERSION, GatewayParameters.info.plural, GatewayParameters.info.kind, optional=True
)
"""Optional: a cluster whose CRDs predate the kind still serves the class (no Gateway can ask for a plane)."""

FINALIZER: Final = "kflare.dev/data-plane"
GATEWAY_LABEL: Final = "kflare.dev/gateway"
"""On each object of a Gateway's plane: the Gateway's name (its namespace is the object's)."""
CLUSTER_PREFIX: Final = "kflare-gateway/"
"""A dedicated plane's Envoy says `--service-cluster kflare-gateway/<namespace>/<gateway>`: the xDS listener serves
it that plane's configuration (the shared plane's bootstrap says `kflare-data-plane`)."""
NAME_MAX: Final = 52


def plane_name(gateway: str) -> str:
    """The name of a Gateway's plane objects: `kflare-gw-<gateway>`, shortened with a hash when long."""
    name = f"kflare-gw-{gateway}"
    if len(name) <= NAME_MAX:
        return name
    digest = hashlib.sha256(gateway.encode()).hexdigest()[:8]
    return f"{name[: NAME_MAX - 9].rstrip('-.')}-{digest}"


def cluster_of(gateway: ObjectKey) -> str:
    return f"{CLUSTER_PREFIX}{gateway[0]}/{gateway[1]}"


@dataclass(frozen=True)
class Plane:
    """A Gateway's own data plane, as its GatewayParameters and its spec.infrastructure ask for it."""

    gateway: ObjectKey
    uid: str
    parameters: Mapping[str, object]
    """The GatewayParameters' spec."""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    token: tuple[str, str] | None = None
    """A GatewayConfig's plane: the Secret (in the Gateway's namespace) and key of the connector token naming the
    tunnel its Tunnel adopts; `parameters` then holds what the GatewayConfig gives in a GatewayParameters' terms.
    None: a GatewayParameters' plane, whose Tunnel kflare creates."""

    @property
    def namespace(self) -> str:
        return self.gateway[0]

    @property
    def name(self) -> str:
        return plane_name(self.gateway[1])

    @property
    def tunnel_key(self) -> ObjectKey:
        return (self.namespace, self.name)

    @property
    def cluster(self) -> str:
        return cluster_of(self.gateway)


Choice = Plane | str
"""A dedicated plane, or why the Gateway cannot have the one it asks for (its Accepted condition's message)."""


def parameters_ref(gateway: Mapping[str, object], default: ObjectKey | None = None) -> Mapping[str, object] | None:
    """The GatewayParameters a Gateway asks for: its own `spec.infrastructure.parametersRef`, else the controller's
    default (`--gateway-default-parameters`, which carries its namespace), else none."""
    ref = raw.at(gateway, "spec", "infrastructure", "parametersRef")
    if isinstance(ref, Mapping) and ref:
        return ref
    if default is None:
        return None
    return {"group": GROUP, "kind": GatewayParameters.info.kind, "namespace": default[0], "name": default[1]}


@dataclass(frozen=True)
class PlanePolicy:
    """Which Gateways get a data plane of their own: `cap` per namespace at most; with `default`, a Gateway that
    names no GatewayParameters gets one made of that one (and the shared plane when it cannot have it)."""

    cap: int = 0
    default: ObjectKey | None = None
    namespaces: frozenset[str] | None = None
    """The namespaces planes may run in (`--granted-namespaces`: the chart grants the plane's objects there only);
    None: every namespace."""
    classes: Classes = field(default_factory=Classes)
    """Which GatewayClasses are this controller's."""


def _ours(gateway: Mapping[str, object], classes: set[str]) -> bool:
    return raw.text(gateway, "spec", "gatewayClassName") in classes


def choose(
    gateways: Iterable[Mapping[str, object]],
    parameters: Iterable[Mapping[str, object]],
    classes: set[str],
    cap: int | PlanePolicy,
    tunnel: Callable[[str, str], Mapping[str, object] | None] = lambda namespace, name: None,
    configs: Iterable[Mapping[str, object]] = (),
    accounts: Mapping[str, str] | None = None,
) -> dict[ObjectKey, Choice]:
    """Each Gateway of `classes` (the names of this controller's classes) that asks for a plane of its own: the
    plane, or why it cannot have it. Gateways being deleted have none (their plane is being taken down); a
    namespace's first `cap` asking Gateways, oldest first, get theirs. A Gateway that asks only through the
    policy's default and cannot have its plane is left out: the shared plane serves it, as without a default.

    With the package's kinds read (`policy.classes.package_namespace`), a Gateway may name a GatewayConfig of
    `configs`; its plane's account is the one `accounts` gives its class (class name -> the CloudflareAccount derived
    from the class's GatewayClassConfig)."""
    policy = cap if isinstance(cap, PlanePolicy) else PlanePolicy(cap)
    cap = policy.cap
    found = {shapes.key(p): p for p in parameters}
    package = policy.classes.package_namespace is not None
    found_configs = {shapes.key(c): c for c in configs} if package else {}
    accounts = accounts or {}
    out: dict[ObjectKey, Choice] = {}
    per_namespace: dict[str, int] = {}
    for gateway in sorted(gateways, key=shapes.age_key):
        own = parameters_ref(gateway)
        ref = own if own is not None else parameters_ref(gateway, policy.default)
        meta = raw.mapping(gateway.get("metadata"))
        if ref is None or not _ours(gateway, classes) or meta.get("deletionTimestamp"):
            continue
        gkey = shapes.key(gateway)
        token: tuple[str, str] | None = None
        if package and ref.get("group") == PACKAGE_GROUP and ref.get("kind") == GatewayConfig.info.kind:
            # A LocalParametersReference: the GatewayConfig is in the Gateway's namespace.
            made = config_parameters(found_configs.get((gkey[0], str(ref.get("name") or ""))), gateway, ref, accounts)
            if isinstance(made, str):
                out[gkey] = made
                continue
            spec, token = made
        else:
            if ref.get("group") != GROUP or ref.get("kind") != GatewayParameters.info.kind:
                also = f" or a {GatewayConfig.info.kind}.{PACKAGE_GROUP}" if package else ""
                out[gkey] = (
                    f"spec.infrastructure.parametersRef: {ref.get('kind')}.{ref.get('group') or 'core'} is not a"
                    f" parameters kind of this class; name a {GatewayParameters.info.kind}.{GROUP}{also}"
                )
                continue
            where = str(ref.get("namespace") or gkey[0])
            params = found.get((where, str(ref.get("name") or "")))
            if own is None and (params is None or cap <= 0 or per_namespace.get(gkey[0], 0) >= cap):
                continue  # the default cannot give it a plane: the shared plane serves it
            if params is None:
                kind = GatewayParameters.info.kind
                out[gkey] = f"spec.infrastructure.parametersRef: {kind} {where}/{ref.get('name')} not found"
                continue
            spec = raw.mapping(params.get("spec"))
        if policy.namespaces is not None and gkey[0] not in policy.namespaces:
            if own is not None:
                out[gkey] = (
                    f"this installation runs no data planes in namespace {gkey[0]} (the chart's rbac.namespaces, the"
                    " controller's --granted-namespaces); without spec.infrastructure.parametersRef the Gateway is"
                    " served by the class's shared data plane"
                )
            continue
        if cap <= 0:
            out[gkey] = (
                "this controller makes no data planes of a Gateway's own (--gateway-planes-per-namespace=0);"
                " without spec.infrastructure.parametersRef the Gateway is served by the class's shared data plane"
            )
            continue
        if per_namespace.get(gkey[0], 0) >= cap:
            out[gkey] = (
                f"namespace {gkey[0]} already has {cap} Gateway(s) with a data plane of their own, the most allowed"
                " (the controller's --gateway-planes-per-namespace): this one gets none"
            )
            continue
        infrastructure = raw.at(gateway, "spec", "infrastructure")
        plane = Plane(
            gkey,
            str(meta.get("uid") or ""),
            spec,
            {str(k): str(v) for k, v in raw.mapping(raw.at(infrastructure, "labels")).items()},
            {str(k): str(v) for k, v in raw.mapping(raw.at(infrastructure, "annotations")).items()},
            token,
        )
        existing = tunnel(*plane.tunnel_key)
        if existing is not None and shapes.labels(existing).get(GATEWAY_LABEL) != gkey[1]:
            if own is not None:
                out[gkey] = f"the Tunnel {gkey[0]}/{plane.name} exists and is not this Gateway's: rename one of them"
            continue
        per_namespace[gkey[0]] = per_namespace.get(gkey[0], 0) + 1
        out[gkey] = plane
    return out


def our_classes(classes: Iterable[Mapping[str, object]], served: Classes | None = None) -> set[str]:
    served = served or Classes()
    return {shapes.name(c) for c in classes if served.ours(c)}


@dataclass(frozen=True)
class PlaneSettings:
    """What every dedicated plane is made of, from the controller's settings (the chart sets them)."""

    namespace: str
    """The controller's namespace, where the chart's xDS and origin-certificate Secrets are."""
    xds_secret: str
    origin_secret: str
    envoy_image: str
    cloudflared_image: str
    port: int = 8080
    tls_port: int | None = 8443
    https_port: int | None = 10443
    """Envoy's TLS listener for clients reaching the plane directly (its Service's HTTPS ports); None: none."""
    cap: int = 3
    default_parameters: ObjectKey | None = None
    """The GatewayParameters (namespace, name) of a Gateway that names none; None: such a Gateway is served by
    the shared plane."""
    resources: Mapping[str, object] | None = None
    """Envoy's resources when the GatewayParameters gives none."""
    deletion_policy: str = "delete"
    network_policy: bool = False
    """Give each plane a NetworkPolicy as the chart gives the shared one."""
    xds_port: int = 18000
    """The controller's xDS port, which the NetworkPolicy lets the plane reach."""
    namespaces: frozenset[str] | None = None
    """Where planes may run (`PlanePolicy.namespaces`)."""
    classes: Classes = field(default_factory=Classes)
    """Which GatewayClasses are this controller's (`GatewayOptions.classes`)."""

    @property
    def policy(self) -> PlanePolicy:
        return PlanePolicy(self.cap, self.default_parameters, self.namespaces, self.classes)


def finalized(gateway: Mapping[str, object]) -> bool:
    """Whether the Gateway holds the finalizer of a plane of its own (it has, or had, one)."""
    return FINALIZER in raw.items(raw.at(gateway, "metadata", "finalizers"))
