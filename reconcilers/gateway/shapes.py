"""The Gateway API objects (and the core objects beside them) as the translation reads them: typed shapes of the
JSON the caches hold, with the handful of accessors every part of the translation shares. A route's own shapes (its
rules, matches and filters) are `reconcilers.gateway.route_shapes`.

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


class KubeObject(TypedDict, total=False):
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


class GatewayClass(KubeObject, total=False):
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


class Gateway(KubeObject, total=False):
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


class ListenerSet(KubeObject, total=False):
    spec: Required[ListenerSetSpec]
    status: JSON


# ---- references ------------------------------------------------------------------------------------------------------


class ParentReference(TypedDict, total=False):
    group: str
    kind: str
    namespace: str
    name: Required[str]
    sectionName: str
    port: int


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


class BackendTLSPolicy(KubeObject, total=False):
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


class Service(KubeObject, total=False):
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


class EndpointSlice(KubeObject, total=False):
    addressType: str
    ports: list[EndpointPort] | None
    endpoints: list[Endpoint] | None


class Secret(KubeObject, total=False):
    type: str
    data: dict[str, str]


class ConfigMap(KubeObject, total=False):
    data: dict[str, str]
    binaryData: dict[str, str]


Namespace = KubeObject


# ---- accessors ------------------------------------------------------------------------------------------------------


def ns(obj: KubeObject | Mapping[str, Any]) -> str:
    return cast(KubeObject, obj)["metadata"].get("namespace", "")


def name(obj: KubeObject | Mapping[str, Any]) -> str:
    return cast(KubeObject, obj)["metadata"]["name"]


def key(obj: KubeObject | Mapping[str, Any]) -> ObjectKey:
    return (ns(obj), name(obj))


def generation(obj: KubeObject | Mapping[str, Any]) -> int:
    return cast(KubeObject, obj)["metadata"].get("generation", 0)


def age_key(obj: KubeObject | Mapping[str, Any]) -> tuple[str, str, str]:
    """Oldest first, then by namespace and name: the order the spec breaks ties by."""
    return (cast(KubeObject, obj)["metadata"].get("creationTimestamp", ""), ns(obj), name(obj))


def labels(obj: KubeObject | Mapping[str, Any]) -> dict[str, str]:
    return cast(KubeObject, obj)["metadata"].get("labels", {})


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
