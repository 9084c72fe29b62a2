"""The image's SPDX SBOM, made by syft (the generator BuildKit's SBOM scanner runs in the release workflow) from the
image as built here: it lists the Python packages kflare runs, kflare itself at this version, and the Debian packages
the runtime's files come from (recorded in /var/lib/dpkg/status.d/ as distroless images do, since the image has no
dpkg), each with a package URL; and nothing of a shell, a package manager or pip."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from collections import Counter
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


def purl_kind(package: dict[str, Any]) -> tuple[str, str]:
    """A package's package URL type (pypi, deb...) and canonical name; no type if it has no package URL."""
    for ref in package.get("externalRefs", []):
        if ref["referenceType"] == "purl":
            return ref["referenceLocator"].removeprefix("pkg:").partition("/")[0], canonical(package["name"])
    return "", canonical(package["name"])


def purls(sbom: dict[str, Any]) -> dict[str, str]:
    """package URL type and canonical name -> version."""
    found = {}
    for package in sbom["packages"]:
        kind, name = purl_kind(package)
        if kind:
            found[f"{kind}/{name}"] = package.get("versionInfo", "")
    return found


def test_sbom_is_spdx_and_lists_what_the_image_runs(
    sbom: dict[str, Any], image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sbom["spdxVersion"] == "SPDX-2.3"
    found = purls(sbom)
    assert found["pypi/kflare"] == __version__
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {canonical(re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0]) for d in dependencies}
    missing = sorted(n for n in names if f"pypi/{n}" not in found)
    assert not missing, f"runtime dependencies the SBOM does not list: {missing}"
    # The interpreter the image runs, at its version: the Debian package it comes from (hack/image.sh's base), or
    # on the official image's, where it is built from source, the binary syft recognises.
    python = podman(
        "run", "--rm", "--network=none", "--entrypoint=python", image, "-c", "import sys; print(sys.version)"
    )
    version = python.stdout.split()[0]
    minor = ".".join(version.split(".")[:2])
    interpreter = found.get(f"deb/{canonical(f'python{minor}-minimal')}") or found.get("generic/python", "")
    assert interpreter.startswith(version), f"the interpreter, {version}, is not listed"
    # And the libraries it loads, as Debian packages.
    debian = {name.removeprefix("deb/") for name in found if name.startswith("deb/")}
    assert {"libc6", "libssl3", "libffi8", "zlib1g", "ca-certificates"} <= debian
    assert not debian & {"bash", "dash", "coreutils", "apt", "dpkg", "perl-base", "python3-pip"}
    assert "pypi/pip" not in found
    assert "pypi/setuptools" not in found
    kinds = Counter(kind for kind, _ in map(purl_kind, sbom["packages"]) if kind)
    debs = sorted(package["name"] for package in sbom["packages"] if purl_kind(package)[0] == "deb")
    with capsys.disabled():
        print(f"\nSBOM: {kinds['pypi']} Python and {kinds['deb']} Debian packages, these: {' '.join(debs)}")
