"""The typed errors of the Cloudflare client and the tables that choose one for a failed call.

Every failure a caller can see is a `CloudflareError`:

    CloudflareError
    ├── NotFound            the object is not there (404, or a not-found code on another status)
    ├── Conflict            it already exists / a duplicate (409, or a duplicate code on a 400)
    ├── Terminal            Cloudflare refused the call and will refuse it again: fix the spec, token or plan
    │   ├── InvalidToken        the token is unknown, revoked or malformed (401, 1000, 9106, 6003, ...)
    │   ├── PermissionDenied    the token is valid but may not do this (403, 10000, 9109, ...)
    │   └── QuotaExceeded       a plan limit is reached (81045, 7406, 10009)
    ├── RateLimited         429; `retry_after` says how long to wait
    └── Transient           worth retrying: 5xx, 408, network errors, timeouts, bodies that are not an envelope
        ├── NetworkError        the connection failed or broke
        ├── DeadlineExceeded    a timeout bound ran out; `phase` says which
        └── BadResponse         the reply was not a Cloudflare envelope (an HTML 502, truncated JSON, empty body)

Cloudflare's advice is to classify by HTTP status first and by `errors[].code` second. `classify()` does so with
two tables: `STATUS_CLASSES` (what a status means by default) and `CODE_CLASSES` (codes that say more than their
status: a duplicate sent as a 400, a not-found sent as a 400, a 409 that is not a duplicate). Codes only refine
4xx answers; a 429 is always `RateLimited`, a 5xx always `Transient`, a 404 always `NotFound`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

Outcome = Literal["ok", "not_found", "conflict", "terminal", "rate_limited", "transient"]
OUTCOMES: tuple[Outcome, ...] = ("ok", "not_found", "conflict", "terminal", "rate_limited", "transient")


@dataclass(frozen=True, slots=True)
class ErrorDetail:
    """One entry of the envelope's `errors` list."""

    code: int | None
    message: str
    pointer: str | None = None
    chain: tuple[ErrorDetail, ...] = ()

    def __str__(self) -> str:
        text = self.message if self.code is None else f"{self.code} {self.message}"
        if self.pointer:
            text += f" (at {self.pointer})"
        if self.chain:
            text += " [" + "; ".join(str(detail) for detail in self.chain) + "]"
        return text


class CloudflareError(Exception):
    """A Cloudflare call that did not succeed. Carries the HTTP status (None when no answer came), the errors of
    the envelope, the call's method and path, and Cloudflare's ray ID when there was one."""

    outcome: ClassVar[Outcome] = "terminal"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        errors: Sequence[ErrorDetail] = (),
        method: str | None = None,
        path: str | None = None,
        ray_id: str | None = None,
        sent: bool = True,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.errors: tuple[ErrorDetail, ...] = tuple(errors)
        self.method = method
        self.path = path
        self.ray_id = ray_id
        self.sent = sent
        """Whether the call may have reached Cloudflare (False when it failed before anything was sent)."""

    @property
    def codes(self) -> tuple[int, ...]:
        """Cloudflare's error codes, outer errors first, then their chains."""
        return tuple(code for code in _all_codes(self.errors) if code is not None)

    @property
    def messages(self) -> tuple[str, ...]:
        return tuple(detail.message for detail in self.errors)

    def __str__(self) -> str:
        parts = []
        if self.method and self.path:
            parts.append(f"{self.method} {self.path}:")
        parts.append(self.message)
        facts = []
        if self.status is not None:
            facts.append(f"HTTP {self.status}")
        codes = self.codes
        if codes:
            facts.append(("code " if len(codes) == 1 else "codes ") + ", ".join(str(code) for code in codes))
        if self.ray_id:
            facts.append(f"ray {self.ray_id}")
        if facts:
            parts.append("(" + "; ".join(facts) + ")")
        others = [str(detail) for detail in self.errors if detail.message != self.message]
        if others:
            parts.append("[" + "; ".join(others) + "]")
        return " ".join(parts)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(message={self.message!r}, status={self.status!r}, "
            f"codes={self.codes!r}, method={self.method!r}, path={self.path!r})"
        )


class NotFound(CloudflareError):
    outcome: ClassVar[Outcome] = "not_found"


class Conflict(CloudflareError):
    outcome: ClassVar[Outcome] = "conflict"


class Terminal(CloudflareError):
    outcome: ClassVar[Outcome] = "terminal"


class InvalidToken(Terminal):
    pass


class PermissionDenied(Terminal):
    pass


class QuotaExceeded(Terminal):
    pass


class RateLimited(CloudflareError):
    outcome: ClassVar[Outcome] = "rate_limited"

    def __init__(
        self,
        message: str,
        *,
        retry_after: float,
        status: int | None = 429,
        errors: Sequence[ErrorDetail] = (),
        method: str | None = None,
        path: str | None = None,
        ray_id: str | None = None,
        sent: bool = True,
    ) -> None:
        super().__init__(message, status=status, errors=errors, method=method, path=path, ray_id=ray_id, sent=sent)
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"{super().__str__()} retry after {self.retry_after:g} s"


class Transient(CloudflareError):
    outcome: ClassVar[Outcome] = "transient"


class NetworkError(Transient):
    pass


Phase = Literal["pool", "connect", "tls", "send", "response_start", "body", "request"]


class DeadlineExceeded(Transient):
    """A timeout bound ran out. `phase` names the bound: `connect`, `tls`, `response_start`, `body` (a read of the
    body stalled), `send` (a write stalled), `pool` (no free connection) or `request` (the whole-request deadline)."""

    def __init__(
        self,
        message: str,
        *,
        phase: Phase,
        method: str | None = None,
        path: str | None = None,
        sent: bool = True,
    ) -> None:
        super().__init__(message, method=method, path=path, sent=sent)
        self.phase: Phase = phase


class BadResponse(Transient):
    pass


# What an HTTP status means when no error code says more. Statuses not listed: other 4xx are Terminal, other 5xx
# Transient, and anything else unexpected (1xx, 3xx) Transient.
STATUS_CLASSES: Mapping[int, type[CloudflareError]] = {
    400: Terminal,
    401: InvalidToken,
    403: PermissionDenied,
    404: NotFound,
    408: Transient,
    409: Conflict,
    422: Terminal,
    429: RateLimited,
}

# Codes that decide the class whatever the 4xx status (404 and 429 excepted). Sources: shared/reference
# cloudflare-api.md, sections 3 and 17.
CODE_CLASSES: Mapping[int, type[CloudflareError]] = {
    # -- not found, whatever the status -------------------------------------------------------------------------
    81044: NotFound,  # DNS record does not exist (404)
    10007: NotFound,  # Worker script not found (404)
    10090: NotFound,  # Worker script not found, newer delete responses (404)
    10006: NotFound,  # R2 NoSuchBucket (404)
    1001: NotFound,  # invalid zone identifier: no such zone
    7003: NotFound,  # could not route to /..., the object identifier is invalid or unknown (400)
    # -- already exists / duplicate -----------------------------------------------------------------------------
    1061: Conflict,  # zone name already exists in the account (400)
    81057: Conflict,  # DNS record already exists (older code, 400)
    81058: Conflict,  # an identical DNS record already exists (400)
    81053: Conflict,  # an A, AAAA or CNAME record with that host already exists (400)
    81054: Conflict,  # a CNAME record with that host already exists (400)
    10020: Conflict,  # a Worker route with the same pattern already exists
    10014: Conflict,  # a KV namespace with this title already exists (400)
    10004: Conflict,  # R2 bucket already exists and you own it (409)
    10073: Conflict,  # R2 BucketConflict (409)
    7502: Conflict,  # a D1 database with that name already exists
    1013: Conflict,  # a tunnel with this name already exists (409)
    20217: Conflict,  # the zone already has an entry point ruleset for the phase (400)
    # -- refused: a 409 or 400 that is not a duplicate ---------------------------------------------------------
    10008: Terminal,  # R2 bucket not empty (409)
    1022: Terminal,  # tunnel still has active connections
    # -- the token ----------------------------------------------------------------------------------------------
    1000: InvalidToken,  # invalid API token (401, sometimes 400)
    9106: InvalidToken,  # authentication failed: token not recognised (403)
    6003: InvalidToken,  # invalid request headers (400)
    6111: InvalidToken,  # invalid format for the Authorization header (400, in 6003's chain)
    6103: InvalidToken,  # invalid format for X-Auth-Key (400, in 6003's chain)
    10000: PermissionDenied,  # authentication error: valid token without the permission (403)
    9109: PermissionDenied,  # unauthorized to access requested resource (403)
    10023: PermissionDenied,  # Workers: not authorised or not entitled (403)
    10042: PermissionDenied,  # R2 not enabled on the account (403)
    # -- plan limits --------------------------------------------------------------------------------------------
    81045: QuotaExceeded,  # DNS record quota exceeded
    7406: QuotaExceeded,  # D1 database quota reached
    10009: QuotaExceeded,  # R2 too many buckets
}

# 429 codes that mean the global per-token limit, after which every call of the token is refused: these pause
# the token's whole budget. A 429 with another code (a busy list operation, an R2 per-key limit) fails only its
# own call. A 429 without an envelope or codes is taken as the global limit, the safe reading.
GLOBAL_RATE_LIMIT_CODES: frozenset[int] = frozenset({971, 10429})


def _all_codes(details: Iterable[ErrorDetail]) -> Iterable[int | None]:
    for detail in details:
        yield detail.code
        yield from _all_codes(detail.chain)


def classify(status: int, details: Sequence[ErrorDetail] = ()) -> type[CloudflareError]:
    """The error class for a failed call: by HTTP status first, by error code second."""
    if status == 429:
        return RateLimited
    if status >= 500 or status == 408:
        return Transient
    if status == 404:
        return NotFound
    if 400 <= status < 500 or 200 <= status < 300:
        # A 2xx lands here only with `success: false`: the codes decide, or it is a refusal.
        for code in _all_codes(details):
            if code is not None and code in CODE_CLASSES:
                return CODE_CLASSES[code]
        return STATUS_CLASSES.get(status, Terminal)
    return Transient


def is_global_rate_limit(details: Sequence[ErrorDetail]) -> bool:
    """Whether a 429 with these errors is the token-wide limit (see `GLOBAL_RATE_LIMIT_CODES`)."""
    codes = [code for code in _all_codes(details) if code is not None]
    return not codes or any(code in GLOBAL_RATE_LIMIT_CODES for code in codes)
