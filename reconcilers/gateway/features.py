"""The Gateway API conformance features the class implements, by the upstream suite's names: claimed in each
GatewayClass's `status.supportedFeatures`, which tools (and the conformance suite) read to know what to expect."""

from __future__ import annotations

from typing import TypedDict


class SupportedFeature(TypedDict):
    name: str


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
    "GatewayHTTPListenerIsolation",
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
    "HTTPRouteParentRefPort",
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


def supported_features() -> list[SupportedFeature]:
    """`status.supportedFeatures` of a GatewayClass: the names, in ascending order (as the spec asks)."""
    return [{"name": name} for name in sorted(set(SUPPORTED_FEATURES))]
