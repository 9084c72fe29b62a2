"""An OCI registry on loopback: Distribution's registry (Debian's docker-registry package, installed by
hack/image.sh), plain HTTP, storage in a temporary directory."""

from __future__ import annotations

import contextlib
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.controlplane import free_port
from tests.image.conftest import SCRIPT


@dataclass
class Registry:
    host: str  # host:port, as image references and oci:// URLs name it
    log: Path

    def manifest_digest(self, repository: str, reference: str) -> str | None:
        """The digest the registry serves for `repository:reference` (a tag or a digest), or None."""
        request = urllib.request.Request(
            f"http://{self.host}/v2/{repository}/manifests/{reference}",
            method="HEAD",
            headers={
                "Accept": ", ".join(
                    [
                        "application/vnd.oci.image.index.v1+json",
                        "application/vnd.oci.image.manifest.v1+json",
                        "application/vnd.docker.distribution.manifest.v2+json",
                    ]
                )
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310
                return str(reply.headers["Docker-Content-Digest"])
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    tools = subprocess.run(["bash", str(SCRIPT), "tools"], capture_output=True, text=True, timeout=900, check=False)
    assert tools.returncode == 0, f"hack/image.sh tools failed:\n{tools.stderr[-3000:]}"
    root = tmp_path_factory.mktemp("registry")
    host = f"127.0.0.1:{free_port()}"
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: warn}\n"
        f"storage: {{filesystem: {{rootdirectory: {root / 'data'}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: {host}}}\n"
    )
    log = root / "registry.log"
    with log.open("wb") as out:
        process = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, f"the registry exited:\n{log.read_text()}"
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"http://{host}/v2/", timeout=1) as reply,
            ):
                if reply.status == 200:
                    break
            assert time.monotonic() < deadline, f"the registry did not answer within 30s:\n{log.read_text()}"
            time.sleep(0.1)
        yield Registry(host, log)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
