"""The connection layer under the shared `httpx.AsyncClient`: a bound on the TLS handshake and a record of when
each connection last received bytes (which the HTTP/2 keepalive reads).

httpx folds the TLS handshake into its `connect` timeout and has no way to plug in a network backend, so
`CloudflareTransport` is an `httpx.AsyncHTTPTransport` whose connection pool is rebuilt with `MonitoredBackend`.
That backend opens TCP connections with httpx's connect timeout and wraps each stream in a `MonitoredStream`, whose
`start_tls` uses the smaller of that timeout and the TLS bound, and whose reads stamp `last_received`.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterable
from typing import TypedDict

import httpcore
import httpx


class MonitoredStream(httpcore.AsyncNetworkStream):
    """A network stream that bounds its TLS handshake and records when it last received bytes."""

    def __init__(self, inner: httpcore.AsyncNetworkStream, *, tls_timeout: float) -> None:
        self._inner = inner
        self._tls_timeout = tls_timeout
        self.last_received = time.monotonic()
        self.reading = 0
        self._received: asyncio.Event | None = None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.reading += 1
        try:
            data = await self._inner.read(max_bytes, timeout)
        finally:
            self.reading -= 1
        if data:
            self.last_received = time.monotonic()
            if self._received is not None:
                self._received.set()
                self._received = None
        return data

    async def wait_received(self, since: float, timeout: float) -> bool:
        """Wait (at most `timeout` seconds) until bytes arrive after `since`; whether they did."""
        try:
            async with asyncio.timeout(timeout):
                while self.last_received <= since:
                    if self._received is None:
                        self._received = asyncio.Event()
                    await self._received.wait()
        except TimeoutError:
            return False
        return True

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        bound = self._tls_timeout if timeout is None else min(timeout, self._tls_timeout)
        inner = await self._inner.start_tls(ssl_context, server_hostname, bound)
        return MonitoredStream(inner, tls_timeout=self._tls_timeout)

    def get_extra_info(self, info: str) -> object:
        return self._inner.get_extra_info(info)


class MonitoredBackend(httpcore.AsyncNetworkBackend):
    """httpcore's default backend, with every stream a `MonitoredStream`."""

    def __init__(self, *, tls_timeout: float) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._tls_timeout = tls_timeout

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return MonitoredStream(stream, tls_timeout=self._tls_timeout)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)
        return MonitoredStream(stream, tls_timeout=self._tls_timeout)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _PoolOptions(TypedDict):
    """What the direct pool and the proxy's pool share."""

    ssl_context: ssl.SSLContext
    max_connections: int | None
    max_keepalive_connections: int | None
    keepalive_expiry: float | None
    http1: bool
    http2: bool
    network_backend: httpcore.AsyncNetworkBackend


class CloudflareTransport(httpx.AsyncHTTPTransport):
    """`httpx.AsyncHTTPTransport` over a pool that uses `MonitoredBackend`: direct, or through the HTTP proxy `proxy`
    (a CONNECT tunnel for https, which the TLS handshake with Cloudflare then runs inside)."""

    def __init__(
        self,
        *,
        tls_timeout: float,
        verify: ssl.SSLContext | bool = True,
        http2: bool = True,
        limits: httpx.Limits,
        proxy: str | None = None,
    ) -> None:
        super().__init__(verify=verify, http2=http2, limits=limits, trust_env=False)
        options: _PoolOptions = {
            "ssl_context": httpx.create_ssl_context(verify=verify, trust_env=False),
            "max_connections": limits.max_connections,
            "max_keepalive_connections": limits.max_keepalive_connections,
            "keepalive_expiry": limits.keepalive_expiry,
            "http1": True,
            "http2": http2,
            "network_backend": MonitoredBackend(tls_timeout=tls_timeout),
        }
        self.pool: httpcore.AsyncConnectionPool
        if proxy is None:
            self.pool = httpcore.AsyncConnectionPool(**options)
        else:
            via = httpx.Proxy(proxy)
            self.pool = httpcore.AsyncHTTPProxy(
                proxy_url=httpcore.URL(
                    scheme=via.url.raw_scheme, host=via.url.raw_host, port=via.url.port, target=via.url.raw_path
                ),
                proxy_auth=via.raw_auth,
                proxy_headers=via.headers.raw,
                proxy_ssl_context=httpx.create_ssl_context(trust_env=False) if via.url.scheme == "https" else None,
                **options,
            )
        self._pool = self.pool
