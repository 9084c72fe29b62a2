"""`make chaos`: scenarios that break kflare on purpose (crashes, Cloudflare faults, Kubernetes faults, hostile
input) and check what a user would lose. They are not part of `make test`'s pytest run (see the Makefile)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.controlplane import ControlPlane, bin_dir_from_env
from tests.chaos.figures import FIGURES, SCALE, Figures
from tests.chaos.secrets_audit import AuditLog, audit_args
from tests.fixtures.controller import install_crds
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.kube import leaked

REPORT = Path(os.environ.get("KFLARE_CHAOS_REPORT") or Path("build") / "chaos" / f"figures-{SCALE}.json")
SHARED_PLANE = "KFLARE_BENCH_PLANE"
"""As bench/harness.py reads it: the work directory of a running control plane to use instead of starting one."""
SHARED_EMULATOR = "KFLARE_BENCH_EMULATOR"
"""As bench/harness.py reads it: the URL of a running emulator to use instead of starting one."""


@pytest.fixture(scope="session")
def figures() -> Figures:
    return FIGURES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not FIGURES.rows:
        return
    terminalreporter.section(f"chaos figures ({SCALE} size)")
    terminalreporter.write_line(FIGURES.table())
    FIGURES.write(REPORT)
    terminalreporter.write_line(f"written to {REPORT}")


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """The session's API server, as tests/fixtures/kube.py starts it, with an audit log (see secrets_audit.py).

    With `KFLARE_BENCH_PLANE` set (the smoke run of bench/chaos.py, which empties it first), the plane running there
    instead, left running. It keeps no audit log and this session holds none of its keys (no client certificate
    can be issued for it), so only scenarios that need neither can run on it."""
    bins = bin_dir_from_env()
    if bins is None:
        pytest.fail("no kube-apiserver: set K8S_TEST_BIN (`make chaos` does)")
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    shared = os.environ.get(SHARED_PLANE)
    if shared:
        yield ControlPlane(bin_dir=bins, workdir=Path(shared))
        return
    workdir = Path(tempfile.mkdtemp(prefix="kflare-chaos-audit-"))
    plane = ControlPlane.in_tempdir(bins, extra_args=audit_args(workdir))
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
        left = leaked(plane)
        assert not left, f"control plane left behind: {left}"


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    """The session's emulator, as tests/fixtures/emulator.py starts it; with `KFLARE_BENCH_EMULATOR` set (the smoke
    run of bench/chaos.py), the one running there, left running."""
    process = EmulatorProcess(workdir=tmp_path_factory.mktemp("emulator"))
    shared = os.environ.get(SHARED_EMULATOR)
    if shared:
        process.attach(shared)
    else:
        process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def kflare_crds(control_plane: ControlPlane) -> None:
    """kflare's CRDs, installed once per session; the plane of `KFLARE_BENCH_PLANE` has them already."""
    if not os.environ.get(SHARED_PLANE):
        install_crds(control_plane)


@pytest.fixture(scope="session")
def audit(control_plane: ControlPlane) -> AuditLog:
    arg = next((a for a in control_plane.extra_args if a.startswith("--audit-log-path=")), None)
    if arg is None:
        pytest.fail(f"this scenario reads the API server's audit log, which the plane of {SHARED_PLANE} does not keep")
    return AuditLog(Path(arg.partition("=")[2]))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Scenario 5 searches what every other scenario's controllers produced: it runs last."""
    items.sort(key=lambda item: item.nodeid.startswith("tests/chaos/test_secrets.py"))
