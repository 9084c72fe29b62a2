"""The image as a pod runs it: user 65532, a read-only root filesystem, a tmpfs on /tmp (the emptyDir the chart
mounts), every capability dropped, no privilege escalation; `kflare run` against the test API server and the
emulator (host network), reconciling the first slice, with its probes and metrics answering."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio.client.api_client import ApiClient

from app import __version__
from app.controlplane import ControlPlane, free_port
from tests.fixtures.controller import SYSTEM_NAMESPACE, ControllerProcess, Kflare
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.kube import metrics_reader, service_account_token
from tests.helpers import eventually
from tests.image.conftest import podman, podman_env, ulimits

# The first test builds the image (hack/image.sh), and may install podman first.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

KUBECONFIG = "/etc/kflare/kubeconfig"


class ImageProcess(ControllerProcess):
    """`kflare run` in the image, under podman, with the pod's security settings."""

    def __init__(
        self, image: str, plane: ControlPlane, emulator: EmulatorProcess, workdir: Path, metrics_port: int
    ) -> None:
        super().__init__(plane, emulator, workdir)
        self.name = f"kflare-test-{uuid.uuid4().hex[:8]}"
        self.argv = [
            "podman",
            "run",
            "--rm",
            f"--name={self.name}",
            "--network=host",
            "--read-only",
            "--tmpfs=/tmp:rw,nosuid,nodev,size=64m,mode=1777",
            "--user=65532:65532",
            "--cap-drop=ALL",
            "--security-opt=no-new-privileges",
            *ulimits(),
            f"--volume={plane.kubeconfig_path}:{KUBECONFIG}:ro",
            image,
            f"--kubeconfig={KUBECONFIG}",
            f"--cloudflare-api-url={emulator.base_url}",
            f"--health-probe-bind-address=127.0.0.1:{self.probe_port}",
            f"--metrics-bind-address=127.0.0.1:{metrics_port}",
            f"--webhook-port={free_port()}",
            f"--namespace={SYSTEM_NAMESPACE}",
            "--drift-check-interval=1m",
        ]

    def start(self) -> ImageProcess:
        self._log = self.log_path.open("ab")
        self.started_at = time.monotonic()
        self.process = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=podman_env())
        return self

    def stop(self) -> None:
        super().stop()
        podman("rm", "--force", "--ignore", self.name, check=False)


def inspect(image: str) -> dict[str, Any]:
    (info,) = json.loads(podman("image", "inspect", image).stdout)
    return dict(info)


def test_image_shape(image: str) -> None:
    """What the chart and the restricted Pod Security Standard rely on, read from the built image."""
    config = inspect(image)["Config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["kflare", "run"]
    assert {"9443/tcp", "8080/tcp", "8081/tcp"} <= set(config.get("ExposedPorts") or {})
    version = podman("run", "--rm", "--network=none", *ulimits(), "--entrypoint=kflare", image, "version").stdout
    assert version.strip() == __version__


async def test_image_runs_like_a_pod(
    image: str,
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare_crds: None,
    kflare: Kflare,
    kube: ApiClient,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    size = int(inspect(image)["Size"])
    metrics_port = free_port()
    proc = ImageProcess(image, control_plane, fresh_emulator, tmp_path, metrics_port).start()
    try:
        proc.wait_ready(timeout=60)
        to_ready = time.monotonic() - proc.started_at
        with capsys.disabled():
            print(f"\nimage {image}: {size / 2**20:.0f} MiB, Ready {to_ready:.1f}s after `podman run`")

        probes = f"http://127.0.0.1:{proc.probe_port}"
        async with httpx.AsyncClient(timeout=10) as http:
            assert (await http.get(f"{probes}/healthz")).text == "ok"
            assert (await http.get(f"{probes}/readyz")).text == "ok"

        await kflare.ready_zone("example.com")
        await kflare.ready("CloudflareAccount", kflare.account, reason="Validated")
        await kflare.make_record("www", "zone", name="www.example.com", type="A", content="192.0.2.1", proxied=True)
        record = await kflare.ready("DNSRecord", "www", reason="Synced")
        zone_id = record["status"]["cloudflareMetadata"]["zoneID"]
        held = [r for r in fresh_emulator.client().dns.records.list(zone_id=zone_id) if r.name == "www.example.com"]
        assert [(r.type, r.content) for r in held] == [("A", "192.0.2.1")]

        # Metrics over HTTPS (a certificate the controller made in /tmp), to a token allowed to get /metrics.
        async with metrics_reader(kube, namespace, "scraper"):
            token = await service_account_token(kube, namespace, "scraper")

            async def scraped() -> str:
                async with httpx.AsyncClient(verify=False, timeout=30) as http:  # noqa: S501 (self-signed)
                    reply = await http.get(
                        f"https://127.0.0.1:{metrics_port}/metrics", headers={"Authorization": f"Bearer {token}"}
                    )
                assert reply.status_code == 200, reply.text
                assert 'kflare_resources{kind="DNSRecord",ready="True",reason="Synced"} 1.0' in reply.text
                return reply.text

            text = await eventually(scraped, what="the image's metrics")
        assert "controller_runtime_reconcile_total{" in text

        # Nothing was written outside /tmp: the root filesystem refuses it, and the container still runs.
        refused = podman("exec", proc.name, "touch", "/opt/kflare/probe", check=False)
        assert refused.returncode != 0
        assert "Read-only file system" in refused.stderr
        assert proc.process is not None
        assert proc.process.poll() is None
        await kflare.cleanup()  # deleting goes through the controller's finalizers too
        log = proc.log()
    finally:
        proc.stop()
    assert "Traceback" not in log, log[-3000:]
