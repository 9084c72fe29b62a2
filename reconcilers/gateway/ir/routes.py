"""A route as the IR holds it: what a request must match and what is done with it, every value checked and every
default applied by the Gateway API stage, in no data plane's terms (the xDS stage writes it as Envoy's route).

One `RouteIR` is one rule of a Gateway API route with one of its matches. The values are frozen: the Gateway API
stage remembers a route's build across translations and shares it between the planes and listeners serving it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class StringMatch:
    value: str
    regex: bool = False
    """An RE2 regular expression (checked) matching the whole string; else the exact string."""


@dataclass(frozen=True)
class HeaderMatch:
    """A header (or a query parameter) and what its value must be."""

    name: str
    match: StringMatch


PathKind = Literal["exact", "prefix", "segment_prefix", "regex"]
"""`prefix` is a plain string prefix; `segment_prefix` matches whole path elements (`/foo` matches `/foo` and
`/foo/bar`, never `/foobar`)."""


@dataclass(frozen=True)
class PathMatch:
    kind: PathKind
    value: str


@dataclass(frozen=True)
class Match:
    """What a request must match, every part of it."""

    path: PathMatch
    headers: tuple[HeaderMatch, ...] = ()
    query_params: tuple[HeaderMatch, ...] = ()
    method: str | None = None
    scheme: str | None = None
    """The scheme the visitor used (as the edge tells it): set when one hostname has listeners of both schemes."""


@dataclass(frozen=True)
class HeaderValue:
    name: str
    value: str
    append: bool = False
    """Added beside the header's values; else it replaces them."""


@dataclass(frozen=True)
class HeaderChanges:
    """Headers set, added and removed, of the requests and of the responses (of a route, or of one backend)."""

    request_add: tuple[HeaderValue, ...] = ()
    request_remove: tuple[str, ...] = ()
    response_add: tuple[HeaderValue, ...] = ()
    response_remove: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.request_add or self.request_remove or self.response_add or self.response_remove)


NO_CHANGES = HeaderChanges()


@dataclass(frozen=True)
class ReplaceFullPath:
    path: str


@dataclass(frozen=True)
class ReplacePrefix:
    """The matched prefix `prefix` replaced by `replacement` (only a whole path elements prefix match has one)."""

    replacement: str
    prefix: str


PathChange = ReplaceFullPath | ReplacePrefix


@dataclass(frozen=True)
class Redirect:
    status_code: int
    """One of those the data plane can answer (checked)."""
    scheme: str | None = None
    hostname: str | None = None
    port: int | None = None
    path: PathChange | None = None


@dataclass(frozen=True)
class DirectResponse:
    status: int


@dataclass(frozen=True)
class WeightedCluster:
    cluster: str
    weight: int
    headers: HeaderChanges = NO_CHANGES
    """The header changes of this backend alone."""


@dataclass(frozen=True)
class Mirror:
    """A copy of a share of the requests sent to `cluster`: `percent` of them, or `fraction` (numerator,
    denominator); every one when neither is set."""

    cluster: str
    percent: int | None = None
    fraction: tuple[int, int] | None = None


@dataclass(frozen=True)
class Retry:
    attempts: int
    codes: tuple[int, ...] = ()
    """The response codes retried; empty: any 5xx."""
    backoff_ms: int | None = None


@dataclass(frozen=True)
class Forward:
    """Requests sent to the backends, split by weight (a backend that does not resolve keeps its share, which the
    unresolved cluster answers)."""

    backends: tuple[WeightedCluster, ...]
    timeout_ms: int | None = None
    """The request's whole time, retries included; None: no limit."""
    per_try_ms: int | None = None
    retry: Retry | None = None
    mirrors: tuple[Mirror, ...] = ()
    host_rewrite: str | None = None
    path_rewrite: PathChange | None = None
    base_path: str | None = None
    """An ExternalBackend's base path, prepended to the request's path (never with `path_rewrite`)."""


Action = Forward | Redirect | DirectResponse


@dataclass(frozen=True)
class Cors:
    allow_origins: tuple[StringMatch, ...]
    max_age: int
    """Seconds a browser may cache a preflight's answer."""
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    allow_credentials: bool = False


MatchPrecedence = tuple[int, int, int, int, int]
"""How specific a match is, most first: path kind (exact first), path length (negated), method (0: given), header
and query parameter matches (negated counts)."""

Precedence = tuple[int, int, int, int, int, str, str, str, int, int]
"""A route's place among the others on its hostname: its match's `MatchPrecedence`, then its route's age (creation
time, namespace, name), then its rule's and its match's indexes."""


@dataclass(frozen=True)
class RouteIR:
    """One rule of a route with one of its matches, with what orders it among the others on its hostname."""

    name: str
    """`<kind>/<namespace>/<name>/rule/<r>/match/<m>`, and `/<scheme>` when it is for one scheme only."""
    match: Match
    action: Action
    precedence: Precedence
    headers: HeaderChanges = NO_CHANGES
    cors: Cors | None = None
