"""The HTTP protocol every listener serves: uvicorn's HTTP/1.1, bounded so that no client can hold it open or fill it.

uvicorn alone waits forever for request headers (its keep-alive timeout only runs between requests), buffers
headers of any size and accepts any number of connections. Anyone who can reach a port could hold hundreds of
connections open by sending a header line now and then, or make the process buffer megabytes of headers. Here:

- `header_timeout`: a connection must finish its TLS handshake and then each request's headers within this many
  seconds of its start (of the connection, or of the request's first byte on a kept-alive connection); else it gets
  `408` and is closed. uvicorn's `timeout_keep_alive` still closes idle connections between requests.
- `max_header_bytes`: the request line and headers of one request, together; past that `431`, then close.
- `max_connections`: open connections of the listener, TLS handshakes in progress included; one more is closed at
  once, before anything is read from it.

TLS is done here rather than by asyncio's server (whose handshake timeout is fixed at 60 s and whose pending
handshakes are invisible to the cap): a connection is accepted as plain TCP, counted, and upgraded with
`loop.start_tls` under the header deadline. The `ssl.SSLContext` is used as it is at each handshake, so a
`ReloadingTLS` that loads a renewed certificate into it is presented to new connections at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

log = logging.getLogger(__name__)

HEADER_TIMEOUT: Final = 10.0
MAX_HEADER_BYTES: Final = 64 * 1024
MAX_CONNECTIONS: Final = 256
KEEP_ALIVE: Final = 5


@dataclass(frozen=True)
class Limits:
    """What one listener allows its clients (see the module's doc)."""

    header_timeout: float = HEADER_TIMEOUT
    max_header_bytes: int = MAX_HEADER_BYTES
    max_connections: int = MAX_CONNECTIONS
    keep_alive: int = KEEP_ALIVE


def _refusal(status: bytes, reason: str) -> bytes:
    body = reason.encode("ascii")
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
        b"content-length: " + str(len(body)).encode("ascii") + b"\r\n\r\n" + body
    )


class _HeadersTooLarge(Exception):
    pass


class BoundedHTTP(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline on each request's headers, a bound on their size and a cap on
    the listener's connections. A subclass per listener sets `limits` (`bounded_protocol`)."""

    limits: ClassVar[Limits] = Limits()

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, object],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._deadline: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._too_large = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio's signature, wider than uvicorn's: a stream connection's transport is always a full Transport.
        assert isinstance(transport, asyncio.Transport)
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            log.debug("refused a connection: %d open", len(self.connections) - 1)
            transport.abort()
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        self._arm()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        if not self._too_large:
            super().send_400_response(msg)
            return
        limit = self.limits.max_header_bytes
        self.transport.write(_refusal(b"431 Request Header Fields Too Large", f"request headers over {limit} bytes"))
        self.transport.close()

    def _count(self, size: int) -> None:
        self._header_bytes += size
        if self._header_bytes > self.limits.max_header_bytes:
            # Raised inside the parser's callback: httptools turns it into a parser error, which ends the request.
            self._too_large = True
            raise _HeadersTooLarge

    def _arm(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.limits.header_timeout, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self.transport is not None and not self.transport.is_closing():
            timeout = self.limits.header_timeout
            self.transport.write(_refusal(b"408 Request Timeout", f"no complete request headers within {timeout:g}s"))
            self.transport.close()


class _Pending(asyncio.Protocol):
    """Stands in for the HTTP protocol while `start_tls` returns: bytes decrypted before the HTTP protocol has its
    transport are kept for it."""

    def __init__(self, http: asyncio.Protocol) -> None:
        self.http = http
        self.early: list[bytes] = []

    def data_received(self, data: bytes) -> None:
        self.early.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        pass  # start_tls fails, and `TLSAccept._handshake` closes the connection


class TLSAccept(asyncio.Protocol):
    """A TLS listener's first protocol: counts the connection, does the handshake within the header deadline, then
    hands the connection to the HTTP protocol. A subclass per listener sets the class attributes."""

    http_class: ClassVar[type[BoundedHTTP]] = BoundedHTTP
    context: ClassVar[ssl.SSLContext]

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, object],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.config, self.server_state, self.app_state = config, server_state, app_state
        self.loop = _loop or asyncio.get_event_loop()
        self.transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def _connections(self) -> set[Any]:
        return self.server_state.connections

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.pause_reading()  # nothing is read before the handshake takes over the connection
        self._connections.add(self)
        if len(self._connections) > self.http_class.limits.max_connections:
            self._connections.discard(self)
            transport.abort()
            return
        self._task = self.loop.create_task(self._handshake(transport), name="tls-handshake")

    async def _handshake(self, transport: asyncio.Transport) -> None:
        http = self.http_class(config=self.config, server_state=self.server_state, app_state=self.app_state)
        pending = _Pending(http)
        try:
            tls = await self.loop.start_tls(
                transport,
                pending,
                self.context,
                server_side=True,
                ssl_handshake_timeout=self.http_class.limits.header_timeout,
            )
        except (OSError, ssl.SSLError, TimeoutError, EOFError) as exc:
            # A client that goes away or speaks no TLS is no event worth a log line each.
            log.debug("TLS handshake failed: %s", type(exc).__name__)
            transport.abort()
            return
        finally:
            self._connections.discard(self)
        if tls is None or tls.is_closing():
            return
        tls.set_protocol(http)
        http.connection_made(tls)
        for data in pending.early:
            if tls.is_closing():
                break
            http.data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.discard(self)
        if self._task is not None:
            self._task.cancel()

    def data_received(self, data: bytes) -> None:  # reading is paused until start_tls owns the transport
        pass

    def shutdown(self) -> None:
        """uvicorn's shutdown asks every connection to end: one still shaking hands has nothing to finish."""
        if self.transport is not None:
            self.transport.close()


class StopsWhenTold:
    """`should_exit` as uvicorn's servers (and `app.server.Process`) set it, waking the listener's loop at once
    from any thread (a test's too), so a listener waits on `exit_event()` instead of polling the flag."""

    _exit: bool = False
    _waking: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    @property
    def should_exit(self) -> bool:
        return self._exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._exit = value
        if value and self._waking is not None:
            loop, wake = self._waking
            with contextlib.suppress(RuntimeError):  # its loop closed: it has stopped already
                loop.call_soon_threadsafe(wake.set)

    def exit_event(self) -> asyncio.Event:
        """Set once `should_exit` is (call it from the listener's loop)."""
        wake = asyncio.Event()
        self._waking = (asyncio.get_running_loop(), wake)
        if self._exit:
            wake.set()
        return wake


def bounded_protocol(limits: Limits, context: ssl.SSLContext | None = None) -> type[asyncio.Protocol]:
    """The protocol class for a listener with `limits`, serving TLS with `context` when given."""
    http = type("BoundedHTTP", (BoundedHTTP,), {"limits": limits})
    if context is None:
        return http
    return type("TLSAccept", (TLSAccept,), {"http_class": http, "context": context})


def config(
    app: ASGIApp,
    host: str,
    port: int,
    limits: Limits,
    *,
    context: ssl.SSLContext | None = None,
) -> uvicorn.Config:
    """The uvicorn configuration of one listener of `kflare run`."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=bounded_protocol(limits, context),
        log_config=None,
        lifespan="off",
        access_log=False,
        timeout_keep_alive=limits.keep_alive,
    )
