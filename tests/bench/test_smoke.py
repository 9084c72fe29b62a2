"""Every benchmark in bench/ runs at its smallest size and prints its figures.

A benchmark nobody runs stops running (an import moved, a flag renamed, a kind's plural changed) and its figures can
no longer be reproduced. Each script here runs as a user runs it, `.venv/bin/python bench/X.py` with the flags that
make it smallest, and must exit 0 and print the lines of its table. What the figures are is not checked: at this
size, and on a shared machine, they mean nothing.

The benchmarks that need a control plane share one (`KFLARE_BENCH_PLANE`, see bench/harness.py), which each empties
of what the one before it left, and an emulator (`KFLARE_BENCH_EMULATOR`), which each puts back to its starting
state: starting a plane for each would cost more than most of them take at this size, and an emulator a second.
`bench/chaos.py` runs its scenario on it too, as that scenario reads no audit log (`make chaos` starts a plane
whose API server writes one).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.controlplane import ControlPlane, bin_dir_from_env
from tests.fixtures.controller import install_crds
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.gateway import install_gateway_api
from tests.fixtures.kube import leaked

SHARED_PLANE = "KFLARE_BENCH_PLANE"
SHARED_EMULATOR = "KFLARE_BENCH_EMULATOR"
"""As bench/harness.py reads them (the tests do not import the benchmarks)."""

BENCH = Path(__file__).resolve().parents[2] / "bench"
STOP_GRACE = 30.0
"""Seconds a benchmark has to stop what it started once asked to stop (SIGTERM unwinds its `finally`)."""


def run(script: str, *args: str, timeout: float, env: dict[str, str] | None = None) -> str:
    """The benchmark's standard output; fails with its output when it exits non-zero or outlives `timeout`."""
    proc = subprocess.Popen(
        [sys.executable, str(BENCH / script), *args],
        cwd=BENCH.parent,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"bench/{script} still running after {timeout:.0f} s:\n{stop(proc)[-4000:]}")
    finally:
        if proc.poll() is None:  # the test itself was stopped (its timeout, ^C): so is the benchmark
            stop(proc)
    print(out)  # the table, for `pytest -s` or `-rP`
    assert proc.returncode == 0, f"bench/{script} exited {proc.returncode}:\n{out[-4000:]}"
    return out


def stop(proc: subprocess.Popen[str]) -> str:
    """Its output once stopped: SIGTERM first, which a benchmark unwinds (stopping what it started), then SIGKILL."""
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


def lines_with(out: str, *labels: str) -> None:
    missing = [label for label in labels if label not in out]
    assert not missing, f"not printed: {missing}\n{out[-4000:]}"


@pytest.fixture(scope="module")
def test_bins() -> dict[str, str]:
    """K8S_TEST_BIN for the benchmarks that start the test control plane."""
    bins = bin_dir_from_env()
    if bins is None:
        message = "no kube-apiserver: set K8S_TEST_BIN (`make test` does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return {"K8S_TEST_BIN": str(bins), "NO_PROXY": "127.0.0.1,localhost"}


@pytest.fixture(scope="module")
def shared_plane(test_bins: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of a benchmark that uses the module's control plane and emulator as its own. The plane has
    kflare's CRDs and the Gateway API's, which bench/gateway.py installs and then finds there: the API server spends
    seconds on those (it compiles their validation rules), here while kflare's are rendered. The emulator starts
    while the plane does."""
    plane = ControlPlane.in_tempdir(Path(test_bins["K8S_TEST_BIN"]))
    emulator = EmulatorProcess(workdir=tmp_path_factory.mktemp("emulator"))
    pool = ThreadPoolExecutor(2)
    try:
        started = pool.submit(emulator.start)
        plane.start()
        gateway = pool.submit(install_gateway_api, plane)
        install_crds(plane)
        gateway.result()
        started.result()
        yield {**test_bins, SHARED_PLANE: str(plane.workdir), SHARED_EMULATOR: emulator.url}
    finally:
        pool.submit(emulator.stop)  # while the plane stops
        plane.stop()
        pool.shutdown()
        assert not leaked(plane), f"control plane left behind: {leaked(plane)}"
        assert not emulator.running


def test_chaos_help_starts_nothing(tmp_path: Path) -> None:
    """`--help` describes the run; it neither runs pytest nor removes the last report."""
    report = tmp_path / "figures.json"
    report.write_text("{}")
    out = run("chaos.py", "--help", "--report", str(report), timeout=60)
    assert out.startswith("usage:"), out[-2000:]
    assert report.read_text() == "{}"


def test_expressions() -> None:
    out = run("expressions.py", "--expressions", "50", "--rounds", "1", timeout=60)
    lines_with(out, "expressions/s", "check_expression costs")


def test_cloudflare_client() -> None:
    out = run("cloudflare_client.py", "--calls", "20", "--concurrency", "2", "--rounds", "1", timeout=120)
    lines_with(out, "calls per line", "calls/s", "CPU us/call")


def test_webhook() -> None:
    args = ("--reviews", "20", "--concurrency", "2", "--rounds", "1", "--hostile", "4", "--idle", "0.5")
    out = run("webhook.py", *args, timeout=240)
    lines_with(
        out,
        "reviews/s",
        "webhook + metrics",
        "rounds' own ratios",
        "above the bare ASGI endpoint",
        "WAFCustomRule (expression checked)",
        "RSS in MiB",
    )


@pytest.mark.integration
def test_converge(shared_plane: dict[str, str]) -> None:
    # One scale: a second one would add a converge, two restarts and a drift round for the RSS slope line only.
    args = ("--scales", "4:1", "--drift", "0.5", "--outage", "0.5", "--secrets-mib", "1", "--settle", "0")
    out = run("converge.py", *args, timeout=240, env=shared_plane)
    lines_with(
        out,
        "kflare converge benchmark",
        "calls to converge",
        "calls after a restart",
        "calls per drift round",
        "account 503 for 0.5 s",
        "controller RSS, 5 resources Ready",
        "floor: kubectl apply + a finalizer and a status write each",
        "wall time to all Ready / floor",
        "baseline: 4 records, each write alone",
    )


@pytest.mark.integration
def test_tunnels(shared_plane: dict[str, str]) -> None:
    out = run("tunnels.py", "--tunnels", "1", "--drift", "0.5", timeout=240, env=shared_plane)
    lines_with(out, "calls to converge", "calls after a restart", "calls per drift round", "token reads")


@pytest.mark.integration
def test_rules(shared_plane: dict[str, str]) -> None:
    out = run("rules.py", "--rules", "7", "--items", "10", "--drift", "0.5", timeout=240, env=shared_plane)
    lines_with(out, "converge rules:", "drift round of the rules", "converge the list", "drift round of the list")


@pytest.mark.integration
def test_workers(shared_plane: dict[str, str]) -> None:
    out = run("workers.py", "--workers", "2", "--drift", "0.5", timeout=240, env=shared_plane)
    lines_with(out, "calls to converge the Workers", "calls per drift round", "uploads on an idle resync")


@pytest.mark.integration
def test_soak(shared_plane: dict[str, str]) -> None:
    args = ("--resources", "4", "--minutes", "0.04", "--window", "0.02", "--drift", "0.5", "--warmup", "0")
    out = run("soak.py", *args, timeout=240, env=shared_plane)
    lines_with(out, "soak: 4 records", "RSS slope", "open sockets slope", "not Ready at the end")


@pytest.mark.integration
def test_gateway(shared_plane: dict[str, str]) -> None:
    args = ("--routes", "2", "--repeat", "1", "--changes", "2", "--seconds", "0.2")
    out = run(
        "gateway.py", *args, "--concurrency", "2", "--idle", "0.2", "--imports", "1", timeout=240, env=shared_plane
    )
    lines_with(
        out,
        "translation of 2 HTTPRoutes",
        "xDS push",
        "route change",
        "requests per second",
        "ingress document",
        "grpcio + xds-protos",
    )


@pytest.mark.integration
def test_chaos(shared_plane: dict[str, str], tmp_path: Path) -> None:
    """The smallest scenario that records figures, at the size of `make chaos`."""
    args = ("--scale", "ci", "--report", str(tmp_path / "figures.json"))
    out = run(
        "chaos.py", *args, "--", "-k", "test_fuzzed_reviews_straight_at_the_webhook", timeout=240, env=shared_plane
    )
    lines_with(out, "chaos figures, ci size", "reviews fuzzed", "review hangs")
