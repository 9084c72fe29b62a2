"""A rule's matches as Envoy's route matches (paths, headers, query parameters, methods, gRPC methods), with what
every part of the rule builder (`reconcilers.gateway.rules`) shares: `Unsupported`, and the checks of a regex and of
the fields a part sets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from reconcilers.gateway.route_shapes import GRPCMethodMatch, GRPCRouteMatch, HeaderMatch, HTTPRouteMatch, PathMatch
from reconcilers.gateway.shapes import JSON
from reconcilers.gateway.status import GRPC_ROUTE, HTTP_ROUTE

_MATCH_KEYS = {HTTP_ROUTE: {"path", "headers", "queryParams", "method"}, GRPC_ROUTE: {"method", "headers"}}
DEFAULT_PATH: PathMatch = {"type": "PathPrefix", "value": "/"}
_NOT_RE2 = re.compile(r"\(\?[=!<]|\(\?P=|\\[1-9]|[*+?}]\+|\(\?>")


class Unsupported(Exception):
    """A part of a route the data plane does not implement; the message names it."""


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


def check_keys(obj: Mapping[str, Any], allowed: set[str], where: str) -> None:
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
class Match:
    """One match of a rule, as Envoy's route match, with its precedence and the path match a rewrite reads."""

    envoy: JSON
    precedence: tuple[Any, ...]
    path: PathMatch | None


def route_match(kind: str, match: Mapping[str, Any], where: str) -> Match:
    check_keys(match, _MATCH_KEYS[kind], where)
    path: PathMatch | None = None
    envoy_match: JSON
    method_rank = 1
    if kind == GRPC_ROUTE:
        grpc = cast(GRPCRouteMatch, match)
        envoy_match = _grpc_path(grpc["method"], where) if grpc.get("method") else {"prefix": "/"}
        precedence_path: tuple[int, int] = (0 if "path" in envoy_match else 1, 0)
        headers = _headers(grpc.get("headers", []), f"{where}.headers")
    else:
        http = cast(HTTPRouteMatch, match)
        path = http.get("path", DEFAULT_PATH)
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
    return Match(envoy_match, (*precedence_path, method_rank, *counts), path)
