"""The IR's routes as Envoy's route entries."""

from __future__ import annotations

import re

from pydantic import JsonValue

from reconcilers.gateway import envoy
from reconcilers.gateway.envoy import EnvoyJSON
from reconcilers.gateway.ir.routes import (
    Cors,
    DirectResponse,
    Forward,
    HeaderChanges,
    HeaderMatch,
    HeaderValue,
    Match,
    Mirror,
    PathChange,
    PathMatch,
    Redirect,
    ReplaceFullPath,
    Retry,
    RouteIR,
    StringMatch,
)
from reconcilers.gateway.shapes import escape

_RESPONSE_CODES = {
    301: "MOVED_PERMANENTLY",
    302: "FOUND",
    303: "SEE_OTHER",
    307: "TEMPORARY_REDIRECT",
    308: "PERMANENT_REDIRECT",
}


def route_entry(route: RouteIR) -> EnvoyJSON:
    entry: EnvoyJSON = {"name": route.name, "match": _match(route.match)}
    action = route.action
    if isinstance(action, Redirect):
        entry["redirect"] = _redirect(action)
    elif isinstance(action, DirectResponse):
        entry["direct_response"] = {"status": action.status}
    else:
        entry["route"] = _forward(action)
    _apply_headers(route.headers, entry)
    if route.cors is not None:
        entry["typed_per_filter_config"] = {envoy.CORS_FILTER: {"@type": envoy.CORS_POLICY, **_cors(route.cors)}}
    return entry


# ---- matches --------------------------------------------------------------------------------------------------------


def _string_match(match: StringMatch) -> EnvoyJSON:
    return {"safe_regex": {"regex": match.value}} if match.regex else {"exact": match.value}


def _path(path: PathMatch) -> EnvoyJSON:
    if path.kind == "exact":
        return {"path": path.value}
    if path.kind == "prefix":
        return {"prefix": path.value}
    if path.kind == "segment_prefix":
        return {"path_separated_prefix": path.value}
    return {"safe_regex": {"regex": path.value}}


def _header(header: HeaderMatch) -> EnvoyJSON:
    return {"name": header.name, "string_match": _string_match(header.match)}


def _match(match: Match) -> EnvoyJSON:
    out = _path(match.path)
    if match.query_params:
        out["query_parameters"] = [_header(q) for q in match.query_params]
    headers: list[JsonValue] = [_header(h) for h in match.headers]
    if match.method is not None:
        headers.append({"name": ":method", "string_match": {"exact": match.method}})
    if match.scheme is not None:
        # The edge says the visitor's scheme in X-Forwarded-Proto; every request reaches Envoy over one plaintext hop.
        headers.append({"name": "x-forwarded-proto", "string_match": {"exact": match.scheme}})
    if headers:
        out["headers"] = headers
    return out


# ---- header changes -------------------------------------------------------------------------------------------------


def _added(values: tuple[HeaderValue, ...]) -> list[JsonValue]:
    return [
        {
            # `%` starts an Envoy command operator: a user's value is escaped.
            "header": {"key": h.name, "value": escape(h.value)},
            "append_action": "APPEND_IF_EXISTS_OR_ADD" if h.append else "OVERWRITE_IF_EXISTS_OR_ADD",
        }
        for h in values
    ]


def _apply_headers(changes: HeaderChanges, entry: EnvoyJSON) -> None:
    if not changes:
        return
    fields: list[tuple[str, list[JsonValue]]] = [
        ("request_headers_to_add", _added(changes.request_add)),
        ("request_headers_to_remove", list(changes.request_remove)),
        ("response_headers_to_add", _added(changes.response_add)),
        ("response_headers_to_remove", list(changes.response_remove)),
    ]
    for key, value in fields:
        if value:
            entry[key] = value


# ---- actions --------------------------------------------------------------------------------------------------------


def _prefix_rewrite(replacement: str, prefix: str) -> EnvoyJSON:
    value = replacement.rstrip("/")
    if value:
        return {"prefix_rewrite": value}
    # Replacing /foo with / must give /bar for /foo/bar, not //bar.
    stripped = prefix.rstrip("/")
    return {"regex_rewrite": {"pattern": {"regex": f"^{re.escape(stripped)}/*"}, "substitution": "/"}}


def _redirect(redirect: Redirect) -> EnvoyJSON:
    out: EnvoyJSON = {}
    if redirect.scheme:
        out["scheme_redirect"] = redirect.scheme
    if redirect.hostname:
        out["host_redirect"] = redirect.hostname
    if redirect.port is not None:
        out["port_redirect"] = redirect.port
    out["response_code"] = _RESPONSE_CODES[redirect.status_code]
    if isinstance(redirect.path, ReplaceFullPath):
        out["path_redirect"] = redirect.path.path
    elif redirect.path is not None:
        out.update(_prefix_rewrite(redirect.path.replacement, redirect.path.prefix))
    return out


def _mirror_policy(mirror: Mirror) -> EnvoyJSON:
    policy: EnvoyJSON = {"cluster": mirror.cluster}
    if mirror.percent is not None:
        policy["runtime_fraction"] = {"default_value": {"numerator": mirror.percent, "denominator": "HUNDRED"}}
    elif mirror.fraction is not None:
        numerator, denominator = mirror.fraction
        numerator = numerator * 1_000_000 // max(denominator, 1)
        policy["runtime_fraction"] = {"default_value": {"numerator": numerator, "denominator": "MILLION"}}
    return policy


def _retry_policy(retry: Retry | None, per_try_ms: int | None) -> EnvoyJSON | None:
    """Envoy's retry policy: the rule's retry (on the codes it names), and the timeout of each try."""
    if retry is None and not per_try_ms:
        return None
    policy: EnvoyJSON = {"num_retries": 0}
    if retry is not None:
        policy["num_retries"] = retry.attempts
        # Connection errors are retried too, as the spec says a retry should.
        codes: list[JsonValue] = list(retry.codes)
        policy["retry_on"] = "connect-failure,refused-stream,reset" + (",retriable-status-codes" if codes else ",5xx")
        if codes:
            policy["retriable_status_codes"] = codes
        if retry.backoff_ms is not None:
            policy["retry_back_off"] = {"base_interval": f"{retry.backoff_ms / 1000:g}s"}
    if per_try_ms:
        policy["per_try_timeout"] = f"{per_try_ms / 1000:g}s"
    return policy


def _path_rewrite(change: PathChange) -> EnvoyJSON:
    if isinstance(change, ReplaceFullPath):
        return {"regex_rewrite": {"pattern": {"regex": "^.*$"}, "substitution": change.path.replace("\\", "\\\\")}}
    return _prefix_rewrite(change.replacement, change.prefix)


def _forward(forward: Forward) -> EnvoyJSON:
    action: EnvoyJSON = {}
    backends = forward.backends
    if len(backends) == 1 and not backends[0].headers:
        action["cluster"] = backends[0].cluster
    else:
        # A split, or a backend of its own header changes: those are per cluster of a weighted split.
        clusters: list[JsonValue] = []
        for backend in backends:
            cluster: EnvoyJSON = {"name": backend.cluster, "weight": backend.weight}
            _apply_headers(backend.headers, cluster)
            clusters.append(cluster)
        action["weighted_clusters"] = {"clusters": clusters}
    # Envoy's default of 15 s is not the route's: no timeout unless the route sets one.
    action["timeout"] = f"{(forward.timeout_ms or 0) / 1000:g}s"
    retry = _retry_policy(forward.retry, forward.per_try_ms)
    if retry is not None:
        action["retry_policy"] = retry
    if forward.mirrors:
        action["request_mirror_policies"] = [_mirror_policy(m) for m in forward.mirrors]
    if forward.host_rewrite:
        action["host_rewrite_literal"] = forward.host_rewrite
    if forward.path_rewrite is not None:
        action.update(_path_rewrite(forward.path_rewrite))
    if forward.base_path is not None:
        # Envoy rewrites the path alone: the request's query string is kept.
        prefix = forward.base_path.rstrip("/").replace("\\", "\\\\")
        action["regex_rewrite"] = {"pattern": {"regex": "^(.*)$"}, "substitution": f"{prefix}\\1"}
    return action


def _cors(cors: Cors) -> EnvoyJSON:
    """Envoy's CORS policy of a route (the cors filter answers preflights and adds the response headers)."""
    policy: EnvoyJSON = {
        "allow_origin_string_match": [_string_match(o) for o in cors.allow_origins],
        "max_age": str(cors.max_age),
        # A preflight from an origin the route does not allow is answered by Envoy, not passed to the backend: the
        # backend would answer it as an ordinary OPTIONS, which a browser could read as allowed.
        "forward_not_matching_preflights": False,
    }
    for name, values in (
        ("allow_methods", cors.allow_methods),
        ("allow_headers", cors.allow_headers),
        ("expose_headers", cors.expose_headers),
    ):
        if values:
            policy[name] = ",".join(values)
    if cors.allow_credentials:
        policy["allow_credentials"] = True
    return policy
