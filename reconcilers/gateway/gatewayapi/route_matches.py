"""A rule's matches as the IR's (paths, headers, query parameters, methods, gRPC methods), with what
every part of the rule builder (`rules`) shares: `Unsupported`, and the checks of a regex and of the fields a part
sets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from reconcilers.gateway.gatewayapi.route_shapes import (
    GRPCMethodMatch,
    GRPCRouteMatch,
    HeaderMatch,
    HTTPRouteMatch,
    PathMatch,
)
from reconcilers.gateway.gatewayapi.status import GRPC_ROUTE, HTTP_ROUTE
from reconcilers.gateway.ir import routes as ir

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


def check_keys(obj: Mapping[str, object], allowed: set[str], where: str) -> None:
    extra = sorted(k for k, v in obj.items() if k not in allowed and v not in (None, [], {}))
    if extra:
        raise Unsupported(f"{where}.{extra[0]} is not supported by this data plane")


def _string_match(kind: str | None, value: str, where: str) -> ir.StringMatch:
    if kind in (None, "Exact"):
        return ir.StringMatch(value)
    if kind == "RegularExpression":
        problem = regex_error(value)
        if problem:
            raise Unsupported(f"{where}: regular expression {value!r} {problem}")
        return ir.StringMatch(value, regex=True)
    raise Unsupported(f"{where}.type {kind} is not supported")


def _path_match(path: PathMatch, where: str) -> tuple[ir.PathMatch, tuple[int, int]]:
    """The path match and the precedence of this match (rank, length): Exact first, then the longest prefix."""
    kind, value = path.get("type", "PathPrefix"), path.get("value", "/")
    if kind == "Exact":
        return ir.PathMatch("exact", value), (0, -len(value))
    if kind == "PathPrefix":
        trimmed = value.rstrip("/") or "/"
        match = ir.PathMatch("prefix", "/") if trimmed == "/" else ir.PathMatch("segment_prefix", trimmed)
        return match, (1, -len(trimmed))
    if kind == "RegularExpression":
        problem = regex_error(value)
        if problem:
            raise Unsupported(f"{where}.path: regular expression {value!r} {problem}")
        return ir.PathMatch("regex", value), (2, -len(value))
    raise Unsupported(f"{where}.path.type {kind} is not supported")


def _headers(headers: list[HeaderMatch], where: str) -> tuple[ir.HeaderMatch, ...]:
    return tuple(
        ir.HeaderMatch(h["name"], _string_match(h.get("type"), h.get("value", ""), f"{where}[{i}]"))
        for i, h in enumerate(headers)
    )


def _grpc_path(method: GRPCMethodMatch, where: str) -> ir.PathMatch:
    kind = method.get("type", "Exact")
    service, name = method.get("service"), method.get("method")
    if kind == "Exact":
        if service and name:
            return ir.PathMatch("exact", f"/{service}/{name}")
        if service:
            return ir.PathMatch("prefix", f"/{service}/")
        if name:
            return ir.PathMatch("regex", f"/[^/]+/{re.escape(name)}")
        return ir.PathMatch("prefix", "/")
    if kind == "RegularExpression":
        for part in (service, name):
            if part and (problem := regex_error(part)):
                raise Unsupported(f"{where}.method: regular expression {part!r} {problem}")
        return ir.PathMatch("regex", f"/{service or '[^/]+'}/{name or '[^/]+'}")
    raise Unsupported(f"{where}.method.type {kind} is not supported")


@dataclass
class Match:
    """One match of a rule, with its precedence and the path match a rewrite reads."""

    match: ir.Match
    precedence: ir.MatchPrecedence
    path: PathMatch | None


def route_match(kind: str, match: HTTPRouteMatch | GRPCRouteMatch, where: str) -> Match:
    check_keys(match, _MATCH_KEYS[kind], where)
    path: PathMatch | None = None
    method: str | None = None
    query_params: tuple[ir.HeaderMatch, ...] = ()
    method_rank = 1
    if kind == GRPC_ROUTE:
        grpc = cast(GRPCRouteMatch, match)
        path_match = _grpc_path(grpc["method"], where) if grpc.get("method") else ir.PathMatch("prefix", "/")
        precedence_path: tuple[int, int] = (0 if path_match.kind == "exact" else 1, 0)
        headers = _headers(grpc.get("headers", []), f"{where}.headers")
    else:
        http = cast(HTTPRouteMatch, match)
        path = http.get("path", DEFAULT_PATH)
        path_match, precedence_path = _path_match(path, where)
        headers = _headers(http.get("headers", []), f"{where}.headers")
        if http.get("method"):
            method = http["method"]
            method_rank = 0
        if http.get("queryParams"):
            query_params = tuple(
                ir.HeaderMatch(q["name"], _string_match(q.get("type"), q.get("value", ""), f"{where}.queryParams"))
                for q in http["queryParams"]
            )
    counts = (-len(match.get("headers") or []), -len(query_params))
    found = ir.Match(path_match, headers, query_params, method)
    return Match(found, (*precedence_path, method_rank, *counts), path)
