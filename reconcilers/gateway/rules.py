"""A route's rules as Envoy routes: matches (paths, headers, query parameters, methods, gRPC methods), filters
(header modifiers, redirects, rewrites, mirrors) and the route action over the rule's backends.

Nothing in a route is silently ignored: a field, match or filter the data plane does not implement raises
`Unsupported` with a message naming it; the rule holding it is left out (the route is `PartiallyInvalid`), and a
route with no rule left, or whose spec holds it, is refused with it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from reconcilers.gateway import envoy, shapes
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
    RouteFilter,
    RouteRule,
    URLRewrite,
    escape,
)
from reconcilers.gateway.status import GRPC_ROUTE, HTTP_ROUTE

_RULE_KEYS = {
    HTTP_ROUTE: {"name", "matches", "filters", "backendRefs", "timeouts", "retry"},
    GRPC_ROUTE: {"name", "matches", "filters", "backendRefs"},
}
_MATCH_KEYS = {HTTP_ROUTE: {"path", "headers", "queryParams", "method"}, GRPC_ROUTE: {"method", "headers"}}
_FILTERS = {
    HTTP_ROUTE: {
        "RequestHeaderModifier",
        "ResponseHeaderModifier",
        "RequestRedirect",
        "URLRewrite",
        "RequestMirror",
        "CORS",
    },
    GRPC_ROUTE: {"RequestHeaderModifier", "ResponseHeaderModifier", "RequestMirror"},
}
_BACKEND_FILTERS = {"RequestHeaderModifier", "ResponseHeaderModifier"}
"""The filters of a backendRef: Envoy changes headers per cluster of a weighted split."""
_SPEC_KEYS = {"parentRefs", "hostnames", "rules"}
_BACKEND_KEYS = {"group", "kind", "name", "namespace", "port", "weight", "filters"}
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
    invalid: list[str] = field(default_factory=list)
    """Why each rule left out was (a rule the data plane cannot serve is dropped, the others are served)."""
    rules: int = 0


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
class _HeaderChanges:
    """Header modifiers as Envoy's additions and removals, of a route or of one backend of it."""

    request_add: list[JSON] = field(default_factory=list)
    request_remove: list[str] = field(default_factory=list)
    response_add: list[JSON] = field(default_factory=list)
    response_remove: list[str] = field(default_factory=list)

    def take(self, flt: RouteFilter, where: str) -> bool:
        """Take a header modifier filter; False when `flt` is another kind of filter."""
        if flt["type"] == "RequestHeaderModifier":
            add, remove = _header_mutations(flt.get("requestHeaderModifier", {}), where)
            self.request_add += add
            self.request_remove += remove
        elif flt["type"] == "ResponseHeaderModifier":
            add, remove = _header_mutations(flt.get("responseHeaderModifier", {}), where)
            self.response_add += add
            self.response_remove += remove
        else:
            return False
        return True

    def apply(self, entry: JSON) -> None:
        for key, value in (
            ("request_headers_to_add", self.request_add),
            ("request_headers_to_remove", self.request_remove),
            ("response_headers_to_add", self.response_add),
            ("response_headers_to_remove", self.response_remove),
        ):
            if value:
                entry[key] = value

    def __bool__(self) -> bool:
        return bool(self.request_add or self.request_remove or self.response_add or self.response_remove)


@dataclass
class _Filters:
    """What a rule's filters ask of each of its Envoy routes."""

    headers: _HeaderChanges = field(default_factory=_HeaderChanges)
    redirect: RequestRedirect | None = None
    rewrite: URLRewrite | None = None
    mirrors: list[JSON] = field(default_factory=list)
    cors: JSON | None = None


def _mirror_policy(mirror: RequestMirror, cluster: str) -> JSON:
    policy: JSON = {"cluster": cluster}
    if mirror.get("percent") is not None:
        policy["runtime_fraction"] = {"default_value": {"numerator": mirror["percent"], "denominator": "HUNDRED"}}
    elif "fraction" in mirror:
        fraction = mirror["fraction"]
        numerator = fraction["numerator"] * 1_000_000 // max(fraction.get("denominator", 100), 1)
        policy["runtime_fraction"] = {"default_value": {"numerator": numerator, "denominator": "MILLION"}}
    return policy


def _filters(
    kind: str, rule: RouteRule, namespace: str, resolver: Resolver, problems: list[tuple[str, str]], where: str
) -> _Filters:
    out = _Filters()
    for f, flt in enumerate(rule.get("filters", [])):
        fwhere = f"{where}.filters[{f}]"
        ftype = flt["type"]
        if ftype not in _FILTERS[kind]:
            raise Unsupported(f"{fwhere}: filter {ftype} is not supported by this data plane")
        if out.headers.take(flt, fwhere):
            continue
        if ftype == "RequestRedirect":
            out.redirect = flt.get("requestRedirect", {})
        elif ftype == "URLRewrite":
            out.rewrite = flt.get("urlRewrite", {})
        elif ftype == "CORS":
            out.cors = _cors(flt.get("cors", {}))
        elif ftype == "RequestMirror":
            mirror = flt["requestMirror"]
            backend = resolver.backend(kind, namespace, mirror["backendRef"], 1, http2=kind == GRPC_ROUTE)
            if backend.problem or backend.cluster is None:
                problems += [backend.problem] if backend.problem else []
                continue
            out.mirrors.append(_mirror_policy(mirror, backend.cluster))
    return out


def _origin_match(origin: str) -> JSON:
    """An allowed CORS origin as Envoy matches it: `*` any, `https://*.example.com` any subdomain, else exact."""
    if origin == "*":
        return {"safe_regex": {"regex": ".*"}}
    if "*" in origin:
        return {"safe_regex": {"regex": ".+".join(re.escape(part) for part in origin.split("*"))}}
    return {"exact": origin}


def _cors(cors: JSON) -> JSON:
    """Envoy's CORS policy of a route (the cors filter answers preflights and adds the response headers)."""
    policy: JSON = {
        "allow_origin_string_match": [_origin_match(str(o)) for o in cors.get("allowOrigins", [])],
        # The spec's default: a browser caches a preflight's answer for 5 seconds.
        "max_age": str(int(cors.get("maxAge", 5))),
        # A preflight from an origin the route does not allow is answered by Envoy, not passed to the backend: the
        # backend would answer it as an ordinary OPTIONS, which a browser could read as allowed.
        "forward_not_matching_preflights": False,
    }
    for key, name in (
        ("allowMethods", "allow_methods"),
        ("allowHeaders", "allow_headers"),
        ("exposeHeaders", "expose_headers"),
    ):
        if cors.get(key):
            policy[name] = ",".join(str(v) for v in cors[key])
    if cors.get("allowCredentials"):
        policy["allow_credentials"] = True
    return policy


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
    retry: JSON | None = None
    """The rule's retry: codes, attempts and backoff."""


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
    if out.request_ms is None and out.per_try_ms is not None and not rule.get("retry"):
        out.request_ms, out.per_try_ms = out.per_try_ms, None
    retry = rule.get("retry")
    if retry:
        if retry.get("backoff") is not None and shapes.duration_ms(str(retry["backoff"])) is None:
            raise Unsupported(f"{where}.retry.backoff: {retry['backoff']!r} is not a duration")
        out.retry = retry
    return out


def _retry_policy(timeouts: _Timeouts) -> JSON | None:
    """Envoy's retry policy: the rule's retry (on the codes it names), and the timeout of each try."""
    if timeouts.retry is None and not timeouts.per_try_ms:
        return None
    policy: JSON = {"num_retries": 0}
    if timeouts.retry is not None:
        retry = timeouts.retry
        policy["num_retries"] = int(retry.get("attempts", 2))  # the spec's default when only codes are given
        codes = [int(c) for c in retry.get("codes", [])]
        # Connection errors are retried too, as the spec says a retry should.
        policy["retry_on"] = "connect-failure,refused-stream,reset" + (",retriable-status-codes" if codes else ",5xx")
        if codes:
            policy["retriable_status_codes"] = codes
        if retry.get("backoff") is not None:
            base = shapes.duration_ms(str(retry["backoff"])) or 1
            policy["retry_back_off"] = {"base_interval": f"{base / 1000:g}s"}
    if timeouts.per_try_ms:
        policy["per_try_timeout"] = f"{timeouts.per_try_ms / 1000:g}s"
    return policy


def _action(
    backends: list[tuple[Backend, _HeaderChanges]],
    filters: _Filters,
    path_match: PathMatch | None,
    timeouts: _Timeouts,
    where: str,
) -> JSON:
    """The route action; `{"direct_response": ...}` when the rule has no backend to send to."""
    live = [(b, headers) for b, headers in backends if b.weight > 0]
    if not live or all(b.cluster is None for b, _ in live):
        # No backend, or none that resolves: the spec wants a 500 for that traffic.
        return {"direct_response": {"status": 500}}
    action: JSON = {}
    if len(live) == 1 and not live[0][1]:
        action["cluster"] = live[0][0].cluster
    else:
        # A split, or a backend of its own header changes: those are per cluster of a weighted split.
        clusters = []
        for b, headers in live:
            cluster: JSON = {"name": b.cluster or UNRESOLVED, "weight": b.weight}
            headers.apply(cluster)
            clusters.append(cluster)
        action["weighted_clusters"] = {"clusters": clusters}
    # Envoy's default of 15 s is not the route's: no timeout unless the route sets one.
    action["timeout"] = f"{(timeouts.request_ms or 0) / 1000:g}s"
    retry = _retry_policy(timeouts)
    if retry is not None:
        action["retry_policy"] = retry
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
    based = [b.path for b, _ in live if b.path]
    if based:
        action["regex_rewrite"] = _base_path(based[0], len(live), bool(rewrite and rewrite.get("path")), where)
    return action


def _base_path(base: str, backends: int, rewritten: bool, where: str) -> JSON:
    """The rewrite prepending an ExternalBackend's base path to the request's path (Envoy rewrites the path alone,
    its query string is kept). One rewrite per route: with another backend beside it, or a URLRewrite of the path,
    which path a request gets could not be said."""
    if backends > 1 or rewritten:
        raise Unsupported(
            f"{where}: an ExternalBackend with a path must be the rule's only backend, without a URLRewrite"
        )
    if "?" in base or "#" in base:
        raise Unsupported(f"{where}: an ExternalBackend path with a query string ({base!r}) is not supported")
    prefix = base.rstrip("/").replace("\\", "\\\\")
    return {"pattern": {"regex": "^(.*)$"}, "substitution": f"{prefix}\\1"}


# ---- a route --------------------------------------------------------------------------------------------------------


def build_route(kind: str, route: Route, resolver: Resolver) -> BuiltRoute:
    """The route's Envoy routes (with their precedence), its unresolved backends, and the rules left out because
    the data plane cannot serve them; raises Unsupported for what refuses the whole route."""
    spec = route["spec"]
    _check_keys(spec, _SPEC_KEYS, "spec")
    built = BuiltRoute()
    rules = spec.get("rules") or [RouteRule()]
    built.rules = len(rules)
    for r, rule in enumerate(rules):
        problems: list[tuple[str, str]] = []
        try:
            routes = _build_rule(kind, route, r, rule, resolver, problems)
        except Unsupported as exc:
            built.invalid.append(str(exc))
            continue
        built.routes += routes
        built.problems += problems
    return built


def _build_rule(
    kind: str, route: Route, r: int, rule: RouteRule, resolver: Resolver, problems: list[tuple[str, str]]
) -> list[EnvoyRoute]:
    namespace, name = shapes.key(route)
    grpc = kind == GRPC_ROUTE
    where = f"spec.rules[{r}]"
    _check_keys(rule, _RULE_KEYS[kind], where)
    filters = _filters(kind, rule, namespace, resolver, problems, where)
    if filters.redirect is not None and rule.get("backendRefs"):
        raise Unsupported(f"{where}: RequestRedirect with backendRefs (the spec forbids both)")
    backends: list[tuple[Backend, _HeaderChanges]] = []
    for b, ref in enumerate(rule.get("backendRefs", [])):
        bwhere = f"{where}.backendRefs[{b}]"
        _check_keys(ref, _BACKEND_KEYS, bwhere)
        headers = _HeaderChanges()
        for f, flt in enumerate(ref.get("filters", [])):
            if flt["type"] not in _BACKEND_FILTERS or not headers.take(flt, f"{bwhere}.filters[{f}]"):
                raise Unsupported(f"{bwhere}.filters[{f}]: filter {flt['type']} of a backend is not supported")
        backend = resolver.backend(kind, namespace, ref, ref.get("weight", 1), http2=grpc)
        if backend.problem:
            problems.append(backend.problem)
        backends.append((backend, headers))
    timeouts = _timeouts(rule, where)
    out: list[EnvoyRoute] = []
    matches: list[Mapping[str, Any]] = list(rule.get("matches") or [{}])
    for m, raw in enumerate(matches):
        match = _match(kind, raw, f"{where}.matches[{m}]")
        entry: JSON = {"name": f"{kind}/{namespace}/{name}/rule/{r}/match/{m}", "match": match.envoy}
        if filters.redirect is not None:
            entry["redirect"] = _redirect(filters.redirect, match.path, where)
        else:
            action = _action(backends, filters, match.path, timeouts, where)
            entry.update(action if "direct_response" in action else {"route": action})
        filters.headers.apply(entry)
        if filters.cors is not None:
            entry["typed_per_filter_config"] = {envoy.CORS_FILTER: {"@type": envoy.CORS_POLICY, **filters.cors}}
        out.append(EnvoyRoute(entry, (*match.precedence, *shapes.age_key(route), r, m)))
    return out
