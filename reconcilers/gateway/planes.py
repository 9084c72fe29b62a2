"""Data planes of their own: a Gateway of the class whose `spec.infrastructure.parametersRef` names a kflare
GatewayParameters gets its own Tunnel (a kflare Tunnel kflare creates in the Gateway's namespace), Envoy + cloudflared
Deployment, PodDisruptionBudget and ServiceAccount, instead of the class's shared data plane.

With the package's kinds read, a parametersRef may name a cloudflare-tunnel-gateway-controller GatewayConfig instead
(same namespace): the plane is the same but for its Tunnel, which adopts the user's existing tunnel (the one its
connector token names) under the account of the class's GatewayClassConfig and keeps it in Cloudflare whatever
happens (`adopting_tunnel_object`): the tunnel is the user's, made outside kflare, so kflare never makes or deletes it.

Which Gateways get one is a pure function of the caches (`choose`), read the same way by the translation (which
serves such a Gateway's routes to its own plane and publishes its hostnames through its own tunnel) and by the
reconcile here (which makes the plane's objects). A namespace holds at most `cap` dedicated planes, given to its
oldest Gateways that ask; the others are refused (`Accepted=False, InvalidParameters`) and keep nothing new.

Each object carries the Gateway's `spec.infrastructure.labels` and `annotations` and an owner reference to it; the
reconcile that makes and removes them is `reconcilers.gateway.data_planes`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from pydantic import ValidationError

from app.api.base import GROUP, VERSION
from app.api.constants import ADOPTION_POLICY_ANNOTATION, DELETION_POLICY_ANNOTATION, DeletionPolicy
from app.api.gateway_parameters import GatewayParameters
from app.api.tunnel import TOKEN_KEY
from app.api.tunnel_gateway_package import TUNNEL_TOKEN_KEY, GatewayConfig, GatewayConfigSpec
from app.kube.client import JSON, ResourceType
from reconcilers.gateway import shapes
from reconcilers.gateway.kinds import CLASS_CONFIG_KIND, GATEWAYS, PACKAGE_GROUP, TUNNEL_KIND, Classes, derived_name
from reconcilers.gateway.shapes import ObjectKey

PARAMETERS: Final = ResourceType(
    GROUP, VERSION, GatewayParameters.info.plural, GatewayParameters.info.kind, optional=True
)
"""Optional: a cluster whose CRDs predate the kind still serves the class (no Gateway can ask for a plane)."""
DEPLOYMENTS: Final = ResourceType("apps", "v1", "deployments", "Deployment")
DISRUPTION_BUDGETS: Final = ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
SERVICE_ACCOUNTS: Final = ResourceType("", "v1", "serviceaccounts", "ServiceAccount")
SECRETS: Final = ResourceType("", "v1", "secrets", "Secret")
NETWORK_POLICIES: Final = ResourceType("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy")
TUNNELS: Final = ResourceType(GROUP, VERSION, "tunnels", TUNNEL_KIND)

FINALIZER: Final = "kflare.dev/data-plane"
GATEWAY_LABEL: Final = "kflare.dev/gateway"
"""On each object of a Gateway's plane: the Gateway's name (its namespace is the object's)."""
PLANE_LABEL: Final = "kflare.dev/data-plane"
GATEWAY_NAME_LABEL: Final = "gateway.networking.k8s.io/gateway-name"
"""Gateway API's label of the resources generated for a Gateway (what its conformance suite looks them up by)."""
PLANE_APP: Final = "kflare-data-plane"
CLUSTER_PREFIX: Final = "kflare-gateway/"
"""A dedicated plane's Envoy says `--service-cluster kflare-gateway/<namespace>/<gateway>`: the xDS listener serves
it that plane's configuration (the shared plane's bootstrap says `kflare-data-plane`)."""
NAME_MAX: Final = 52
CLOUDFLARED_METRICS_PORT: Final = 2000
"""The pod's port for cloudflared's /ready and /metrics: the bootstrap's listener on Envoy passes those two on."""
CLOUDFLARED_LOOPBACK: Final = "127.0.0.1:20000"
"""Where cloudflared's metrics listener binds: it also serves `/config`, `/diag` and `/debug/pprof`, with no switch to
turn them off, so only the pod itself reaches it."""
XDS_KEYS: Final = ("bootstrap.json", "ca.crt", "client.crt", "client.key")
ORIGIN_KEYS: Final = ("ca.crt", "tls.crt", "tls.key")


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
    parameters: Mapping[str, Any]
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


def parameters_ref(gateway: Mapping[str, Any], default: ObjectKey | None = None) -> Mapping[str, Any] | None:
    """The GatewayParameters a Gateway asks for: its own `spec.infrastructure.parametersRef`, else the controller's
    default (`--gateway-default-parameters`, which carries its namespace), else none."""
    ref = ((gateway.get("spec") or {}).get("infrastructure") or {}).get("parametersRef")
    if ref:
        return cast(Mapping[str, Any], ref)
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


def _ours(gateway: Mapping[str, Any], classes: set[str]) -> bool:
    return str((gateway.get("spec") or {}).get("gatewayClassName") or "") in classes


def choose(
    gateways: Iterable[Mapping[str, Any]],
    parameters: Iterable[Mapping[str, Any]],
    classes: set[str],
    cap: int | PlanePolicy,
    tunnel: Callable[[str, str], Mapping[str, Any] | None] = lambda namespace, name: None,
    configs: Iterable[Mapping[str, Any]] = (),
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
        meta = gateway.get("metadata") or {}
        if ref is None or not _ours(gateway, classes) or meta.get("deletionTimestamp"):
            continue
        gkey = shapes.key(gateway)
        token: tuple[str, str] | None = None
        if package and ref.get("group") == PACKAGE_GROUP and ref.get("kind") == GatewayConfig.info.kind:
            # A LocalParametersReference: the GatewayConfig is in the Gateway's namespace.
            made = _of_config(found_configs.get((gkey[0], str(ref.get("name") or ""))), gateway, ref, accounts)
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
            spec = cast(Mapping[str, Any], params.get("spec") or {})
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
        infrastructure = (gateway.get("spec") or {}).get("infrastructure") or {}
        plane = Plane(
            gkey,
            str(meta.get("uid") or ""),
            spec,
            {str(k): str(v) for k, v in (infrastructure.get("labels") or {}).items()},
            {str(k): str(v) for k, v in (infrastructure.get("annotations") or {}).items()},
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


def _of_config(
    config: Mapping[str, Any] | None, gateway: Mapping[str, Any], ref: Mapping[str, Any], accounts: Mapping[str, str]
) -> tuple[Mapping[str, Any], tuple[str, str]] | str:
    """A GatewayConfig's plane in a GatewayParameters' terms, and where its connector token is; or why the Gateway
    cannot have it."""
    where = f"{GatewayConfig.info.kind} {shapes.ns(gateway)}/{ref.get('name')}"
    if config is None:
        return f"spec.infrastructure.parametersRef: {where} not found"
    raw = cast(Mapping[str, Any], config.get("spec") or {})
    try:
        spec = GatewayConfigSpec.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        return f"{where} is not valid: spec.{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    if spec.autoscaling is not None:
        return f"{where} asks for autoscaling, which kflare does not do: give spec.replicas instead"
    if spec.cloudflare_credentials_secret_ref is not None:
        # Other credentials usually mean a tunnel in another account: the class's would not reach it, or act on
        # another account than the one asked for.
        return (
            f"{where} gives cloudflareCredentialsSecretRef, which kflare does not read (the tunnel is adopted with the"
            f" credentials of the class's {CLASS_CONFIG_KIND}): remove it when those reach the tunnel"
        )
    class_name = str((gateway.get("spec") or {}).get("gatewayClassName") or "")
    account = accounts.get(class_name)
    if account is None:
        return (
            f"{where}: a GatewayConfig's tunnel is adopted under the account of its class's {CLASS_CONFIG_KIND}, and"
            f" GatewayClass {class_name} names none"
        )
    # Envoy's resources as the package gives them (a Kubernetes ResourceRequirements), and its default of 2 replicas.
    parameters: dict[str, Any] = {"accountRef": {"name": account}, "replicas": spec.replicas or 2}
    if raw.get("resources"):
        parameters["resources"] = raw["resources"]
    secret = spec.tunnel_token_secret_ref
    return parameters, (secret.name, secret.key or TUNNEL_TOKEN_KEY)


def class_accounts(classes: Iterable[Mapping[str, Any]], served: Classes) -> dict[str, str]:
    """Of this controller's classes naming a GatewayClassConfig: class name -> the CloudflareAccount derived from it
    (`reconcilers.gateway.package`), under which a GatewayConfig's plane adopts its tunnel."""
    out: dict[str, str] = {}
    if served.package_namespace is None:
        return out
    for cls in classes:
        ref = (cls.get("spec") or {}).get("parametersRef") or {}
        if served.ours(cls) and ref.get("group") == PACKAGE_GROUP and ref.get("kind") == CLASS_CONFIG_KIND:
            out[shapes.name(cls)] = derived_name(str(ref.get("name") or ""))
    return out


def our_classes(classes: Iterable[Mapping[str, Any]], served: Classes | None = None) -> set[str]:
    served = served or Classes()
    return {shapes.name(c) for c in classes if served.ours(c)}


# ---- the objects ------------------------------------------------------------------------------------------------


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
    cap: int = 3
    default_parameters: ObjectKey | None = None
    """The GatewayParameters (namespace, name) of a Gateway that names none; None: such a Gateway is served by
    the shared plane."""
    resources: Mapping[str, Any] | None = None
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


_SECURITY: Final = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "runAsGroup": 65532,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
_POD_SECURITY: Final = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "runAsGroup": 65532,
    "fsGroup": 65532,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _selector(plane: Plane) -> dict[str, str]:
    return {"app.kubernetes.io/name": PLANE_APP, PLANE_LABEL: plane.name}


def _meta(plane: Plane, name: str) -> JSON:
    """An object's metadata: the Gateway's infrastructure labels and annotations, the plane's own labels, and an
    owner reference to the Gateway (when its UID is known)."""
    labels = {
        **plane.labels,
        "app.kubernetes.io/name": PLANE_APP,
        "app.kubernetes.io/component": "data-plane",
        "app.kubernetes.io/managed-by": "kflare",
        GATEWAY_LABEL: plane.gateway[1],
        GATEWAY_NAME_LABEL: plane.gateway[1],
        PLANE_LABEL: plane.name,
    }
    meta: JSON = {"name": name, "namespace": plane.namespace, "labels": labels}
    if plane.annotations:
        meta["annotations"] = dict(plane.annotations)
    if plane.uid:
        meta["ownerReferences"] = [
            {
                "apiVersion": GATEWAYS.api_version,
                "kind": GATEWAYS.kind,
                "name": plane.gateway[1],
                "uid": plane.uid,
                "controller": True,
                "blockOwnerDeletion": False,
            }
        ]
    return meta


def tunnel_object(plane: Plane, settings: PlaneSettings) -> JSON:
    spec = plane.parameters
    prefix = str(spec.get("tunnelName") or "kflare")
    meta = _meta(plane, plane.name)
    policy = str(spec.get("tunnelDeletionPolicy") or settings.deletion_policy)
    meta["annotations"] = {**meta.get("annotations", {}), DELETION_POLICY_ANNOTATION: policy}
    return {
        "apiVersion": TUNNELS.api_version,
        "kind": TUNNELS.kind,
        "metadata": meta,
        "spec": {
            "name": f"{prefix}-{plane.namespace}-{plane.gateway[1]}"[:255],
            "accountRef": {k: str(v) for k, v in (spec.get("accountRef") or {}).items() if k in ("name", "kind") and v},
            "credentialsSecretRef": {"name": f"{plane.name}-tunnel-token"},
        },
    }


def adopting_tunnel_object(plane: Plane, tunnel_name: str) -> JSON:
    """A GatewayConfig's plane's Tunnel: it adopts the user's tunnel, named `tunnel_name` in Cloudflare (adoption is by
    name), and keeps it in Cloudflare when it goes. Its token Secret is the one cloudflared reads, as in any plane."""
    meta = _meta(plane, plane.name)
    meta["annotations"] = {
        **meta.get("annotations", {}),
        ADOPTION_POLICY_ANNOTATION: "adopt",
        DELETION_POLICY_ANNOTATION: DeletionPolicy.RETAIN.value,
    }
    return {
        "apiVersion": TUNNELS.api_version,
        "kind": TUNNELS.kind,
        "metadata": meta,
        "spec": {
            "name": tunnel_name,
            "accountRef": {"name": str((plane.parameters.get("accountRef") or {}).get("name") or "")},
            "credentialsSecretRef": {"name": f"{plane.name}-tunnel-token"},
        },
    }


def plane_objects(
    plane: Plane, settings: PlaneSettings, xds: Mapping[str, str], origin: Mapping[str, str]
) -> list[tuple[ResourceType, JSON]]:
    """The plane's objects but its Tunnel, as they are applied (`xds` and `origin`: the data of the chart's Secrets,
    copied: a pod reads Secrets of its own namespace only)."""
    name = plane.name
    xds_secret, origin_secret = f"{name}-xds", f"{name}-origin-tls"
    resources = plane.parameters.get("resources") or settings.resources
    checksum = hashlib.sha256(json.dumps([xds, origin], sort_keys=True).encode()).hexdigest()
    envoy: JSON = {
        "name": "envoy",
        "image": settings.envoy_image,
        # The cluster tells the xDS listener which plane this Envoy is; a node ID per pod tells its replicas apart.
        "args": [
            "-c",
            "/etc/envoy/bootstrap.json",
            "--service-node",
            "$(POD_NAME)",
            "--service-cluster",
            plane.cluster,
            "--disable-hot-restart",
            "-l",
            "warning",
        ],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [
            {"name": "http", "containerPort": settings.port, "protocol": "TCP"},
            *([{"name": "https", "containerPort": settings.tls_port, "protocol": "TCP"}] if settings.tls_port else []),
            {"name": "envoy-ready", "containerPort": 9902, "protocol": "TCP"},
            # cloudflared's /ready and /metrics, which the bootstrap's listener passes on to its loopback listener.
            {"name": "cf-metrics", "containerPort": CLOUDFLARED_METRICS_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": {"httpGet": {"path": "/ready", "port": "envoy-ready"}},
        "securityContext": _SECURITY,
        "volumeMounts": [
            {"name": "bootstrap", "mountPath": "/etc/envoy", "readOnly": True},
            {"name": "origin-tls", "mountPath": "/etc/kflare/origin-tls", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},  # noqa: S108 (an emptyDir: the root filesystem is read-only)
        ],
    }
    if resources:
        envoy["resources"] = dict(resources)
    cloudflared: JSON = {
        "name": "cloudflared",
        "image": settings.cloudflared_image,
        # http2: gRPC trailers are not carried over QUIC.
        "args": ["tunnel", "--no-autoupdate", "--protocol", "http2", "--metrics", CLOUDFLARED_LOOPBACK, "run"],
        "env": [
            {
                "name": TOKEN_KEY,
                "valueFrom": {"secretKeyRef": {"name": f"{name}-tunnel-token", "key": TOKEN_KEY}},
            }
        ],
        # Envoy's port (a probe's named port must be its own container's): cloudflared has none open to the pod.
        "readinessProbe": {"httpGet": {"path": "/ready", "port": CLOUDFLARED_METRICS_PORT}},
        "securityContext": _SECURITY,
        "volumeMounts": [{"name": "origin-tls", "mountPath": "/etc/kflare/origin-tls", "readOnly": True}],
    }
    pod_meta = _meta(plane, name)
    for key in ("name", "namespace", "ownerReferences"):
        pod_meta.pop(key, None)
    pod_meta["annotations"] = {**pod_meta.get("annotations", {}), "checksum/bootstrap": checksum}
    deployment: JSON = {
        "apiVersion": DEPLOYMENTS.api_version,
        "kind": DEPLOYMENTS.kind,
        "metadata": _meta(plane, name),
        "spec": {
            "replicas": int(plane.parameters.get("replicas") or 2),
            "selector": {"matchLabels": _selector(plane)},
            "template": {
                "metadata": pod_meta,
                "spec": {
                    "serviceAccountName": name,
                    "automountServiceAccountToken": False,
                    "securityContext": _POD_SECURITY,
                    "containers": [envoy, cloudflared],
                    "volumes": [
                        {"name": "bootstrap", "secret": {"secretName": xds_secret}},
                        {"name": "origin-tls", "secret": {"secretName": origin_secret}},
                        {"name": "tmp", "emptyDir": {}},
                    ],
                },
            },
        },
    }
    return [
        (
            SERVICE_ACCOUNTS,
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": _meta(plane, name),
                "automountServiceAccountToken": False,
            },
        ),
        (
            SECRETS,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": _meta(plane, xds_secret),
                "type": "Opaque",
                "data": dict(xds),
            },
        ),
        (
            SECRETS,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": _meta(plane, origin_secret),
                "type": "kubernetes.io/tls",
                "data": dict(origin),
            },
        ),
        (DEPLOYMENTS, deployment),
        (
            DISRUPTION_BUDGETS,
            {
                "apiVersion": DISRUPTION_BUDGETS.api_version,
                "kind": DISRUPTION_BUDGETS.kind,
                "metadata": _meta(plane, name),
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": _selector(plane)}},
            },
        ),
        *([(NETWORK_POLICIES, network_policy(plane, settings))] if settings.network_policy else []),
    ]


def network_policy(plane: Plane, settings: PlaneSettings) -> JSON:
    """The plane's pods take connections on their metrics ports only (cloudflared dials out), and reach DNS, the
    controller's xDS listener, the backends (pods of any namespace: a route may name a Service of another one, by a
    ReferenceGrant) and Cloudflare's edge (7844 over TCP or UDP, 443 for its API; a NetworkPolicy cannot name a
    host)."""
    tcp = "TCP"
    return {
        "apiVersion": NETWORK_POLICIES.api_version,
        "kind": NETWORK_POLICIES.kind,
        "metadata": _meta(plane, plane.name),
        "spec": {
            "podSelector": {"matchLabels": _selector(plane)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"ports": [{"port": 9902, "protocol": tcp}, {"port": 2000, "protocol": tcp}]}],
            "egress": [
                {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": tcp}]},
                {
                    # A listener on an ephemeral port (0: tests) is reached on whichever port it has.
                    **({"ports": [{"port": settings.xds_port, "protocol": tcp}]} if settings.xds_port else {}),
                    "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": settings.namespace}}}],
                },
                {"to": [{"namespaceSelector": {}}]},
                {
                    "ports": [
                        {"port": 7844, "protocol": tcp},
                        {"port": 7844, "protocol": "UDP"},
                        {"port": 443, "protocol": tcp},
                    ]
                },
            ],
        },
    }


def owned_names(name: str) -> list[tuple[ResourceType, str]]:
    """The plane's objects but its Tunnel, in the order they are deleted (the pods' Deployment first)."""
    return [
        (DEPLOYMENTS, name),
        (DISRUPTION_BUDGETS, name),
        (SECRETS, f"{name}-xds"),
        (SECRETS, f"{name}-origin-tls"),
        (SERVICE_ACCOUNTS, name),
        (NETWORK_POLICIES, name),
    ]


def finalized(gateway: Mapping[str, Any]) -> bool:
    """Whether the Gateway holds the finalizer of a plane of its own (it has, or had, one)."""
    return FINALIZER in ((gateway.get("metadata") or {}).get("finalizers") or [])
