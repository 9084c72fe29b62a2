"""A cluster whose only way out is an HTTP proxy: HTTPS_PROXY and NO_PROXY, as the deploy guide sets them with
`extraEnv`, read by kflare's two clients as client-go reads them. A real forward proxy (Debian's tinyproxy, which
`make test` installs) carries Cloudflare's calls in CONNECT tunnels; the API server (a real one, listening on this
machine's own address, as a cluster's does) is reached directly where NO_PROXY covers it, through the proxy where it
does not; and a proxy that refuses the tunnel is said to at once, not waited on.

Both ends listen on a non-loopback address of this machine: loopback is never proxied (as in Go)."""

from __future__ import annotations

import contextlib
import ipaddress
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

from app.cloudflare.errors import NetworkError
from app.cloudflare.http import HttpConfig
from app.cloudflare.session import CloudflareSession
from app.controlplane import CertificateAuthority, ControlPlane, bin_dir_from_env, free_port
from app.emulator.app import create_app
from app.kube.client import NAMESPACES, KubeClient
from tests.helpers import eventually
from tests.unit.reconcilers.harness import ACCOUNT_ID, TOKEN, _Server, emulator_state

pytestmark = pytest.mark.integration


def own_address() -> str:
    """This machine's address on its way out (no packet is sent: a UDP socket's route is only looked up)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError as exc:
            pytest.fail(f"this machine has no route out, so no address a proxy would be used for: {exc}")
        address = str(probe.getsockname()[0])
    if ipaddress.ip_address(address).is_loopback:
        pytest.fail(f"this machine's only address is loopback ({address}), which is never proxied")
    return address


@dataclass
class Proxy:
    url: str
    log: Path

    def tunnels(self) -> list[str]:
        """The CONNECT requests the proxy took so far, as `host:port`."""
        lines = self.log.read_text(errors="replace").splitlines()
        return [line.split("CONNECT ", 2)[-1].split()[0] for line in lines if "): CONNECT " in line]


@contextlib.contextmanager
def tinyproxy(workdir: Path, *settings: str) -> Iterator[Proxy]:
    binary = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"
    if not Path(binary).exists():
        pytest.fail("tinyproxy is missing: hack/test-bins.sh (which `make test` runs) installs it")
    port = free_port()
    config = workdir / f"tinyproxy-{port}.conf"
    lines = [f"Port {port}", "Listen 127.0.0.1", "Allow 127.0.0.1", "User nobody", "Group nogroup"]
    config.write_text("\n".join([*lines, "Timeout 30", "MaxClients 64", "LogLevel Connect", *settings]) + "\n")
    log = workdir / f"tinyproxy-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([binary, "-d", "-c", str(config)], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert proc.poll() is None, f"tinyproxy exited: {log.read_text()}"
            assert time.monotonic() < deadline, f"tinyproxy did not listen on {port}: {log.read_text()}"
            time.sleep(0.05)  # a poll with a deadline: the process's port, which nothing signals
        yield Proxy(f"http://127.0.0.1:{port}", log)
    finally:
        proc.terminate()
        proc.wait(10)


@dataclass
class Cloudflare:
    base_url: str
    trust: ssl.SSLContext


@pytest.fixture(scope="module")
def address() -> str:
    return own_address()


@pytest.fixture(scope="module")
def cloudflare(address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloudflare]:
    """The emulator over TLS on this machine's address, with a certificate for it."""
    work = tmp_path_factory.mktemp("emulator-tls")
    ca = CertificateAuthority.create("proxy-test")
    key, cert = ca.issue("emulator", hosts=[address], server=True)
    (work / "tls.key").write_bytes(key)
    (work / "tls.crt").write_bytes(cert)
    config = uvicorn.Config(
        create_app(emulator_state([])),
        host=address,
        port=0,
        log_level="warning",
        lifespan="off",
        ssl_keyfile=str(work / "tls.key"),
        ssl_certfile=str(work / "tls.crt"),
    )
    server = _Server(config)
    thread = threading.Thread(target=server.run, name="emulator-tls", daemon=True)
    thread.start()
    assert server.listening.wait(10)
    assert server.started
    port = server.servers[0].sockets[0].getsockname()[1]
    trust = ssl.create_default_context(cadata=ca.pem.decode())
    try:
        yield Cloudflare(f"https://{address}:{port}/client/v4", trust)
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="module")
def api_server(address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A real API server listening on this machine's address, as a cluster's listens on its own."""
    bins = bin_dir_from_env()
    if bins is None:
        pytest.fail("no kube-apiserver: set K8S_TEST_BIN (`make test` does) or KUBEBUILDER_ASSETS")
    plane = ControlPlane(bin_dir=bins, workdir=tmp_path_factory.mktemp("plane"), address=address)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


async def zones(cloudflare: Cloudflare) -> list[object]:
    session = CloudflareSession(HttpConfig(base_url=cloudflare.base_url, verify=cloudflare.trust))
    try:
        client = session.client(TOKEN)
        await client.get_account(ACCOUNT_ID)
        return [zone async for zone in client.list_zones(account_id=ACCOUNT_ID)]
    finally:
        await session.aclose()


async def test_cloudflare_calls_go_through_the_proxy_unless_no_proxy_covers_cloudflare(
    cloudflare: Cloudflare, address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = cloudflare.base_url.removeprefix("https://").split("/")[0]
    with tinyproxy(tmp_path) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "10.96.0.0/12,.svc,.cluster.local")
        assert await zones(cloudflare) == []
        assert proxy.tunnels() == [target], "Cloudflare's calls did not go through the proxy"

        monkeypatch.setenv("NO_PROXY", f"10.96.0.0/12,{ipaddress.ip_network(address + '/24', strict=False)}")
        assert await zones(cloudflare) == []
        assert proxy.tunnels() == [target], "a host NO_PROXY covers went through the proxy"


async def test_api_server_calls_go_direct_where_no_proxy_covers_them_and_through_the_proxy_otherwise(
    api_server: ControlPlane, address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = api_server.host.removeprefix("https://")
    with tinyproxy(tmp_path) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        for no_proxy in (f"{address}/32", address, f"{address}:{target.rsplit(':', 1)[1]}"):
            monkeypatch.setenv("NO_PROXY", f".svc,{no_proxy}")
            kube = await KubeClient.connect(api_server.kubeconfig_path)
            try:
                assert (await kube.get(NAMESPACES, "default"))["metadata"]["name"] == "default"
            finally:
                await kube.close()
            assert proxy.tunnels() == [], f"NO_PROXY={no_proxy} did not keep the API server's calls direct"

        monkeypatch.setenv("NO_PROXY", ".svc")  # a cluster whose NO_PROXY misses the API server: as client-go does
        kube = await KubeClient.connect(api_server.kubeconfig_path)
        try:
            assert (await kube.get(NAMESPACES, "default"))["metadata"]["name"] == "default"
        finally:
            await kube.close()
        assert target in proxy.tunnels()


async def test_a_proxy_that_refuses_the_tunnel_is_said_to_at_once_without_its_credentials(
    cloudflare: Cloudflare, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tinyproxy(tmp_path, "ConnectPort 1") as proxy:  # CONNECT to port 1 only: every other tunnel is refused
        monkeypatch.setenv("HTTPS_PROXY", proxy.url.replace("http://", "http://kflare:hunter2@"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        # A NetworkError that says so, not a DeadlineExceeded: the refusal is read, not waited out.
        with pytest.raises(NetworkError) as refused:
            await zones(cloudflare)

        async def logged() -> bool:
            return bool(proxy.tunnels())

        await eventually(logged, timeout=5, what="the proxy's log of the refused tunnel")
    message = str(refused.value)
    assert f"the HTTP proxy {proxy.url} refused or failed the connection to Cloudflare" in message, message
    assert "403" in message, message
    assert "hunter2" not in message
