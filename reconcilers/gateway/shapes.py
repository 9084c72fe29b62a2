"""The Gateway API objects (and the core objects beside them) as the translation reads them: typed shapes of the
JSON the caches hold, with the handful of accessors every part of the translation shares.

The shapes follow the v1.6 standard channel. Keys the API server always fills (a Gateway's spec, a listener's name,
port and protocol) are `Required`; the rest may be absent in objects made by hand (tests, `kflare dev`), so readers
give each its Gateway API default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, Required, TypedDict, cast

from reconcilers.gateway.kinds import GATEWAY_GROUP

JSON = dict[str, Any]
RouteKey = tuple[str, str, str]  # kind, namespace, name
ObjectKey = tuple[str, str]  # namespace, name


class ObjectMeta(TypedDict, total=False):
    name: Required[str]
    namespace: str
    generation: int
    creationTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    resourceVersion: str
    finalizers: list[str]


class _Object(TypedDict, total=False):
    """What every object has: its metadata."""

    metadata: Required[ObjectMeta]


class Condition(TypedDict):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str
    observedGeneration: int
    lastTransitionTime: NotRequired[str]


class LabelSelectorRequirement(TypedDict, total=False):
    key: Required[str]
    operator: Required[str]
    values: list[str]


class LabelSelector(TypedDict, total=False):
    matchLabels: dict[str, str]
    matchExpressions: list[LabelSelectorRequirement]


# ---- GatewayClass and Gateway ---------------------------------------------------------------------------------------


class ParametersReference(TypedDict, total=False):
    group: Required[str]
    kind: Required[str]
    name: Required[str]
    namespace: str


class GatewayClassSpec(TypedDict, total=False):
    controllerName: Required[str]
    parametersRef: ParametersReference
    description: str


class GatewayClass(_Object, total=False):
    spec: Required[GatewayClassSpec]
    status: JSON


RouteNamespaces = TypedDict("RouteNamespaces", {"from": str, "selector": LabelSelector}, total=False)


class RouteGroupKind(TypedDict, total=False):
    group: str
    kind: Required[str]


class AllowedRoutes(TypedDict, total=False):
    namespaces: RouteNamespaces
    kinds: list[RouteGroupKind]


class SecretObjectReference(TypedDict, total=False):
    group: str
    kind: str
    name: Required[str]
    namespace: str


class ListenerTLS(TypedDict, total=False):
    mode: str
    certificateRefs: list[SecretObjectReference]
    options: dict[str, str]


class Listener(TypedDict, total=False):
    name: Required[str]
    hostname: str
    port: Required[int]
    protocol: Required[str]
    tls: ListenerTLS
    allowedRoutes: AllowedRoutes


ListenerNamespaces = TypedDict("ListenerNamespaces", {"from": str, "selector": LabelSelector}, total=False)


class AllowedListeners(TypedDict, total=False):
    namespaces: ListenerNamespaces


class GatewaySpec(TypedDict, total=False):
    gatewayClassName: Required[str]
    listeners: list[Listener]
    addresses: list[JSON]
    allowedListeners: AllowedListeners


class Gateway(_Object, total=False):
    spec: Required[GatewaySpec]
    status: JSON


class ParentGatewayReference(TypedDict, total=False):
    group: str
    kind: str
    name: Required[str]
    namespace: str


class ListenerSetSpec(TypedDict, total=False):
    parentRef: Required[ParentGatewayReference]
    listeners: list[Listener]


class ListenerSet(_Object, total=False):
    spec: Required[ListenerSetSpec]
    status: JSON


# ---- routes ---------------------------------------------------------------------------------------------------------


class ParentReference(TypedDict, total=False):
    group: str
    kind: str
    namespace: str
    name: Required[str]
    sectionName: str
    port: int


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
    extensionRef: JSON
    cors: JSON


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
    retry: JSON
    sessionPersistence: JSON


class RouteSpec(TypedDict, total=False):
    parentRefs: list[ParentReference]
    hostnames: list[str]
    rules: list[RouteRule]


class Route(_Object, total=False):
    """An HTTPRoute or a GRPCRoute."""

    spec: Required[RouteSpec]
    status: JSON


class ReferenceGrantFrom(TypedDict):
    group: str
    kind: str
    namespace: str


class ReferenceGrantTo(TypedDict, total=False):
    group: Required[str]
    kind: Required[str]
    name: str


ReferenceGrantSpec = TypedDict("ReferenceGrantSpec", {"from": list[ReferenceGrantFrom], "to": list[ReferenceGrantTo]})


class ReferenceGrant(TypedDict):
    metadata: ObjectMeta
    spec: ReferenceGrantSpec


# ---- policies -------------------------------------------------------------------------------------------------------


class PolicyTargetReference(TypedDict, total=False):
    group: Required[str]
    kind: Required[str]
    name: Required[str]
    sectionName: str


class LocalObjectReference(TypedDict, total=False):
    group: Required[str]
    kind: Required[str]
    name: Required[str]


class SubjectAltName(TypedDict, total=False):
    type: Required[str]
    hostname: str
    uri: str


class BackendTLSValidation(TypedDict, total=False):
    caCertificateRefs: list[LocalObjectReference]
    wellKnownCACertificates: str
    hostname: Required[str]
    subjectAltNames: list[SubjectAltName]


class BackendTLSPolicySpec(TypedDict, total=False):
    targetRefs: Required[list[PolicyTargetReference]]
    validation: Required[BackendTLSValidation]
    options: dict[str, str]


class PolicyAncestorStatus(TypedDict):
    ancestorRef: ParentReference
    controllerName: str
    conditions: list[Condition]


class PolicyStatus(TypedDict, total=False):
    ancestors: list[PolicyAncestorStatus]


class BackendTLSPolicy(_Object, total=False):
    spec: Required[BackendTLSPolicySpec]
    status: PolicyStatus


# ---- core objects ---------------------------------------------------------------------------------------------------


class ServicePort(TypedDict, total=False):
    name: str
    port: Required[int]
    targetPort: int | str
    appProtocol: str
    protocol: str


class ServiceSpec(TypedDict, total=False):
    ports: list[ServicePort]
    type: str
    externalName: str


class Service(_Object, total=False):
    spec: ServiceSpec


class EndpointConditions(TypedDict, total=False):
    ready: bool


class Endpoint(TypedDict, total=False):
    addresses: Required[list[str]]
    conditions: EndpointConditions


class EndpointPort(TypedDict, total=False):
    name: str
    port: int
    protocol: str


class EndpointSlice(_Object, total=False):
    addressType: str
    ports: list[EndpointPort] | None
    endpoints: list[Endpoint] | None


class Secret(_Object, total=False):
    type: str
    data: dict[str, str]


class ConfigMap(_Object, total=False):
    data: dict[str, str]
    binaryData: dict[str, str]


Namespace = _Object


# ---- accessors ------------------------------------------------------------------------------------------------------


def ns(obj: _Object | Mapping[str, Any]) -> str:
    return cast(_Object, obj)["metadata"].get("namespace", "")


def name(obj: _Object | Mapping[str, Any]) -> str:
    return cast(_Object, obj)["metadata"]["name"]


def key(obj: _Object | Mapping[str, Any]) -> ObjectKey:
    return (ns(obj), name(obj))


def generation(obj: _Object | Mapping[str, Any]) -> int:
    return cast(_Object, obj)["metadata"].get("generation", 0)


def age_key(obj: _Object | Mapping[str, Any]) -> tuple[str, str, str]:
    """Oldest first, then by namespace and name: the order the spec breaks ties by."""
    return (cast(_Object, obj)["metadata"].get("creationTimestamp", ""), ns(obj), name(obj))


def labels(obj: _Object | Mapping[str, Any]) -> dict[str, str]:
    return cast(_Object, obj)["metadata"].get("labels", {})


def condition(type_: str, ok: bool, reason: str, message: str, observed: int) -> Condition:
    return {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message[:32768],
        "observedGeneration": observed,
    }


def escape(value: str) -> str:
    """A user string as Envoy must read it: `%` starts a command operator (%ENVIRONMENT(...)%), `%%` is a `%`."""
    return value.replace("%", "%%")


_DURATION = re.compile(r"(\d+)(h|ms|m|s)")
_UNITS_MS = {"h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}


def duration_ms(value: str) -> int | None:
    """A Gateway API duration (`1h30m`, `500ms`) in milliseconds; None when it is not one."""
    if not value or _DURATION.sub("", value):
        return None
    return sum(int(n) * _UNITS_MS[unit] for n, unit in _DURATION.findall(value))


def selector_matches(selector: LabelSelector, have: Mapping[str, str]) -> bool:
    for label, value in selector.get("matchLabels", {}).items():
        if have.get(label) != value:
            return False
    for expr in selector.get("matchExpressions", []):
        label, op, values = expr["key"], expr["operator"], expr.get("values", [])
        if op == "In" and have.get(label) not in values:
            return False
        if op == "NotIn" and label in have and have[label] in values:
            return False
        if op == "Exists" and label not in have:
            return False
        if op == "DoesNotExist" and label in have:
            return False
    return True


def reference_granted(
    grants: list[ReferenceGrant],
    from_kind: str,
    from_ns: str,
    to_kind: str,
    to_ns: str,
    to_name: str,
    to_group: str = "",
) -> bool:
    """Whether a ReferenceGrant in `to_ns` lets a `from_kind` (of the Gateway API group) in `from_ns` refer to the
    object `to_kind` `to_name` of `to_group` (core unless said) there."""
    for grant in grants:
        if ns(grant) != to_ns:
            continue
        if not any(
            f["group"] == GATEWAY_GROUP and f["kind"] == from_kind and f["namespace"] == from_ns
            for f in grant["spec"]["from"]
        ):
            continue
        for to in grant["spec"]["to"]:
            if to.get("group", "") == to_group and to["kind"] == to_kind and to.get("name") in (None, "", to_name):
                return True
    return False
