"""The Gateway API features the class claims in `GatewayClass.status.supportedFeatures`: what the translation
serves (everything else in a route is refused in its status), by the names of the conformance suite of the bundle
the class is built against. The suite, run without a feature list, tests exactly these (docs/conformance/)."""

from __future__ import annotations

from typing import Final

SUPPORTED_FEATURES: Final = (
    # GATEWAY-HTTP and GATEWAY-GRPC's core.
    "Gateway",
    "HTTPRoute",
    "GRPCRoute",
    "ReferenceGrant",
    # Extended, as the translation builds them.
    "HTTPRouteHostRewrite",
    "HTTPRouteMethodMatching",
    "HTTPRoutePathRedirect",
    "HTTPRoutePathRewrite",
    "HTTPRoutePortRedirect",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteRequestMirror",
    "HTTPRouteRequestMultipleMirrors",
    "HTTPRouteRequestTimeout",
    "HTTPRouteBackendTimeout",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteSchemeRedirect",
)


def supported_features() -> list[dict[str, str]]:
    """The status field's value: sorted by name, as the API asks of it."""
    return [{"name": name} for name in sorted(SUPPORTED_FEATURES)]
