"""A TCP proxy between the controller and the API server, so that a test can break the controller's connections
(its watches among them) without touching anyone else's: TLS passes through untouched, so the controller still
verifies the API server's certificate.

`pause()` stops relaying bytes (a network that went silent: requests in flight wait), `reset()` aborts every
connection the proxy carries (the controller's watches end at once and reconnect), `resume()` relays again. The
proxy runs its own event loop in a thread, so a test that blocks its own loop for a moment does not stall the
controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from app.controlplane import ControlPlane, free_port


class KubeProxy:
    def __init__(self, plane: ControlPlane) -> None:
        upstream = urlsplit(plane.host)
        self.upstream = (upstream.hostname or "127.0.0.1", upstream.port or 443)
        self.port = free_port()
        self.plane = plane
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kube-proxy", daemon=True)
        self._flowing: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.resets = 0

    def kubeconfig(self) -> Path:
        """The control plane's admin kubeconfig, through the proxy."""
        config = json.loads(self.plane.kubeconfig_path.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        path = self.plane.workdir / f"kubeconfig-proxy-{self.port}"
        path.write_text(json.dumps(config))
        return path

    def _run(self, coro: object) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)  # type: ignore[arg-type]

    def start(self) -> KubeProxy:
        self._thread.start()
        self._run(self._start())
        return self

    async def _start(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(OSError):
            writer.close()

    def pause(self) -> None:
        assert self._flowing is not None
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def resume(self) -> None:
        assert self._flowing is not None
        self._loop.call_soon_threadsafe(self._flowing.set)

    def reset(self) -> None:
        """Abort every connection (both sides), as a broken network path would."""

        async def abort() -> None:
            for writer in list(self._writers):
                writer.transport.abort()
            self._writers.clear()

        self._run(abort())
        self.resets += 1

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()

        with contextlib.suppress(Exception):
            self._run(close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@contextlib.contextmanager
def kube_proxy(plane: ControlPlane) -> Iterator[KubeProxy]:
    proxy = KubeProxy(plane).start()
    try:
        yield proxy
    finally:
        proxy.stop()
