"""A route's rules as the IR's routes: each rule's matches (`route_matches`: paths, headers, query parameters, methods,
gRPC methods), its filters (`route_filters`: header modifiers, redirects, rewrites, mirrors) and the route action
over the rule's backends.

Nothing in a route is silently ignored: a field, match or filter the data plane does not implement raises
`Unsupported` with a message naming it; the rule holding it is left out (the route is `PartiallyInvalid`), and a
route with no rule left, or whose spec holds it, is refused with it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Final

from reconcilers.gateway import shapes
from reconcilers.gateway.gatewayapi.backends import UNRESOLVED, Backend, Backends
from reconcilers.gateway.gatewayapi.route_filters import (
    BACKEND_FILTERS,
    Filters,
    HeaderChanges,
    prefix_rewrite,
    redirect,
    rule_filters,
)
from reconcilers.gateway.gatewayapi.route_matches import Unsupported, check_keys, route_match
from reconcilers.gateway.gatewayapi.route_shapes import GRPCRouteMatch, HTTPRouteMatch, PathMatch, Route, RouteRule
from reconcilers.gateway.gatewayapi.status import GRPC_ROUTE, HTTP_ROUTE
from reconcilers.gateway.ir import routes as ir
from reconcilers.gateway.ir.routes import RouteIR

_RULE_KEYS = {
    HTTP_ROUTE: {"name", "matches", "filters", "backendRefs", "timeouts", "retry"},
    GRPC_ROUTE: {"name", "matches", "filters", "backendRefs"},
}
_SPEC_KEYS = {"parentRefs", "hostnames", "rules"}
_BACKEND_KEYS = {"group", "kind", "name", "namespace", "port", "weight", "filters"}


def for_scheme(route: RouteIR, scheme: str) -> RouteIR:
    """`route` for requests the visitor made over `scheme` only (the edge says which in X-Forwarded-Proto): how
    an HTTP and an HTTPS listener of one Gateway are told apart, all traffic reaching Envoy over one plaintext hop."""
    before = route.precedence
    # One header more to match (the fourth place holds the number of header matches, negated: more headers,
    # earlier): ahead of the same route for either scheme.
    precedence = (*before[:3], before[3] - 1, *before[4:])
    return dataclasses.replace(
        route,
        name=f"{route.name}/{scheme}",
        match=dataclasses.replace(route.match, scheme=scheme),
        precedence=precedence,
    )


DEFAULT_PORTS: Final = {"HTTP": 80, "HTTPS": 443}


def on_port(route: RouteIR, port: int) -> RouteIR:
    """`route` as served by a listener of `port`, not its protocol's usual one: a redirect that names neither a
    scheme nor a port keeps the listener's port (Gateway API), which Envoy would drop with the host it replaces."""
    action = route.action
    if not isinstance(action, ir.Redirect) or action.scheme is not None or action.port is not None:
        return route
    return dataclasses.replace(route, action=dataclasses.replace(action, port=port))


@dataclass
class BuiltRoute:
    """A route's routes in the IR, and the backends it names that do not resolve."""

    routes: list[RouteIR] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    """Why each rule left out was (a rule the data plane cannot serve is dropped, the others are served)."""
    rules: int = 0


# ---- the route action -----------------------------------------------------------------------------------------------


@dataclass
class _Timeouts:
    request_ms: int | None = None
    per_try_ms: int | None = None
    retry: ir.Retry | None = None


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
        backoff_ms: int | None = None
        if retry.get("backoff") is not None:
            backoff_ms = shapes.duration_ms(str(retry["backoff"]))
            if backoff_ms is None:
                raise Unsupported(f"{where}.retry.backoff: {retry['backoff']!r} is not a duration")
            backoff_ms = backoff_ms or 1
        out.retry = ir.Retry(
            # The spec's default when only codes are given.
            int(retry.get("attempts", 2)),
            tuple(int(c) for c in retry.get("codes", [])),
            backoff_ms,
        )
    return out


def _action(
    backends: list[tuple[Backend, HeaderChanges]],
    filters: Filters,
    path_match: PathMatch | None,
    timeouts: _Timeouts,
    where: str,
) -> ir.Forward | ir.DirectResponse:
    """What is done with a request; a direct response when the rule has no backend to send to."""
    live = [(b, headers) for b, headers in backends if b.weight > 0]
    if not live or all(b.cluster is None for b, _ in live):
        # No backend, or none that resolves: the spec wants a 500 for that traffic.
        return ir.DirectResponse(500)
    host_rewrite: str | None = None
    path_rewrite: ir.PathChange | None = None
    rewrite = filters.rewrite
    if rewrite:
        if rewrite.get("hostname"):
            host_rewrite = rewrite["hostname"]
        path = rewrite.get("path")
        if path:
            if path["type"] == "ReplaceFullPath":
                path_rewrite = ir.ReplaceFullPath(path.get("replaceFullPath", "/"))
            elif path["type"] == "ReplacePrefixMatch":
                path_rewrite = prefix_rewrite(path.get("replacePrefixMatch", "/"), path_match, where)
            else:
                raise Unsupported(f"{where}: URLRewrite path type {path['type']} is not supported")
    based = [b.path for b, _ in live if b.path]
    if based:
        _check_base_path(based[0], len(live), bool(rewrite and rewrite.get("path")), where)
    return ir.Forward(
        tuple(ir.WeightedCluster(b.cluster or UNRESOLVED, b.weight, headers.frozen()) for b, headers in live),
        timeout_ms=timeouts.request_ms,
        per_try_ms=timeouts.per_try_ms,
        retry=timeouts.retry,
        mirrors=tuple(filters.mirrors),
        host_rewrite=host_rewrite,
        path_rewrite=path_rewrite,
        base_path=based[0] if based else None,
    )


def _check_base_path(base: str, backends: int, rewritten: bool, where: str) -> None:
    """An ExternalBackend's base path is prepended to the request's path (its query string kept), once per route:
    with another backend beside it, or a URLRewrite of the path, which path a request gets could not be said."""
    if backends > 1 or rewritten:
        raise Unsupported(
            f"{where}: an ExternalBackend with a path must be the rule's only backend, without a URLRewrite"
        )
    if "?" in base or "#" in base:
        raise Unsupported(f"{where}: an ExternalBackend path with a query string ({base!r}) is not supported")


# ---- a route --------------------------------------------------------------------------------------------------------


def build_route(kind: str, route: Route, resolver: Backends) -> BuiltRoute:
    """The route's routes (with their precedence), its unresolved backends, and the rules left out because
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
) -> list[RouteIR]:
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
    out: list[RouteIR] = []
    matches: list[HTTPRouteMatch | GRPCRouteMatch] = list(rule.get("matches") or [{}])
    route_headers = filters.headers.frozen()
    for m, raw in enumerate(matches):
        match = route_match(kind, raw, f"{where}.matches[{m}]")
        action: ir.Action
        if filters.redirect is not None:
            action = redirect(filters.redirect, match.path, where)
        else:
            action = _action(backends, filters, match.path, timeouts, where)
        out.append(
            RouteIR(
                f"{kind}/{namespace}/{name}/rule/{r}/match/{m}",
                match.match,
                action,
                (*match.precedence, *shapes.age_key(route), r, m),
                route_headers,
                filters.cors,
            )
        )
    return out
