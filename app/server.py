"""The process: the listeners (FastAPI apps, each served by its own uvicorn.Server, and the xDS listener's gRPC
server, all in one event loop) and the lifespan that starts and stops the controller manager."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

import uvicorn
from fastapi import FastAPI, Response
from pydantic import JsonValue

from app.api.base import GROUP, VERSION
from app.api.registry import kind_for
from app.api.tenancy import NamespacePolicy
from app.certificates import kept_certificate, kept_gateway_material
from app.cloudflare.budget import BudgetConfig
from app.cloudflare.http import HttpConfig, user_agent
from app.cloudflare.session import CloudflareSession
from app.kube.client import NAMESPACES, KubeClient, KubeError, ResourceType
from app.kube.informer import Informer
from app.kube.manager import Manager, default_identity
from app.listener import Limits, StopsWhenTold, TLSAccept
from app.listener import config as listener_config
from app.memory import pin_mmap_threshold
from app.metrics.collectors import instrument
from app.metrics.listener import listener as metrics_listener
from app.settings import Settings, split_bind_address
from app.tls import ReloadingTLS
from reconcilers.context import Context
from reconcilers.gateway.snapshot import SnapshotStore
from reconcilers.registry import register_all
from webhooks import create_app as webhook_app
from webhooks.access import Cluster

log = logging.getLogger(__name__)

LOOP_STALL = 10.0  # /healthz fails when the event loop has not ticked for this long


GC_THRESHOLD: Final = (10_000, 20, 50)
"""The cyclic collector's thresholds: a reconcile allocates many short-lived containers, which the default (700)
collects ten times as often for nothing (they are freed by their reference counts); a full collection scans every
cached object, which at 1,000 routes put 150 ms pauses in a translation of 60."""


def settle_heap() -> None:
    """Once the caches are listed: move what the process holds now (the caches, the modules) out of the cyclic
    collector's sight, so that its full collections scan only what came after. Those objects are still freed by
    their reference counts; only a cycle among them would stay, and the caches hold none."""
    gc.collect()
    gc.freeze()


@dataclass
class Runtime:
    """Everything the lifespan starts, so the apps and tests can look at it."""

    settings: Settings
    kube: KubeClient | None = None
    cloudflare: CloudflareSession | None = None
    manager: Manager | None = None
    xds: SnapshotStore = field(default_factory=lambda: SnapshotStore(serving=lambda: False))
    """The data plane's configuration (the Gateway class), answered by the xDS listener."""
    last_tick: float = field(default_factory=time.monotonic)
    username: str | None = None
    """Who the API server knows this process as (a SelfSubjectReview at start): the webhook lets only this user
    write what only kflare writes."""
    _ticker: asyncio.Task[None] | None = None

    def kflare_users(self) -> frozenset[str]:
        return frozenset() if self.username is None else frozenset({self.username})

    async def start(self) -> None:
        s = self.settings
        self.kube = await KubeClient.connect(s.kubeconfig)
        self.username = await self.kube.whoami()
        # The replica's name in every call it makes, so that Cloudflare's side tells the replicas of one token apart.
        identity = default_identity()
        self.cloudflare = CloudflareSession(
            HttpConfig(base_url=s.cloudflare_api_url, user_agent=user_agent(identity)),
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
            identity=identity,
            leader_elect=s.leader_elect,
            lease_name=s.lease_name,
            lease_duration=s.lease_duration.total_seconds(),
            renew_deadline=s.renew_deadline.total_seconds(),
            retry_period=s.retry_period.total_seconds(),
            reconcile_timeout=s.reconcile_timeout.total_seconds(),
            drift_interval=s.drift_check_interval.total_seconds(),
            resync_period=s.resync_period.total_seconds() or 36000.0,
            readable_namespaces=s.granted_namespace_set,
        )
        session = self.cloudflare
        ctx = Context(
            kube=self.kube,
            recorder=self.manager.recorder,
            secrets=self.manager.secrets,
            configmaps=self.manager.configmaps,
            index=self.manager.index,
            cloudflare=lambda token: session.client(token),
            default_deletion_policy=s.default_deletion_policy,
            default_account_namespaces=NamespacePolicy.model_validate({"from": s.default_account_namespaces}),
            dns_batch_size=s.dns_batch_size,
            informer_of=self.manager.informer_of,
            enqueue=self.manager.enqueue,
            queued=self.manager.queued,
            own_write=self.manager.note_own_write,
        )
        register_all(self.manager, ctx)
        if s.gateway_enabled:
            # Imported here: the class (and gRPC with Envoy's messages, under the xDS listener) costs a process that
            # runs no Gateway class about half a second of start and some MiB it would never use.
            from reconcilers.gateway.controller import GatewayOptions, register_gateway
            from reconcilers.gateway.kinds import Classes
            from reconcilers.gateway.planes import PlaneSettings

            host, port = split_bind_address(s.gateway_data_plane_address) or ("127.0.0.1", 8080)
            options = GatewayOptions(
                host,
                port,
                tenancy_label=s.gateway_namespace_label,
                origin=s.gateway_origin_url,
                allow_external_name_services=s.gateway_allow_external_name_services,
                classes=Classes(
                    s.gateway_controller_name_set, s.namespace if s.gateway_tunnel_gateway_package else None
                ),
                tls_port=s.gateway_data_plane_tls_port or None,
                https_port=s.gateway_data_plane_https_port or None,
                tls_dir=s.gateway_origin_tls_dir,
                server_name=s.gateway_origin_server_name,
                planes=PlaneSettings(
                    namespace=s.namespace,
                    xds_secret=s.gateway_plane_xds_secret,
                    origin_secret=s.gateway_plane_origin_secret,
                    envoy_image=s.gateway_plane_envoy_image,
                    cloudflared_image=s.gateway_plane_cloudflared_image,
                    port=port,
                    tls_port=s.gateway_data_plane_tls_port or None,
                    https_port=s.gateway_data_plane_https_port or None,
                    cap=s.gateway_planes_per_namespace,
                    default_parameters=s.gateway_default_parameters_key,
                    resources=s.gateway_plane_resources,
                    deletion_policy=str(s.default_deletion_policy),
                    network_policy=s.gateway_plane_network_policy,
                    xds_port=(split_bind_address(s.gateway_xds_bind_address) or ("", 18000))[1],
                    namespaces=s.granted_namespace_set,
                ),
            )
            register_gateway(self.manager, ctx, self.xds, options)
        self.manager.start()
        self._ticker = asyncio.create_task(self._tick(), name="loop-ticker")

    async def stop(self) -> None:
        await self.stop_reconciling()
        await self.close()

    async def stop_reconciling(self) -> None:
        """Stop the manager (reconciles, informers, the Lease); the clients stay open for the listeners."""
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
        if self.manager is not None:
            await self.manager.stop()

    async def close(self) -> None:
        if self.cloudflare is not None:
            await self.cloudflare.aclose()
        if self.kube is not None:
            await self.kube.close()

    async def _tick(self) -> None:
        synced = False
        while True:
            self.last_tick = time.monotonic()
            now_synced = self.manager is not None and self.manager.synced
            if now_synced and not synced:
                settle_heap()
            synced = now_synced
            await asyncio.sleep(1.0)

    def _cache(self, kind: str) -> Informer | None:
        manager = self.manager
        return manager.informer_of(kind) if manager is not None and manager.synced else None

    async def list_objects(self, kind: str, namespace: str | None) -> list[Mapping[str, JsonValue]]:
        """A kflare kind's objects, for the webhook: the leader's cache, else one read of the API server (a standby
        holds no cache)."""
        informer = self._cache(kind)
        if informer is not None:
            return list(informer.list(namespace))
        if self.kube is None:
            return []
        return list((await self.kube.list(_resource_type(kind), namespace)).get("items") or [])

    async def get_object(self, kind: str, name: str, namespace: str | None) -> Mapping[str, JsonValue] | None:
        """A kflare object, for the webhook, read as `list_objects` reads (None: there is none)."""
        informer = self._cache(kind)
        if informer is not None:
            return informer.get(name, namespace)
        if self.kube is None:
            return None
        try:
            return await self.kube.get(_resource_type(kind), name, namespace)
        except KubeError as exc:
            if exc.not_found:
                return None
            raise

    async def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """A namespace's labels, for the webhook, read as `list_objects` reads (None: no such namespace)."""
        raw = await self.get_object("Namespace", namespace, None)
        if raw is None:
            return None
        metadata = raw.get("metadata")
        labels = metadata.get("labels") if isinstance(metadata, dict) else None
        if not isinstance(labels, dict):
            return {}
        return {key: value for key, value in labels.items() if isinstance(value, str)}

    @property
    def healthy(self) -> bool:
        loop_ok = time.monotonic() - self.last_tick < LOOP_STALL
        return loop_ok and self.manager is not None and self.manager.alive

    @property
    def ready(self) -> bool:
        return self.manager is not None and self.manager.ready

    def resources(self) -> list[tuple[str, Sequence[Mapping[str, JsonValue]]]]:
        """Each kind with the objects its informer holds (none on a standby), for `kflare_resources`."""
        if self.manager is None:
            return []
        return [(kind, controller.informer.list()) for kind, controller in self.manager.controllers.items()]


class Listener(StopsWhenTold, uvicorn.Server):
    """A uvicorn server that leaves signals to the process, which stops every listener and the manager together.

    uvicorn wakes ten times a second to see whether it should stop (and refreshes the Date header on every tenth):
    with a few listeners that was most of an idle process's CPU. This one refreshes once a second, and stops as
    soon as `should_exit` is set."""

    async def main_loop(self) -> None:
        wake = self.exit_event()
        while not await self.on_tick(0):  # tick 0: the Date header is refreshed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await wake.wait()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def _log_started_message(self, listeners: Sequence[socket.SocketType]) -> None:
        # uvicorn would say http:// for a listener whose TLS is done by its protocol (app.listener.TLSAccept).
        http = self.config.http
        tls = isinstance(http, type) and issubclass(http, TLSAccept)
        for sock in listeners:
            host, port = sock.getsockname()[:2]
            log.info("listening on %s://%s:%d", "https" if tls or self.config.ssl else "http", host, port)


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


class Serving(Protocol):
    """What the process asks of a listener's server: a uvicorn `Listener`, or the xDS listener's gRPC server."""

    started: bool
    should_exit: bool

    async def serve(self) -> None: ...


@dataclass
class Served:
    """One listener of the process: its server, where it listens, and its certificate when it serves TLS."""

    name: str
    server: Serving
    host: str
    port: int
    tls: ReloadingTLS | None = None
    follows: tuple[Callable[[], Coroutine[object, None, None]], ...] = ()
    """Watches of files the listener reads beside its certificate (the xDS token), run next to it."""

    @property
    def url(self) -> str:
        scheme = "https" if self.tls is not None else "http"
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host  # noqa: S104 (comparing, not binding)
        return f"{scheme}://{host}:{self.port}"


def limits(settings: Settings) -> Limits:
    return Limits(
        header_timeout=settings.http_header_timeout.total_seconds(),
        max_connections=settings.http_max_connections,
    )


def _resource_type(kind: str) -> ResourceType:
    if kind == "Namespace":
        return NAMESPACES
    info = kind_for(kind).info
    return ResourceType(GROUP, VERSION, info.plural, info.kind, namespaced=info.namespaced)


@dataclass(frozen=True)
class ClusterReads:
    """What the webhook's tenancy checks read (`webhooks.access.Cluster`), through the runtime."""

    runtime: Runtime
    default_account_namespaces: NamespacePolicy

    async def get(self, kind: str, name: str, namespace: str | None) -> Mapping[str, JsonValue] | None:
        return await self.runtime.get_object(kind, name, namespace)

    async def list(self, kind: str, namespace: str | None) -> list[Mapping[str, JsonValue]]:
        return await self.runtime.list_objects(kind, namespace)

    async def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return await self.runtime.namespace_labels(namespace)


def webhook_listener(
    settings: Settings,
    host: str,
    port: int,
    *,
    cluster: Cluster | None = None,
    kflare: Callable[[], frozenset[str]] = frozenset,
) -> Served:
    """The webhook listener: TLS from --webhook-cert-dir (tls.crt, tls.key), reloaded on change; a self-signed
    certificate for localhost without one. `cluster` reads the cluster's objects for the tenancy checks and warnings;
    `kflare` tells the controller's usernames."""
    tls = ReloadingTLS(settings.webhook_cert_dir, hosts=["localhost", "127.0.0.1"])
    body_timeout = settings.webhook_body_timeout.total_seconds()
    app = instrument(webhook_app(cluster=cluster, body_timeout=body_timeout, kflare=kflare), "webhook")
    config = listener_config(app, host, port, limits(settings), context=tls.ssl_context)
    return Served("webhook", Listener(config), host, port, tls)


def listeners(settings: Settings, runtime: Runtime) -> list[Served]:
    """Every listener `settings` turns on, in the order they start."""
    out: list[Served] = []
    probes = split_bind_address(settings.health_probe_bind_address)
    if probes is not None:
        app = instrument(probes_app(runtime), "probes")
        config = listener_config(app, *probes, limits(settings))
        out.append(Served("probes", Listener(config), *probes))
    metrics = split_bind_address(settings.metrics_bind_address)
    if metrics is not None:
        endpoint = metrics_listener(settings, runtime, *metrics, limits=limits(settings), resources=runtime.resources)
        out.append(Served("metrics", Listener(endpoint.config), *metrics, endpoint.tls))
    webhook = settings.webhook_address
    if webhook is not None:
        policy = NamespacePolicy.model_validate({"from": settings.default_account_namespaces})
        cluster = ClusterReads(runtime, policy)
        out.append(webhook_listener(settings, *webhook, cluster=cluster, kflare=runtime.kflare_users))
    xds = split_bind_address(settings.gateway_xds_bind_address) if settings.gateway_enabled else None
    if xds is not None:
        out.append(xds_listener(settings, runtime, *xds))
    return out


def xds_listener(settings: Settings, runtime: Runtime, host: str, port: int) -> Served:
    """The data plane's xDS (the Gateway class): Envoy presents the token of --gateway-xds-token-file, and with
    --gateway-xds-client-ca-file a client certificate signed by that CA too."""
    if settings.gateway_xds_token_file is None:
        raise ValueError("--gateway-xds-token-file is required with --gateway-enabled")
    from app.xds import TokenFile, XdsServer  # see Runtime.start: only a process running the Gateway class

    token = TokenFile(settings.gateway_xds_token_file)
    tls = ReloadingTLS(settings.gateway_xds_cert_dir) if settings.gateway_xds_cert_dir is not None else None
    if settings.gateway_xds_client_ca_file is not None:
        if tls is None:
            raise ValueError("--gateway-xds-client-ca-file needs --gateway-xds-cert-dir (client certificates need TLS)")
        tls.require_client_certificates(settings.gateway_xds_client_ca_file)
    server = XdsServer(runtime.xds, lambda: token.value, host, port, tls=tls, limits=limits(settings))
    return Served("xds", server, host, port, tls, follows=(token.watch,))


class Process:
    """What `kflare run` runs: the runtime (manager, clients) and the listeners, in one event loop."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.runtime = Runtime(settings)
        self.listeners = listeners(settings, self.runtime)
        self._tasks: list[asyncio.Task[None]] = []
        self._background: list[asyncio.Task[None]] = []

    def listener(self, name: str) -> Served | None:
        return next((served for served in self.listeners if served.name == name), None)

    async def start(self, *, timeout: float = 30.0) -> None:
        """Start the runtime and the listeners, and return once every listener accepts connections."""
        pin_mmap_threshold()
        await self.runtime.start()
        for served in self.listeners:
            self._tasks.append(asyncio.create_task(served.server.serve(), name=f"listener-{served.name}"))
            if served.tls is not None:
                self._background.append(asyncio.create_task(served.tls.watch(), name=f"{served.name}-cert-reload"))
            for follow in served.follows:
                self._background.append(asyncio.create_task(follow(), name=f"{served.name}-{follow.__qualname__}"))
        async with asyncio.timeout(timeout):
            for served, task in zip(self.listeners, self._tasks, strict=True):
                while not served.server.started:
                    if task.done():  # it could not bind, say: uvicorn has logged why
                        raise RuntimeError(f"the {served.name} listener on {served.host}:{served.port} did not start")
                    await asyncio.sleep(0.02)

    async def stop(self) -> None:
        # Reconciles first: their writes pass this process's own webhook (in `kflare dev`, or a single replica), and
        # a write after the listener closed would fail as "connection refused".
        await self.runtime.stop_reconciling()
        delay = self.settings.shutdown_delay.total_seconds()
        if delay > 0:
            # The pod is leaving its Services' endpoints (and /readyz now fails); until every kube-proxy has
            # followed, the API server may still send an admission review here, which must be answered, not refused.
            log.info("answering for %.0f s more while the pod leaves its Services' endpoints", delay)
            await asyncio.sleep(delay)
        for served in self.listeners:
            served.server.should_exit = True
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._background, return_exceptions=True)
        await self.runtime.close()


async def serve(settings: Settings) -> int:
    """Run the manager and the listeners until SIGTERM or SIGINT."""
    gc.set_threshold(*GC_THRESHOLD)
    kept = await kept_certificate(settings)
    material = await kept_gateway_material(settings)
    process = Process(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    keeping = [
        asyncio.create_task(k.keep(), name=name)
        for k, name in ((kept, "serving-certificate"), (material, "gateway-material"))
        if k is not None
    ]
    try:
        await process.start()
        await stop.wait()
    finally:
        log.info("shutting down")
        for task in keeping:
            task.cancel()
        await asyncio.gather(*keeping, return_exceptions=True)
        await process.stop()
        for k in (kept, material):
            if k is not None:
                await k.kube.close()
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
