"""The process: the listeners (FastAPI apps, each served by its own uvicorn.Server in one event loop) and the
lifespan that starts and stops the controller manager."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Response

from app.api.base import GROUP, VERSION
from app.api.registry import kind_for
from app.cloudflare.budget import BudgetConfig
from app.cloudflare.http import HttpConfig
from app.cloudflare.session import CloudflareSession
from app.kube.client import KubeClient, ResourceType
from app.kube.manager import Manager
from app.metrics import instrument
from app.metrics import listener as metrics_listener
from app.settings import Settings, split_bind_address
from app.tls import ReloadingTLS
from reconcilers.context import Context
from reconcilers.registry import register_all
from webhooks import create_app as webhook_app

log = logging.getLogger(__name__)

LOOP_STALL = 10.0  # /healthz fails when the event loop has not ticked for this long


@dataclass
class Runtime:
    """Everything the lifespan starts, so the apps and tests can look at it."""

    settings: Settings
    kube: KubeClient | None = None
    cloudflare: CloudflareSession | None = None
    manager: Manager | None = None
    last_tick: float = field(default_factory=time.monotonic)
    _ticker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        s = self.settings
        self.kube = await KubeClient.connect(s.kubeconfig)
        self.cloudflare = CloudflareSession(
            HttpConfig(base_url=s.cloudflare_api_url),
            BudgetConfig(
                limit=s.cloudflare_rate_limit,
                window=s.cloudflare_rate_window.total_seconds(),
                share=s.cloudflare_budget_share,
            ),
        )
        self.cloudflare.start()
        self.manager = Manager(
            self.kube,
            s.namespace,
            leader_elect=s.leader_elect,
            lease_name=s.lease_name,
            lease_duration=s.lease_duration.total_seconds(),
            renew_deadline=s.renew_deadline.total_seconds(),
            retry_period=s.retry_period.total_seconds(),
            reconcile_timeout=s.reconcile_timeout.total_seconds(),
            drift_interval=s.drift_check_interval.total_seconds(),
            resync_period=s.resync_period.total_seconds() or 36000.0,
        )
        session = self.cloudflare
        ctx = Context(
            kube=self.kube,
            recorder=self.manager.recorder,
            secrets=self.manager.secrets,
            configmaps=self.manager.configmaps,
            index=self.manager.index,
            cloudflare=lambda token: session.client(token),
            default_deletion_policy=s.default_deletion_policy.value,
            dns_batch_size=s.dns_batch_size,
            informer_of=self.manager.informer_of,
            enqueue=self.manager.enqueue,
            own_write=self.manager.note_own_write,
        )
        register_all(self.manager, ctx)
        self.manager.start()
        self._ticker = asyncio.create_task(self._tick(), name="loop-ticker")

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
        if self.manager is not None:
            await self.manager.stop()
        if self.cloudflare is not None:
            await self.cloudflare.aclose()
        if self.kube is not None:
            await self.kube.close()

    async def _tick(self) -> None:
        while True:
            self.last_tick = time.monotonic()
            await asyncio.sleep(1.0)

    async def list_objects(self, kind: str, namespace: str | None) -> list[Mapping[str, Any]]:
        """A kflare kind's objects, for the webhook's warnings: the leader's cache, else one read of the API server
        (a standby holds no cache)."""
        manager = self.manager
        informer = manager.informer_of(kind) if manager is not None and manager.synced else None
        if informer is not None:
            return [o for o in informer.list() if namespace is None or o["metadata"].get("namespace") == namespace]
        if self.kube is None:
            return []
        info = kind_for(kind).info
        rt = ResourceType(GROUP, VERSION, info.plural, info.kind, namespaced=info.namespaced)
        return list((await self.kube.list(rt, namespace)).get("items") or [])

    @property
    def healthy(self) -> bool:
        loop_ok = time.monotonic() - self.last_tick < LOOP_STALL
        return loop_ok and self.manager is not None and self.manager.alive

    @property
    def ready(self) -> bool:
        return self.manager is not None and self.manager.ready


class Listener(uvicorn.Server):
    """A uvicorn server that leaves signals to the process, which stops every listener and the manager together."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def probes_app(runtime: Runtime) -> FastAPI:
    app = FastAPI(title="kflare probes", version="v1", docs_url=None, redoc_url=None)

    @app.get("/healthz", summary="Liveness: the event loop runs and no background task died")
    async def healthz() -> Response:
        ok = runtime.healthy
        return Response("ok" if ok else "unhealthy", status_code=200 if ok else 500, media_type="text/plain")

    @app.get("/readyz", summary="Readiness: caches synced (leader) or serving (standby)")
    async def readyz() -> Response:
        ok = runtime.ready
        return Response("ok" if ok else "not ready", status_code=200 if ok else 503, media_type="text/plain")

    return app


async def serve(settings: Settings) -> int:
    """Run the manager and the listeners until SIGTERM or SIGINT."""
    runtime = Runtime(settings)
    servers: list[uvicorn.Server] = []
    probes = split_bind_address(settings.health_probe_bind_address)
    if probes is not None:
        app = instrument(probes_app(runtime), "probes")
        config = uvicorn.Config(app, host=probes[0], port=probes[1], log_config=None, lifespan="off")
        servers.append(Listener(config))
    metrics = split_bind_address(settings.metrics_bind_address)
    endpoint = metrics_listener(settings, runtime, *metrics) if metrics is not None else None
    if endpoint is not None:
        servers.append(Listener(endpoint.config))
    webhook_tls: ReloadingTLS | None = None
    if settings.webhook_port > 0:  # TLS from --webhook-cert-dir (tls.crt, tls.key), reloaded on change
        webhook_tls = ReloadingTLS(settings.webhook_cert_dir, hosts=["localhost", "127.0.0.1"])
        app = instrument(webhook_app(objects=runtime.list_objects), "webhook")
        config = uvicorn.Config(app, host="0.0.0.0", port=settings.webhook_port, log_config=None, lifespan="off")  # noqa: S104
        webhook_tls.apply(config)
        servers.append(Listener(config))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await runtime.start()
    tasks = []
    for server in servers:
        tasks.append(asyncio.create_task(server.serve(), name="listener"))
    background = [asyncio.create_task(endpoint.watch(), name="metrics-cert-reload")] if endpoint else []
    if webhook_tls is not None:
        background.append(asyncio.create_task(webhook_tls.watch(), name="webhook-cert-reload"))
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        for server in servers:
            server.should_exit = True
        for task in background:
            task.cancel()
        await asyncio.gather(*tasks, *background, return_exceptions=True)
        await runtime.stop()
    return 0


@contextlib.asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Runtime]:
    """The runtime without listeners, for tests that drive the manager in-process."""
    runtime = Runtime(settings)
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.stop()
