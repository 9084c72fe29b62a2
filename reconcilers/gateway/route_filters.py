"""A rule's filters as Envoy's route settings: header modifiers (of the rule or of one of its backends), redirects,
rewrites, mirrors and CORS. What a filter asks that the data plane does not implement raises `Unsupported`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from reconcilers.gateway.backends import Backends
from reconcilers.gateway.route_matches import DEFAULT_PATH, Unsupported
from reconcilers.gateway.route_shapes import (
    HeaderModifier,
    PathMatch,
    RequestMirror,
    RequestRedirect,
    RouteFilter,
    RouteRule,
    URLRewrite,
)
from reconcilers.gateway.shapes import JSON, escape
from reconcilers.gateway.status import GRPC_ROUTE, HTTP_ROUTE

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
_REDIRECT_CODES = {
    301: "MOVED_PERMANENTLY",
    302: "FOUND",
    303: "SEE_OTHER",
    307: "TEMPORARY_REDIRECT",
    308: "PERMANENT_REDIRECT",
}
_UNMODIFIABLE = {"host"}


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
class HeaderChanges:
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
class Filters:
    """What a rule's filters ask of each of its Envoy routes."""

    headers: HeaderChanges = field(default_factory=HeaderChanges)
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


def prefix_rewrite(replacement: str, path_match: PathMatch | None, where: str) -> JSON:
    """Envoy's rewrite of the matched prefix to `replacement` (ReplacePrefixMatch of a redirect or a rewrite)."""
    if (path_match or DEFAULT_PATH).get("type", "PathPrefix") != "PathPrefix":
        raise Unsupported(f"{where}: ReplacePrefixMatch needs a PathPrefix match")
    value = replacement.rstrip("/")
    if value:
        return {"prefix_rewrite": value}
    # Replacing /foo with / must give /bar for /foo/bar, not //bar.
    prefix = (path_match or DEFAULT_PATH).get("value", "/").rstrip("/")
    return {"regex_rewrite": {"pattern": {"regex": f"^{re.escape(prefix)}/*"}, "substitution": "/"}}


def redirect(redirect: RequestRedirect, path_match: PathMatch | None, where: str) -> JSON:
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
            out.update(prefix_rewrite(path.get("replacePrefixMatch", "/"), path_match, where))
        else:
            raise Unsupported(f"{where}: redirect path type {path['type']} is not supported")
    return out
