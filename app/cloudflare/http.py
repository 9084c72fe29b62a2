"""The process's one `httpx.AsyncClient` for Cloudflare, and the time bounds of every call made through it.

The deploy guide's bounds and how each is enforced:

- connect, 30 s: httpx's `connect` timeout around DNS resolution and the TCP connect (all addresses tried within
  it). Exact.
- TLS handshake, 10 s: `MonitoredStream.start_tls` (`transport.py`) gives the handshake the smaller of the connect
  timeout and this bound. Exact.
- response start, 60 s: an `asyncio.timeout` that httpcore's trace hook re-arms when the request has been sent in
  full and the wait for the response headers begins, and disarms when they arrive. Exact.
- whole request, 120 s: the same `asyncio.timeout`, armed from the moment the call asks for a connection until the
  response body is read, an upload included. Exact.
- HTTP/2 ping after 30 s without a frame, close when the ping is not answered within 15 s: `Keepalive`
  (`keepalive.py`) looks at the pool every 3 s and sends a real PING frame through httpcore's h2 state machine; the
  answer must arrive within 15 s of the ping (exact). Approximate: the ping goes out between 30 and 33 s after the
  last read (the period of the check); "a frame" is any bytes read from the connection, and frames the server sent
  to an idle connection count only once read (the ping's own read reads them, so the cost is an extra ping). It
  relies on httpcore internals; if they change it logs once and turns itself off. HTTP/1.1 connections (the emulator
  speaks only that) are never pinged.

Also bounded, beyond the guide: a single read of a response body that stalls for `response_start` seconds, and a
single write of the request that stalls as long (httpx's per-operation `read`/`write` timeouts), and the wait for a
free pooled connection (by the whole-request deadline). Idle connections are closed after `idle_close` seconds
(HTTP/1.1 has no ping; this is its only keepalive bound). Budget waiting (`budget.py`) happens before a call starts
and is not part of its deadline. A call that hits a bound raises `DeadlineExceeded` with `phase` set to the bound.

The client goes through the HTTP proxy the environment names for Cloudflare's URL, as Go's net/http would
(`app.proxy`: HTTPS_PROXY, NO_PROXY with CIDR blocks and domain suffixes), and directly otherwise; httpx's own reading
of those variables is off (`trust_env=False`), as it reads NO_PROXY differently. A proxy that refuses or fails the
tunnel is said as such (`NetworkError`, the proxy named without its credentials).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields

import httpx

from app import __version__
from app.cloudflare.errors import DeadlineExceeded, NetworkError, Phase
from app.cloudflare.keepalive import Keepalive
from app.cloudflare.transport import CloudflareTransport
from app.proxy import ProxyEnvironment, redacted

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.cloudflare.com/client/v4"


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Every time bound of a Cloudflare call, in seconds."""

    connect: float = 30.0
    tls: float = 10.0
    response_start: float = 60.0
    request: float = 120.0
    ping_after: float = 30.0
    ping_timeout: float = 15.0
    idle_close: float = 120.0

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            if getattr(self, name) <= 0:
                raise ValueError(f"timeout {name} must be positive")


@dataclass(frozen=True, slots=True)
class HttpConfig:
    base_url: str = DEFAULT_BASE_URL
    timeouts: Timeouts = field(default_factory=Timeouts)
    http2: bool = True
    max_connections: int = 20
    verify: ssl.SSLContext | bool = True
    user_agent: str = f"kflare/{__version__}"
    proxies: ProxyEnvironment = field(default_factory=ProxyEnvironment.from_environ)
    """The proxy variables (the process's environment when the config is made)."""


def user_agent(replica: str) -> str:
    """The User-Agent of one replica: the product, and the replica's leader-election identity as a comment."""
    return f"kflare/{__version__} ({replica})"


@dataclass(frozen=True, slots=True)
class RawResponse:
    status: int
    headers: httpx.Headers
    body: bytes
    http_version: str


_PHASE_TEXT: Mapping[Phase, str] = {
    "pool": "no free connection",
    "connect": "connecting took longer than {connect:g} s",
    "tls": "the TLS handshake took longer than {tls:g} s",
    "send": "sending the request stalled",
    "response_start": "no response within {response_start:g} s of sending the request",
    "body": "reading the response stalled",
    "request": "the whole request took longer than {request:g} s",
}


class _CallTimer:
    """Tracks which phase a call is in and moves its deadline: the whole-request bound, tightened to the
    response-start bound while waiting for the response headers."""

    def __init__(self, timeouts: Timeouts) -> None:
        self.timeouts = timeouts
        self.phase: Phase = "pool"
        self.deadline_phase: Phase = "request"
        self._loop = asyncio.get_running_loop()
        self._whole = self._loop.time() + timeouts.request
        self.scope = asyncio.timeout_at(self._whole)

    @property
    def sent(self) -> bool:
        """Whether the request may have reached the server."""
        return self.phase not in ("pool", "connect", "tls")

    async def trace(self, event: str, info: Mapping[str, object]) -> None:
        _, _, name = event.partition(".")
        if name == "connect_tcp.started":
            self.phase = "connect"
        elif name == "start_tls.started":
            self.phase = "tls"
        elif name == "send_request_headers.started":
            self.phase = "send"
        elif name == "receive_response_headers.started":
            self.phase = "response_start"
            start_by = self._loop.time() + self.timeouts.response_start
            if start_by < self._whole:
                self.deadline_phase = "response_start"
                self.scope.reschedule(start_by)
        elif name == "receive_response_headers.complete":
            self.phase = "body"
            self.deadline_phase = "request"
            self.scope.reschedule(self._whole)

    def text(self, phase: Phase) -> str:
        return _PHASE_TEXT[phase].format(**{f.name: getattr(self.timeouts, f.name) for f in fields(self.timeouts)})


class _DropEncodedHeaderBlocks(logging.Filter):
    """hpack logs every encoded header block at DEBUG; with the token in it (Huffman-coded, but trivially decoded).
    h2 already makes `authorization` never-indexed, which masks it in hpack's other debug lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith("Encoded header block"))


_HEADER_BLOCK_FILTER = _DropEncodedHeaderBlocks()


def _guard_header_logs() -> None:
    hpack_logger = logging.getLogger("hpack.hpack")
    if _HEADER_BLOCK_FILTER not in hpack_logger.filters:
        hpack_logger.addFilter(_HEADER_BLOCK_FILTER)


class CloudflareHTTP:
    """The shared HTTP client: one per process. Use as `async with`, or call `start()` and `aclose()`."""

    def __init__(self, config: HttpConfig | None = None, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        _guard_header_logs()
        self.config = config or HttpConfig()
        t = self.config.timeouts
        limits = httpx.Limits(
            max_connections=self.config.max_connections,
            max_keepalive_connections=self.config.max_connections,
            keepalive_expiry=t.idle_close,
        )
        self._keepalive: Keepalive | None = None
        self.proxy = self.config.proxies.proxy_for(self.config.base_url)
        if transport is None:
            own = CloudflareTransport(
                tls_timeout=t.tls, verify=self.config.verify, http2=self.config.http2, limits=limits, proxy=self.proxy
            )
            self._keepalive = Keepalive(own.pool, ping_after=t.ping_after, ping_timeout=t.ping_timeout)
            transport = own
        self.client = httpx.AsyncClient(
            base_url=self.config.base_url.rstrip("/"),
            transport=transport,
            timeout=httpx.Timeout(connect=t.connect, read=t.response_start, write=t.response_start, pool=t.request),
            headers={"User-Agent": self.config.user_agent, "Accept": "application/json"},
            follow_redirects=False,
            trust_env=False,
        )

    def __repr__(self) -> str:
        return f"CloudflareHTTP(base_url={self.config.base_url!r})"

    @property
    def keepalive(self) -> Keepalive | None:
        return self._keepalive

    def start(self) -> None:
        """Start the HTTP/2 keepalive. Needs a running event loop; `send()` calls it too."""
        if self._keepalive is not None:
            self._keepalive.start()

    async def aclose(self) -> None:
        if self._keepalive is not None:
            await self._keepalive.aclose()
        async with asyncio.timeout(self.config.timeouts.ping_timeout):
            await self.client.aclose()

    async def __aenter__(self) -> CloudflareHTTP:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def send(
        self, request: httpx.Request, *, redact: Callable[[str], str] = str, path: str | None = None
    ) -> RawResponse:
        """Send `request` and read its whole body within the time bounds, or raise `DeadlineExceeded` or
        `NetworkError` (each with `sent` telling whether the request may have reached the server). `redact` scrubs
        the text of a transport error before it goes into the message; `path` names the call in errors (the URL's
        path by default)."""
        self.start()
        timer = _CallTimer(self.config.timeouts)
        request.extensions["trace"] = timer.trace
        method, path = request.method, path or request.url.path
        try:
            async with timer.scope:
                response = await self.client.send(request, stream=True)
                try:
                    body = await response.aread()
                finally:
                    await response.aclose()
        except TimeoutError:
            phase = timer.deadline_phase
            raise DeadlineExceeded(timer.text(phase), phase=phase, method=method, path=path, sent=timer.sent) from None
        except httpx.TimeoutException as exc:
            phase = _timeout_phase(exc, timer)
            raise DeadlineExceeded(
                timer.text(phase), phase=phase, method=method, path=path, sent=_sent(exc, timer)
            ) from None
        except httpx.ProxyError as exc:
            shown = redacted(self.proxy or "")
            raise NetworkError(
                f"the HTTP proxy {shown} refused or failed the connection to Cloudflare{redact(_describe(exc))}",
                method=method,
                path=path,
                sent=False,
            ) from None
        except httpx.TransportError as exc:
            raise NetworkError(
                f"{type(exc).__name__} while {_PHASE_DOING[timer.phase]}{redact(_describe(exc))}",
                method=method,
                path=path,
                sent=_sent(exc, timer),
            ) from None
        except httpx.HTTPError as exc:
            raise NetworkError(f"{type(exc).__name__}{redact(_describe(exc))}", method=method, path=path) from None
        return RawResponse(
            status=response.status_code, headers=response.headers, body=body, http_version=response.http_version
        )


_PHASE_DOING: Mapping[Phase, str] = {
    "pool": "waiting for a connection",
    "connect": "connecting",
    "tls": "in the TLS handshake",
    "send": "sending the request",
    "response_start": "waiting for the response",
    "body": "reading the response",
    "request": "making the request",
}


def _timeout_phase(exc: httpx.TimeoutException, timer: _CallTimer) -> Phase:
    if isinstance(exc, httpx.ConnectTimeout):
        return "tls" if timer.phase == "tls" else "connect"
    if isinstance(exc, httpx.PoolTimeout):
        return "pool"
    if isinstance(exc, httpx.WriteTimeout):
        return "send"
    if isinstance(exc, httpx.ReadTimeout):
        return "body" if timer.phase == "body" else "response_start"
    return timer.phase


def _sent(exc: httpx.TransportError, timer: _CallTimer) -> bool:
    """Whether a failed request may have reached the server: not when it failed getting a connection."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout | httpx.UnsupportedProtocol):
        return False
    return timer.phase not in ("connect", "tls")


def _describe(exc: BaseException) -> str:
    """': ' and the exception's text (cut short), or nothing when it has none."""
    text = str(exc).strip()
    return f": {text[:200]}" if text else ""
