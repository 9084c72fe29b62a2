"""The Gateway API objects the Gateway class reads, as TypedDicts of the JSON the caches hold:
generated from the OpenAPI v3 schemas of the experimental channel's CRDs (version v1). Do not edit:
regenerate with `python -m app.gateway_api_shapes` (a test fails while this module is stale).

A shape the schemas repeat under the same field is declared once, named by the first path it appears at.
`metadata` is the Kubernetes ObjectMeta the CRDs leave untyped, and always present.
"""

# Evaluated annotations (no `from __future__ import annotations`): a shape's `__required_keys__` then holds its
# `Required` keys, which the caches check their objects by.
from typing import Literal, Required, TypedDict


class ObjectMeta(TypedDict, total=False):
    name: Required[str]
    namespace: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    resourceVersion: str
    uid: str
    finalizers: list[str]


class GatewayClassSpecParametersRef(TypedDict, total=False):
    group: Required[str]
    kind: Required[str]
    name: Required[str]
    namespace: str


class GatewayClassSpec(TypedDict, total=False):
    controllerName: Required[str]
    description: str
    parametersRef: GatewayClassSpecParametersRef


class GatewayClassStatusConditions(TypedDict, total=False):
    lastTransitionTime: Required[str]
    message: Required[str]
    observedGeneration: int
    reason: Required[str]
    status: Required[Literal["True", "False", "Unknown"]]
    type: Required[str]


class GatewayClassStatusSupportedFeatures(TypedDict, total=False):
    name: Required[str]


class GatewayClassStatus(TypedDict, total=False):
    conditions: list[GatewayClassStatusConditions]
    supportedFeatures: list[GatewayClassStatusSupportedFeatures]


class GatewayClass(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]
    spec: Required[GatewayClassSpec]
    status: GatewayClassStatus


class GatewaySpecAddresses(TypedDict, total=False):
    type: str
    value: str


class GatewaySpecAllowedListenersNamespacesSelectorMatchExpressions(TypedDict, total=False):
    key: Required[str]
    operator: Required[str]
    values: list[str]


class GatewaySpecAllowedListenersNamespacesSelector(TypedDict, total=False):
    matchExpressions: list[GatewaySpecAllowedListenersNamespacesSelectorMatchExpressions]
    matchLabels: dict[str, str]


GatewaySpecAllowedListenersNamespaces = TypedDict(
    "GatewaySpecAllowedListenersNamespaces",
    {
        "from": Literal["All", "Selector", "Same", "None"],
        "selector": GatewaySpecAllowedListenersNamespacesSelector,
    },
    total=False,
)


class GatewaySpecAllowedListeners(TypedDict, total=False):
    namespaces: GatewaySpecAllowedListenersNamespaces


class GatewaySpecInfrastructureParametersRef(TypedDict, total=False):
    group: Required[str]
    kind: Required[str]
    name: Required[str]


class GatewaySpecInfrastructure(TypedDict, total=False):
    annotations: dict[str, str]
    labels: dict[str, str]
    parametersRef: GatewaySpecInfrastructureParametersRef


class GatewaySpecListenersAllowedRoutesKinds(TypedDict, total=False):
    group: str
    kind: Required[str]


GatewaySpecListenersAllowedRoutesNamespaces = TypedDict(
    "GatewaySpecListenersAllowedRoutesNamespaces",
    {
        "from": Literal["All", "Selector", "Same"],
        "selector": GatewaySpecAllowedListenersNamespacesSelector,
    },
    total=False,
)


class GatewaySpecListenersAllowedRoutes(TypedDict, total=False):
    kinds: list[GatewaySpecListenersAllowedRoutesKinds]
    namespaces: GatewaySpecListenersAllowedRoutesNamespaces


class GatewaySpecListenersTlsCertificateRefs(TypedDict, total=False):
    group: str
    kind: str
    name: Required[str]
    namespace: str


class GatewaySpecListenersTls(TypedDict, total=False):
    certificateRefs: list[GatewaySpecListenersTlsCertificateRefs]
    mode: Literal["Terminate", "Passthrough"]
    options: dict[str, str]


class GatewaySpecListeners(TypedDict, total=False):
    allowedRoutes: GatewaySpecListenersAllowedRoutes
    hostname: str
    name: Required[str]
    port: Required[int]
    protocol: Required[str]
    tls: GatewaySpecListenersTls


class GatewaySpecTlsBackendClientCertificateRef(TypedDict, total=False):
    group: str
    kind: str
    name: Required[str]
    namespace: str


class GatewaySpecTlsBackend(TypedDict, total=False):
    clientCertificateRef: GatewaySpecTlsBackendClientCertificateRef


class GatewaySpecTlsFrontendDefaultValidationCaCertificateRefs(TypedDict, total=False):
    group: Required[str]
    kind: Required[str]
    name: Required[str]
    namespace: str


class GatewaySpecTlsFrontendDefaultValidation(TypedDict, total=False):
    caCertificateRefs: Required[list[GatewaySpecTlsFrontendDefaultValidationCaCertificateRefs]]
    mode: Literal["AllowValidOnly", "AllowInsecureFallback"]


class GatewaySpecTlsFrontendDefault(TypedDict, total=False):
    validation: GatewaySpecTlsFrontendDefaultValidation


class GatewaySpecTlsFrontendPerPortTls(TypedDict, total=False):
    validation: GatewaySpecTlsFrontendDefaultValidation


class GatewaySpecTlsFrontendPerPort(TypedDict, total=False):
    port: Required[int]
    tls: Required[GatewaySpecTlsFrontendPerPortTls]


class GatewaySpecTlsFrontend(TypedDict, total=False):
    default: Required[GatewaySpecTlsFrontendDefault]
    perPort: list[GatewaySpecTlsFrontendPerPort]


class GatewaySpecTls(TypedDict, total=False):
    backend: GatewaySpecTlsBackend
    frontend: GatewaySpecTlsFrontend


class GatewaySpec(TypedDict, total=False):
    addresses: list[GatewaySpecAddresses]
    allowedListeners: GatewaySpecAllowedListeners
    defaultScope: Literal["All", "None"]
    gatewayClassName: Required[str]
    infrastructure: GatewaySpecInfrastructure
    listeners: Required[list[GatewaySpecListeners]]
    tls: GatewaySpecTls


class GatewayStatusAddresses(TypedDict, total=False):
    type: str
    value: Required[str]


class GatewayStatusListenersSupportedKinds(TypedDict, total=False):
    group: str
    kind: Required[str]


class GatewayStatusListeners(TypedDict, total=False):
    attachedRoutes: Required[int]
    conditions: Required[list[GatewayClassStatusConditions]]
    name: Required[str]
    supportedKinds: list[GatewayStatusListenersSupportedKinds]


class GatewayStatus(TypedDict, total=False):
    addresses: list[GatewayStatusAddresses]
    attachedListenerSets: int
    conditions: list[GatewayClassStatusConditions]
    listeners: list[GatewayStatusListeners]


class Gateway(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]
    spec: Required[GatewaySpec]
    status: GatewayStatus


class ListenerSetSpecParentRef(TypedDict, total=False):
    group: str
    kind: str
    name: Required[str]
    namespace: str


class ListenerSetSpec(TypedDict, total=False):
    listeners: Required[list[GatewaySpecListeners]]
    parentRef: Required[ListenerSetSpecParentRef]


class ListenerSetStatus(TypedDict, total=False):
    conditions: list[GatewayClassStatusConditions]
    listeners: list[GatewayStatusListeners]


class ListenerSet(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]
    spec: Required[ListenerSetSpec]
    status: ListenerSetStatus


class HTTPRouteSpecParentRefs(TypedDict, total=False):
    group: str
    kind: str
    name: Required[str]
    namespace: str
    port: int
    sectionName: str


class HTTPRouteSpecRulesBackendRefsFiltersCors(TypedDict, total=False):
    allowCredentials: bool
    allowHeaders: list[str]
    allowMethods: list[Literal["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "*"]]
    allowOrigins: list[str]
    exposeHeaders: list[str]
    maxAge: int


class HTTPRouteSpecRulesBackendRefsFiltersExtensionRef(TypedDict, total=False):
    group: Required[str]
    kind: Required[str]
    name: Required[str]


class HTTPRouteSpecRulesBackendRefsFiltersExternalAuthBackendRef(TypedDict, total=False):
    group: str
    kind: str
    name: Required[str]
    namespace: str
    port: int


class HTTPRouteSpecRulesBackendRefsFiltersExternalAuthForwardBody(TypedDict, total=False):
    maxSize: int


class HTTPRouteSpecRulesBackendRefsFiltersExternalAuthGrpc(TypedDict, total=False):
    allowedHeaders: list[str]


class HTTPRouteSpecRulesBackendRefsFiltersExternalAuthHttp(TypedDict, total=False):
    allowedHeaders: list[str]
    allowedResponseHeaders: list[str]
    path: str


class HTTPRouteSpecRulesBackendRefsFiltersExternalAuth(TypedDict, total=False):
    backendRef: Required[HTTPRouteSpecRulesBackendRefsFiltersExternalAuthBackendRef]
    forwardBody: HTTPRouteSpecRulesBackendRefsFiltersExternalAuthForwardBody
    grpc: HTTPRouteSpecRulesBackendRefsFiltersExternalAuthGrpc
    http: HTTPRouteSpecRulesBackendRefsFiltersExternalAuthHttp
    protocol: Required[Literal["HTTP", "GRPC"]]


class HTTPRouteSpecRulesBackendRefsFiltersRequestHeaderModifierAdd(TypedDict, total=False):
    name: Required[str]
    value: Required[str]


class HTTPRouteSpecRulesBackendRefsFiltersRequestHeaderModifierSet(TypedDict, total=False):
    name: Required[str]
    value: Required[str]


class HTTPRouteSpecRulesBackendRefsFiltersRequestHeaderModifier(TypedDict, total=False):
    add: list[HTTPRouteSpecRulesBackendRefsFiltersRequestHeaderModifierAdd]
    remove: list[str]
    set: list[HTTPRouteSpecRulesBackendRefsFiltersRequestHeaderModifierSet]


class HTTPRouteSpecRulesBackendRefsFiltersRequestMirrorFraction(TypedDict, total=False):
    denominator: int
    numerator: Required[int]


class HTTPRouteSpecRulesBackendRefsFiltersRequestMirror(TypedDict, total=False):
    backendRef: Required[HTTPRouteSpecRulesBackendRefsFiltersExternalAuthBackendRef]
    fraction: HTTPRouteSpecRulesBackendRefsFiltersRequestMirrorFraction
    percent: int


class HTTPRouteSpecRulesBackendRefsFiltersRequestRedirectPath(TypedDict, total=False):
    replaceFullPath: str
    replacePrefixMatch: str
    type: Required[Literal["ReplaceFullPath", "ReplacePrefixMatch"]]


class HTTPRouteSpecRulesBackendRefsFiltersRequestRedirect(TypedDict, total=False):
    hostname: str
    path: HTTPRouteSpecRulesBackendRefsFiltersRequestRedirectPath
    port: int
    scheme: Literal["http", "https"]
    statusCode: int


class HTTPRouteSpecRulesBackendRefsFiltersResponseHeaderModifier(TypedDict, total=False):
    add: list[HTTPRouteSpecRulesBackendRefsFiltersRequestHeaderModifierAdd]
    remove: list[str]
    set: list[HTTPRouteSpecRulesBackendRefsFiltersRequestHeaderModifierSet]


class HTTPRouteSpecRulesBackendRefsFiltersUrlRewrite(TypedDict, total=False):
    hostname: str
    path: HTTPRouteSpecRulesBackendRefsFiltersRequestRedirectPath


class HTTPRouteSpecRulesBackendRefsFilters(TypedDict, total=False):
    cors: HTTPRouteSpecRulesBackendRefsFiltersCors
    extensionRef: HTTPRouteSpecRulesBackendRefsFiltersExtensionRef
    externalAuth: HTTPRouteSpecRulesBackendRefsFiltersExternalAuth
    requestHeaderModifier: HTTPRouteSpecRulesBackendRefsFiltersRequestHeaderModifier
    requestMirror: HTTPRouteSpecRulesBackendRefsFiltersRequestMirror
    requestRedirect: HTTPRouteSpecRulesBackendRefsFiltersRequestRedirect
    responseHeaderModifier: HTTPRouteSpecRulesBackendRefsFiltersResponseHeaderModifier
    type: Required[
        Literal[
            "RequestHeaderModifier",
            "ResponseHeaderModifier",
            "RequestMirror",
            "RequestRedirect",
            "URLRewrite",
            "ExtensionRef",
            "CORS",
            "ExternalAuth",
        ]
    ]
    urlRewrite: HTTPRouteSpecRulesBackendRefsFiltersUrlRewrite


class HTTPRouteSpecRulesBackendRefs(TypedDict, total=False):
    filters: list[HTTPRouteSpecRulesBackendRefsFilters]
    group: str
    kind: str
    name: Required[str]
    namespace: str
    port: int
    weight: int


class HTTPRouteSpecRulesMatchesHeaders(TypedDict, total=False):
    name: Required[str]
    type: Literal["Exact", "RegularExpression"]
    value: Required[str]


class HTTPRouteSpecRulesMatchesPath(TypedDict, total=False):
    type: Literal["Exact", "PathPrefix", "RegularExpression"]
    value: str


class HTTPRouteSpecRulesMatchesQueryParams(TypedDict, total=False):
    name: Required[str]
    type: Literal["Exact", "RegularExpression"]
    value: Required[str]


class HTTPRouteSpecRulesMatches(TypedDict, total=False):
    headers: list[HTTPRouteSpecRulesMatchesHeaders]
    method: Literal["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]
    path: HTTPRouteSpecRulesMatchesPath
    queryParams: list[HTTPRouteSpecRulesMatchesQueryParams]


class HTTPRouteSpecRulesRetry(TypedDict, total=False):
    attempts: int
    backoff: str
    codes: list[int]


class HTTPRouteSpecRulesSessionPersistenceCookieConfig(TypedDict, total=False):
    lifetimeType: Literal["Permanent", "Session"]


class HTTPRouteSpecRulesSessionPersistence(TypedDict, total=False):
    absoluteTimeout: str
    cookieConfig: HTTPRouteSpecRulesSessionPersistenceCookieConfig
    sessionName: str
    type: Literal["Cookie", "Header"]


class HTTPRouteSpecRulesTimeouts(TypedDict, total=False):
    backendRequest: str
    request: str


class HTTPRouteSpecRules(TypedDict, total=False):
    backendRefs: list[HTTPRouteSpecRulesBackendRefs]
    filters: list[HTTPRouteSpecRulesBackendRefsFilters]
    matches: list[HTTPRouteSpecRulesMatches]
    name: str
    retry: HTTPRouteSpecRulesRetry
    sessionPersistence: HTTPRouteSpecRulesSessionPersistence
    timeouts: HTTPRouteSpecRulesTimeouts


class HTTPRouteSpec(TypedDict, total=False):
    hostnames: list[str]
    parentRefs: list[HTTPRouteSpecParentRefs]
    rules: list[HTTPRouteSpecRules]
    useDefaultGateways: Literal["All", "None"]


class HTTPRouteStatusParentsParentRef(TypedDict, total=False):
    group: str
    kind: str
    name: Required[str]
    namespace: str
    port: int
    sectionName: str


class HTTPRouteStatusParents(TypedDict, total=False):
    conditions: Required[list[GatewayClassStatusConditions]]
    controllerName: Required[str]
    parentRef: Required[HTTPRouteStatusParentsParentRef]


class HTTPRouteStatus(TypedDict, total=False):
    parents: Required[list[HTTPRouteStatusParents]]


class HTTPRoute(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]
    spec: Required[HTTPRouteSpec]
    status: HTTPRouteStatus


class GRPCRouteSpecRulesBackendRefsFilters(TypedDict, total=False):
    extensionRef: HTTPRouteSpecRulesBackendRefsFiltersExtensionRef
    requestHeaderModifier: HTTPRouteSpecRulesBackendRefsFiltersRequestHeaderModifier
    requestMirror: HTTPRouteSpecRulesBackendRefsFiltersRequestMirror
    responseHeaderModifier: HTTPRouteSpecRulesBackendRefsFiltersResponseHeaderModifier
    type: Required[Literal["ResponseHeaderModifier", "RequestHeaderModifier", "RequestMirror", "ExtensionRef"]]


class GRPCRouteSpecRulesBackendRefs(TypedDict, total=False):
    filters: list[GRPCRouteSpecRulesBackendRefsFilters]
    group: str
    kind: str
    name: Required[str]
    namespace: str
    port: int
    weight: int


class GRPCRouteSpecRulesMatchesMethod(TypedDict, total=False):
    method: str
    service: str
    type: Literal["Exact", "RegularExpression"]


class GRPCRouteSpecRulesMatches(TypedDict, total=False):
    headers: list[HTTPRouteSpecRulesMatchesHeaders]
    method: GRPCRouteSpecRulesMatchesMethod


class GRPCRouteSpecRules(TypedDict, total=False):
    backendRefs: list[GRPCRouteSpecRulesBackendRefs]
    filters: list[GRPCRouteSpecRulesBackendRefsFilters]
    matches: list[GRPCRouteSpecRulesMatches]
    name: str
    sessionPersistence: HTTPRouteSpecRulesSessionPersistence


class GRPCRouteSpec(TypedDict, total=False):
    hostnames: list[str]
    parentRefs: list[HTTPRouteSpecParentRefs]
    rules: list[GRPCRouteSpecRules]
    useDefaultGateways: Literal["All", "None"]


class GRPCRoute(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]
    spec: Required[GRPCRouteSpec]
    status: HTTPRouteStatus


class ReferenceGrantSpecFrom(TypedDict, total=False):
    group: Required[str]
    kind: Required[str]
    namespace: Required[str]


class ReferenceGrantSpecTo(TypedDict, total=False):
    group: Required[str]
    kind: Required[str]
    name: str


ReferenceGrantSpec = TypedDict(
    "ReferenceGrantSpec",
    {
        "from": Required[list[ReferenceGrantSpecFrom]],
        "to": Required[list[ReferenceGrantSpecTo]],
    },
    total=False,
)


class ReferenceGrant(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]
    spec: Required[ReferenceGrantSpec]


class BackendTLSPolicySpecTargetRefs(TypedDict, total=False):
    group: Required[str]
    kind: Required[str]
    name: Required[str]
    sectionName: str


class BackendTLSPolicySpecValidationCaCertificateRefs(TypedDict, total=False):
    group: Required[str]
    kind: Required[str]
    name: Required[str]


class BackendTLSPolicySpecValidationSubjectAltNames(TypedDict, total=False):
    hostname: str
    type: Required[Literal["Hostname", "URI"]]
    uri: str


class BackendTLSPolicySpecValidation(TypedDict, total=False):
    caCertificateRefs: list[BackendTLSPolicySpecValidationCaCertificateRefs]
    hostname: Required[str]
    subjectAltNames: list[BackendTLSPolicySpecValidationSubjectAltNames]
    wellKnownCACertificates: str


class BackendTLSPolicySpec(TypedDict, total=False):
    options: dict[str, str]
    targetRefs: Required[list[BackendTLSPolicySpecTargetRefs]]
    validation: Required[BackendTLSPolicySpecValidation]


class BackendTLSPolicyStatusAncestorsAncestorRef(TypedDict, total=False):
    group: str
    kind: str
    name: Required[str]
    namespace: str
    port: int
    sectionName: str


class BackendTLSPolicyStatusAncestors(TypedDict, total=False):
    ancestorRef: Required[BackendTLSPolicyStatusAncestorsAncestorRef]
    conditions: Required[list[GatewayClassStatusConditions]]
    controllerName: Required[str]


class BackendTLSPolicyStatus(TypedDict, total=False):
    ancestors: Required[list[BackendTLSPolicyStatusAncestors]]


class BackendTLSPolicy(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]
    spec: Required[BackendTLSPolicySpec]
    status: BackendTLSPolicyStatus
