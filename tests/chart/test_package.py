"""The chart as it ships: `helm package` makes the archive that `helm install` takes from a file and from an OCI
registry (with the image pushed beside it), its appVersion pins the image's tag and `image.digest` pins the image
by digest. Every test runs with Helm 3 and with Helm 4."""

from __future__ import annotations

import asyncio
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio.client.api_client import ApiClient

from app import __version__
from tests.chart.helm import CHART, Helm
from tests.chart.registry import Registry
from tests.chart.test_install import Release, read
from tests.image.conftest import podman

pytestmark = pytest.mark.integration

DEFAULT_REPOSITORY = yaml.safe_load((CHART / "values.yaml").read_text())["image"]["repository"]
NO_WEBHOOK = {"webhook": {"enabled": False}}


def package(helm: Helm, destination: Path) -> Path:
    out = helm.run("package", str(CHART), "--destination", str(destination)).stdout
    archive = destination / f"kflare-{__version__}.tgz"
    assert str(archive) in out, out
    return archive


async def manager_image(kube: ApiClient, release: Release) -> str:
    deployment = await read(kube, "Deployment", release.fullname, release.namespace)
    (container,) = deployment.spec.template.spec.containers
    return str(container.image)


def test_package_holds_the_chart(helm: Helm, tmp_path: Path) -> None:
    archive = package(helm, tmp_path)
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
        chart = yaml.safe_load(tar.extractfile("kflare/Chart.yaml").read())  # type: ignore[union-attr]
    assert chart["version"] == chart["appVersion"] == __version__
    crds = {f"kflare/templates/crds/{p.name}" for p in (CHART / "templates" / "crds").glob("*.yaml")}
    assert crds
    assert crds | {"kflare/values.yaml", "kflare/values.schema.json", "kflare/templates/NOTES.txt"} <= names
    assert not [n for n in names if n.endswith((".orig", ".bak", "~"))]
    lint = helm.run("lint", str(archive), "--strict")
    assert "1 chart(s) linted, 0 chart(s) failed" in lint.stdout


async def test_install_from_the_package_file(release: Release, helm: Helm, kube: ApiClient, tmp_path: Path) -> None:
    archive = package(helm, tmp_path)
    await asyncio.to_thread(release.install, NO_WEBHOOK, chart=archive)
    # No tag given: the chart's appVersion, so a chart version always runs the image built with it.
    assert await manager_image(kube, release) == f"{DEFAULT_REPOSITORY}:{__version__}"
    listed = release._helm("list", "-o", "yaml").stdout
    (entry,) = [r for r in yaml.safe_load(listed) if r["name"] == release.name]
    assert entry["chart"] == f"kflare-{__version__}"
    assert entry["app_version"] == __version__


@pytest.mark.timeout(1800)  # the first run builds the image, and may install podman and the registry
async def test_install_from_an_oci_registry_pinned_by_digest(
    release: Release, helm: Helm, kube: ApiClient, registry: Registry, image: str, tmp_path: Path
) -> None:
    """What a release does and a platform team then runs: the image and the chart pushed to a registry, the chart
    installed from there with the image pinned to the digest the registry holds."""
    digest_file = tmp_path / "digest"
    target = f"{registry.host}/kflare:{__version__}"
    podman("push", "--quiet", "--tls-verify=false", f"--digestfile={digest_file}", image, target, timeout=300)
    digest = digest_file.read_text().strip()
    assert digest.startswith("sha256:")
    assert registry.manifest_digest("kflare", __version__) == digest

    archive = package(helm, tmp_path)
    pushed = helm.run("push", str(archive), f"oci://{registry.host}/charts", "--plain-http")
    assert f"{registry.host}/charts/kflare:{__version__}" in pushed.stdout + pushed.stderr
    chart_digest = registry.manifest_digest("charts/kflare", __version__)
    assert chart_digest is not None
    assert chart_digest in pushed.stdout + pushed.stderr

    shown = helm.run("show", "chart", f"oci://{registry.host}/charts/kflare", "--version", __version__, "--plain-http")
    assert yaml.safe_load(shown.stdout)["appVersion"] == __version__

    values = {**NO_WEBHOOK, "image": {"repository": f"{registry.host}/kflare", "digest": digest}}
    oci = f"oci://{registry.host}/charts/kflare"
    await asyncio.to_thread(release.install, values, chart=oci, args=["--version", __version__, "--plain-http"])
    pinned = await manager_image(kube, release)
    assert pinned == f"{registry.host}/kflare@{digest}"
    # What the pod would pull is there, by digest, whatever the tag points to later.
    assert registry.manifest_digest("kflare", digest) == digest


def test_a_digest_that_is_not_sha256_is_refused(helm: Helm) -> None:
    done = helm.template({"image": {"digest": "latest"}}, check=False)
    assert done.returncode != 0
    assert "digest" in done.stderr


def test_helm_versions() -> None:
    """Both majors are really there: Helm 3 for existing users, Helm 4 for new ones."""
    from tests.chart.helm import HELMS, helm_binary

    majors = set()
    for name in HELMS:
        out = subprocess.run([str(helm_binary(name)), "version", "--short"], capture_output=True, text=True, check=True)
        majors.add(out.stdout.strip().split(".")[0])
    assert majors == {"v3", "v4"}
