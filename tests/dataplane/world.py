"""Gateway API objects as the API server would hold them, for tests that translate them without one."""

from __future__ import annotations

from typing import Any

from reconcilers.gateway.kinds import CLASS_NAME, CONTROLLER_NAME, GATEWAY_GROUP
from reconcilers.gateway.translate import World

JSON = dict[str, Any]
NS = "apps"


def meta(name: str, namespace: str | None = NS, created: str = "2026-01-01T00:00:00Z", **extra: Any) -> JSON:
    out: JSON = {"name": name, "generation": 1, "creationTimestamp": created, **extra}
    if namespace is not None:
        out["namespace"] = namespace
    return out


def gateway_class(name: str = CLASS_NAME, parameters: JSON | None = None) -> JSON:
    spec: JSON = {"controllerName": CONTROLLER_NAME}
    if parameters is not None:
        spec["parametersRef"] = parameters
    return {"kind": "GatewayClass", "metadata": meta(name, None), "spec": spec}


def gateway(name: str = "edge", listeners: list[JSON] | None = None, namespace: str = NS) -> JSON:
    return {
        "kind": "Gateway",
        "metadata": meta(name, namespace),
        "spec": {
            "gatewayClassName": CLASS_NAME,
            "listeners": listeners
            if listeners is not None
            else [{"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}],
        },
    }


def http_route(
    name: str,
    hostnames: list[str] | None,
    rules: list[JSON],
    *,
    namespace: str = NS,
    parents: list[JSON] | None = None,
    created: str = "2026-01-01T00:00:00Z",
) -> JSON:
    spec: JSON = {"parentRefs": parents or [{"name": "edge", "namespace": NS}], "rules": rules}
    if hostnames is not None:
        spec["hostnames"] = hostnames
    return {"kind": "HTTPRoute", "metadata": meta(name, namespace, created), "spec": spec}


def grpc_route(name: str, hostnames: list[str], rules: list[JSON], *, namespace: str = NS) -> JSON:
    return {
        "kind": "GRPCRoute",
        "metadata": meta(name, namespace),
        "spec": {"parentRefs": [{"name": "edge", "namespace": NS}], "hostnames": hostnames, "rules": rules},
    }


def backend(name: str, port: int = 80, weight: int | None = None, namespace: str | None = None) -> JSON:
    out: JSON = {"name": name, "port": port}
    if weight is not None:
        out["weight"] = weight
    if namespace is not None:
        out["namespace"] = namespace
    return out


def service(name: str, namespace: str = NS, app_protocol: str | None = None) -> JSON:
    port: JSON = {"name": "http", "port": 80, "targetPort": 8080}
    if app_protocol:
        port["appProtocol"] = app_protocol
    return {"kind": "Service", "metadata": meta(name, namespace), "spec": {"ports": [port]}}


def endpoint_slice(service_name: str, target: int, namespace: str = NS, address: str = "127.0.0.1") -> JSON:
    """An FQDN-type slice holding a loopback address: what the API server accepts for a loopback backend."""
    return {
        "kind": "EndpointSlice",
        "metadata": meta(f"{service_name}-x", namespace, labels={"kubernetes.io/service-name": service_name}),
        "addressType": "FQDN",
        "ports": [{"name": "http", "port": target, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
    }


def world(
    routes: list[JSON],
    backends: dict[str, int],
    *,
    gateways: list[JSON] | None = None,
    grpc: list[JSON] | None = None,
    **extra: Any,
) -> World:
    services = [service(name) for name in backends]
    slices = [endpoint_slice(name, port) for name, port in backends.items()]
    return World(
        classes=[gateway_class()],
        gateways=gateways if gateways is not None else [gateway()],
        http_routes=routes,
        grpc_routes=grpc or [],
        services=services + extra.pop("services", []),
        slices=slices + extra.pop("slices", []),
        namespaces=extra.pop("namespaces", [{"metadata": {"name": NS}}]),
        **extra,
    )


__all__ = ["GATEWAY_GROUP"]


def reference_grant(namespace: str, kind: str, name: str, *, from_kind: str = "Gateway", from_ns: str = NS) -> JSON:
    """A ReferenceGrant in `namespace` letting `from_kind`s of `from_ns` refer to its `kind` `name` (core group)."""
    return {
        "kind": "ReferenceGrant",
        "metadata": meta(f"{from_kind.lower()}s", namespace),
        "spec": {
            "from": [{"group": "gateway.networking.k8s.io", "kind": from_kind, "namespace": from_ns}],
            "to": [{"group": "", "kind": kind, "name": name}],
        },
    }
