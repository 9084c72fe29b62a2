"""The controller image, built by hack/image.sh (podman, a local Debian base): once per session."""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "image.sh"


def podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(REPO / "hack" / "containers.conf")}


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, check=False, env=podman_env()
    )
    if check:
        assert done.returncode == 0, f"podman {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return done


def ulimits() -> list[str]:
    """Explicit limits well under the machine's own: podman's defaults exceed what runc may set here, and so does a
    limit close to the machine's."""
    flags = []
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft, hard = resource.getrlimit(which)
        limit = min(v // 2 for v in (soft, hard, 16384) if v != resource.RLIM_INFINITY)
        flags.append(f"--ulimit={name}={limit}:{limit}")
    return flags


@pytest.fixture(scope="session")
def image() -> str:
    """The kflare image's reference; hack/image.sh installs podman when missing and reuses an unchanged build. A
    machine that cannot build it fails the tests: they are how the image is known to work."""
    done = subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, timeout=1500, check=False, env=podman_env()
    )
    assert done.returncode == 0, f"hack/image.sh failed ({done.returncode}):\n{done.stderr[-4000:]}"
    return done.stdout.strip().splitlines()[-1]
