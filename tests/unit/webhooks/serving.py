"""Serve an ASGI app with uvicorn on a free loopback port inside the test's event loop, and look at its TLS."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from app.controlplane import free_port
from app.server import Listener
from app.tls import ReloadingTLS


@contextlib.asynccontextmanager
async def serving(app: Any, tls: ReloadingTLS | None = None, *, timeout: float = 20.0) -> AsyncIterator[int]:
    """Run `app` on 127.0.0.1 (with `tls` and its watcher when given) until the block ends; yields the port."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="off")
    if tls is not None:
        tls.apply(config)
    server = Listener(config)
    task = asyncio.create_task(server.serve(), name="test-listener")
    watcher = asyncio.create_task(tls.watch(), name="test-tls-watch") if tls is not None else None
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if task.done():
                task.result()
                raise AssertionError("the server stopped before it started")
            assert time.monotonic() < deadline, f"the server did not start within {timeout}s"
            await asyncio.sleep(0.02)
        yield port
    finally:
        server.should_exit = True
        if watcher is not None:
            watcher.cancel()
        await asyncio.gather(task, *([watcher] if watcher else []), return_exceptions=True)


def client_context(ca_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.set_alpn_protocols(["h2", "http/1.1"])
    return context


async def handshake(port: int, ca_pem: bytes) -> tuple[bytes, str | None]:
    """A fresh TLS handshake with 127.0.0.1:port, verified against `ca_pem`: the certificate the server
    presented (DER) and the ALPN protocol it chose."""
    _reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, ssl=client_context(ca_pem), server_hostname="127.0.0.1"), 10
    )
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True)
        return der, ssl_object.selected_alpn_protocol()
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()
