"""The metrics listener: `GET /metrics` in Prometheus' text format (or OpenMetrics, when asked), behind the
Kubernetes authentication and authorization of `app.metrics.authz` unless `--metrics-secure=false`."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import uvicorn
from fastapi import FastAPI, Request, Response
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from app.cloudflare.budget import BudgetStats
from app.kube.client import KubeClient
from app.kube.metrics import REGISTRY
from app.listener import Limits
from app.listener import config as listener_config
from app.metrics.authz import AuthMiddleware, Authorizer, KubeReviewer
from app.metrics.collectors import (
    CloudflareCollector,
    Exposition,
    ResourceCollector,
    ResourceSource,
    TaskCollector,
    instrument,
)
from app.settings import Settings
from app.tls import ReloadingTLS

METRICS_PATH: Final = "/metrics"


_REFUSALS: dict[int | str, dict[str, object]] = {
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

    def openapi() -> dict[str, object]:
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


__all__ = ["METRICS_PATH", "MetricsListener", "RuntimeView", "create_app", "listener"]
