"""The image's SPDX SBOM, made by syft (the generator BuildKit's SBOM scanner runs in the release workflow) from the
image as built here: it lists the Debian packages of the base and the Python packages kflare runs, kflare itself
at this version, each with a package URL."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from app import __version__
from tests.chart.gotools import go_tool
from tests.image.conftest import REPO, podman

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]  # the first run builds syft and the image


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def sbom(image: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    syft = go_tool("syft")
    root = tmp_path_factory.mktemp("sbom")
    archive, out = root / "image.tar", root / "kflare.spdx.json"
    podman("save", "--quiet", "--format=oci-archive", f"--output={archive}", image, timeout=300)
    done = subprocess.run(
        [str(syft), "scan", f"oci-archive:{archive}", "--quiet", "--output", f"spdx-json={out}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(Path(out).read_text()))


def purls(sbom: dict[str, Any]) -> dict[str, str]:
    """package URL type and canonical name -> version."""
    found = {}
    for package in sbom["packages"]:
        for ref in package.get("externalRefs", []):
            if ref["referenceType"] == "purl":
                kind = ref["referenceLocator"].removeprefix("pkg:").partition("/")[0]
                found[f"{kind}/{canonical(package['name'])}"] = package.get("versionInfo", "")
    return found


def test_sbom_is_spdx_and_lists_what_the_image_runs(sbom: dict[str, Any], image: str) -> None:
    assert sbom["spdxVersion"] == "SPDX-2.3"
    found = purls(sbom)
    assert found["pypi/kflare"] == __version__
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {canonical(re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0]) for d in dependencies}
    missing = sorted(n for n in names if f"pypi/{n}" not in found)
    assert not missing, f"runtime dependencies the SBOM does not list: {missing}"
    # The interpreter the image runs, as the Debian package it comes from.
    python = podman(
        "run", "--rm", "--network=none", "--entrypoint=python", image, "-c", "import sys; print(sys.version)"
    )
    minor = ".".join(python.stdout.split()[0].split(".")[:2])
    assert f"deb/{canonical('python' + minor)}" in found
    assert "deb/libc6" in found
