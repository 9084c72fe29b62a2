"""The shapes of an HTTPRoute and a GRPCRoute (rules, matches, filters, backendRefs), as `reconcilers.gateway.shapes`
types the rest of the Gateway API objects the translation reads.
"""

# Evaluated annotations (no `from __future__ import annotations`): a shape's `__required_keys__` then holds its
# `Required` keys, which the caches check their objects by (`reconcilers.gateway.caches.shaped`).
from typing import Required, TypedDict

from reconcilers.gateway import gateway_api as api
from reconcilers.gateway.shapes import KubeObject, ParentReference

# The generated shapes, by the Gateway API's names for them.
HTTPCORSFilter = api.HTTPRouteSpecRulesBackendRefsFiltersCors
LocalObjectReference = api.HTTPRouteSpecRulesBackendRefsFiltersExtensionRef
HTTPRouteRetry = api.HTTPRouteSpecRulesRetry
SessionPersistence = api.HTTPRouteSpecRulesSessionPersistence
RouteStatus = api.HTTPRouteStatus


class HTTPHeader(TypedDict):
    name: str
    value: str


class HeaderMatch(TypedDict, total=False):
    type: str
    name: Required[str]
    value: str


QueryParamMatch = HeaderMatch


class PathMatch(TypedDict, total=False):
    type: str
    value: str


class HTTPRouteMatch(TypedDict, total=False):
    path: PathMatch
    headers: list[HeaderMatch]
    queryParams: list[QueryParamMatch]
    method: str


class GRPCMethodMatch(TypedDict, total=False):
    type: str
    service: str
    method: str


class GRPCRouteMatch(TypedDict, total=False):
    method: GRPCMethodMatch
    headers: list[HeaderMatch]


class HeaderModifier(TypedDict, total=False):
    set: list[HTTPHeader]
    add: list[HTTPHeader]
    remove: list[str]


class BackendObjectReference(TypedDict, total=False):
    group: str
    kind: str
    name: Required[str]
    namespace: str
    port: int


class Fraction(TypedDict, total=False):
    numerator: Required[int]
    denominator: int


class RequestMirror(TypedDict, total=False):
    backendRef: Required[BackendObjectReference]
    percent: int
    fraction: Fraction


class PathModifier(TypedDict, total=False):
    type: Required[str]
    replaceFullPath: str
    replacePrefixMatch: str


class RequestRedirect(TypedDict, total=False):
    scheme: str
    hostname: str
    path: PathModifier
    port: int
    statusCode: int


class URLRewrite(TypedDict, total=False):
    hostname: str
    path: PathModifier


class RouteFilter(TypedDict, total=False):
    type: Required[str]
    requestHeaderModifier: HeaderModifier
    responseHeaderModifier: HeaderModifier
    requestRedirect: RequestRedirect
    urlRewrite: URLRewrite
    requestMirror: RequestMirror
    extensionRef: LocalObjectReference
    cors: HTTPCORSFilter


class BackendRef(BackendObjectReference, total=False):
    weight: int
    filters: list[RouteFilter]


class Timeouts(TypedDict, total=False):
    request: str
    backendRequest: str


class RouteRule(TypedDict, total=False):
    """A rule of an HTTPRoute or a GRPCRoute: a GRPCRoute's rule has no timeouts, and its matches are
    `GRPCRouteMatch`es (the rule builder reads them as such)."""

    name: str
    matches: list[HTTPRouteMatch] | list[GRPCRouteMatch]
    filters: list[RouteFilter]
    backendRefs: list[BackendRef]
    timeouts: Timeouts
    retry: HTTPRouteRetry
    sessionPersistence: SessionPersistence


class RouteSpec(TypedDict, total=False):
    parentRefs: list[ParentReference]
    hostnames: list[str]
    rules: list[RouteRule]


class Route(KubeObject, total=False):
    """An HTTPRoute or a GRPCRoute."""

    spec: Required[RouteSpec]
    status: RouteStatus
