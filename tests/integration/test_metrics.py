"""The metrics listener against the real API server: ServiceAccount tokens checked by TokenReview and
SubjectAccessReview, over HTTPS; and `kflare run` serving it."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio.client.api_client import ApiClient

from app.controlplane import ControlPlane, free_port
from app.kube.client import KubeClient
from app.metrics.listener import MetricsListener, listener
from app.server import Listener
from app.settings import Settings
from tests.fixtures.controller import controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.kube import metrics_reader, service_account_token

pytestmark = pytest.mark.integration


@dataclass
class View:
    """The part of the runtime the metrics listener reads."""

    kube: KubeClient | None = None
    cloudflare: Any = None


@contextlib.asynccontextmanager
async def serving(endpoint: MetricsListener, *, timeout: float = 20.0) -> AsyncIterator[str]:
    """Serve the listener in this event loop until the block ends; yields its base URL."""
    server = Listener(endpoint.config)
    task = asyncio.create_task(server.serve(), name="metrics-listener")
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if task.done():
                task.result()
                raise AssertionError("the metrics listener stopped before it started")
            assert time.monotonic() < deadline, f"the metrics listener did not start within {timeout}s"
            await asyncio.sleep(0.02)
        scheme = "https" if endpoint.tls is not None else "http"
        yield f"{scheme}://127.0.0.1:{endpoint.config.port}"
    finally:
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)


def http_client(endpoint: MetricsListener) -> httpx.AsyncClient:
    """A client that trusts the listener's certificate, and only that."""
    verify: ssl.SSLContext | bool = False
    if endpoint.tls is not None:
        verify = ssl.create_default_context(cadata=endpoint.tls.cert_pem.decode())
    return httpx.AsyncClient(verify=verify, timeout=30.0)


@pytest.fixture
async def kube_client(control_plane: ControlPlane) -> AsyncIterator[KubeClient]:
    kube = await KubeClient.connect(control_plane.kubeconfig_path)
    try:
        yield kube
    finally:
        await kube.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_secure_metrics_need_a_token_allowed_to_get_metrics(
    kube: ApiClient, kube_client: KubeClient, namespace: str
) -> None:
    endpoint = listener(Settings(), View(kube=kube_client), "127.0.0.1", free_port())
    assert endpoint.tls is not None
    async with serving(endpoint) as url, http_client(endpoint) as http:
        missing = await http.get(f"{url}/metrics")
        assert missing.status_code == 401

        assert (await http.get(f"{url}/metrics", headers=bearer("not-a-token"))).status_code == 401
        forged = "eyJhbGciOiJSUzI1NiIsImtpZCI6IngifQ.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
        assert (await http.get(f"{url}/metrics", headers=bearer(forged))).status_code == 401

        unprivileged = await service_account_token(kube, namespace, "scraper")
        forbidden = await http.get(f"{url}/metrics", headers=bearer(unprivileged))
        assert forbidden.status_code == 403
        assert f"system:serviceaccount:{namespace}:scraper" in forbidden.text

        async with metrics_reader(kube, namespace, "scraper"):
            # A new token of the same account: the refusal of the first one may still be cached for a few seconds.
            token = await service_account_token(kube, namespace, "scraper")
            reply = await http.get(f"{url}/metrics", headers=bearer(token))
            assert reply.status_code == 200, reply.text
            assert reply.headers["content-type"].startswith("text/plain")
            for name in ("controller_runtime_reconcile_total", "workqueue_depth"):
                assert f"# HELP {name} " in reply.text
                assert f"# TYPE {name} " in reply.text
            assert "kflare_http_requests_total{" in reply.text
            # Allowed for /metrics only.
            assert (await http.get(f"{url}/other", headers=bearer(token))).status_code == 403

        other = await service_account_token(kube, namespace, "another")
        assert (await http.get(f"{url}/metrics", headers=bearer(other))).status_code == 403


async def test_unreachable_api_server_is_503(control_plane: ControlPlane, namespace: str, kube: ApiClient) -> None:
    token = await service_account_token(kube, namespace, "scraper")
    kube_client = await KubeClient.connect(control_plane.kubeconfig_path)
    kube_client.host = f"https://127.0.0.1:{free_port()}"  # nothing listens there
    try:
        endpoint = listener(Settings(), View(kube=kube_client), "127.0.0.1", free_port())
        async with serving(endpoint) as url, http_client(endpoint) as http:
            reply = await http.get(f"{url}/metrics", headers=bearer(token))
            assert reply.status_code == 503
            assert token not in reply.text
            assert (await http.get(f"{url}/metrics")).status_code == 401
    finally:
        await kube_client.close()


async def test_insecure_metrics_are_plain_http_without_auth() -> None:
    endpoint = listener(Settings(metrics_secure=False), View(), "127.0.0.1", free_port())
    assert endpoint.tls is None
    async with serving(endpoint) as url, http_client(endpoint) as http:
        assert url.startswith("http://")
        reply = await http.get(f"{url}/metrics")
        assert reply.status_code == 200
        assert "# TYPE controller_runtime_reconcile_total counter" in reply.text


async def test_kflare_run_serves_secure_metrics(
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare_crds: None,
    kube: ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    port = free_port()
    token = await service_account_token(kube, namespace, "prometheus")
    async with metrics_reader(kube, namespace, "prometheus"):
        with controller_process(
            control_plane, fresh_emulator, tmp_path, f"--metrics-bind-address=127.0.0.1:{port}"
        ) as proc:
            # Self-signed: Prometheus' ServiceMonitor skips verification in that case, and so does this test.
            async with httpx.AsyncClient(verify=False, timeout=30.0) as http:  # noqa: S501
                assert (await http.get(f"https://127.0.0.1:{port}/metrics")).status_code == 401
                reply = await http.get(f"https://127.0.0.1:{port}/metrics", headers=bearer(token))
                assert reply.status_code == 200, proc.log()[-3000:]
                text = reply.text
    for series in (
        "# TYPE controller_runtime_reconcile_total counter",
        "# TYPE workqueue_depth gauge",
        "# TYPE process_resident_memory_bytes gauge",
        "# TYPE kflare_cloudflare_calls_total counter",
        'kflare_http_requests_total{handler="/readyz",listener="probes",method="GET"',
    ):
        assert series in text, series
    assert token not in proc.log()
