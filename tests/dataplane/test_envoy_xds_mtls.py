"""Envoy gets its configuration from the xDS listener exactly as `kflare run` builds it with the chart's flags
(`--gateway-xds-cert-dir`, `--gateway-xds-client-ca-file`): over mutual TLS with its client certificate, and
nothing at all without one."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.controlplane import free_port
from app.server import Runtime, xds_listener
from app.settings import Settings
from reconcilers.gateway import envoy
from reconcilers.gateway.snapshot import SnapshotStore
from tests.fixtures.envoy import TOKEN, _Thread, running_envoy
from tests.helpers import eventually
from tests.unit.gateway.test_xds_mtls import CA, HOST


@pytest.fixture
def mtls_xds(tmp_path: Path) -> Iterator[tuple[int, int, CA, Path]]:
    """The listener on loopback, serving a snapshot whose one route answers 200 "over mtls"."""
    ca = CA("kflare-xds-ca")
    (tmp_path / "token").write_text(TOKEN)
    (tmp_path / "ca.crt").write_bytes(ca.pem)
    ca.issue(tmp_path / "server", HOST, server=True)
    settings = Settings(
        gateway_enabled=True,
        gateway_xds_token_file=tmp_path / "token",
        gateway_xds_cert_dir=tmp_path / "server",
        gateway_xds_client_ca_file=tmp_path / "ca.crt",
    )
    ingress = free_port()
    store = SnapshotStore()
    store.publish(
        {
            "listeners": [envoy.ingress_listener("127.0.0.1", ingress)],
            "routes": [
                {
                    "@type": envoy.ROUTE_CONFIGURATION,
                    "name": envoy.INGRESS,
                    "virtual_hosts": [
                        {
                            "name": "all",
                            "domains": ["*"],
                            "routes": [
                                {
                                    "match": {"prefix": "/"},
                                    "direct_response": {"status": 200, "body": {"inline_string": "over mtls"}},
                                }
                            ],
                        }
                    ],
                }
            ],
        }
    )
    port = free_port()
    served = xds_listener(settings, Runtime(settings, xds=store), "127.0.0.1", port)
    thread = _Thread()
    thread.start(served.server, port)
    try:
        yield port, ingress, ca, tmp_path
    finally:
        thread.stop()


def bootstrap(xds_port: int, ca_dir: Path, client: tuple[Path, Path] | None) -> dict[str, object]:
    return envoy.bootstrap(
        node_id="mtls",
        xds_host="127.0.0.1",
        xds_port=xds_port,
        token=TOKEN,
        admin_port=free_port(),
        ca_file=str(ca_dir / "ca.crt"),
        server_name=HOST,
        client_cert=(str(client[0]), str(client[1])) if client is not None else None,
    )


async def test_envoy_is_configured_over_mutual_tls(mtls_xds: tuple[int, int, CA, Path]) -> None:
    xds_port, ingress, ca, workdir = mtls_xds
    client = ca.issue(workdir / "envoy", "kflare-data-plane", server=False)
    with running_envoy(bootstrap(xds_port, workdir, client)):
        async with httpx.AsyncClient(timeout=5) as http:
            reply = await http.get(f"http://127.0.0.1:{ingress}/")
    assert (reply.status_code, reply.text) == (200, "over mtls")


async def test_envoy_without_a_client_certificate_gets_nothing(mtls_xds: tuple[int, int, CA, Path]) -> None:
    xds_port, ingress, _, workdir = mtls_xds
    config = bootstrap(xds_port, workdir, None)
    admin = config["admin"]["address"]["socket_address"]["port_value"]  # type: ignore[index]
    with running_envoy(config, wait_ready=False):

        async def refused() -> bool:
            try:
                async with httpx.AsyncClient(timeout=1) as http:
                    stats = (await http.get(f"http://127.0.0.1:{admin}/stats?filter=kflare-xds")).text
            except httpx.TransportError:  # its admin not listening yet
                return False
            # The listener ends the handshake: Envoy counts a connection that never got to carry a request.
            failed = re.search(r"cluster\.kflare-xds\.upstream_cx_connect_fail: (\d+)", stats)
            return failed is not None and int(failed.group(1)) > 0

        await eventually(refused, what="Envoy's xDS connections to fail the handshake")
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient(timeout=5) as http:
                await http.get(f"http://127.0.0.1:{ingress}/")
