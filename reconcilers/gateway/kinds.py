"""The Gateway API kinds the `cloudflare-tunnel` class reads and writes, and the names it answers to."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from app.kube.client import ResourceType
from reconcilers.gateway import raw

GATEWAY_GROUP = "gateway.networking.k8s.io"
CONTROLLER_NAME = "kflare.dev/gateway-controller"
CLASS_NAME = "cloudflare-tunnel"
GATEWAY_EXISTS_FINALIZER = "gateway-exists-finalizer.gateway.networking.k8s.io"
BUNDLE_VERSION_ANNOTATION = "gateway.networking.k8s.io/bundle-version"
CHANNEL_ANNOTATION = "gateway.networking.k8s.io/channel"
BUNDLE_VERSION = "v1.6.3"
"""The Gateway API bundle the translation is written against: a patch difference is fine, another minor is not."""

GATEWAY_CLASSES = ResourceType(GATEWAY_GROUP, "v1", "gatewayclasses", "GatewayClass", namespaced=False)
GATEWAYS = ResourceType(GATEWAY_GROUP, "v1", "gateways", "Gateway")
HTTP_ROUTES = ResourceType(GATEWAY_GROUP, "v1", "httproutes", "HTTPRoute")
GRPC_ROUTES = ResourceType(GATEWAY_GROUP, "v1", "grpcroutes", "GRPCRoute")
REFERENCE_GRANTS = ResourceType(GATEWAY_GROUP, "v1beta1", "referencegrants", "ReferenceGrant")
# v1 since bundles v1.4 and v1.5: a cluster with an older bundle still gets the rest of the class.
BACKEND_TLS_POLICIES = ResourceType(GATEWAY_GROUP, "v1", "backendtlspolicies", "BackendTLSPolicy", optional=True)
LISTENER_SETS = ResourceType(GATEWAY_GROUP, "v1", "listenersets", "ListenerSet", optional=True)
SERVICES = ResourceType("", "v1", "services", "Service")
ENDPOINT_SLICES = ResourceType("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", namespaced=False)
CRDS = ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)

ORIGIN_SERVER_NAME = "kflare-data-plane"
"""The name the data plane's origin certificate is for (the chart's, and --gateway-origin-server-name's default)."""

TUNNEL_GROUP = "kflare.dev"
TUNNEL_KIND = "Tunnel"

PACKAGE_GROUP = "cf.k8s.lex.la"
"""The API group of cloudflare-tunnel-gateway-controller's kinds, which the class reads as its own equivalents
(`reconcilers.gateway.package`)."""
PACKAGE_CONTROLLER_NAME = "cf.k8s.lex.la/tunnel-controller"
"""That package's controllerName: its GatewayClasses, once kflare is told to answer to it."""
CLASS_CONFIG_KIND = "GatewayClassConfig"
DERIVED_PREFIX = "tunnel-gateway-"
"""Of the CloudflareAccount and the Tunnel kflare derives from a GatewayClassConfig (`derived_name`)."""
_NAME_MAX = 63


def derived_name(config: str) -> str:
    """The name of the CloudflareAccount and Tunnel derived from the GatewayClassConfig `config` (a DNS label: the
    Tunnel's token Secret is named after it), shortened with a hash when long."""
    name = f"{DERIVED_PREFIX}{config}"
    if len(name) <= _NAME_MAX - len("-token"):
        return name
    digest = hashlib.sha256(config.encode()).hexdigest()[:8]
    return f"{name[: _NAME_MAX - len('-token') - 9].rstrip('-.')}-{digest}"


@dataclass(frozen=True)
class Classes:
    """Which GatewayClasses the class serves (by controllerName) and the Tunnel each publishes through."""

    names: frozenset[str] = frozenset({CONTROLLER_NAME})
    """The controllerNames answered to: kflare's own and those of `--gateway-controller-names`."""
    package_namespace: str | None = None
    """With the package's kinds read (`--gateway-tunnel-gateway-package`), the controller's namespace, where the
    Tunnel derived from a GatewayClassConfig lives; None: a class naming one names nothing kflare reads."""

    def ours(self, cls: Mapping[str, object]) -> bool:
        return raw.text(cls, "spec", "controllerName") in self.names

    def controller_of(self, cls: Mapping[str, object]) -> str:
        """The controllerName this controller writes in the statuses of the class's routes and policies (the
        class's own, as Gateway API says)."""
        return raw.text(cls, "spec", "controllerName", default=CONTROLLER_NAME)

    def tunnel(self, cls: Mapping[str, object]) -> tuple[str, str] | None:
        """The kflare Tunnel a class of this controller publishes through: the one its parametersRef names, or the
        one derived from the GatewayClassConfig it names."""
        if not self.ours(cls):
            return None
        ref = raw.mapping(raw.at(cls, "spec", "parametersRef"))
        if ref.get("kind") == TUNNEL_KIND and ref.get("namespace"):
            return (str(ref["namespace"]), str(ref.get("name") or ""))
        if self.package_namespace and ref.get("group") == PACKAGE_GROUP and ref.get("kind") == CLASS_CONFIG_KIND:
            return (self.package_namespace, derived_name(str(ref.get("name") or "")))
        return None
