"""Who may scrape: the authentication and authorization filter in front of the metrics app.

It follows kube-rbac-proxy and controller-runtime's secure metrics: the caller sends `Authorization: Bearer <token>`;
a TokenReview says who it is (401 when nobody), a SubjectAccessReview whether that user may `get` the non-resource
path (403 when not). Answers are cached by a keyed hash of the token, never the token: an allowed one for a minute,
a refused one for a few seconds. When the API server cannot answer in time the request gets 503, so a scrape fails
without looking like a refusal.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from fastapi import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.kube.client import KubeClient, KubeError

# The logger the metrics listener's refusals have always been logged under, which log queries may filter on.
log = logging.getLogger("app.metrics")

ALLOWED_TTL: Final = 60.0
"""Seconds an allowed token is trusted without asking the API server again."""
DENIED_TTL: Final = 10.0
"""Seconds a refused token (401 or 403) is refused without asking again."""
CACHE_SIZE: Final = 1024
REVIEW_TIMEOUT: Final = 5.0
"""Bound on one TokenReview or SubjectAccessReview, connection included."""
MAX_TOKEN_LENGTH: Final = 16 * 1024
TOKEN_REVIEWS: Final = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS: Final = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class ReviewUnavailable(Exception):
    """The API server did not answer a review (unreachable, timed out, refused the call itself)."""


@dataclass(frozen=True)
class UserInfo:
    """Who a TokenReview says a token belongs to."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, Sequence[str]] = field(default_factory=dict)


class Reviewer(Protocol):
    """Asks the API server about a token. Both raise `ReviewUnavailable` when there is no answer."""

    async def authenticate(self, token: str) -> UserInfo | None:
        """The token's user, or None when the API server does not accept the token."""
        ...

    async def authorize(self, user: UserInfo, verb: str, path: str) -> bool:
        """Whether `user` may `verb` the non-resource `path`."""
        ...


class KubeReviewer:
    """TokenReview and SubjectAccessReview through the controller's own API client (which needs `create` on both,
    as the built-in ClusterRole `system:auth-delegator` grants)."""

    def __init__(
        self,
        kube: KubeClient | Callable[[], KubeClient | None],
        *,
        timeout: float = REVIEW_TIMEOUT,
        audiences: Sequence[str] = (),
    ) -> None:
        self._kube = kube
        self.timeout = timeout
        self.audiences = list(audiences)

    def _client(self) -> KubeClient:
        kube = self._kube if isinstance(self._kube, KubeClient) else self._kube()
        if kube is None:
            raise ReviewUnavailable("the Kubernetes client is not connected yet")
        return kube

    async def _post(self, path: str, body: Mapping[str, object], what: str) -> Mapping[str, object]:
        kube = self._client()
        try:
            async with asyncio.timeout(self.timeout):
                return await kube.request("POST", path, body=body, timeout=self.timeout, flow=None)
        except KubeError as exc:
            # Never the token: the message is the API server's Status, which does not quote the request.
            raise ReviewUnavailable(f"{what} refused: {exc.status} {exc.reason}: {exc.message}") from None
        except TimeoutError:
            raise ReviewUnavailable(f"{what} timed out after {self.timeout:g} s") from None
        except OSError as exc:
            raise ReviewUnavailable(f"{what} failed: {type(exc).__name__}: {exc}") from None

    async def authenticate(self, token: str) -> UserInfo | None:
        spec: dict[str, object] = {"token": token}
        if self.audiences:
            spec["audiences"] = self.audiences
        review = await self._post(
            TOKEN_REVIEWS,
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec},
            "TokenReview",
        )
        status = _fields(review.get("status"))
        if not status.get("authenticated"):
            return None
        user = _fields(status.get("user"))
        extra = _fields(user.get("extra"))
        return UserInfo(
            username=str(user.get("username", "")),
            uid=str(user.get("uid", "")),
            groups=tuple(str(g) for g in _items(user.get("groups"))),
            extra={str(k): [str(v) for v in _items(values)] for k, values in extra.items()},
        )

    async def authorize(self, user: UserInfo, verb: str, path: str) -> bool:
        spec: dict[str, object] = {
            "user": user.username,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        review = await self._post(
            ACCESS_REVIEWS,
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
            "SubjectAccessReview",
        )
        status = _fields(review.get("status"))
        return bool(status.get("allowed")) and not status.get("denied")


def _fields(value: object) -> Mapping[str, object]:
    """An object of a review's reply (its `status`, the `user`...); empty when the reply leaves it out."""
    return value if isinstance(value, Mapping) else {}


def _items(value: object) -> list[object]:
    """A list of a review's reply; empty when the reply leaves it out."""
    return value if isinstance(value, list) else []


@dataclass(frozen=True)
class Verdict:
    """What to answer a request: `status` 200 lets it through; 401, 403 and 503 refuse it."""

    status: int
    reason: str
    user: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    return token


class Authorizer:
    """Decides requests from their `Authorization` header with a `Reviewer`, caching answers by a keyed hash of the
    token (a random key of this process: the cache holds nothing that could be checked against a token elsewhere).

    Concurrent requests with the same token, verb and path share one review. `clock` is for tests.
    """

    def __init__(
        self,
        reviewer: Reviewer,
        *,
        allowed_ttl: float = ALLOWED_TTL,
        denied_ttl: float = DENIED_TTL,
        max_entries: int = CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reviewer = reviewer
        self.allowed_ttl = allowed_ttl
        self.denied_ttl = denied_ttl
        self.max_entries = max_entries
        self._clock = clock
        self._key = secrets.token_bytes(32)
        self._cache: OrderedDict[tuple[bytes, str, str], tuple[float, Verdict]] = OrderedDict()
        self._pending: dict[tuple[bytes, str, str], asyncio.Future[Verdict]] = {}
        self.reviews = 0
        """Reviews started (one per cache miss), for tests and debugging."""

    def __len__(self) -> int:
        return len(self._cache)

    def _cache_key(self, token: str, verb: str, path: str) -> tuple[bytes, str, str]:
        return hmac.new(self._key, token.encode(), hashlib.sha256).digest(), verb, path

    def _cached(self, key: tuple[bytes, str, str]) -> Verdict | None:
        entry = self._cache.get(key)
        if entry is None:
            return None
        expires, verdict = entry
        if self._clock() >= expires:
            del self._cache[key]
            return None
        self._cache.move_to_end(key)
        return verdict

    def _remember(self, key: tuple[bytes, str, str], verdict: Verdict) -> None:
        if verdict.status == 503:
            return  # the API server may answer the next request: ask again
        ttl = self.allowed_ttl if verdict.allowed else self.denied_ttl
        if ttl <= 0:
            return
        self._cache[key] = (self._clock() + ttl, verdict)
        self._cache.move_to_end(key)
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)

    async def check(self, authorization: str | None, verb: str, path: str) -> Verdict:
        token = bearer_token(authorization)
        if token is None:
            return Verdict(401, "a bearer token is required")
        key = self._cache_key(token, verb, path)
        cached = self._cached(key)
        if cached is not None:
            return cached
        pending = self._pending.get(key)
        if pending is None:
            self.reviews += 1
            pending = asyncio.ensure_future(self._review(token, verb, path))
            self._pending[key] = pending

            def settle(done: asyncio.Future[Verdict], key: tuple[bytes, str, str] = key) -> None:
                self._pending.pop(key, None)
                if not done.cancelled() and done.exception() is None:
                    self._remember(key, done.result())

            pending.add_done_callback(settle)
        # Shielded: a caller that goes away does not cancel the review others wait for.
        return await asyncio.shield(pending)

    async def _review(self, token: str, verb: str, path: str) -> Verdict:
        try:
            user = await self.reviewer.authenticate(token)
            if user is None:
                return Verdict(401, "the token is not valid")
            if not await self.reviewer.authorize(user, verb, path):
                log.info("refused %s %s to %s", verb, path, user.username, extra={"user": user.username})
                return Verdict(403, f"{user.username} may not {verb} {path}", user.username)
            return Verdict(200, "allowed", user.username)
        except ReviewUnavailable as exc:
            log.warning("cannot check a metrics request with the API server: %s", exc)
            return Verdict(503, "the Kubernetes API server did not answer the access review")


class AuthMiddleware:
    """Refuses every HTTP request that `authorizer` does not allow, before it reaches a route."""

    def __init__(self, app: ASGIApp, authorizer: Authorizer) -> None:
        self.app = app
        self.authorizer = authorizer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        authorization: str | None = None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                authorization = value.decode("latin-1")
                break
        # Non-resource verbs are the lower-cased HTTP method, as the API server itself and kube-rbac-proxy use.
        verdict = await self.authorizer.check(authorization, str(scope["method"]).lower(), str(scope["path"]))
        if verdict.allowed:
            await self.app(scope, receive, send)
            return
        headers = {"Cache-Control": "no-store"}
        if verdict.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="kflare-metrics"'
        elif verdict.status == 503:
            headers["Retry-After"] = "5"
        text = {401: "Unauthorized", 403: "Forbidden", 503: "Service Unavailable"}.get(verdict.status, "Refused")
        response = Response(f"{text}: {verdict.reason}\n", verdict.status, headers=headers, media_type="text/plain")
        await response(scope, receive, send)


__all__ = [
    "ACCESS_REVIEWS",
    "ALLOWED_TTL",
    "CACHE_SIZE",
    "DENIED_TTL",
    "MAX_TOKEN_LENGTH",
    "REVIEW_TIMEOUT",
    "TOKEN_REVIEWS",
    "AuthMiddleware",
    "Authorizer",
    "KubeReviewer",
    "ReviewUnavailable",
    "Reviewer",
    "UserInfo",
    "Verdict",
    "bearer_token",
]
