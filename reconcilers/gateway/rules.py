"""A route's rules as Envoy routes: each rule's matches (`reconcilers.gateway.route_matches`: paths, headers, query
parameters, methods, gRPC methods), its filters (`reconcilers.gateway.route_filters`: header modifiers, redirects,
rewrites, mirrors) and the route action over the rule's backends.

Nothing in a route is silently ignored: a field, match or filter the data plane does not implement raises
`Unsupported` with a message naming it; the rule holding it is left out (the route is `PartiallyInvalid`), and a
route with no rule left, or whose spec holds it, is refused with it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from reconcilers.gateway import envoy, shapes
from reconcilers.gateway.backends import UNRESOLVED, Backend, Backends
from reconcilers.gateway.ir import EnvoyRoute
from reconcilers.gateway.route_filters import (
    BACKEND_FILTERS,
    Filters,
    HeaderChanges,
    prefix_rewrite,
    redirect,
    rule_filters,
)
from reconcilers.gateway.route_matches import Unsupported, check_keys, route_match
from reconcilers.gateway.route_shapes import PathMatch, Route, RouteRule
from reconcilers.gateway.shapes import JSON
from reconcilers.gateway.status import GRPC_ROUTE, HTTP_ROUTE

_RULE_KEYS = {
    HTTP_ROUTE: {"name", "matches", "filters", "backendRefs", "timeouts", "retry"},
    GRPC_ROUTE: {"name", "matches", "filters", "backendRefs"},
}
_SPEC_KEYS = {"parentRefs", "hostnames", "rules"}
_BACKEND_KEYS = {"group", "kind", "name", "namespace", "port", "weight", "filters"}

_HEADER_COUNT = 3
"""Where in a route's precedence the number of its header matches is (negated: more headers, earlier)."""


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


DEFAULT_PORTS: Final = {"HTTP": 80, "HTTPS": 443}


def on_port(route: EnvoyRoute, port: int) -> EnvoyRoute:
    """`route` as served by a listener of `port`, not its protocol's usual one: a redirect that names neither a
    scheme nor a port keeps the listener's port (Gateway API), which Envoy would drop with the host it replaces."""
    redirect = route.entry.get("redirect")
    if redirect is None or "scheme_redirect" in redirect or "port_redirect" in redirect:
        return route
    entry = {**route.entry, "redirect": {**redirect, "port_redirect": port}}
    return EnvoyRoute(entry, route.precedence)


@dataclass
class BuiltRoute:
    """A route's Envoy routes, and the backends it names that do not resolve."""

    routes: list[EnvoyRoute] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    """Why each rule left out was (a rule the data plane cannot serve is dropped, the others are served)."""
    rules: int = 0


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
    backends: list[tuple[Backend, HeaderChanges]],
    filters: Filters,
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
                action.update(prefix_rewrite(path.get("replacePrefixMatch", "/"), path_match, where))
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


def build_route(kind: str, route: Route, resolver: Backends) -> BuiltRoute:
    """The route's Envoy routes (with their precedence), its unresolved backends, and the rules left out because
    the data plane cannot serve them; raises Unsupported for what refuses the whole route."""
    spec = route["spec"]
    check_keys(spec, _SPEC_KEYS, "spec")
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
    kind: str, route: Route, r: int, rule: RouteRule, resolver: Backends, problems: list[tuple[str, str]]
) -> list[EnvoyRoute]:
    namespace, name = shapes.key(route)
    grpc = kind == GRPC_ROUTE
    where = f"spec.rules[{r}]"
    check_keys(rule, _RULE_KEYS[kind], where)
    filters = rule_filters(kind, rule, namespace, resolver, problems, where)
    if filters.redirect is not None and rule.get("backendRefs"):
        raise Unsupported(f"{where}: RequestRedirect with backendRefs (the spec forbids both)")
    backends: list[tuple[Backend, HeaderChanges]] = []
    for b, ref in enumerate(rule.get("backendRefs", [])):
        bwhere = f"{where}.backendRefs[{b}]"
        check_keys(ref, _BACKEND_KEYS, bwhere)
        headers = HeaderChanges()
        for f, flt in enumerate(ref.get("filters", [])):
            if flt["type"] not in BACKEND_FILTERS or not headers.take(flt, f"{bwhere}.filters[{f}]"):
                raise Unsupported(f"{bwhere}.filters[{f}]: filter {flt['type']} of a backend is not supported")
        backend = resolver.backend(kind, namespace, ref, ref.get("weight", 1), http2=grpc)
        if backend.problem:
            problems.append(backend.problem)
        backends.append((backend, headers))
    timeouts = _timeouts(rule, where)
    out: list[EnvoyRoute] = []
    matches: list[Mapping[str, Any]] = list(rule.get("matches") or [{}])
    for m, raw in enumerate(matches):
        match = route_match(kind, raw, f"{where}.matches[{m}]")
        entry: JSON = {"name": f"{kind}/{namespace}/{name}/rule/{r}/match/{m}", "match": match.envoy}
        if filters.redirect is not None:
            entry["redirect"] = redirect(filters.redirect, match.path, where)
        else:
            action = _action(backends, filters, match.path, timeouts, where)
            entry.update(action if "direct_response" in action else {"route": action})
        filters.headers.apply(entry)
        if filters.cors is not None:
            entry["typed_per_filter_config"] = {envoy.CORS_FILTER: {"@type": envoy.CORS_POLICY, **filters.cors}}
        out.append(EnvoyRoute(entry, (*match.precedence, *shapes.age_key(route), r, m)))
    return out
