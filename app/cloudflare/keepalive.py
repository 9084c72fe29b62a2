"""HTTP/2 keepalive: ping a connection that has gone `ping_after` seconds without a frame from the server, and
close it when the ping gets no answer within `ping_timeout`.

httpx and httpcore have no keepalive ping, so `Keepalive` runs one task per process that looks at the pool's
HTTP/2 connections every `tick` seconds (a fifth of the smaller bound, 3 s with the defaults). For a connection whose
`MonitoredStream` has received nothing for `ping_after` seconds it sends a PING frame through the connection's own
h2 state machine (under its write lock). Any bytes received afterwards count as the answer: while a request is
reading the connection, its read sees them; on an idle connection the keepalive reads itself, through httpcore's own
event dispatch, so frames meant for a request that starts meanwhile reach it. If nothing arrives within
`ping_timeout`, httpcore marks the connection failed (its read times out) and the keepalive closes it: requests in
flight on it fail at once with a network error, and the pool opens a fresh connection for the next one.

This reaches into httpcore's HTTP/2 connection (`_connection`, `_h2_state`, `_network_stream`, `_write_lock`,
`_receive_events`), checked at run time: if those are not there (another httpcore version), the keepalive logs once
and stops, and idle connections are only closed after the pool's idle expiry. HTTP/1.1 connections are not pinged
(the protocol has no ping); the pool discards one the server closed and closes idle ones after the idle expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable

import httpcore

from app.cloudflare.transport import MonitoredStream

logger = logging.getLogger(__name__)

_REQUIRED = ("_h2_state", "_network_stream", "_write_lock", "_receive_events", "is_available", "has_expired")


class Keepalive:
    """Pings idle HTTP/2 connections of `pool`. `start()` in a running loop; `aclose()` to stop."""

    def __init__(self, pool: httpcore.AsyncConnectionPool, *, ping_after: float, ping_timeout: float) -> None:
        if ping_after <= 0 or ping_timeout <= 0:
            raise ValueError("ping_after and ping_timeout must be positive")
        self._pool = pool
        self.ping_after = ping_after
        self.ping_timeout = ping_timeout
        self.tick = min(ping_after, ping_timeout) / 5
        self.pings_sent = 0
        self.pings_answered = 0
        self.connections_closed = 0
        self._pinging: dict[int, asyncio.Task[None]] = {}
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"Keepalive(ping_after={self.ping_after}, ping_timeout={self.ping_timeout})"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="cloudflare-h2-keepalive")

    async def aclose(self) -> None:
        tasks = [t for t in (self._task, *self._pinging.values()) if t is not None]
        self._task = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._pinging.clear()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            try:
                self.check()
            except Exception:  # an unexpected httpcore shape must not kill the process's client
                logger.warning("HTTP/2 keepalive pings stopped: unexpected connection pool shape", exc_info=True)
                return

    def check(self) -> None:
        """Start a ping on every HTTP/2 connection that has been silent for `ping_after` seconds."""
        now = time.monotonic()
        for connection in list(self._pool.connections):
            h2 = getattr(connection, "_connection", None)
            if not isinstance(h2, httpcore.AsyncHTTP2Connection) or id(h2) in self._pinging:
                continue
            if not all(hasattr(h2, name) for name in _REQUIRED):
                raise RuntimeError("httpcore's HTTP/2 connection lacks the attributes the keepalive needs")
            stream = h2._network_stream
            if not isinstance(stream, MonitoredStream):
                continue
            if h2.is_closed() or not h2.is_available() or h2.has_expired():
                continue
            if now - stream.last_received < self.ping_after:
                continue
            key = id(h2)
            task = asyncio.get_running_loop().create_task(self._ping(connection, h2, stream))
            self._pinging[key] = task
            task.add_done_callback(self._forget(key))

    def _forget(self, key: int) -> Callable[[asyncio.Task[None]], None]:
        def forget(_: asyncio.Task[None]) -> None:
            self._pinging.pop(key, None)

        return forget

    async def _ping(
        self, connection: httpcore.AsyncConnectionInterface, h2: httpcore.AsyncHTTP2Connection, stream: MonitoredStream
    ) -> None:
        sent_at = time.monotonic()
        deadline = sent_at + self.ping_timeout
        failure: str | None = None
        try:
            # The outer bound is a safety net; the reads and writes below carry their own timeouts.
            async with asyncio.timeout(self.ping_timeout + 1):
                async with h2._write_lock:
                    h2._h2_state.ping(os.urandom(8))
                    await stream.write(h2._h2_state.data_to_send(), self.ping_timeout)
                self.pings_sent += 1
                while stream.last_received <= sent_at:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        failure = f"no answer to a ping within {self.ping_timeout:g} s"
                        break
                    if stream.reading:
                        await stream.wait_received(sent_at, remaining)
                    else:
                        request = httpcore.Request(
                            "GET",
                            "https://keepalive.invalid/",
                            extensions={"timeout": {"read": remaining, "write": remaining}},
                        )
                        await h2._receive_events(request)
        except TimeoutError:
            failure = f"no answer to a ping within {self.ping_timeout:g} s"
        except Exception as exc:
            failure = f"ping failed: {type(exc).__name__}"
        if failure is None:
            self.pings_answered += 1
            return
        self.connections_closed += 1
        logger.warning("closing an HTTP/2 connection to Cloudflare: %s", failure)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.ping_timeout):
                await connection.aclose()
