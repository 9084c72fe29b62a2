"""The release workflow: actionlint finds nothing wrong with it, it builds, pushes, signs and attests what the
README's "Verifying a release" checks, and its commands that can run here do: the version check (which refuses a
tag the package and the chart disagree with) and the chart's packaging. The image build it runs is the
Dockerfile's, which tests/image builds and runs, and its SBOMs come from syft, which tests/image/test_sbom.py runs
on that image."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from app import __version__
from app.api.crds import render_crds
from tests.chart.gotools import go_tool
from tests.chart.helm import CHART, REPO_ROOT, Helm

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yml"
IMAGE = yaml.safe_load((CHART / "values.yaml").read_text())["image"]["repository"]
OWNER = IMAGE.split("/")[1]


def workflow() -> dict[str, Any]:
    return dict(yaml.safe_load(RELEASE.read_text()))


def steps() -> list[dict[str, Any]]:
    (job,) = workflow()["jobs"].values()
    return list(job["steps"])


def step(name_starts: str) -> dict[str, Any]:
    (found,) = [s for s in steps() if s.get("name", "").startswith(name_starts)]
    return found


@pytest.mark.timeout(1800)  # the first run builds actionlint
def test_actionlint_passes() -> None:
    actionlint = go_tool("actionlint")  # hack/go-tools.sh installs shellcheck too, for the `run:` scripts
    shellcheck = shutil.which("shellcheck")
    assert shellcheck is not None, "no shellcheck: actionlint would not check the workflow's scripts"
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    argv = [str(actionlint), "-no-color", f"-shellcheck={shellcheck}", *files]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_release_runs_on_version_tags_with_the_least_permissions() -> None:
    wf = workflow()
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as true
    assert on == {"push": {"tags": ["v*"]}}
    assert wf["permissions"] == {"contents": "read"}
    (job,) = wf["jobs"].values()
    assert job["permissions"] == {"contents": "write", "packages": "write", "id-token": "write"}


def test_release_builds_both_platforms_with_sbom_and_provenance() -> None:
    build = step("Build and push the image")
    assert build["uses"].startswith("docker/build-push-action@")
    config = build["with"]
    assert set(config["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert config["push"] is True
    assert config["sbom"] is True
    assert config["provenance"] == "mode=max"
    assert "BASE" not in str(config)  # the release builds on the public base, the Dockerfile's default


def test_release_signs_image_chart_and_files() -> None:
    script = "\n".join(s.get("run", "") for s in steps())
    assert 'cosign sign --yes "$IMAGE@$DIGEST"' in script  # by digest: the index, both platforms
    assert 'cosign sign --yes "$CHARTS/kflare@$digest"' in script
    assert script.count("cosign sign-blob --yes --bundle") == 3  # the chart archive, the CRDs and each SBOM
    assert '"oci://$CHARTS"' in script
    assert '--format "{{ json (index .SBOM \\"linux/$arch\\").SPDX }}"' in script
    assert any(s.get("uses", "").startswith("sigstore/cosign-installer@") for s in steps())


def run_version_step(tmp_path: Path, tag: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    output = tmp_path / "output"
    output.write_text("")
    env = {
        "PATH": os.environ["PATH"],
        "GITHUB_REF_NAME": tag,
        "GITHUB_REPOSITORY_OWNER": OWNER.upper(),  # GitHub keeps the owner's case; registries want lower case
        "GITHUB_OUTPUT": str(output),
    }
    script = step("Version")["run"]
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return done, outputs


def test_the_release_attaches_the_crds_as_one_manifest_of_every_kind(tmp_path: Path) -> None:
    """Installs that manage the CRDs themselves (crds.enabled=false) apply config/crd/bases from the release: the
    step's file holds every kind's CRD, exactly as generated, and the GitHub release carries it."""
    shutil.copytree(REPO_ROOT / "config", tmp_path / "config")
    crd_step = step("CRDs as plain manifests")
    script = crd_step["run"].replace("cosign sign-blob", ": cosign sign-blob")  # no signing here
    env = {"PATH": os.environ["PATH"], "VERSION": __version__}
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    documents = [d for d in yaml.safe_load_all((tmp_path / f"dist/kflare-{__version__}-crds.yaml").read_text()) if d]
    assert {d["metadata"]["name"] for d in documents} == {
        crd["metadata"]["name"] for crd in (yaml.safe_load(text) for text in render_crds(helm=False).values())
    }
    assert "dist/*-crds.yaml" in step("GitHub release")["run"]


def test_version_step_agrees_with_the_package_and_the_chart(tmp_path: Path) -> None:
    done, outputs = run_version_step(tmp_path, f"v{__version__}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert outputs == {"version": __version__, "image": IMAGE, "charts": f"ghcr.io/{OWNER}/charts"}


def test_version_step_refuses_a_tag_the_package_disagrees_with(tmp_path: Path) -> None:
    done, outputs = run_version_step(tmp_path, "v9.9.9")
    assert done.returncode != 0
    assert f"::error::tag v9.9.9, app/__init__.py {__version__}" in done.stdout
    assert outputs == {}


def test_chart_packaging_command_runs_here(helm: Helm, tmp_path: Path) -> None:
    """The workflow's `helm package` line, run in a copy of the checkout's chart."""
    script = step("Package, push and sign the chart")["run"]
    (line,) = [ln.strip() for ln in script.splitlines() if ln.strip().startswith("helm package")]
    shutil.copytree(CHART, tmp_path / "chart" / "kflare")
    (tmp_path / "dist").mkdir()
    argv = [str(helm.binary), *line.split()[1:]]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "dist" / f"kflare-{__version__}.tgz").is_file()


def test_readme_verifies_what_the_workflow_signs() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("## Verifying a release", 1)[1].split("\n## ", 1)[0]
    identity = f"https://github.com/{OWNER}/kflare/.github/workflows/release.yml@refs/tags/v$version"
    assert f'identity="{identity}"' in section
    assert "issuer=https://token.actions.githubusercontent.com" in section
    assert f'cosign verify "{IMAGE}:$version"' in section
    assert f'cosign verify "ghcr.io/{OWNER}/charts/kflare:$version"' in section
    assert f"helm install kflare oci://ghcr.io/{OWNER}/charts/kflare" in section
    assert "--set image.digest=" in section
    policy = yaml.safe_load(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert policy["kind"] == "ImageValidatingPolicy"
    (glob,) = policy["spec"]["matchImageReferences"]
    assert glob["glob"] == f"{IMAGE}*"
    (ident,) = policy["spec"]["attestors"][0]["cosign"]["keyless"]["identities"]
    assert re.match(ident["subjectRegExp"], identity.replace("$version", __version__))
