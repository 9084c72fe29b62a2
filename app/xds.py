"""The fourth listener: Envoy's configuration pushed over delta ADS (gRPC), authenticated.

Envoy opens one bidirectional stream (`AggregatedDiscoveryService/DeltaAggregatedResources`, `api_type:
DELTA_GRPC`) and subscribes to the listeners and clusters (wildcard), then to the routes and endpoints they name.
Delta xDS rather than state of the world: a response carries only the resources that changed and names those
removed, and an Envoy that reconnects (a restart of the controller, a failover) says which versions it holds and is
sent only what differs. The route configuration's virtual hosts go as resources of their own (VHDS, which Envoy
subscribes to over the same stream once the route configuration names it), so a change to one route sends that
hostname's virtual host, not the thousand others.

Push, not poll: the snapshot store calls back on every new snapshot, each open stream wakes and sends the
difference between what it sent and the new snapshot, type by type in `WIRE_TYPES` order (clusters before the
endpoints and routes that name them). Versions are content hashes of the encoded resources, so two leaders that
compute the same resources hold the same versions.

Authentication: mutual TLS when the listener has certificates (`ReloadingTLS`'s material, reloaded for new
handshakes), and inside it a credential, as `authorization: Bearer <token>` in the stream's initial metadata, checked
when the stream opens and again whenever it wakes (a rotated token file ends the streams that presented the old
token). The credential decides which data plane the stream is, and so what it is served: the installation's token
is the shared plane's, and each Gateway's own plane presents its own (`envoy.plane_token`: its name and an HMAC under
the installation's token, in its namespace's Secret), never the node's self-declared cluster, which must agree with
it (PERMISSION_DENIED otherwise). A wrong credential ends the stream with UNAUTHENTICATED; a standby, or a leader
without a snapshot yet, with UNAVAILABLE: Envoy keeps the configuration it has and opens a new stream after a
back-off. A refusal (NACK) is held for the plane and the Envoy that sent it, until that Envoy takes a later version
or its stream ends.

Encoding the snapshot's JSON into protobuf is most of the cost: `app.xds_encoding` encodes each resource (each
virtual host) once per content, shared by every stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeAlias

import grpc
from envoy.service.discovery.v3 import discovery_pb2
from prometheus_client import Counter, Gauge

from app.kube.metrics import REGISTRY
from app.listener import Limits, StopsWhenTold
from app.tls import ReloadingTLS
from app.xds_encoding import WIRE_TYPES, Encoder, TypeView, View
from reconcilers.gateway import envoy
from reconcilers.gateway.planes import CLUSTER_PREFIX
from reconcilers.gateway.snapshot import SnapshotStore

log = logging.getLogger(__name__)

DELTA_METHOD: Final = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
MAX_REQUEST: Final = 1 << 20
RECHECK: Final = 1.0
"""Seconds an idle stream waits before it looks again at the token and at whether this process may serve (neither
calls back when it changes)."""

_KEY_OF: Final = {url: key for key, url in WIRE_TYPES.items()}
_WILDCARD: Final = frozenset({"listeners", "clusters", "virtual_hosts"})
"""Types whose first request with no names is a wildcard subscription (Envoy subscribes to VHDS so)."""

STREAMS = Gauge("kflare_xds_streams", "Open xDS streams from data planes", registry=REGISTRY)
REFUSED = Counter(
    "kflare_xds_streams_refused_total", "xDS streams refused, by gRPC status", ["code"], registry=REGISTRY
)
SENT_RESOURCES = Counter(
    "kflare_xds_resources_sent_total", "Resources pushed to data planes, by type", ["type"], registry=REGISTRY
)
SENT_BYTES = Counter(
    "kflare_xds_sent_bytes_total", "Bytes of xDS responses pushed to data planes, by type", ["type"], registry=REGISTRY
)


class TokenFile:
    """The token Envoy must present, as its file holds it now (`value`); `watch()` follows the file."""

    def __init__(self, path: Path, *, interval: float = 3.0) -> None:
        self.path, self.interval = path, interval
        self.value = self._read()

    def _read(self) -> str:
        token = self.path.read_text().strip()
        if not token:
            raise ValueError(f"{self.path} holds no token")
        return token

    def reload(self) -> bool:
        """Read the file again; True when it holds a new token. One that cannot be read, or an empty file (a
        Secret half updated), keeps the current token."""
        try:
            token = self._read()
        except (OSError, ValueError) as exc:
            log.warning("cannot read the xDS token, keeping the current one: %s", exc)
            return False
        if token == self.value:
            return False
        self.value = token
        log.info("reloaded the xDS token from %s", self.path)
        return True

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.reload()


def plane_of(cluster: str) -> str:
    """The data plane an Envoy of node cluster `cluster` belongs to: a Gateway's own (its Deployment says
    `--service-cluster kflare-gateway/<namespace>/<name>`), or "" the shared one."""
    return cluster if cluster.startswith(CLUSTER_PREFIX) else ""


# ---- streams -------------------------------------------------------------------------------------------------


@dataclass
class Subscription:
    """What one stream asked for of one type, and what it holds (as this stream sent it, or as Envoy said when it
    opened the stream)."""

    wildcard: bool = False
    names: set[str] = field(default_factory=set)
    held: dict[str, str] = field(default_factory=dict)
    answered: bool = False


class _Wake:
    """Queued when the snapshot changed."""


_WAKE: Final = _Wake()
_END: Final = None
_Queued: TypeAlias = discovery_pb2.DeltaDiscoveryRequest | _Wake | None
"""What a stream's queue holds: a request of its Envoy, a wake-up, or the end of the requests."""


class XdsService:
    """The delta ADS stream handler, and the encoded snapshot its streams share."""

    def __init__(self, store: SnapshotStore, token: Callable[[], str]) -> None:
        self.store, self.token = store, token
        self.encoders: dict[str, Encoder] = {"": Encoder()}
        """One per data plane ("" the shared one): each remembers what it encoded of its own plane."""
        self._views: dict[str, View] = {}
        self._lock = asyncio.Lock()
        self._streams: set[tuple[asyncio.AbstractEventLoop, asyncio.Queue[_Queued]]] = set()
        self._handlers: set[asyncio.Task[object]] = set()
        self._unwatch = store.watch(self._changed)
        self._nonce = 0
        self._reported: set[tuple[str, str, str]] = set()

    def close(self) -> None:
        self._unwatch()

    async def drained(self, timeout: float) -> None:
        """Wait until every stream's handler has run its last step: the listener ends after its streams, not
        while they still tidy up."""
        if self._handlers:
            await asyncio.wait(set(self._handlers), timeout=timeout)

    def handler(self) -> grpc.GenericRpcHandler:
        method = grpc.stream_stream_rpc_method_handler(
            self.delta,
            request_deserializer=discovery_pb2.DeltaDiscoveryRequest.FromString,
            response_serializer=discovery_pb2.DeltaDiscoveryResponse.SerializeToString,
        )
        service, name = DELTA_METHOD.rsplit("/", 1)
        return grpc.method_handlers_generic_handler(service.lstrip("/"), {name: method})

    def _changed(self) -> None:
        # Called by the store's publisher, perhaps on another thread: each stream's loop is handed the wake-up.
        for loop, queue in list(self._streams):
            with contextlib.suppress(RuntimeError):  # a loop that closed: its stream is gone
                loop.call_soon_threadsafe(queue.put_nowait, _WAKE)

    @property
    def encoder(self) -> Encoder:
        """The shared data plane's encoder."""
        return self.encoders[""]

    async def view(self, plane: str = "") -> View | None:
        """The current snapshot of `plane` ("" the shared data plane, else a Gateway's own plane's cluster name),
        encoded (once per snapshot, whichever stream asks first); None when there is nothing this process may serve
        it."""
        if self.store.resources is None or not self.store.serving():
            return None
        async with self._lock:
            resources, generation = self.store.snapshot(plane), self.store.generation
            if resources is None:
                self._views.pop(plane, None)
                if plane:
                    self.encoders.pop(plane, None)
                return None
            view = self._views.get(plane)
            if view is None or view.generation != generation:
                started = time.perf_counter()
                encoder = self.encoders.setdefault(plane, Encoder())
                # Off the loop: the first snapshot of a large configuration takes a while to encode.
                view = self._views[plane] = await asyncio.to_thread(encoder.encode, generation, resources)
                log.debug(
                    "encoded the xDS snapshot",
                    extra={
                        "plane": plane,
                        "generation": generation,
                        "seconds": round(time.perf_counter() - started, 4),
                    },
                )
                for key, name, error in encoder.failures:
                    if (key, name, error) not in self._reported:
                        self._reported.add((key, name, error))
                        extra = {"type": key, "resource": name, "error": error}
                        log.error("cannot encode a resource for Envoy", extra=extra)
                        self.store.refused(key, f"{name} does not encode: {error}", "kflare", "", plane)
            return view

    def _identity(self, presented: str) -> str | None:
        """The data plane a presented credential is for ("" the shared one); None when it is no credential here."""
        master = self.token()
        if not master:
            return None
        if hmac.compare_digest(presented.encode(), f"Bearer {master}".encode()):
            return ""
        return envoy.plane_of_token(master, presented.removeprefix("Bearer "))

    async def _refuse(self, context: grpc.aio.ServicerContext, code: grpc.StatusCode, details: str) -> None:
        REFUSED.labels(code.name).inc()
        await context.abort(code, details)

    async def delta(
        self, requests: AsyncIterator[discovery_pb2.DeltaDiscoveryRequest], context: grpc.aio.ServicerContext
    ) -> None:
        presented = next(
            (str(value) for key, value in (context.invocation_metadata() or ()) if key == envoy.TOKEN_HEADER), ""
        )
        identity = self._identity(presented)
        if identity is None:
            await self._refuse(context, grpc.StatusCode.UNAUTHENTICATED, "unauthenticated")
        if self.store.resources is None or not self.store.serving():
            await self._refuse(context, grpc.StatusCode.UNAVAILABLE, "no configuration to serve here")
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Queued] = asyncio.Queue()

        async def read() -> None:
            try:
                async for request in requests:
                    queue.put_nowait(request)
            finally:
                queue.put_nowait(_END)

        entry = (loop, queue)
        self._streams.add(entry)
        handler = asyncio.current_task()
        if handler is not None:
            self._handlers.add(handler)
            handler.add_done_callback(self._handlers.discard)
        reader = asyncio.create_task(read(), name="xds-read")
        stream = _Stream(self, context)
        stream.plane = identity or ""
        STREAMS.inc()
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), RECHECK)
                except TimeoutError:
                    item = _WAKE
                if item is _END:
                    return
                if self._identity(presented) != identity:
                    await self._refuse(context, grpc.StatusCode.UNAUTHENTICATED, "unauthenticated")
                request = item if isinstance(item, discovery_pb2.DeltaDiscoveryRequest) else None
                if request is not None and request.HasField("node") and plane_of(request.node.cluster) != stream.plane:
                    # The node says which plane it is; the credential decides. Neither name is echoed.
                    details = "the node's cluster is not the data plane this credential is for"
                    await self._refuse(context, grpc.StatusCode.PERMISSION_DENIED, details)
                view = await self.view(stream.plane)
                if view is None:
                    where = f"the data plane {stream.plane}" if stream.plane else "here"
                    await self._refuse(context, grpc.StatusCode.UNAVAILABLE, f"no configuration to serve {where}")
                    return
                if isinstance(item, discovery_pb2.DeltaDiscoveryRequest):
                    await stream.request(item, view)
                else:
                    await stream.push(view)
        finally:
            STREAMS.dec()
            self._streams.discard(entry)
            if stream.node:
                self.store.forget(stream.plane, stream.node)  # what it refused goes with it
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    def nonce(self) -> str:
        self._nonce += 1
        return f"{self._nonce:x}"


class _Stream:
    """One Envoy's stream: its subscriptions, and the responses it has not acknowledged yet."""

    def __init__(self, service: XdsService, context: grpc.aio.ServicerContext) -> None:
        self.service, self.context = service, context
        self.node = ""
        self.plane = ""
        """The data plane the stream's credential is for ("" the shared one)."""
        self.subscriptions: dict[str, Subscription] = {}
        self.pending: dict[str, tuple[str, str]] = {}
        """nonce -> (type key, version) of each response sent and not yet answered."""

    async def request(self, request: discovery_pb2.DeltaDiscoveryRequest, view: View) -> None:
        if request.HasField("node") and request.node.id:
            self.node = request.node.id
        key = _KEY_OF.get(request.type_url)
        if key is None:
            log.debug("a data plane asked for a type not served", extra={"type": request.type_url})
            return
        sub = self.subscriptions.get(key)
        new: set[str] = set()
        if sub is None:
            sub = self.subscriptions[key] = Subscription(held=dict(request.initial_resource_versions))
            # An empty first request is a wildcard subscription (the legacy form Envoy still sends).
            sub.wildcard = key in _WILDCARD and not request.resource_names_subscribe
        for name in request.resource_names_subscribe:
            if name == "*":
                sub.wildcard = True
            elif name not in sub.names:
                sub.names.add(name)
                new.add(name)
        for name in request.resource_names_unsubscribe:
            if name == "*":
                sub.wildcard = False
            else:
                sub.names.discard(name)
                sub.held.pop(name, None)
        if request.response_nonce:
            answered = self.pending.pop(request.response_nonce, None)
            if answered is not None:
                self._answered(request, *answered)
        await self._send(key, sub, view.types[key], new)

    def _answered(self, request: discovery_pb2.DeltaDiscoveryRequest, key: str, version: str) -> None:
        store = self.service.store
        if request.HasField("error_detail") and (request.error_detail.code or request.error_detail.message):
            message = request.error_detail.message or f"code {request.error_detail.code}"
            store.refused(key, message, self.node, version, self.plane)
            extra = {"node": self.node, "plane": self.plane, "type": key, "error": message}
            log.warning("data plane refused its configuration", extra=extra)
        else:
            store.accepted(key, self.node, version, self.plane)

    async def push(self, view: View) -> None:
        for key in WIRE_TYPES:
            sub = self.subscriptions.get(key)
            if sub is not None:
                await self._send(key, sub, view.types[key], set())

    async def _send(self, key: str, sub: Subscription, typed: TypeView, new: set[str]) -> None:
        if sub.wildcard:
            wanted: set[str] = set(typed.resources)
        elif key == "virtual_hosts":
            # VHDS subscribes by route configuration name: every virtual host of that configuration is wanted.
            prefixes = tuple(f"{n}/" for n in sub.names)
            wanted = {n for n in typed.resources if n in sub.names or n.startswith(prefixes)}
            new = {n for n in new if "/" in n}
        else:
            wanted = sub.names & typed.resources.keys()
        changed = [typed.resources[n] for n in sorted(wanted) if sub.held.get(n) != typed.resources[n].version]
        removed = sorted(n for n in sub.held if n not in wanted and n not in typed.failed)
        # A name asked for that the snapshot does not hold is said removed: Envoy then stops waiting for it.
        removed += sorted(n for n in new if n not in typed.resources and n not in typed.failed and n not in sub.held)
        if not changed and not removed and sub.answered:
            return
        response = discovery_pb2.DeltaDiscoveryResponse(
            type_url=WIRE_TYPES[key],
            system_version_info=typed.version,
            resources=[e.message for e in changed],
            removed_resources=removed,
            nonce=self.service.nonce(),
        )
        for encoded in changed:
            sub.held[encoded.name] = encoded.version
        for name in removed:
            sub.held.pop(name, None)
        sub.answered = True
        self.pending[response.nonce] = (key, typed.version)
        size = response.ByteSize()
        SENT_RESOURCES.labels(key).inc(len(changed))
        SENT_BYTES.labels(key).inc(size)
        log.debug(
            "pushed xDS resources",
            extra={"node": self.node, "type": key, "changed": len(changed), "removed": len(removed), "bytes": size},
        )
        await self.context.write(response)


# ---- the listener ---------------------------------------------------------------------------------------------


def credentials(tls: ReloadingTLS) -> grpc.ServerCredentials:
    """Server credentials from `tls`'s pair (and its client CA, when it requires client certificates), asked again at
    each new handshake: a pair or CA `tls` reloads is used from the next connection on."""

    def configuration() -> grpc.ServerCertificateConfiguration:
        ca = tls.client_ca_pem if tls.client_ca is not None else None
        return grpc.ssl_server_certificate_configuration([(tls.key_pem, tls.cert_pem)], root_certificates=ca)

    seen = [tls.reloads]

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        # Runs in gRPC's own threads, at each handshake: reading what `tls` holds is all it does.
        if tls.reloads == seen[0]:
            return None
        seen[0] = tls.reloads
        return configuration()

    return grpc.dynamic_ssl_server_credentials(
        configuration(), fetch, require_client_authentication=tls.client_ca is not None
    )


def options(limits: Limits) -> list[tuple[str, int]]:
    """The listener's bounds (see app.listener): no client holds a handshake open, fills the process with a request,
    or keeps a dead connection."""
    return [
        ("grpc.so_reuseport", 0),  # a second process on the port fails to bind instead of sharing it
        ("grpc.max_receive_message_length", MAX_REQUEST),
        ("grpc.max_concurrent_streams", 16),
        ("grpc.server_handshake_timeout_ms", int(limits.header_timeout * 1000)),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
        ("grpc.http2.max_ping_strikes", 0),
        ("grpc.max_connection_idle_ms", 60_000),
    ]


class XdsServer(StopsWhenTold):
    """The gRPC server of the xDS listener, with what `app.server.Process` asks of a listener: `serve()` (until
    `should_exit`), and `started`."""

    def __init__(
        self,
        store: SnapshotStore,
        token: Callable[[], str],
        host: str,
        port: int,
        *,
        tls: ReloadingTLS | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.service = XdsService(store, token)
        self.host, self.port, self.tls = host, port, tls
        self.limits = limits or Limits()
        self.started = False

    async def serve(self) -> None:
        stop = self.exit_event()
        server = grpc.aio.server(
            handlers=[self.service.handler()],
            options=options(self.limits),
            maximum_concurrent_rpcs=self.limits.max_connections,
        )
        address = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        if self.tls is not None:
            bound = server.add_secure_port(address, credentials(self.tls))
        else:
            bound = server.add_insecure_port(address)
        if not bound:
            raise RuntimeError(f"the xDS listener cannot bind {address}")
        await server.start()
        self.started = True
        log.info("listening on %s://%s (xDS, gRPC)", "grpcs" if self.tls is not None else "grpc", address)
        try:
            await stop.wait()
        finally:
            self.service.close()
            # Open streams end with UNAVAILABLE: the data planes keep their configuration and reconnect.
            await server.stop(grace=1.0)
            await self.service.drained(timeout=5.0)
            self.started = False
