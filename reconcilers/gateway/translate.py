"""Gateway API objects in, Envoy resources and Gateway API statuses out: a pure function of what the caches hold.

The output also lists the hostnames the class publishes (and whether each carries gRPC), which is what the tunnel's
ingress document and the DNS records per hostname are computed from.

Nothing in a route is silently ignored: a field, match or filter the data plane does not implement makes the route
`Accepted=False` with reason `UnsupportedValue` and a message naming it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconcilers.gateway import envoy
from reconcilers.gateway.kinds import (
    BUNDLE_VERSION,
    CLASS_NAME,
    CONTROLLER_NAME,
    GATEWAY_GROUP,
    TUNNEL_GROUP,
    TUNNEL_KIND,
)

JSON = dict[str, Any]
RouteKey = tuple[str, str, str]  # kind, namespace, name

HTTP_ROUTE, GRPC_ROUTE = "HTTPRoute", "GRPCRoute"
ROUTE_KINDS = (HTTP_ROUTE, GRPC_ROUTE)
SERVED_PROTOCOLS = ("HTTP", "HTTPS")
H2C = "kubernetes.io/h2c"


@dataclass(frozen=True)
class TunnelState:
    """What the class needs of the kflare Tunnel its parametersRef names."""

    ready: bool
    message: str = ""
    address: str | None = None
    """`<tunnel id>.cfargotunnel.com`, once the tunnel has an ID."""


TunnelLookup = Callable[[str, str], TunnelState | None]
"""(namespace, name) of a Tunnel -> its state, None when there is no such Tunnel."""


@dataclass
class World:
    """Everything the translation reads, as the caches hold it."""

    classes: list[JSON] = field(default_factory=list)
    gateways: list[JSON] = field(default_factory=list)
    http_routes: list[JSON] = field(default_factory=list)
    grpc_routes: list[JSON] = field(default_factory=list)
    grants: list[JSON] = field(default_factory=list)
    services: list[JSON] = field(default_factory=list)
    slices: list[JSON] = field(default_factory=list)
    namespaces: list[JSON] = field(default_factory=list)
    tunnel: TunnelLookup = lambda namespace, name: None
    installed_bundle: str | None = None
    tenancy_label: str | None = None
    controller_name: str = CONTROLLER_NAME


@dataclass(frozen=True)
class Hostname:
    """A hostname the class publishes: the tunnel's ingress document gets a rule for it (an HTTP/2 origin when it
    carries gRPC) and the zone a proxied CNAME."""

    hostname: str
    grpc: bool
    tunnel: tuple[str, str] | None
    """(namespace, name) of the Tunnel of the class serving it; None for a class with no Tunnel."""
    routes: tuple[RouteKey, ...]


@dataclass
class Translation:
    resources: dict[str, list[JSON]]
    """Envoy resources by xDS type key (envoy.TYPES), the ingress listener excepted (it comes from settings)."""
    class_status: dict[str, JSON]
    gateway_status: dict[tuple[str, str], JSON]
    route_parents: dict[RouteKey, list[JSON]]
    """This controller's entries of each route's status.parents (others' entries are kept when writing)."""
    hostnames: list[Hostname]
    classes_in_use: set[str]


def published_hostnames(world: World) -> list[Hostname]:
    """The (hostname, is_grpc) list the tunnel's ingress document and the DNS records are computed from."""
    return translate(world).hostnames


# ---- small helpers -------------------------------------------------------------------------------------------------


def _meta(obj: JSON) -> JSON:
    meta: JSON = obj.get("metadata") or {}
    return meta


def _ns(obj: JSON) -> str:
    return str(_meta(obj).get("namespace") or "")


def _name(obj: JSON) -> str:
    return str(_meta(obj).get("name") or "")


def _generation(obj: JSON) -> int:
    return int(_meta(obj).get("generation") or 0)


def _age_key(obj: JSON) -> tuple[str, str, str]:
    return (str(_meta(obj).get("creationTimestamp") or ""), _ns(obj), _name(obj))


def condition(type_: str, ok: bool, reason: str, message: str, generation: int) -> JSON:
    return {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message[:32768],
        "observedGeneration": generation,
    }


def escape(value: str) -> str:
    """A user string as Envoy must read it: `%` starts a command operator (%ENVIRONMENT(...)%), `%%` is a `%`."""
    return value.replace("%", "%%")


def _minor(version: str | None) -> str | None:
    if not version:
        return None
    match = re.match(r"v?(\d+)\.(\d+)", version)
    return f"v{match.group(1)}.{match.group(2)}" if match else None


_DURATION = re.compile(r"(\d+)(h|ms|m|s)")
_UNITS_MS = {"h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}


def duration_ms(value: str) -> int | None:
    """A Gateway API duration (`1h30m`, `500ms`) in milliseconds; None when it is not one."""
    if not value or _DURATION.sub("", value):
        return None
    return sum(int(n) * _UNITS_MS[unit] for n, unit in _DURATION.findall(value))


_NOT_RE2 = re.compile(r"\(\?[=!<]|\(\?P=|\\[1-9]|[*+?}]\+|\(\?>")


def regex_error(pattern: str) -> str | None:
    """Why Envoy (RE2) would refuse `pattern`, as far as can be told without RE2: one refused regex would make Envoy
    refuse the whole route configuration, so a doubtful one is refused here, in the route's status."""
    if len(pattern) > 1024:
        return "longer than 1024 characters"
    if _NOT_RE2.search(pattern):
        return "uses lookaround, a backreference or a possessive quantifier, which RE2 does not support"
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    return None


def hostname_matches(listener: str | None, route: str) -> str | None:
    """The intersection of a listener hostname and a route hostname (both may be wildcards), None when empty."""
    if listener is None:
        return route
    if listener == route:
        return route
    if listener.startswith("*."):
        if route.startswith("*."):
            # The narrower wildcard wins: *.example.com and *.a.example.com intersect in *.a.example.com.
            if route.endswith(listener[1:]):
                return route
            if listener.endswith(route[1:]):
                return listener
            return None
        return route if route.endswith(listener[1:]) else None
    if route.startswith("*."):
        return listener if listener.endswith(route[1:]) else None
    return None


def _selector_matches(selector: JSON, labels: Mapping[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _within(hostname: str, domain: str) -> bool:
    name = hostname[2:] if hostname.startswith("*.") else hostname
    return name == domain or name.endswith("." + domain)


# ---- the class and its Gateways -----------------------------------------------------------------------------------


@dataclass
class _Listener:
    gateway: JSON
    spec: JSON
    index: int
    accepted: bool
    kinds: tuple[str, ...]
    conditions: list[JSON]
    attached: int = 0

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or "")

    @property
    def hostname(self) -> str | None:
        value = self.spec.get("hostname")
        return str(value) if value else None

    def allows_namespace(self, namespace: str, labels: Mapping[str, str]) -> bool:
        spec = ((self.spec.get("allowedRoutes") or {}).get("namespaces")) or {}
        origin = spec.get("from") or "Same"
        if origin == "All":
            return True
        if origin == "Same":
            return namespace == _ns(self.gateway)
        if origin == "Selector":
            return _selector_matches(spec.get("selector") or {}, labels)
        return False


def _class_status(cls: JSON, world: World) -> tuple[JSON, bool, TunnelState | None, tuple[str, str] | None]:
    generation = _generation(cls)
    ref = (cls.get("spec") or {}).get("parametersRef")
    tunnel: TunnelState | None = None
    tunnel_key: tuple[str, str] | None = None
    if ref is None:
        accepted = condition(
            "Accepted",
            True,
            "Accepted",
            "no parametersRef: served by the data plane only, not through a Tunnel",
            generation,
        )
    elif ref.get("group") != TUNNEL_GROUP or ref.get("kind") != TUNNEL_KIND or not ref.get("namespace"):
        accepted = condition(
            "Accepted",
            False,
            "InvalidParameters",
            f"parametersRef must name a {TUNNEL_KIND}.{TUNNEL_GROUP} with its namespace",
            generation,
        )
    else:
        tunnel_key = (str(ref["namespace"]), str(ref.get("name") or ""))
        tunnel = world.tunnel(*tunnel_key)
        if tunnel is None:
            accepted = condition(
                "Accepted",
                False,
                "InvalidParameters",
                f"{TUNNEL_KIND} {tunnel_key[0]}/{tunnel_key[1]} not found",
                generation,
            )
        else:
            accepted = condition(
                "Accepted", True, "Accepted", f"{TUNNEL_KIND} {tunnel_key[0]}/{tunnel_key[1]}", generation
            )
    wanted = _minor(BUNDLE_VERSION)
    installed = _minor(world.installed_bundle)
    if installed == wanted:
        supported = condition(
            "SupportedVersion", True, "SupportedVersion", f"Gateway API {world.installed_bundle}", generation
        )
    else:
        supported = condition(
            "SupportedVersion",
            False,
            "UnsupportedVersion",
            f"installed Gateway API bundle {world.installed_bundle or 'unknown'}; this controller wants {wanted}.x",
            generation,
        )
    status = {"conditions": [accepted, supported]}
    return status, accepted["status"] == "True", tunnel, tunnel_key


def _listener(gateway: JSON, spec: JSON, index: int) -> _Listener:
    generation = _generation(gateway)
    protocol = spec.get("protocol")
    conds: list[JSON] = []
    kinds: list[str] = []
    bad_kinds: list[str] = []
    allowed = (spec.get("allowedRoutes") or {}).get("kinds")
    if allowed is None:
        kinds = list(ROUTE_KINDS)
    else:
        for kind in allowed:
            group = kind.get("group", GATEWAY_GROUP)
            if group == GATEWAY_GROUP and kind.get("kind") in ROUTE_KINDS:
                kinds.append(str(kind["kind"]))
            else:
                bad_kinds.append(f"{kind.get('kind')}.{group}")
    accepted = True
    if protocol not in SERVED_PROTOCOLS:
        accepted = False
        conds.append(
            condition(
                "Accepted",
                False,
                "UnsupportedProtocol",
                f"protocol {protocol}: a Cloudflare Tunnel carries HTTP only (HTTP or HTTPS listeners)",
                generation,
            )
        )
    elif spec.get("tls") is not None:
        accepted = False
        conds.append(
            condition(
                "Accepted",
                False,
                "UnsupportedValue",
                "tls: TLS ends at Cloudflare's edge; an HTTPS listener of this class has no tls block",
                generation,
            )
        )
    else:
        conds.append(condition("Accepted", True, "Accepted", "", generation))
    if bad_kinds:
        conds.append(
            condition(
                "ResolvedRefs",
                False,
                "InvalidRouteKinds",
                f"route kinds not supported: {', '.join(bad_kinds)} (supported: HTTPRoute, GRPCRoute)",
                generation,
            )
        )
    else:
        conds.append(condition("ResolvedRefs", True, "ResolvedRefs", "", generation))
    conds.append(condition("Conflicted", False, "NoConflicts", "", generation))
    programmed = accepted and bool(kinds)
    conds.append(condition("Programmed", programmed, "Programmed" if programmed else "Invalid", "", generation))
    if not kinds:
        accepted = False
    return _Listener(gateway, spec, index, accepted, tuple(kinds), conds)


# ---- routes ---------------------------------------------------------------------------------------------------------

_RULE_KEYS = {
    HTTP_ROUTE: {"name", "matches", "filters", "backendRefs", "timeouts"},
    GRPC_ROUTE: {"name", "matches", "filters", "backendRefs"},
}
_MATCH_KEYS = {HTTP_ROUTE: {"path", "headers", "queryParams", "method"}, GRPC_ROUTE: {"method", "headers"}}
_FILTERS = {
    HTTP_ROUTE: {"RequestHeaderModifier", "ResponseHeaderModifier", "RequestRedirect", "URLRewrite", "RequestMirror"},
    GRPC_ROUTE: {"RequestHeaderModifier", "ResponseHeaderModifier", "RequestMirror"},
}
_SPEC_KEYS = {"parentRefs", "hostnames", "rules"}
_BACKEND_KEYS = {"group", "kind", "name", "namespace", "port", "weight"}
_REDIRECT_CODES = {
    301: "MOVED_PERMANENTLY",
    302: "FOUND",
    303: "SEE_OTHER",
    307: "TEMPORARY_REDIRECT",
    308: "PERMANENT_REDIRECT",
}


class Unsupported(Exception):
    """A part of a route the data plane does not implement; the message names it."""


@dataclass
class _Backend:
    cluster: str | None
    weight: int
    problem: tuple[str, str] | None = None  # (reason, message) when it does not resolve


@dataclass
class _Resolver:
    """Backends: Services, their ports and EndpointSlices, and the ReferenceGrants that let a route reach into
    another namespace."""

    world: World
    refresh: float
    clusters: dict[str, JSON] = field(default_factory=dict)
    assignments: dict[str, JSON] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.services = {(_ns(s), _name(s)): s for s in self.world.services}
        self.slices: dict[tuple[str, str], list[JSON]] = defaultdict(list)
        for item in self.world.slices:
            service = (_meta(item).get("labels") or {}).get("kubernetes.io/service-name")
            if service:
                self.slices[(_ns(item), service)].append(item)

    def granted(self, kind: str, from_ns: str, to_ns: str, name: str) -> bool:
        for grant in self.world.grants:
            if _ns(grant) != to_ns:
                continue
            spec = grant.get("spec") or {}
            if not any(
                f.get("group") == GATEWAY_GROUP and f.get("kind") == kind and f.get("namespace") == from_ns
                for f in spec.get("from") or []
            ):
                continue
            for to in spec.get("to") or []:
                if (to.get("group") or "") == "" and to.get("kind") == "Service" and to.get("name") in (None, "", name):
                    return True
        return False

    def backend(self, kind: str, route_ns: str, ref: JSON, *, http2: bool) -> _Backend:
        weight = int(ref.get("weight", 1))
        group, ref_kind = ref.get("group") or "", ref.get("kind") or "Service"
        name = str(ref.get("name") or "")
        if group != "" or ref_kind != "Service":
            return _Backend(
                None, weight, ("InvalidKind", f"backendRef {ref_kind}.{group or 'core'} {name}: only Services")
            )
        namespace = str(ref.get("namespace") or route_ns)
        if namespace != route_ns and not self.granted(kind, route_ns, namespace, name):
            return _Backend(
                None, weight, ("RefNotPermitted", f"Service {namespace}/{name}: no ReferenceGrant lets {route_ns} in")
            )
        service = self.services.get((namespace, name))
        if service is None:
            return _Backend(None, weight, ("BackendNotFound", f"Service {namespace}/{name} not found"))
        port = ref.get("port")
        if port is None:
            return _Backend(None, weight, ("BackendNotFound", f"backendRef to Service {namespace}/{name} has no port"))
        ports = [p for p in (service.get("spec") or {}).get("ports") or [] if p.get("port") == port]
        if not ports:
            return _Backend(None, weight, ("BackendNotFound", f"Service {namespace}/{name} has no port {port}"))
        service_port = ports[0]
        h2 = http2 or service_port.get("appProtocol") == H2C
        cluster = f"{namespace}/{name}:{port}" + ("/h2c" if h2 else "")
        if cluster not in self.clusters:
            self.clusters[cluster] = envoy.eds_cluster(cluster, http2=h2, refresh=self.refresh)
            self.assignments[cluster] = envoy.load_assignment(
                cluster, self._addresses(namespace, name, service_port.get("name"))
            )
        return _Backend(cluster, weight)

    def _addresses(self, namespace: str, service: str, port_name: str | None) -> list[tuple[str, int]]:
        """Ready endpoints of every slice of the Service, FQDN-type slices included when they hold IP literals
        (how loopback backends are written where the API server refuses loopback in IP slices)."""
        out: set[tuple[str, int]] = set()
        for item in self.slices.get((namespace, service), []):
            ports = [p for p in item.get("ports") or [] if (p.get("name") or None) == (port_name or None)]
            if not ports or ports[0].get("port") is None:
                continue
            target = int(ports[0]["port"])
            for endpoint in item.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready") is False:
                    continue
                for address in endpoint.get("addresses") or []:
                    try:
                        ipaddress.ip_address(address)
                    except ValueError:
                        continue  # a DNS name in an FQDN slice: EDS takes addresses only
                    out.add((address, target))
        return sorted(out)


def _check_keys(obj: JSON, allowed: set[str], where: str) -> None:
    extra = sorted(k for k, v in obj.items() if k not in allowed and v not in (None, [], {}))
    if extra:
        raise Unsupported(f"{where}.{extra[0]} is not supported by this data plane")


def _string_match(kind: str | None, value: str, where: str) -> JSON:
    if kind in (None, "Exact"):
        return {"exact": value}
    if kind == "RegularExpression":
        problem = regex_error(value)
        if problem:
            raise Unsupported(f"{where}: regular expression {value!r} {problem}")
        return {"safe_regex": {"regex": value}}
    raise Unsupported(f"{where}.type {kind} is not supported")


def _path_match(path: JSON | None, where: str) -> tuple[JSON, tuple[int, int]]:
    """Envoy's path match and the precedence of this match (rank, length): Exact first, then the longest prefix."""
    path = path or {"type": "PathPrefix", "value": "/"}
    kind, value = path.get("type", "PathPrefix"), str(path.get("value", "/"))
    if kind == "Exact":
        return {"path": value}, (0, -len(value))
    if kind == "PathPrefix":
        trimmed = value.rstrip("/") or "/"
        # Gateway API prefixes match whole path elements: /foo matches /foo and /foo/bar, never /foobar.
        match = {"prefix": "/"} if trimmed == "/" else {"path_separated_prefix": trimmed}
        return match, (1, -len(trimmed))
    if kind == "RegularExpression":
        problem = regex_error(value)
        if problem:
            raise Unsupported(f"{where}.path: regular expression {value!r} {problem}")
        return {"safe_regex": {"regex": value}}, (2, -len(value))
    raise Unsupported(f"{where}.path.type {kind} is not supported")


def _headers(headers: list[JSON], where: str) -> list[JSON]:
    return [
        {"name": h["name"], "string_match": _string_match(h.get("type"), str(h.get("value", "")), f"{where}[{i}]")}
        for i, h in enumerate(headers)
    ]


def _grpc_path(method: JSON, where: str) -> JSON:
    kind = method.get("type", "Exact")
    service, name = method.get("service"), method.get("method")
    if kind == "Exact":
        if service and name:
            return {"path": f"/{service}/{name}"}
        if service:
            return {"prefix": f"/{service}/"}
        if name:
            return {"safe_regex": {"regex": f"/[^/]+/{re.escape(str(name))}"}}
        return {"prefix": "/"}
    if kind == "RegularExpression":
        for part in (service, name):
            if part and (problem := regex_error(str(part))):
                raise Unsupported(f"{where}.method: regular expression {part!r} {problem}")
        return {"safe_regex": {"regex": f"/{service or '[^/]+'}/{name or '[^/]+'}"}}
    raise Unsupported(f"{where}.method.type {kind} is not supported")


_UNMODIFIABLE = {"host"}


def _header_mutations(modifier: JSON, where: str) -> tuple[list[JSON], list[str]]:
    for key in ("set", "add"):
        for h in modifier.get(key) or []:
            if str(h.get("name", "")).lower() in _UNMODIFIABLE:
                raise Unsupported(f"{where}: the {h['name']} header cannot be modified here (URLRewrite sets it)")
    for name in modifier.get("remove") or []:
        if str(name).lower() in _UNMODIFIABLE:
            raise Unsupported(f"{where}: the {name} header cannot be removed")
    add = [
        {"header": {"key": h["name"], "value": escape(str(h.get("value", "")))}, "append_action": action}
        for action, entries in (
            ("OVERWRITE_IF_EXISTS_OR_ADD", modifier.get("set") or []),
            ("APPEND_IF_EXISTS_OR_ADD", modifier.get("add") or []),
        )
        for h in entries
    ]
    return add, [str(name) for name in modifier.get("remove") or []]


@dataclass
class _Rule:
    """One Envoy route (a rule x one of its matches) with what orders it among the others on its hostname."""

    route: JSON
    precedence: tuple[Any, ...]


def _build_rules(
    kind: str, route: JSON, resolver: _Resolver
) -> tuple[list[tuple[JSON, tuple[Any, ...]]], list[tuple[str, str]]]:
    """The route's Envoy routes (with their precedence) and its unresolved backends; raises Unsupported."""
    spec = route.get("spec") or {}
    _check_keys(spec, _SPEC_KEYS, "spec")
    namespace = _ns(route)
    problems: list[tuple[str, str]] = []
    out: list[tuple[JSON, tuple[Any, ...]]] = []
    grpc = kind == GRPC_ROUTE
    rules = spec.get("rules") or [{}]
    for r, rule in enumerate(rules):
        where = f"spec.rules[{r}]"
        _check_keys(rule, _RULE_KEYS[kind], where)
        request_add: list[JSON] = []
        request_remove: list[str] = []
        response_add: list[JSON] = []
        response_remove: list[str] = []
        redirect: JSON | None = None
        rewrite: JSON | None = None
        mirrors: list[JSON] = []
        for f, flt in enumerate(rule.get("filters") or []):
            fwhere = f"{where}.filters[{f}]"
            ftype = flt.get("type")
            if ftype not in _FILTERS[kind]:
                raise Unsupported(f"{fwhere}: filter {ftype} is not supported by this data plane")
            if ftype == "RequestHeaderModifier":
                add, remove = _header_mutations(flt.get("requestHeaderModifier") or {}, fwhere)
                request_add += add
                request_remove += remove
            elif ftype == "ResponseHeaderModifier":
                add, remove = _header_mutations(flt.get("responseHeaderModifier") or {}, fwhere)
                response_add += add
                response_remove += remove
            elif ftype == "RequestRedirect":
                redirect = flt.get("requestRedirect") or {}
            elif ftype == "URLRewrite":
                rewrite = flt.get("urlRewrite") or {}
            elif ftype == "RequestMirror":
                mirror = flt.get("requestMirror") or {}
                backend = resolver.backend(kind, namespace, mirror.get("backendRef") or {}, http2=grpc)
                if backend.problem:
                    problems.append(backend.problem)
                    continue
                policy: JSON = {"cluster": backend.cluster}
                if mirror.get("percent") is not None:
                    policy["runtime_fraction"] = {
                        "default_value": {"numerator": int(mirror["percent"]), "denominator": "HUNDRED"}
                    }
                elif mirror.get("fraction") is not None:
                    fraction = mirror["fraction"]
                    denominator = int(fraction.get("denominator", 100))
                    numerator = int(fraction["numerator"]) * 1_000_000 // max(denominator, 1)
                    policy["runtime_fraction"] = {"default_value": {"numerator": numerator, "denominator": "MILLION"}}
                mirrors.append(policy)
        if redirect is not None and rule.get("backendRefs"):
            raise Unsupported(f"{where}: RequestRedirect with backendRefs (the spec forbids both)")
        backends: list[_Backend] = []
        for b, ref in enumerate(rule.get("backendRefs") or []):
            _check_keys(ref, _BACKEND_KEYS, f"{where}.backendRefs[{b}]")
            backend = resolver.backend(kind, namespace, ref, http2=grpc)
            if backend.problem:
                problems.append(backend.problem)
            backends.append(backend)
        timeout_ms: int | None = None
        per_try_ms: int | None = None
        timeouts = rule.get("timeouts") or {}
        for key in ("request", "backendRequest"):
            if key in timeouts:
                value = duration_ms(str(timeouts[key]))
                if value is None:
                    raise Unsupported(f"{where}.timeouts.{key}: {timeouts[key]!r} is not a duration")
                if key == "request":
                    timeout_ms = value
                else:
                    per_try_ms = value
        if timeout_ms is None and per_try_ms is not None:
            timeout_ms, per_try_ms = per_try_ms, None

        matches = rule.get("matches") or [{}]
        for m, match in enumerate(matches):
            mwhere = f"{where}.matches[{m}]"
            _check_keys(match, _MATCH_KEYS[kind], mwhere)
            envoy_match: JSON
            path_match: JSON | None = None
            if grpc:
                envoy_match = _grpc_path(match.get("method") or {}, mwhere) if match.get("method") else {"prefix": "/"}
                precedence_path: tuple[int, int] = (0 if "path" in envoy_match else 1, 0)
            else:
                path_match = match.get("path")
                envoy_match, precedence_path = _path_match(path_match, mwhere)
            headers = _headers(match.get("headers") or [], f"{mwhere}.headers")
            if match.get("method") and not grpc:
                headers.append({"name": ":method", "string_match": {"exact": str(match["method"])}})
            if headers:
                envoy_match["headers"] = headers
            if match.get("queryParams"):
                envoy_match["query_parameters"] = [
                    {
                        "name": q["name"],
                        "string_match": _string_match(q.get("type"), str(q.get("value", "")), f"{mwhere}.queryParams"),
                    }
                    for q in match["queryParams"]
                ]
            entry: JSON = {"name": f"{kind}/{namespace}/{_name(route)}/rule/{r}/match/{m}", "match": envoy_match}
            if redirect is not None:
                entry["redirect"] = _redirect(redirect, path_match, where)
            else:
                entry["route"] = _action(backends, rewrite, path_match, mirrors, timeout_ms, per_try_ms, where)
                if entry["route"].get("direct_response"):
                    entry["direct_response"] = entry.pop("route")["direct_response"]
            if request_add:
                entry["request_headers_to_add"] = request_add
            if request_remove:
                entry["request_headers_to_remove"] = request_remove
            if response_add:
                entry["response_headers_to_add"] = response_add
            if response_remove:
                entry["response_headers_to_remove"] = response_remove
            precedence = (
                *precedence_path,
                0 if (not grpc and match.get("method")) else 1,
                -len(match.get("headers") or []),
                -len(match.get("queryParams") or []),
                *_age_key(route),
                r,
                m,
            )
            out.append((entry, precedence))
    return out, problems


def _redirect(redirect: JSON, path_match: JSON | None, where: str) -> JSON:
    out: JSON = {}
    if redirect.get("scheme"):
        out["scheme_redirect"] = str(redirect["scheme"])
    if redirect.get("hostname"):
        out["host_redirect"] = str(redirect["hostname"])
    if redirect.get("port") is not None:
        out["port_redirect"] = int(redirect["port"])
    code = int(redirect.get("statusCode", 302))
    if code not in _REDIRECT_CODES:
        raise Unsupported(f"{where}: redirect statusCode {code} is not supported")
    out["response_code"] = _REDIRECT_CODES[code]
    path = redirect.get("path")
    if path:
        if path.get("type") == "ReplaceFullPath":
            out["path_redirect"] = str(path.get("replaceFullPath", "/"))
        elif path.get("type") == "ReplacePrefixMatch":
            if (path_match or {}).get("type", "PathPrefix") != "PathPrefix":
                raise Unsupported(f"{where}: ReplacePrefixMatch needs a PathPrefix match")
            value = str(path.get("replacePrefixMatch", "/")).rstrip("/")
            if value:
                out["prefix_rewrite"] = value
            else:
                prefix = str((path_match or {}).get("value", "/")).rstrip("/")
                out["regex_rewrite"] = {"pattern": {"regex": f"^{re.escape(prefix)}/*"}, "substitution": "/"}
        else:
            raise Unsupported(f"{where}: redirect path type {path.get('type')} is not supported")
    return out


def _action(
    backends: list[_Backend],
    rewrite: JSON | None,
    path_match: JSON | None,
    mirrors: list[JSON],
    timeout_ms: int | None,
    per_try_ms: int | None,
    where: str,
) -> JSON:
    live = [b for b in backends if b.weight > 0]
    if not live or all(b.cluster is None for b in live):
        # No backend, or none that resolves: the spec wants a 500 for that traffic.
        return {"direct_response": {"status": 500}}
    action: JSON = {}
    if len(live) == 1:
        action["cluster"] = live[0].cluster
    else:
        action["weighted_clusters"] = {
            "clusters": [
                # An unresolved backend's share goes to a cluster with no endpoints (Envoy answers it with 503).
                {"name": b.cluster or "kflare-unresolved", "weight": b.weight}
                for b in live
            ]
        }
    # Envoy's default of 15 s is not the route's: no timeout unless the route sets one.
    action["timeout"] = f"{(timeout_ms or 0) / 1000:g}s"
    if per_try_ms:
        action["retry_policy"] = {"num_retries": 0, "per_try_timeout": f"{per_try_ms / 1000:g}s"}
    if mirrors:
        action["request_mirror_policies"] = mirrors
    if rewrite:
        if rewrite.get("hostname"):
            action["host_rewrite_literal"] = str(rewrite["hostname"])
        path = rewrite.get("path")
        if path:
            if path.get("type") == "ReplaceFullPath":
                value = str(path.get("replaceFullPath", "/"))
                action["regex_rewrite"] = {"pattern": {"regex": "^.*$"}, "substitution": value.replace("\\", "\\\\")}
            elif path.get("type") == "ReplacePrefixMatch":
                if (path_match or {}).get("type", "PathPrefix") != "PathPrefix":
                    raise Unsupported(f"{where}: ReplacePrefixMatch needs a PathPrefix match")
                prefix = str((path_match or {}).get("value", "/")).rstrip("/")
                value = str(path.get("replacePrefixMatch", "/")).rstrip("/")
                if value:
                    action["prefix_rewrite"] = value
                else:
                    # Replacing /foo with / must give /bar for /foo/bar, not //bar.
                    action["regex_rewrite"] = {
                        "pattern": {"regex": f"^{re.escape(prefix)}/*"},
                        "substitution": "/",
                    }
            else:
                raise Unsupported(f"{where}: URLRewrite path type {path.get('type')} is not supported")
    return action


# ---- the whole translation -----------------------------------------------------------------------------------------


@dataclass
class _Attachment:
    kind: str
    route: JSON
    parent_index: int
    parent: JSON
    listeners: list[_Listener]
    hostnames: list[str]
    conditions: list[JSON] = field(default_factory=list)
    accepted: bool = True


def translate(world: World, *, refresh: float = 0.5) -> Translation:
    class_status: dict[str, JSON] = {}
    usable: dict[str, tuple[TunnelState | None, tuple[str, str] | None]] = {}
    classes_in_use: set[str] = set()
    for cls in world.classes:
        if (cls.get("spec") or {}).get("controllerName") != world.controller_name:
            continue
        cstatus, cls_accepted, ctunnel, ctunnel_key = _class_status(cls, world)
        class_status[_name(cls)] = cstatus
        if cls_accepted:
            usable[_name(cls)] = (ctunnel, ctunnel_key)

    gateway_status: dict[tuple[str, str], JSON] = {}
    listeners_of: dict[tuple[str, str], list[_Listener]] = {}
    gateway_tunnel: dict[tuple[str, str], tuple[str, str] | None] = {}
    for gateway in world.gateways:
        class_name = str((gateway.get("spec") or {}).get("gatewayClassName") or "")
        if class_name not in class_status:
            continue
        classes_in_use.add(class_name)
        key = (_ns(gateway), _name(gateway))
        generation = _generation(gateway)
        listeners = [
            _listener(gateway, spec, i) for i, spec in enumerate((gateway.get("spec") or {}).get("listeners") or [])
        ]
        status: JSON = {}
        if class_name not in usable:
            message = f"GatewayClass {class_name} is not accepted"
            status["conditions"] = [
                condition("Accepted", False, "Pending", message, generation),
                condition("Programmed", False, "Pending", message, generation),
            ]
            for listener in listeners:
                listener.accepted = False
        elif (gateway.get("spec") or {}).get("addresses"):
            message = "spec.addresses: the address of this class is its Tunnel's, it cannot be chosen"
            status["conditions"] = [
                condition("Accepted", False, "UnsupportedAddress", message, generation),
                condition("Programmed", False, "Invalid", message, generation),
            ]
            for listener in listeners:
                listener.accepted = False
        else:
            tunnel, tunnel_key = usable[class_name]
            valid = [listener for listener in listeners if listener.accepted]
            if valid and len(valid) == len(listeners):
                accepted = condition("Accepted", True, "Accepted", "", generation)
            else:
                invalid = ", ".join(listener.name for listener in listeners if not listener.accepted)
                accepted = condition(
                    "Accepted", bool(valid), "ListenersNotValid", f"listeners not served: {invalid}", generation
                )
            if not valid:
                programmed = condition("Programmed", False, "Invalid", "no listener can be served", generation)
            elif tunnel is not None and not tunnel.ready:
                programmed = condition("Programmed", False, "Pending", tunnel.message or "Tunnel not ready", generation)
            else:
                programmed = condition("Programmed", True, "Programmed", "", generation)
            status["conditions"] = [accepted, programmed]
            if tunnel is not None and tunnel.address:
                status["addresses"] = [{"type": "Hostname", "value": tunnel.address}]
            gateway_tunnel[key] = tunnel_key
            listeners_of[key] = valid
        gateway_status[key] = status
        status["_listeners"] = listeners  # replaced by the listener statuses once routes are counted

    labels_of = {_name(n): dict(_meta(n).get("labels") or {}) for n in world.namespaces}
    resolver = _Resolver(world, refresh)
    route_parents: dict[RouteKey, list[JSON]] = {}
    attachments: list[_Attachment] = []
    built: dict[RouteKey, list[tuple[JSON, tuple[Any, ...]]]] = {}
    for kind, routes in ((HTTP_ROUTE, world.http_routes), (GRPC_ROUTE, world.grpc_routes)):
        for route in routes:
            rkey: RouteKey = (kind, _ns(route), _name(route))
            generation = _generation(route)
            spec = route.get("spec") or {}
            ours: list[_Attachment] = []
            for p, parent in enumerate(spec.get("parentRefs") or []):
                if parent.get("group", GATEWAY_GROUP) != GATEWAY_GROUP or parent.get("kind", "Gateway") != "Gateway":
                    continue
                gkey = (str(parent.get("namespace") or _ns(route)), str(parent.get("name") or ""))
                if gkey not in gateway_status:
                    continue  # not a Gateway of this class: another controller's business
                ours.append(_attach(kind, route, p, parent, gkey, listeners_of.get(gkey), labels_of, world))
            if not ours:
                continue
            unsupported: str | None = None
            problems: list[tuple[str, str]] = []
            try:
                built[rkey], problems = _build_rules(kind, route, resolver)
            except Unsupported as exc:
                unsupported = str(exc)
            for attachment in ours:
                if attachment.accepted and unsupported:
                    attachment.accepted = False
                    attachment.conditions = [condition("Accepted", False, "UnsupportedValue", unsupported, generation)]
                if problems:
                    reason, message = problems[0]
                    resolved = condition("ResolvedRefs", False, reason, message, generation)
                else:
                    resolved = condition("ResolvedRefs", True, "ResolvedRefs", "", generation)
                attachment.conditions.append(resolved)
            attachments += ours

    _settle_hostname_owners([a for a in attachments if a.accepted])

    vhosts: dict[str, list[tuple[JSON, tuple[Any, ...]]]] = defaultdict(list)
    published: dict[str, tuple[bool, tuple[str, str] | None, set[RouteKey]]] = {}
    for attachment in attachments:
        rkey = (attachment.kind, _ns(attachment.route), _name(attachment.route))
        generation = _generation(attachment.route)
        if attachment.accepted:
            attachment.conditions.insert(0, condition("Accepted", True, "Accepted", "", generation))
            for listener in attachment.listeners:
                listener.attached += 1
            gkey = (str(attachment.parent.get("namespace") or rkey[1]), str(attachment.parent.get("name")))
            for hostname in attachment.hostnames:
                existing = {entry["name"] for entry, _ in vhosts[hostname]}
                vhosts[hostname] += [(e, p) for e, p in built.get(rkey, []) if e["name"] not in existing]
                if hostname != "*":
                    published.setdefault(hostname, (attachment.kind == GRPC_ROUTE, gateway_tunnel.get(gkey), set()))[
                        2
                    ].add(rkey)
        entry = {
            "parentRef": attachment.parent,
            "controllerName": world.controller_name,
            "conditions": attachment.conditions,
        }
        route_parents.setdefault(rkey, []).append(entry)

    for gstatus in gateway_status.values():
        served_listeners: list[_Listener] = gstatus.pop("_listeners")
        gstatus["listeners"] = [
            {
                "name": listener.name,
                "supportedKinds": [{"group": GATEWAY_GROUP, "kind": k} for k in listener.kinds],
                "attachedRoutes": listener.attached,
                "conditions": listener.conditions,
            }
            for listener in served_listeners
        ]

    virtual_hosts: list[JSON] = []
    for hostname in sorted(vhosts, key=lambda h: (h == "*", h)):
        routes = [entry for entry, _ in sorted(vhosts[hostname], key=lambda item: item[1])]
        virtual_hosts.append({"name": hostname, "domains": [hostname], "routes": routes})
    route_configuration = {
        "@type": envoy.ROUTE_CONFIGURATION,
        "name": envoy.INGRESS,
        "virtual_hosts": virtual_hosts,
        # Envoy adds the peer's address for an external request; the peer is cloudflared on loopback, which says
        # nothing, and backends must see no x-envoy-* header at all.
        "request_headers_to_remove": ["x-envoy-external-address"],
    }
    clusters = dict(resolver.clusters)
    assignments = dict(resolver.assignments)
    if any(
        c.get("name") == "kflare-unresolved"
        for vh in virtual_hosts
        for r in vh["routes"]
        for c in ((r.get("route") or {}).get("weighted_clusters") or {}).get("clusters", [])
    ):
        clusters["kflare-unresolved"] = envoy.eds_cluster("kflare-unresolved", http2=False, refresh=refresh)
        assignments["kflare-unresolved"] = envoy.load_assignment("kflare-unresolved", [])
    resources = {
        "routes": [route_configuration],
        "clusters": [clusters[name] for name in sorted(clusters)],
        "endpoints": [assignments[name] for name in sorted(assignments)],
    }
    hostnames = [
        Hostname(name, grpc, tunnel, tuple(sorted(routes)))
        for name, (grpc, tunnel, routes) in sorted(published.items())
    ]
    return Translation(resources, class_status, gateway_status, route_parents, hostnames, classes_in_use)


def _attach(
    kind: str,
    route: JSON,
    index: int,
    parent: JSON,
    gkey: tuple[str, str],
    listeners: list[_Listener] | None,
    labels_of: Mapping[str, Mapping[str, str]],
    world: World,
) -> _Attachment:
    generation = _generation(route)
    attachment = _Attachment(kind, route, index, parent, [], [])

    def refuse(reason: str, message: str) -> _Attachment:
        attachment.accepted = False
        attachment.conditions = [condition("Accepted", False, reason, message, generation)]
        return attachment

    if listeners is None:
        return refuse("Pending", f"Gateway {gkey[0]}/{gkey[1]} is not accepted")
    candidates = [
        listener
        for listener in listeners
        if (parent.get("sectionName") is None or listener.name == parent.get("sectionName"))
        and (parent.get("port") is None or listener.spec.get("port") == parent.get("port"))
    ]
    if not candidates:
        return refuse("NoMatchingParent", "no served listener matches the parentRef's sectionName and port")
    namespace = _ns(route)
    labels = labels_of.get(namespace, {})
    allowed = [c for c in candidates if kind in c.kinds and c.allows_namespace(namespace, labels)]
    if not allowed:
        return refuse("NotAllowedByListeners", f"the listeners' allowedRoutes do not admit a {kind} from {namespace}")
    declared = [str(h) for h in (route.get("spec") or {}).get("hostnames") or []]
    if world.tenancy_label and world.tenancy_label in labels:
        domain = labels[world.tenancy_label]
        if not declared:
            return refuse(
                "HostnameNotAllowed",
                f"namespace {namespace} is labelled {world.tenancy_label}={domain}: its routes must declare hostnames",
            )
        outside = [h for h in declared if not _within(h, domain)]
        if outside:
            return refuse(
                "HostnameNotAllowed",
                f"hostname {outside[0]} is not {domain} or under it ({world.tenancy_label} of namespace {namespace})",
            )
    hostnames: set[str] = set()
    for listener in allowed:
        if declared:
            found = [h for h in (hostname_matches(listener.hostname, d) for d in declared) if h]
        else:
            found = [listener.hostname or "*"]
        if found:
            attachment.listeners.append(listener)
            hostnames.update(found)
    if not attachment.listeners:
        return refuse("NoMatchingListenerHostname", "no route hostname intersects a listener hostname")
    attachment.hostnames = sorted(hostnames)
    return attachment


def _settle_hostname_owners(attachments: list[_Attachment]) -> None:
    """One namespace and one route kind own a hostname: the oldest route claiming it. Routes of the same namespace
    and kind share it (their rules merge); any other claimant is refused with the conflict named."""
    while True:
        owner: dict[str, _Attachment] = {}
        for attachment in sorted(attachments, key=lambda a: _age_key(a.route)):
            if not attachment.accepted:
                continue
            for hostname in attachment.hostnames:
                owner.setdefault(hostname, attachment)
        changed = False
        for attachment in attachments:
            if not attachment.accepted:
                continue
            for hostname in attachment.hostnames:
                winner = owner[hostname]
                if (_ns(winner.route), winner.kind) != (_ns(attachment.route), attachment.kind):
                    attachment.accepted = False
                    attachment.conditions = [
                        condition(
                            "Accepted",
                            False,
                            "HostnameConflict",
                            f"hostname {hostname} is served by the older {winner.kind} "
                            f"{_ns(winner.route)}/{_name(winner.route)}",
                            _generation(attachment.route),
                        ),
                        *[c for c in attachment.conditions if c["type"] != "Accepted"],
                    ]
                    changed = True
                    break
        if not changed:
            return


def content_version(resources: Iterable[JSON]) -> str:
    import json

    digest = hashlib.sha256(json.dumps(list(resources), sort_keys=True, separators=(",", ":")).encode())
    return digest.hexdigest()[:16]


__all__ = ["CLASS_NAME", "Hostname", "Translation", "TunnelState", "World", "published_hostnames", "translate"]
