"""The metrics listener: `GET /metrics` in Prometheus' text format (or OpenMetrics, when asked), behind Kubernetes
authentication and authorization unless `--metrics-secure=false`.

What a scrape returns, all from one registry (`app.kube.metrics.REGISTRY`):

- the controller runtime's series under controller-runtime's names (`controller_runtime_reconcile_total`,
  `workqueue_depth`, ...), kept by `app.kube`;
- the process' own (`process_*`, `python_gc_*`, `python_info`), from prometheus_client's collectors;
- the listeners' HTTP requests (`kflare_http_requests_total`, `kflare_http_request_duration_seconds`, labelled by
  listener), recorded by prometheus-fastapi-instrumentator on every app `instrument()` is applied to;
- the Cloudflare client's use of each token's call budget (`kflare_cloudflare_*`), read from
  `CloudflareSession.budget_stats()` at scrape time by `CloudflareCollector`. A token is named by its fingerprint;
- `kflare_resources{kind, ready, reason}`: how many kflare resources the leader's informer caches hold, by the
  status and reason of their Ready condition, counted at scrape time by `ResourceCollector` (a standby caches none,
  so it exports no samples and a sum over the pods counts each resource once).

Access control follows kube-rbac-proxy and controller-runtime's secure metrics: the caller sends
`Authorization: Bearer <token>`; a TokenReview says who it is (401 when nobody), a SubjectAccessReview whether that
user may `get` the non-resource path (403 when not). Answers are cached by a keyed hash of the token, never the
token: an allowed one for a minute, a refused one for a few seconds. When the API server cannot answer in time the
request gets 503, so a scrape fails without looking like a refusal.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import hmac
import logging
import re
import secrets
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import uvicorn
from fastapi import FastAPI, Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from prometheus_fastapi_instrumentator import Instrumentator
from prometheus_fastapi_instrumentator.metrics import Info
from starlette.types import ASGIApp, Receive, Scope, Send

from app.cloudflare.budget import BudgetStats
from app.kube.client import KubeClient, KubeError
from app.kube.metrics import REGISTRY
from app.listener import Limits
from app.listener import config as listener_config
from app.settings import Settings
from app.tls import ReloadingTLS

log = logging.getLogger(__name__)

METRICS_PATH: Final = "/metrics"
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


# -- what a scrape returns ---------------------------------------------------------------------------------------


def _install_process_collectors(registry: CollectorRegistry) -> None:
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)


_install_process_collectors(REGISTRY)  # once per process: a module runs once

HTTP_REQUESTS = Counter(
    "kflare_http_requests_total",
    "HTTP requests served, by listener, method, status code and route",
    ["listener", "method", "status", "handler"],
    registry=REGISTRY,
)
HTTP_DURATION = Histogram(
    "kflare_http_request_duration_seconds",
    "Time to serve an HTTP request, by listener, method and route",
    ["listener", "method", "handler"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _record(listener: str) -> Callable[[Info], None]:
    def record(info: Info) -> None:
        # A client picks the method: anything unusual shares one label value, so it cannot grow the series.
        method = info.method if info.method in _METHODS else "other"
        HTTP_REQUESTS.labels(listener, method, info.modified_status, info.modified_handler).inc()
        HTTP_DURATION.labels(listener, method, info.modified_handler).observe(info.modified_duration)

    return record


def instrument(app: FastAPI, listener: str) -> FastAPI:
    """Record `app`'s requests in `kflare_http_*{listener=...}`; requests to unknown paths share `handler="none"`.
    Call it once per app, after the app's own middleware, so that refused requests count too."""
    instrumentator = Instrumentator(
        should_group_status_codes=False,
        should_group_untemplated=True,
        registry=REGISTRY,
    )
    # With an instrumentation of our own the instrumentator registers none of its default series, which it would
    # try to register again for every app.
    instrumentator.add(_record(listener)).instrument(app)
    return app


class CloudflareCollector(Collector):
    """The Cloudflare client's per-token budgets as Prometheus series, read from `source` at each scrape."""

    def __init__(self, source: Callable[[], Iterable[BudgetStats]]) -> None:
        self._source = source

    def describe(self) -> Iterable[Metric]:
        return []  # series come and go with tokens: nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        stats = list(self._source())
        token = ["token"]
        calls = CounterMetricFamily(
            "kflare_cloudflare_calls",
            "Cloudflare API calls answered or failed, by outcome",
            labels=["token", "outcome"],
        )
        limited = CounterMetricFamily(
            "kflare_cloudflare_rate_limited", "Cloudflare API calls answered 429 (rate limited)", labels=token
        )
        waited = CounterMetricFamily(
            "kflare_cloudflare_budget_wait_seconds",
            "Seconds callers spent waiting for the token's call budget",
            labels=token,
        )
        refused = CounterMetricFamily(
            "kflare_cloudflare_budget_refused",
            "Calls failed without being sent because the budget's wait would be too long",
            labels=token,
        )
        pauses = CounterMetricFamily(
            "kflare_cloudflare_budget_pauses", "Pauses of every call of the token ordered by Cloudflare", labels=token
        )
        remaining = GaugeMetricFamily(
            "kflare_cloudflare_budget_remaining", "Calls that could be sent now without waiting", labels=token
        )
        capacity = GaugeMetricFamily(
            "kflare_cloudflare_budget_capacity", "Calls the budget allows per window", labels=token
        )
        window = GaugeMetricFamily(
            "kflare_cloudflare_budget_window_seconds", "Length of the budget's sliding window", labels=token
        )
        in_flight = GaugeMetricFamily(
            "kflare_cloudflare_calls_in_flight", "Calls sent and not answered yet", labels=token
        )
        waiting = GaugeMetricFamily(
            "kflare_cloudflare_budget_waiting", "Callers waiting for the token's budget now", labels=token
        )
        paused = GaugeMetricFamily(
            "kflare_cloudflare_budget_paused_seconds", "Seconds left of a pause Cloudflare ordered", labels=token
        )
        server_remaining = GaugeMetricFamily(
            "kflare_cloudflare_server_remaining", "Calls left in Cloudflare's own window, as it last said", labels=token
        )
        for s in stats:
            for outcome, count in sorted(s.calls.items()):
                calls.add_metric([s.token, outcome], count)
            limited.add_metric([s.token], s.calls.get("rate_limited", 0))
            waited.add_metric([s.token], s.waited_seconds)
            refused.add_metric([s.token], s.refused)
            pauses.add_metric([s.token], s.pauses)
            remaining.add_metric([s.token], s.remaining)
            capacity.add_metric([s.token], s.capacity)
            window.add_metric([s.token], s.window)
            in_flight.add_metric([s.token], s.in_flight)
            waiting.add_metric([s.token], s.waiting)
            paused.add_metric([s.token], s.paused_for)
            if s.server_remaining is not None:
                server_remaining.add_metric([s.token], s.server_remaining)
        yield from (calls, limited, waited, refused, pauses, remaining, capacity, window, in_flight, waiting, paused)
        yield server_remaining


ResourceSource = Callable[[], Iterable[tuple[str, Iterable[Mapping[str, Any]]]]]
"""Each kind with the objects of that kind the controller holds."""

_REASON = re.compile(r"[A-Z][A-Za-z0-9]{0,63}")


def ready_of(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(status, reason) of an object's Ready condition: ("Unknown", "") before its first reconcile. Reasons are
    the controller's own CamelCase words; anything else shares "Other", so the label cannot grow without bound."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            value = cond.get("status")
            reason = cond.get("reason")
            ready = value if value in ("True", "False") else "Unknown"
            if not isinstance(reason, str) or not reason:
                return ready, ""
            return ready, reason if _REASON.fullmatch(reason) else "Other"
    return "Unknown", ""


class ResourceCollector(Collector):
    """`kflare_resources{kind, ready, reason}`: resources counted by their Ready condition at each scrape, from
    what the controller already holds (its informer caches), so alerting on resources that are not Ready needs no
    kube-state-metrics configuration. A few dozen series at most: kinds times the reasons each can report."""

    def __init__(self, source: ResourceSource) -> None:
        self._source = source

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "kflare_resources",
            "kflare resources the controller manages, by kind and by the status and reason of their Ready condition",
            labels=["kind", "ready", "reason"],
        )
        for kind, objects in self._source():
            counts = collections.Counter(ready_of(obj) for obj in objects)
            for (ready, reason), count in sorted(counts.items()):
                family.add_metric([kind, ready, reason], count)
        yield family


class TaskCollector(Collector):
    """`kflare_asyncio_tasks`: the event loop's tasks at each scrape. Watches, timers and connections each hold a
    task, so a count that grows with time (and not with resources) is a leak."""

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        try:
            tasks = asyncio.all_tasks()
        except RuntimeError:  # scraped outside the event loop (a registry read by hand): nothing to count
            return
        yield GaugeMetricFamily("kflare_asyncio_tasks", "asyncio tasks of the process' event loop", value=len(tasks))


class Exposition(Collector):
    """Several collectors as one, for one scrape: the process' registry plus collectors owned by one runtime."""

    def __init__(self, *collectors: Collector) -> None:
        self.collectors = collectors

    def collect(self) -> Iterator[Metric]:
        for collector in self.collectors:
            yield from collector.collect()


# -- who may scrape ----------------------------------------------------------------------------------------------


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

    async def _post(self, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        kube = self._client()
        try:
            async with asyncio.timeout(self.timeout):
                return await kube.request("POST", path, body=body, timeout=self.timeout)
        except KubeError as exc:
            # Never the token: the message is the API server's Status, which does not quote the request.
            raise ReviewUnavailable(f"{what} refused: {exc.status} {exc.reason}: {exc.message}") from None
        except TimeoutError:
            raise ReviewUnavailable(f"{what} timed out after {self.timeout:g} s") from None
        except OSError as exc:
            raise ReviewUnavailable(f"{what} failed: {type(exc).__name__}: {exc}") from None

    async def authenticate(self, token: str) -> UserInfo | None:
        spec: dict[str, Any] = {"token": token}
        if self.audiences:
            spec["audiences"] = self.audiences
        review = await self._post(
            TOKEN_REVIEWS,
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec},
            "TokenReview",
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        extra = user.get("extra") or {}
        return UserInfo(
            username=str(user.get("username", "")),
            uid=str(user.get("uid", "")),
            groups=tuple(str(g) for g in user.get("groups") or ()),
            extra={str(k): [str(v) for v in values or ()] for k, values in extra.items()},
        )

    async def authorize(self, user: UserInfo, verb: str, path: str) -> bool:
        spec: dict[str, Any] = {
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
        status = review.get("status") or {}
        return bool(status.get("allowed")) and not status.get("denied")


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


# -- the app and its listener ------------------------------------------------------------------------------------

_REFUSALS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No bearer token, or one the Kubernetes API server does not accept"},
    403: {"description": "The token's user may not get this path"},
    503: {"description": "The Kubernetes API server did not answer the access review"},
}
_EXPOSITION = {
    "text/plain": {"schema": {"type": "string"}},
    "application/openmetrics-text": {"schema": {"type": "string"}},
}


def create_app(
    authorizer: Authorizer | None = None,
    *,
    collectors: Sequence[Collector] = (),
    registry: Collector = REGISTRY,
) -> FastAPI:
    """The metrics app: `registry` plus `collectors` at `/metrics`; every request checked by `authorizer` when one
    is given (`--metrics-secure`), none otherwise."""
    app = FastAPI(
        title="kflare metrics",
        version="v1",
        description="Prometheus metrics of the kflare controller.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    exposition = Exposition(registry, *collectors)
    secure = authorizer is not None

    @app.get(
        METRICS_PATH,
        summary="Prometheus metrics",
        response_class=Response,
        responses={200: {"content": _EXPOSITION, "description": "The metrics"}, **(_REFUSALS if secure else {})},
        openapi_extra={"security": [{"kubernetesBearer": []}]} if secure else None,
    )
    async def metrics(request: Request) -> Response:
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encoder(exposition), headers={"Content-Type": content_type})

    if authorizer is not None:
        app.add_middleware(AuthMiddleware, authorizer=authorizer)
        _document_bearer(app)
    return instrument(app, "metrics")


def _document_bearer(app: FastAPI) -> None:
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {})["securitySchemes"] = {
                "kubernetesBearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A Kubernetes token whose user may get the path (RBAC nonResourceURLs)",
                }
            }
            app.openapi_schema = schema
        return app.openapi_schema

    setattr(app, "openapi", openapi)  # noqa: B010 (FastAPI's documented way to customise the schema)


class RuntimeView(Protocol):
    """What the metrics listener reads of the process' runtime; both are None until it has started."""

    @property
    def kube(self) -> KubeClient | None: ...

    @property
    def cloudflare(self) -> _BudgetSource | None: ...


class _BudgetSource(Protocol):
    def budget_stats(self) -> list[BudgetStats]: ...


@dataclass
class MetricsListener:
    """The metrics app's uvicorn configuration and, when serving HTTPS, the certificate to keep reloading."""

    config: uvicorn.Config
    tls: ReloadingTLS | None

    async def watch(self) -> None:
        """Reload the certificate on change until cancelled; returns at once when there is nothing to watch."""
        if self.tls is not None:
            await self.tls.watch()


def listener(
    settings: Settings,
    runtime: RuntimeView,
    host: str,
    port: int,
    *,
    limits: Limits | None = None,
    resources: ResourceSource | None = None,
) -> MetricsListener:
    """The metrics listener of `kflare run` on (host, port), per `--metrics-secure` and `--metrics-cert-path`;
    `resources` feeds `kflare_resources`."""

    def budgets() -> list[BudgetStats]:
        session = runtime.cloudflare
        return session.budget_stats() if session is not None else []

    authorizer = Authorizer(KubeReviewer(lambda: runtime.kube)) if settings.metrics_secure else None
    collectors: list[Collector] = [
        CloudflareCollector(budgets),
        ResourceCollector(resources or (lambda: [])),
        TaskCollector(),
    ]
    app = create_app(authorizer, collectors=collectors)
    tls: ReloadingTLS | None = None
    if settings.metrics_secure:
        tls = ReloadingTLS(settings.metrics_cert_path, hosts=_self_signed_hosts(host))
    context = tls.ssl_context if tls is not None else None
    config = listener_config(app, host, port, limits or Limits(), context=context)
    return MetricsListener(config, tls)


def _self_signed_hosts(host: str) -> list[str]:
    hosts = ["localhost", "127.0.0.1", socket.gethostname()]
    if host not in ("", "0.0.0.0", "::"):  # noqa: S104 (comparing, not binding)
        hosts.append(host)
    return list(dict.fromkeys(hosts))


__all__ = [
    "Authorizer",
    "CloudflareCollector",
    "Exposition",
    "KubeReviewer",
    "MetricsListener",
    "ResourceCollector",
    "ReviewUnavailable",
    "Reviewer",
    "TaskCollector",
    "UserInfo",
    "Verdict",
    "create_app",
    "instrument",
    "listener",
]
