"""The Gateway API conformance features the class implements, by the upstream suite's names: claimed in each
GatewayClass's `status.supportedFeatures`, which tools (and the conformance suite) read to know what to expect."""

from __future__ import annotations

from typing import TypedDict


class SupportedFeature(TypedDict):
    name: str


# Not claimed: HTTPRouteParentRefPort. A parentRef's port attaches a route to the listeners of that port, but the
# edge reaches the data plane on one origin whatever the visitor's port, so listeners of one scheme and hostname on
# different ports cannot be told apart by traffic (the suite sends to each port and expects different backends).
SUPPORTED_FEATURES = (
    # Core.
    "Gateway",
    "HTTPRoute",
    "ReferenceGrant",
    "GRPCRoute",
    # BackendTLSPolicy, with its subjectAltNames checks.
    "BackendTLSPolicy",
    "BackendTLSPolicySANValidation",
    # Gateway extended.
    "GatewayAddressEmpty",
    "GatewayBackendClientCertificate",
    "GatewayFrontendClientCertificateValidation",
    "GatewayFrontendClientCertificateValidationInsecureFallback",
    "GatewayHTTPListenerIsolation",
    "GatewayHTTPSListenerDetectMisdirectedRequests",
    "ListenerSet",
    # HTTPRoute extended.
    "HTTPRoute303RedirectStatusCode",
    "HTTPRoute307RedirectStatusCode",
    "HTTPRoute308RedirectStatusCode",
    "HTTPRouteBackendProtocolH2C",
    "HTTPRouteBackendProtocolWebSocket",
    "HTTPRouteBackendRequestHeaderModification",
    "HTTPRouteBackendTimeout",
    "HTTPRouteCORS",
    "HTTPRouteHostRewrite",
    "HTTPRouteMethodMatching",
    "HTTPRouteNamedRouteRule",
    "HTTPRoutePathRedirect",
    "HTTPRoutePathRewrite",
    "HTTPRoutePortRedirect",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteRequestMirror",
    "HTTPRouteRequestMultipleMirrors",
    "HTTPRouteRequestPercentageMirror",
    "HTTPRouteRequestTimeout",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteRetry",
    "HTTPRouteSchemeRedirect",
    # GRPCRoute extended.
    "GRPCRouteNamedRouteRule",
)


EXPERIMENTAL_ONLY = frozenset({"HTTPRouteRetry"})
"""Features whose fields only the experimental channel's CRDs hold: with the standard channel's, the API server
drops `retry` from every route, so claiming the feature would promise what no route can ask for."""
OWN_PLANE_ONLY = frozenset({"GatewayInfrastructure", "GatewayPort8080"})
"""Features of a Gateway with a data plane of its own, claimed when every Gateway of the class gets one
(`--gateway-default-parameters`): its plane's objects carry `spec.infrastructure`'s labels and annotations, and its
plane's Service takes each listener's port (8080 as well as 80 and 443). The shared plane is the chart's, with
neither."""


def supported_features(
    channel: str | None = "experimental", *, every_gateway_own_plane: bool = False
) -> list[SupportedFeature]:
    """`status.supportedFeatures` of a GatewayClass for the installed CRDs' channel: the names, in ascending order
    (as the spec asks). An unknown channel claims only what both channels can express."""
    names = set(SUPPORTED_FEATURES)
    if channel != "experimental":
        names -= EXPERIMENTAL_ONLY
    if every_gateway_own_plane:
        names |= OWN_PLANE_ONLY
    return [{"name": name} for name in sorted(names)]
