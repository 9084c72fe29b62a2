"""The Gateway API kinds the `cloudflare-tunnel` class reads and writes, and the names it answers to."""

from __future__ import annotations

from app.kube.client import ResourceType

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
