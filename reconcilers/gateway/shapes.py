"""The Gateway API objects (and the core objects beside them) as the translation reads them: typed shapes of the
JSON the caches hold, with the handful of accessors every part of the translation shares. A route's own shapes (its
rules, matches and filters) are `reconcilers.gateway.gatewayapi.route_shapes`.

The Gateway API objects' shapes are generated from the CRDs' schemas (`reconcilers.gateway.gateway_api`), named
here as the translation reads them. Keys the schemas require are `Required`; the rest may be absent (the API server
fills defaults, objects made by hand need not), so readers give each its Gateway API default.
"""

# Evaluated annotations (no `from __future__ import annotations`): a shape's `__required_keys__` then holds its
# `Required` keys, which the caches check their objects by (`reconcilers.gateway.caches.shaped`).
import re
from collections.abc import Mapping
from typing import Literal, NotRequired, Required, TypedDict

from reconcilers.gateway import gateway_api as api
from reconcilers.gateway import raw
from reconcilers.gateway.gateway_api import ObjectMeta
from reconcilers.gateway.kinds import GATEWAY_GROUP

RouteKey = tuple[str, str, str]  # kind, namespace, name
ObjectKey = tuple[str, str]  # namespace, name


class KubeObject(TypedDict, total=False):
    """What every object has: its metadata."""

    metadata: Required[ObjectMeta]


class Condition(TypedDict):
    """A condition as the class writes it: the API server stamps `lastTransitionTime` when it is left out."""

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


# ---- the Gateway API objects: the generated shapes, by the names the translation reads them by --------------------

LabelSelector = api.GatewaySpecAllowedListenersNamespacesSelector
ParametersReference = api.GatewayClassSpecParametersRef
GatewayClassSpec = api.GatewayClassSpec
GatewayClass = api.GatewayClass
RouteNamespaces = api.GatewaySpecListenersAllowedRoutesNamespaces
RouteGroupKind = api.GatewaySpecListenersAllowedRoutesKinds
AllowedRoutes = api.GatewaySpecListenersAllowedRoutes
SecretObjectReference = api.GatewaySpecListenersTlsCertificateRefs
ListenerTLS = api.GatewaySpecListenersTls
Listener = api.GatewaySpecListeners
ListenerNamespaces = api.GatewaySpecAllowedListenersNamespaces
AllowedListeners = api.GatewaySpecAllowedListeners
GatewaySpec = api.GatewaySpec
Gateway = api.Gateway
ParentGatewayReference = api.ListenerSetSpecParentRef
ListenerSetSpec = api.ListenerSetSpec
ListenerSet = api.ListenerSet
ParentReference = api.HTTPRouteSpecParentRefs
ReferenceGrantFrom = api.ReferenceGrantSpecFrom
ReferenceGrantTo = api.ReferenceGrantSpecTo
ReferenceGrantSpec = api.ReferenceGrantSpec
ReferenceGrant = api.ReferenceGrant
PolicyTargetReference = api.BackendTLSPolicySpecTargetRefs
LocalObjectReference = api.BackendTLSPolicySpecValidationCaCertificateRefs
SubjectAltName = api.BackendTLSPolicySpecValidationSubjectAltNames
BackendTLSValidation = api.BackendTLSPolicySpecValidation
BackendTLSPolicySpec = api.BackendTLSPolicySpec
PolicyStatus = api.BackendTLSPolicyStatus
BackendTLSPolicy = api.BackendTLSPolicy


class PolicyAncestorStatus(TypedDict):
    """An entry of a policy's status.ancestors as the class writes it: its conditions are `Condition`s."""

    ancestorRef: ParentReference
    controllerName: str
    conditions: list[Condition]


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


# Each takes an object shaped or as the caches hold it (untyped JSON), whose metadata the API server guarantees.


def _metadata(obj: KubeObject | Mapping[str, object]) -> Mapping[str, object]:
    return raw.mapping(obj["metadata"])


def _string(obj: KubeObject | Mapping[str, object], field: str) -> str:
    value = _metadata(obj).get(field, "")
    return value if isinstance(value, str) else ""


def ns(obj: KubeObject | Mapping[str, object]) -> str:
    return _string(obj, "namespace")


def name(obj: KubeObject | Mapping[str, object]) -> str:
    return str(_metadata(obj)["name"])


def key(obj: KubeObject | Mapping[str, object]) -> ObjectKey:
    return (ns(obj), name(obj))


def generation(obj: KubeObject | Mapping[str, object]) -> int:
    value = _metadata(obj).get("generation", 0)
    return value if isinstance(value, int) else 0


def age_key(obj: KubeObject | Mapping[str, object]) -> tuple[str, str, str]:
    """Oldest first, then by namespace and name: the order the spec breaks ties by."""
    return (_string(obj, "creationTimestamp"), ns(obj), name(obj))


def labels(obj: KubeObject | Mapping[str, object]) -> dict[str, str]:
    value = _metadata(obj).get("labels", {})
    return value if isinstance(value, dict) else {}


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


def namespace_admitted(
    origin: str, selector: LabelSelector, namespace: str, home: str, labels: Mapping[str, str]
) -> bool:
    """Whether a `namespaces.from` (`All`, `Same`: `home`, `Selector`, else none) admits `namespace`, whose labels
    are `labels`: a listener's allowedRoutes, a Gateway's allowedListeners."""
    if origin == "All":
        return True
    if origin == "Same":
        return namespace == home
    if origin == "Selector":
        return selector_matches(selector, labels)
    return False


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
