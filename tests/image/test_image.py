"""The image as built by hack/image.sh: its shape (no shell, no package manager, no pip; bytecode for everything), and
the chart's pod running it against the test API server and the emulator (host network), reconciling the first slice,
with its probes and metrics answering."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import ssl
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient

from app import __version__
from app.controlplane import ControlPlane
from tests.chart.helm import Helm, helm_binary
from tests.chart.test_install import LEASE, Release
from tests.fixtures.controller import Kflare
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.kube import metrics_reader, service_account_token
from tests.helpers import eventually
from tests.image.conftest import SCRIPT, podman, podman_env, ulimits
from tests.image.pod import Mounts, PodProcess

# The first test builds the image (hack/image.sh), and may install podman first.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


def inspect(image: str) -> dict[str, Any]:
    (info,) = json.loads(podman("image", "inspect", image).stdout)
    return dict(info)


# Issue 19's promise for the distroless-style image (it was 293 MiB on a Debian base with a shell and apt).
SIZE_BUDGET = 150 * 2**20


def in_image(image: str, code: str) -> Any:
    """What a Python snippet prints (as JSON) in the image as it runs: its user, a read-only root, no network."""
    done = podman("run", "--rm", "--read-only", "--network=none", *ulimits(), "--entrypoint=python", image, "-c", code)
    return json.loads(done.stdout)


def test_image_shape(image: str) -> None:
    """What the chart and the restricted Pod Security Standard rely on, read from the built image."""
    info = inspect(image)
    config = info["Config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["kflare", "run"]
    assert {"9443/tcp", "8080/tcp", "8081/tcp"} <= set(config.get("ExposedPorts") or {})
    env = dict(e.partition("=")[::2] for e in config["Env"])
    assert env["PATH"].split(":")[0] == "/opt/kflare/bin"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    version = podman("run", "--rm", "--network=none", *ulimits(), "--entrypoint=kflare", image, "version").stdout
    assert version.strip() == __version__
    assert int(info["Size"]) < SIZE_BUDGET, f"{int(info['Size']) / 2**20:.0f} MiB"


def test_no_shell_no_package_manager_no_pip(image: str) -> None:
    """The runtime stage holds the interpreter, the venv and what they load: no shell to exec into, no apt or dpkg,
    no pip; the only programs are the interpreter and kflare's."""
    refused = podman("run", "--rm", "--network=none", *ulimits(), "--entrypoint=sh", image, "-c", "true", check=False)
    assert refused.returncode != 0
    found = in_image(
        image,
        """if True:
        import importlib.util, json, os, shutil
        dirs = os.environ["PATH"].split(":") + ["/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin"]
        names = ("sh", "bash", "dash", "ash", "busybox", "apt", "apt-get", "dpkg", "pip", "pip3")
        print(json.dumps({
            "user": [os.getuid(), os.getgid()],
            "programs": sorted({n for d in dirs if os.path.isdir(d) for n in os.listdir(d)}),
            "which": {n: shutil.which(n) for n in names},
            "files": [p for p in ("/bin/sh", "/usr/bin/sh", "/var/lib/dpkg/status") if os.path.lexists(p)],
            "modules": [m for m in ("pip", "ensurepip", "setuptools") if importlib.util.find_spec(m)],
        }))
        """,
    )
    assert found["user"] == [65532, 65532]
    assert {n: p for n, p in found["which"].items() if p} == {}
    assert found["files"] == []
    assert found["modules"] == []
    others = [p for p in found["programs"] if not re.fullmatch(r"python3?(\.\d+)?|kflare", p)]
    assert not others, f"programs beside the interpreter and kflare: {others}"


def test_bytecode_is_compiled_and_never_checked(image: str) -> None:
    """Everything kflare run imports has bytecode, compiled hash-based and unchecked (so that nothing about the
    sources, such as their timestamps after the copies between build stages, makes Python compile them again), and
    nothing is compiled at import, which a read-only root filesystem would make Python redo at every start."""
    found = in_image(
        image,
        """if True:
        import importlib._bootstrap_external as external, json, sys
        compiled = []
        source_to_code = external.SourceLoader.source_to_code
        def spy(self, data, path, *args, **kwargs):
            compiled.append(path)
            return source_to_code(self, data, path, *args, **kwargs)
        external.SourceLoader.source_to_code = spy
        import app.cli, app.server
        import app.xds, reconcilers.gateway.controller  # what `kflare run --gateway-enabled` imports as well
        flags, missing = set(), []
        for module in list(sys.modules.values()):
            cached = getattr(getattr(module, "__spec__", None), "cached", None)
            if cached and getattr(module, "__file__", "").endswith(".py"):
                try:
                    with open(cached, "rb") as pyc:
                        flags.add(int.from_bytes(pyc.read(8)[4:], "little"))
                except FileNotFoundError:
                    missing.append(module.__name__)
        print(json.dumps({"compiled": compiled, "missing": missing, "flags": sorted(flags), "n": len(sys.modules)}))
        """,
    )
    assert found["compiled"] == []
    assert found["missing"] == []
    assert found["flags"] == [0b01], "hash-based (bit 0), its source never checked (bit 1 unset)"
    assert found["n"] > 500


async def test_the_charts_pod_runs_the_image(
    image: str,
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare: Kflare,
    kube: ApiClient,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The chart installed, and its Deployment's pod run by podman as the kubelet would run it (see tests/image/pod.py):
    user 65532, read-only root filesystem, an emptyDir (tmpfs) on /tmp, no capabilities, the chart's limits, its
    ServiceAccount's token and so nothing but the chart's RBAC. It makes its serving certificate, gets Ready, reconciles
    the first slice, holds the leader Lease, serves metrics over HTTPS with that certificate, and logs JSON."""
    # The image under the name the chart gives it by default (its appVersion as the tag), in a local repository.
    podman("tag", image, f"localhost/kflare:{__version__}")
    release = Release(Helm(helm_binary(), tmp_path / "helm"), control_plane, f"img{uuid.uuid4().hex[:6]}", namespace)
    # No webhook: nothing routes the API server to its Service here, and the test's objects are an administrator's.
    await asyncio.to_thread(
        release.install, {"webhook": {"enabled": False}, "image": {"repository": "localhost/kflare"}}
    )
    try:
        release.wait_crds()
        deployment = await client.AppsV1Api(kube).read_namespaced_deployment(release.fullname, namespace)
        pod = kube.sanitize_for_serialization(deployment.spec.template.spec)
        issued = await client.CoreV1Api(kube).create_namespaced_service_account_token(
            release.fullname,
            namespace,
            client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)),
        )
        # The serving certificate is the pod's own to make (`--webhook-cert-secret`): no Secret volume for it.
        mounts = Mounts(issued.status.token, {})
        pod_name = f"{release.fullname}-6c9f7d8b5-q4x7z"
        proc = PodProcess(pod, mounts, control_plane, fresh_emulator, tmp_path, pod_name=pod_name, namespace=namespace)
        assert proc.image == f"localhost/kflare:{__version__}"
        size = int(inspect(proc.image)["Size"])
        proc.start()
        try:
            proc.wait_ready(timeout=60)
            to_ready = time.monotonic() - proc.started_at
            with capsys.disabled():
                print(f"\nimage {image}: {size / 2**20:.0f} MiB, Ready {to_ready:.1f}s after `podman run`")
            cert = await client.CoreV1Api(kube).read_namespaced_secret(f"{release.fullname}-webhook-tls", namespace)
            assert cert.metadata.labels["app.kubernetes.io/managed-by"] == "kflare"
            ca = base64.b64decode(cert.data["ca.crt"])
            await reconciles_and_serves(proc, kflare, kube, fresh_emulator, namespace, ca)
            lease = await client.CoordinationV1Api(kube).read_namespaced_lease(LEASE, namespace)
            assert lease.spec.holder_identity.startswith(pod_name)

            # Nothing is written outside /tmp: the root filesystem refuses it, and the container still runs.
            write = "open('/opt/kflare/probe', 'w')"
            refused = podman("exec", proc.name, "python", "-c", write, check=False)
            assert refused.returncode != 0
            assert "Read-only file system" in refused.stderr
            assert proc.process is not None
            assert proc.process.poll() is None
            await kflare.cleanup()  # deleting goes through the controller's finalizers too
            log = proc.log()
        finally:
            proc.stop()
    finally:
        release.uninstall()
    lines = [line for line in log.splitlines() if line.strip()]
    assert lines
    for line in lines:  # logging.format json: one object per line, nothing else
        json.loads(line)
    # RBAC refusals. Not one: an Event refused in a namespace being deleted (earlier tests' namespaces stay
    # Terminating, with their objects, on an API server without a controller-manager; the pod watches them all).
    denied = [line for line in lines if "forbidden" in line.lower() and "because it is being terminated" not in line]
    assert not denied, "\n".join(denied[:10])


async def reconciles_and_serves(
    proc: PodProcess, kflare: Kflare, kube: ApiClient, emulator: EmulatorProcess, namespace: str, ca: bytes
) -> None:
    probes = f"http://127.0.0.1:{proc.probe_port}"
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.get(f"{probes}/healthz")).text == "ok"

        async def ready() -> bool:
            return (await http.get(f"{probes}/readyz")).text == "ok"

        # Ready first as a standby; not ready again for the moment it takes the Lease and syncs its caches.
        await eventually(ready, timeout=60, what="/readyz ok once the pod leads with its caches synced")

    await kflare.ready_zone("example.com")
    await kflare.ready("CloudflareAccount", kflare.account, reason="Validated")
    await kflare.make_record("www", "zone", name="www.example.com", type="A", content="192.0.2.1", proxied=True)
    record = await kflare.ready("DNSRecord", "www", reason="Synced")
    zone_id = record["status"]["cloudflareMetadata"]["zoneID"]
    held = [r for r in emulator.client().dns.records.list(zone_id=zone_id) if r.name == "www.example.com"]
    assert [(r.type, r.content) for r in held] == [("A", "192.0.2.1")]

    # Metrics over HTTPS with the chart's serving certificate (its CA verifies it), to a token allowed to get them.
    tls = ssl.create_default_context(cadata=ca.decode())
    tls.check_hostname = False  # its names are the Service's; the chain is what is checked here
    metrics = f"https://127.0.0.1:{proc.ports['--metrics-bind-address']}/metrics"
    async with metrics_reader(kube, namespace, "scraper"):
        token = await service_account_token(kube, namespace, "scraper")

        async def scraped() -> str:
            async with httpx.AsyncClient(verify=tls, timeout=30) as http:
                reply = await http.get(metrics, headers={"Authorization": f"Bearer {token}"})
            assert reply.status_code == 200, reply.text
            assert 'kflare_resources{kind="DNSRecord",ready="True",reason="Synced"} 1.0' in reply.text
            return reply.text

        text = await eventually(scraped, what="the pod's metrics")
    assert "controller_runtime_reconcile_total{" in text


def test_an_unchanged_source_reuses_the_image(image: str) -> None:
    """The image is tagged by what it is built from: a second run with nothing changed builds nothing."""
    done = subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, timeout=300, check=False, env=podman_env()
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == image
    assert f"reusing {image}" in done.stderr
    assert "building" not in done.stderr
