"""A rule's filters as the IR's route settings: header modifiers (of the rule or of one of its backends), redirects,
rewrites, mirrors and CORS. What a filter asks that the data plane does not implement raises `Unsupported`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from reconcilers.gateway.gatewayapi.backends import Backends
from reconcilers.gateway.gatewayapi.route_matches import DEFAULT_PATH, Unsupported
from reconcilers.gateway.gatewayapi.route_shapes import (
    HeaderModifier,
    HTTPCORSFilter,
    PathMatch,
    RequestMirror,
    RequestRedirect,
    RouteFilter,
    RouteRule,
    URLRewrite,
)
from reconcilers.gateway.gatewayapi.status import GRPC_ROUTE, HTTP_ROUTE
from reconcilers.gateway.ir import routes as ir

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
BACKEND_FILTERS = {"RequestHeaderModifier", "ResponseHeaderModifier"}
"""The filters of a backendRef: Envoy changes headers per cluster of a weighted split."""
_REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
_UNMODIFIABLE = {"host"}


def _header_mutations(modifier: HeaderModifier, where: str) -> tuple[list[ir.HeaderValue], list[str]]:
    for h in [*modifier.get("set", []), *modifier.get("add", [])]:
        if h["name"].lower() in _UNMODIFIABLE:
            raise Unsupported(f"{where}: the {h['name']} header cannot be modified here (URLRewrite sets it)")
    for name in modifier.get("remove", []):
        if name.lower() in _UNMODIFIABLE:
            raise Unsupported(f"{where}: the {name} header cannot be removed")
    add = [
        ir.HeaderValue(h["name"], h.get("value", ""), append)
        for append, entries in ((False, modifier.get("set", [])), (True, modifier.get("add", [])))
        for h in entries
    ]
    return add, list(modifier.get("remove", []))


@dataclass
class HeaderChanges:
    """Header modifiers, of a route or of one backend of it, as they are taken."""

    request_add: list[ir.HeaderValue] = field(default_factory=list)
    request_remove: list[str] = field(default_factory=list)
    response_add: list[ir.HeaderValue] = field(default_factory=list)
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

    def frozen(self) -> ir.HeaderChanges:
        if not (self.request_add or self.request_remove or self.response_add or self.response_remove):
            return ir.NO_CHANGES
        return ir.HeaderChanges(
            tuple(self.request_add), tuple(self.request_remove), tuple(self.response_add), tuple(self.response_remove)
        )


@dataclass
class Filters:
    """What a rule's filters ask of each of its routes."""

    headers: HeaderChanges = field(default_factory=HeaderChanges)
    redirect: RequestRedirect | None = None
    rewrite: URLRewrite | None = None
    mirrors: list[ir.Mirror] = field(default_factory=list)
    cors: ir.Cors | None = None


def _mirror(mirror: RequestMirror, cluster: str) -> ir.Mirror:
    if mirror.get("percent") is not None:
        return ir.Mirror(cluster, percent=mirror["percent"])
    if "fraction" in mirror:
        fraction = mirror["fraction"]
        return ir.Mirror(cluster, fraction=(fraction["numerator"], fraction.get("denominator", 100)))
    return ir.Mirror(cluster)


def rule_filters(
    kind: str, rule: RouteRule, namespace: str, resolver: Backends, problems: list[tuple[str, str]], where: str
) -> Filters:
    out = Filters()
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
            out.mirrors.append(_mirror(mirror, backend.cluster))
    return out


def _origin_match(origin: str) -> ir.StringMatch:
    """An allowed CORS origin: `*` any, `https://*.example.com` any subdomain, else exact."""
    if origin == "*":
        return ir.StringMatch(".*", regex=True)
    if "*" in origin:
        return ir.StringMatch(".+".join(re.escape(part) for part in origin.split("*")), regex=True)
    return ir.StringMatch(origin)


def _cors(cors: HTTPCORSFilter) -> ir.Cors:
    def listed(values: Sequence[str] | None) -> tuple[str, ...]:
        return tuple(str(v) for v in values) if values else ()

    return ir.Cors(
        allow_origins=tuple(_origin_match(str(o)) for o in cors.get("allowOrigins", [])),
        # The spec's default: a browser caches a preflight's answer for 5 seconds.
        max_age=int(cors.get("maxAge", 5)),
        allow_methods=listed(cors.get("allowMethods")),
        allow_headers=listed(cors.get("allowHeaders")),
        expose_headers=listed(cors.get("exposeHeaders")),
        allow_credentials=bool(cors.get("allowCredentials")),
    )


def prefix_rewrite(replacement: str, path_match: PathMatch | None, where: str) -> ir.ReplacePrefix:
    """The rewrite of the matched prefix to `replacement` (ReplacePrefixMatch of a redirect or a rewrite)."""
    if (path_match or DEFAULT_PATH).get("type", "PathPrefix") != "PathPrefix":
        raise Unsupported(f"{where}: ReplacePrefixMatch needs a PathPrefix match")
    return ir.ReplacePrefix(replacement, (path_match or DEFAULT_PATH).get("value", "/"))


def redirect(redirect: RequestRedirect, path_match: PathMatch | None, where: str) -> ir.Redirect:
    code = redirect.get("statusCode", 302)
    if code not in _REDIRECT_CODES:
        raise Unsupported(f"{where}: redirect statusCode {code} is not supported")
    change: ir.PathChange | None = None
    path = redirect.get("path")
    if path:
        if path["type"] == "ReplaceFullPath":
            change = ir.ReplaceFullPath(path.get("replaceFullPath", "/"))
        elif path["type"] == "ReplacePrefixMatch":
            change = prefix_rewrite(path.get("replacePrefixMatch", "/"), path_match, where)
        else:
            raise Unsupported(f"{where}: redirect path type {path['type']} is not supported")
    return ir.Redirect(
        code, redirect.get("scheme") or None, redirect.get("hostname") or None, redirect.get("port"), change
    )
