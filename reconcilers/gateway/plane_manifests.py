"""The Kubernetes objects of a Gateway's own data plane (`reconcilers.gateway.planes` says which Gateways have one):
its Tunnel, and the ServiceAccount, Secrets, Deployment, PodDisruptionBudget, Service and NetworkPolicy of its Envoy
and cloudflared, each with the Gateway's infrastructure labels and annotations and an owner reference to it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Final

from app.api.base import GROUP, VERSION
from app.api.constants import ADOPTION_POLICY_ANNOTATION, DELETION_POLICY_ANNOTATION, DeletionPolicy
from app.api.tunnel import TOKEN_KEY
from app.kube.client import JSON, ResourceType
from reconcilers.gateway import raw
from reconcilers.gateway.kinds import GATEWAYS, TUNNEL_KIND
from reconcilers.gateway.planes import GATEWAY_LABEL, Plane, PlaneSettings

DEPLOYMENTS: Final = ResourceType("apps", "v1", "deployments", "Deployment")
DISRUPTION_BUDGETS: Final = ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
SERVICE_ACCOUNTS: Final = ResourceType("", "v1", "serviceaccounts", "ServiceAccount")
SERVICES: Final = ResourceType("", "v1", "services", "Service")
SECRETS: Final = ResourceType("", "v1", "secrets", "Secret")
NETWORK_POLICIES: Final = ResourceType("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy")
TUNNELS: Final = ResourceType(GROUP, VERSION, "tunnels", TUNNEL_KIND)

PLANE_LABEL: Final = "kflare.dev/data-plane"
GATEWAY_NAME_LABEL: Final = "gateway.networking.k8s.io/gateway-name"
"""Gateway API's label of the resources generated for a Gateway (what its conformance suite looks them up by)."""
PLANE_APP: Final = "kflare-data-plane"
CLOUDFLARED_METRICS_PORT: Final = 2000
"""The pod's port for cloudflared's /ready and /metrics: the bootstrap's listener on Envoy passes those two on."""
CLOUDFLARED_LOOPBACK: Final = "127.0.0.1:20000"
"""Where cloudflared's metrics listener binds: it also serves `/config`, `/diag` and `/debug/pprof`, with no switch to
turn them off, so only the pod itself reaches it."""
GATEWAY_HTTPS_PORT: Final = "gateway-https"
"""Envoy's container port serving the Gateway's HTTPS listeners' certificates to clients reaching the plane directly
(`reconcilers.gateway.xds.https_listeners`)."""
XDS_KEYS: Final = ("bootstrap.json", "ca.crt", "client.crt", "client.key")
ORIGIN_KEYS: Final = ("ca.crt", "tls.crt", "tls.key")


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
            "accountRef": {
                k: str(v) for k, v in raw.mapping(spec.get("accountRef")).items() if k in ("name", "kind") and v
            },
            "credentialsSecretRef": {"name": f"{plane.name}-tunnel-token"},
        },
    }


def adopting_tunnel_object(plane: Plane, tunnel_name: str) -> JSON:
    """A GatewayConfig's plane's Tunnel: it adopts the user's tunnel, named `tunnel_name` in Cloudflare (adoption is by
    name), and keeps it in Cloudflare when it goes. Its token Secret is the one cloudflared reads, as in any plane."""
    account = raw.text(plane.parameters, "accountRef", "name")
    return adopting_tunnel(_meta(plane, plane.name), tunnel_name, account, f"{plane.name}-tunnel-token")


def adopting_tunnel(meta: JSON, tunnel_name: str, account: str, token_secret: str) -> JSON:
    """A kflare Tunnel that adopts the tunnel named `tunnel_name` in Cloudflare (adoption is by name) and keeps it
    there when it goes: kflare never creates nor deletes a tunnel the user made."""
    annotations = {
        **meta.get("annotations", {}),
        ADOPTION_POLICY_ANNOTATION: "adopt",
        DELETION_POLICY_ANNOTATION: DeletionPolicy.RETAIN.value,
    }
    return {
        "apiVersion": TUNNELS.api_version,
        "kind": TUNNELS.kind,
        "metadata": {**meta, "annotations": annotations},
        "spec": {"name": tunnel_name, "accountRef": {"name": account}, "credentialsSecretRef": {"name": token_secret}},
    }


def plane_objects(
    plane: Plane,
    settings: PlaneSettings,
    xds: Mapping[str, str],
    origin: Mapping[str, str],
    listeners: Sequence[Mapping[str, object]] = (),
) -> list[tuple[ResourceType, JSON]]:
    """The plane's objects but its Tunnel, as they are applied (`xds` and `origin`: the data of the chart's Secrets,
    copied: a pod reads Secrets of its own namespace only; `listeners`: the Gateway's, which its Service's ports
    follow)."""
    name = plane.name
    xds_secret, origin_secret = f"{name}-xds", f"{name}-origin-tls"
    resources = plane.parameters.get("resources") or settings.resources
    replicas = plane.parameters.get("replicas")
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
            *(
                [{"name": GATEWAY_HTTPS_PORT, "containerPort": settings.https_port, "protocol": "TCP"}]
                if settings.https_port
                else []
            ),
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
        envoy["resources"] = dict(raw.mapping(resources))
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
            "replicas": int(replicas) if isinstance(replicas, int | str) and replicas else 2,
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
    ports = service_ports(listeners, settings)
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
        *([(SERVICES, service(plane, ports))] if ports else []),
        *([(NETWORK_POLICIES, network_policy(plane, settings))] if settings.network_policy else []),
    ]


def service_ports(listeners: Sequence[Mapping[str, object]], settings: PlaneSettings) -> list[JSON]:
    """One port per distinct port of the Gateway's HTTP and HTTPS (terminating) listeners, in listener order: an HTTP
    one reaches Envoy's plaintext listener, an HTTPS one the listener serving the Gateway's certificates (none when
    that listener is off). A port two protocols claim goes by its first listener (the Gateway says it conflicts)."""
    out: dict[int, JSON] = {}
    for listener in listeners:
        given = listener.get("port")
        port = int(given) if isinstance(given, int | str) and given else 0
        protocol = raw.text(listener, "protocol")
        mode = raw.text(listener, "tls", "mode", default="Terminate")
        if port in out or not 0 < port < 65536:
            continue
        if protocol == "HTTP":
            out[port] = {"name": f"http-{port}", "port": port, "targetPort": "http", "protocol": "TCP"}
        elif protocol == "HTTPS" and mode == "Terminate" and settings.https_port:
            out[port] = {"name": f"https-{port}", "port": port, "targetPort": GATEWAY_HTTPS_PORT, "protocol": "TCP"}
    return list(out.values())


def service(plane: Plane, ports: list[JSON]) -> JSON:
    """The plane's address in the cluster, for clients that reach the Gateway directly rather than through Cloudflare:
    the Gateway's listener ports, on the plane's pods."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(plane, plane.name),
        "spec": {"type": "ClusterIP", "selector": _selector(plane), "ports": ports},
    }


def network_policy(plane: Plane, settings: PlaneSettings) -> JSON:
    """The plane's pods take connections on their metrics ports and on Envoy's ports its Service reaches (clients
    reaching the Gateway directly; cloudflared dials out and needs none), and reach DNS, the
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
            "ingress": [
                {"ports": [{"port": 9902, "protocol": tcp}, {"port": 2000, "protocol": tcp}]},
                {"ports": [{"port": port, "protocol": tcp} for port in (settings.port, settings.https_port) if port]},
            ],
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
        (SERVICES, name),
        (SECRETS, f"{name}-xds"),
        (SECRETS, f"{name}-origin-tls"),
        (SERVICE_ACCOUNTS, name),
        (NETWORK_POLICIES, name),
    ]
