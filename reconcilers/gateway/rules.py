"""A route's rules as Envoy routes: matches (paths, headers, query parameters, methods, gRPC methods), filters
(header modifiers, redirects, rewrites, mirrors) and the route action over the rule's backends.

Nothing in a route is silently ignored: a field, match or filter the data plane does not implement raises
`Unsupported` with a message naming it, and the route is refused with it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from reconcilers.gateway import shapes
from reconcilers.gateway.backends import UNRESOLVED, Backend, Resolver
from reconcilers.gateway.shapes import (
    JSON,
    GRPCMethodMatch,
    HeaderMatch,
    HeaderModifier,
    HTTPRouteMatch,
    PathMatch,
    RequestMirror,
    RequestRedirect,
    Route,
    RouteRule,
    URLRewrite,
    escape,
)
from reconcilers.gateway.status import GRPC_ROUTE, HTTP_ROUTE

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
_UNMODIFIABLE = {"host"}
_DEFAULT_PATH: PathMatch = {"type": "PathPrefix", "value": "/"}
_NOT_RE2 = re.compile(r"\(\?[=!<]|\(\?P=|\\[1-9]|[*+?}]\+|\(\?>")


class Unsupported(Exception):
    """A part of a route the data plane does not implement; the message names it."""


_HEADER_COUNT = 3
"""Where in a route's precedence the number of its header matches is (negated: more headers, earlier)."""


class EnvoyRoute(NamedTuple):
    """One Envoy route (a rule x one of its matches) with what orders it among the others on its hostname."""

    entry: JSON
    precedence: tuple[Any, ...]


def for_scheme(route: EnvoyRoute, scheme: str) -> EnvoyRoute:
    """`route` for requests the visitor made over `scheme` only (the edge says which in X-Forwarded-Proto): how
    an HTTP and an HTTPS listener of one Gateway are told apart, all traffic reaching Envoy over one plaintext hop."""
    entry = copy.deepcopy(route.entry)
    entry["name"] += f"/{scheme}"
    headers = entry["match"].setdefault("headers", [])
    headers.append({"name": "x-forwarded-proto", "string_match": {"exact": scheme}})
    precedence = list(route.precedence)
    precedence[_HEADER_COUNT] -= 1  # one header more to match: ahead of the same route for either scheme
    return EnvoyRoute(entry, tuple(precedence))


@dataclass
class BuiltRoute:
    """A route's Envoy routes, and the backends it names that do not resolve."""

    routes: list[EnvoyRoute] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)


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


def _check_keys(obj: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(k for k, v in obj.items() if k not in allowed and v not in (None, [], {}))
    if extra:
        raise Unsupported(f"{where}.{extra[0]} is not supported by this data plane")


# ---- matches --------------------------------------------------------------------------------------------------------


def _string_match(kind: str | None, value: str, where: str) -> JSON:
    if kind in (None, "Exact"):
        return {"exact": value}
    if kind == "RegularExpression":
        problem = regex_error(value)
        if problem:
            raise Unsupported(f"{where}: regular expression {value!r} {problem}")
        return {"safe_regex": {"regex": value}}
    raise Unsupported(f"{where}.type {kind} is not supported")


def _path_match(path: PathMatch, where: str) -> tuple[JSON, tuple[int, int]]:
    """Envoy's path match and the precedence of this match (rank, length): Exact first, then the longest prefix."""
    kind, value = path.get("type", "PathPrefix"), path.get("value", "/")
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


def _headers(headers: list[HeaderMatch], where: str) -> list[JSON]:
    return [
        {"name": h["name"], "string_match": _string_match(h.get("type"), h.get("value", ""), f"{where}[{i}]")}
        for i, h in enumerate(headers)
    ]


def _grpc_path(method: GRPCMethodMatch, where: str) -> JSON:
    kind = method.get("type", "Exact")
    service, name = method.get("service"), method.get("method")
    if kind == "Exact":
        if service and name:
            return {"path": f"/{service}/{name}"}
        if service:
            return {"prefix": f"/{service}/"}
        if name:
            return {"safe_regex": {"regex": f"/[^/]+/{re.escape(name)}"}}
        return {"prefix": "/"}
    if kind == "RegularExpression":
        for part in (service, name):
            if part and (problem := regex_error(part)):
                raise Unsupported(f"{where}.method: regular expression {part!r} {problem}")
        return {"safe_regex": {"regex": f"/{service or '[^/]+'}/{name or '[^/]+'}"}}
    raise Unsupported(f"{where}.method.type {kind} is not supported")


@dataclass
class _Match:
    """One match of a rule, as Envoy's route match, with its precedence and the path match a rewrite reads."""

    envoy: JSON
    precedence: tuple[Any, ...]
    path: PathMatch | None


def _match(kind: str, match: Mapping[str, Any], where: str) -> _Match:
    _check_keys(match, _MATCH_KEYS[kind], where)
    path: PathMatch | None = None
    envoy_match: JSON
    method_rank = 1
    if kind == GRPC_ROUTE:
        grpc = cast(shapes.GRPCRouteMatch, match)
        envoy_match = _grpc_path(grpc["method"], where) if grpc.get("method") else {"prefix": "/"}
        precedence_path: tuple[int, int] = (0 if "path" in envoy_match else 1, 0)
        headers = _headers(grpc.get("headers", []), f"{where}.headers")
    else:
        http = cast(HTTPRouteMatch, match)
        path = http.get("path", _DEFAULT_PATH)
        envoy_match, precedence_path = _path_match(path, where)
        headers = _headers(http.get("headers", []), f"{where}.headers")
        if http.get("method"):
            headers.append({"name": ":method", "string_match": {"exact": http["method"]}})
            method_rank = 0
        if http.get("queryParams"):
            envoy_match["query_parameters"] = [
                {
                    "name": q["name"],
                    "string_match": _string_match(q.get("type"), q.get("value", ""), f"{where}.queryParams"),
                }
                for q in http["queryParams"]
            ]
    if headers:
        envoy_match["headers"] = headers
    counts = (-len(match.get("headers") or []), -len(match.get("queryParams") or []))
    return _Match(envoy_match, (*precedence_path, method_rank, *counts), path)


# ---- filters --------------------------------------------------------------------------------------------------------


def _header_mutations(modifier: HeaderModifier, where: str) -> tuple[list[JSON], list[str]]:
    for h in [*modifier.get("set", []), *modifier.get("add", [])]:
        if h["name"].lower() in _UNMODIFIABLE:
            raise Unsupported(f"{where}: the {h['name']} header cannot be modified here (URLRewrite sets it)")
    for name in modifier.get("remove", []):
        if name.lower() in _UNMODIFIABLE:
            raise Unsupported(f"{where}: the {name} header cannot be removed")
    add = [
        {"header": {"key": h["name"], "value": escape(h.get("value", ""))}, "append_action": action}
        for action, entries in (
            ("OVERWRITE_IF_EXISTS_OR_ADD", modifier.get("set", [])),
            ("APPEND_IF_EXISTS_OR_ADD", modifier.get("add", [])),
        )
        for h in entries
    ]
    return add, list(modifier.get("remove", []))


@dataclass
class _Filters:
    """What a rule's filters ask of each of its Envoy routes."""

    request_add: list[JSON] = field(default_factory=list)
    request_remove: list[str] = field(default_factory=list)
    response_add: list[JSON] = field(default_factory=list)
    response_remove: list[str] = field(default_factory=list)
    redirect: RequestRedirect | None = None
    rewrite: URLRewrite | None = None
    mirrors: list[JSON] = field(default_factory=list)

    def apply_headers(self, entry: JSON) -> None:
        for key, value in (
            ("request_headers_to_add", self.request_add),
            ("request_headers_to_remove", self.request_remove),
            ("response_headers_to_add", self.response_add),
            ("response_headers_to_remove", self.response_remove),
        ):
            if value:
                entry[key] = value


def _mirror_policy(mirror: RequestMirror, cluster: str) -> JSON:
    policy: JSON = {"cluster": cluster}
    if mirror.get("percent") is not None:
        policy["runtime_fraction"] = {"default_value": {"numerator": mirror["percent"], "denominator": "HUNDRED"}}
    elif "fraction" in mirror:
        fraction = mirror["fraction"]
        numerator = fraction["numerator"] * 1_000_000 // max(fraction.get("denominator", 100), 1)
        policy["runtime_fraction"] = {"default_value": {"numerator": numerator, "denominator": "MILLION"}}
    return policy


def _filters(kind: str, rule: RouteRule, namespace: str, resolver: Resolver, built: BuiltRoute, where: str) -> _Filters:
    out = _Filters()
    for f, flt in enumerate(rule.get("filters", [])):
        fwhere = f"{where}.filters[{f}]"
        ftype = flt["type"]
        if ftype not in _FILTERS[kind]:
            raise Unsupported(f"{fwhere}: filter {ftype} is not supported by this data plane")
        if ftype == "RequestHeaderModifier":
            add, remove = _header_mutations(flt.get("requestHeaderModifier", {}), fwhere)
            out.request_add += add
            out.request_remove += remove
        elif ftype == "ResponseHeaderModifier":
            add, remove = _header_mutations(flt.get("responseHeaderModifier", {}), fwhere)
            out.response_add += add
            out.response_remove += remove
        elif ftype == "RequestRedirect":
            out.redirect = flt.get("requestRedirect", {})
        elif ftype == "URLRewrite":
            out.rewrite = flt.get("urlRewrite", {})
        elif ftype == "RequestMirror":
            mirror = flt["requestMirror"]
            backend = resolver.backend(kind, namespace, mirror["backendRef"], 1, http2=kind == GRPC_ROUTE)
            if backend.problem or backend.cluster is None:
                built.problems += [backend.problem] if backend.problem else []
                continue
            out.mirrors.append(_mirror_policy(mirror, backend.cluster))
    return out


def _prefix_rewrite(replacement: str, path_match: PathMatch | None, where: str) -> JSON:
    """Envoy's rewrite of the matched prefix to `replacement` (ReplacePrefixMatch of a redirect or a rewrite)."""
    if (path_match or _DEFAULT_PATH).get("type", "PathPrefix") != "PathPrefix":
        raise Unsupported(f"{where}: ReplacePrefixMatch needs a PathPrefix match")
    value = replacement.rstrip("/")
    if value:
        return {"prefix_rewrite": value}
    # Replacing /foo with / must give /bar for /foo/bar, not //bar.
    prefix = (path_match or _DEFAULT_PATH).get("value", "/").rstrip("/")
    return {"regex_rewrite": {"pattern": {"regex": f"^{re.escape(prefix)}/*"}, "substitution": "/"}}


def _redirect(redirect: RequestRedirect, path_match: PathMatch | None, where: str) -> JSON:
    out: JSON = {}
    if redirect.get("scheme"):
        out["scheme_redirect"] = redirect["scheme"]
    if redirect.get("hostname"):
        out["host_redirect"] = redirect["hostname"]
    if redirect.get("port") is not None:
        out["port_redirect"] = redirect["port"]
    code = redirect.get("statusCode", 302)
    if code not in _REDIRECT_CODES:
        raise Unsupported(f"{where}: redirect statusCode {code} is not supported")
    out["response_code"] = _REDIRECT_CODES[code]
    path = redirect.get("path")
    if path:
        if path["type"] == "ReplaceFullPath":
            out["path_redirect"] = path.get("replaceFullPath", "/")
        elif path["type"] == "ReplacePrefixMatch":
            out.update(_prefix_rewrite(path.get("replacePrefixMatch", "/"), path_match, where))
        else:
            raise Unsupported(f"{where}: redirect path type {path['type']} is not supported")
    return out


# ---- the route action -----------------------------------------------------------------------------------------------


@dataclass
class _Timeouts:
    request_ms: int | None = None
    per_try_ms: int | None = None


def _timeouts(rule: RouteRule, where: str) -> _Timeouts:
    out = _Timeouts()
    timeouts = rule.get("timeouts", {})
    for key in ("request", "backendRequest"):
        if key in timeouts:
            raw = timeouts[key]
            value = shapes.duration_ms(str(raw))
            if value is None:
                raise Unsupported(f"{where}.timeouts.{key}: {raw!r} is not a duration")
            if key == "request":
                out.request_ms = value
            else:
                out.per_try_ms = value
    if out.request_ms is None and out.per_try_ms is not None:
        out.request_ms, out.per_try_ms = out.per_try_ms, None
    return out


def _action(
    backends: list[Backend], filters: _Filters, path_match: PathMatch | None, timeouts: _Timeouts, where: str
) -> JSON:
    """The route action; `{"direct_response": ...}` when the rule has no backend to send to."""
    live = [b for b in backends if b.weight > 0]
    if not live or all(b.cluster is None for b in live):
        # No backend, or none that resolves: the spec wants a 500 for that traffic.
        return {"direct_response": {"status": 500}}
    action: JSON = {}
    if len(live) == 1:
        action["cluster"] = live[0].cluster
    else:
        action["weighted_clusters"] = {
            "clusters": [{"name": b.cluster or UNRESOLVED, "weight": b.weight} for b in live]
        }
    # Envoy's default of 15 s is not the route's: no timeout unless the route sets one.
    action["timeout"] = f"{(timeouts.request_ms or 0) / 1000:g}s"
    if timeouts.per_try_ms:
        action["retry_policy"] = {"num_retries": 0, "per_try_timeout": f"{timeouts.per_try_ms / 1000:g}s"}
    if filters.mirrors:
        action["request_mirror_policies"] = filters.mirrors
    rewrite = filters.rewrite
    if rewrite:
        if rewrite.get("hostname"):
            action["host_rewrite_literal"] = rewrite["hostname"]
        path = rewrite.get("path")
        if path:
            if path["type"] == "ReplaceFullPath":
                value = path.get("replaceFullPath", "/")
                action["regex_rewrite"] = {"pattern": {"regex": "^.*$"}, "substitution": value.replace("\\", "\\\\")}
            elif path["type"] == "ReplacePrefixMatch":
                action.update(_prefix_rewrite(path.get("replacePrefixMatch", "/"), path_match, where))
            else:
                raise Unsupported(f"{where}: URLRewrite path type {path['type']} is not supported")
    return action


# ---- a route --------------------------------------------------------------------------------------------------------


def build_route(kind: str, route: Route, resolver: Resolver) -> BuiltRoute:
    """The route's Envoy routes (with their precedence) and its unresolved backends; raises Unsupported."""
    spec = route["spec"]
    _check_keys(spec, _SPEC_KEYS, "spec")
    namespace, name = shapes.key(route)
    built = BuiltRoute()
    grpc = kind == GRPC_ROUTE
    for r, rule in enumerate(spec.get("rules") or [RouteRule()]):
        where = f"spec.rules[{r}]"
        _check_keys(rule, _RULE_KEYS[kind], where)
        filters = _filters(kind, rule, namespace, resolver, built, where)
        if filters.redirect is not None and rule.get("backendRefs"):
            raise Unsupported(f"{where}: RequestRedirect with backendRefs (the spec forbids both)")
        backends: list[Backend] = []
        for b, ref in enumerate(rule.get("backendRefs", [])):
            _check_keys(ref, _BACKEND_KEYS, f"{where}.backendRefs[{b}]")
            backend = resolver.backend(kind, namespace, ref, ref.get("weight", 1), http2=grpc)
            if backend.problem:
                built.problems.append(backend.problem)
            backends.append(backend)
        timeouts = _timeouts(rule, where)
        matches: list[Mapping[str, Any]] = list(rule.get("matches") or [{}])
        for m, raw in enumerate(matches):
            match = _match(kind, raw, f"{where}.matches[{m}]")
            entry: JSON = {"name": f"{kind}/{namespace}/{name}/rule/{r}/match/{m}", "match": match.envoy}
            if filters.redirect is not None:
                entry["redirect"] = _redirect(filters.redirect, match.path, where)
            else:
                action = _action(backends, filters, match.path, timeouts, where)
                entry.update(action if "direct_response" in action else {"route": action})
            filters.apply_headers(entry)
            built.routes.append(EnvoyRoute(entry, (*match.precedence, *shapes.age_key(route), r, m)))
    return built
