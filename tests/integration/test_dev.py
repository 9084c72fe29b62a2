"""`kflare dev --once`: the embedded default converges on one machine, with no cluster and no Cloudflare account."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def test_kflare_dev_once_converges_the_examples(control_plane: ControlPlane) -> None:
    kflare = Path(sys.executable).with_name("kflare")
    done = subprocess.run(
        [str(kflare), "dev", "--once", "--timeout", "90", "--bin-dir", str(control_plane.bin_dir)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "all resources are Ready" in done.stdout
    final = done.stdout.rsplit("KIND", 1)[1]
    rules = ("block-admin", "login", "free-managed", "old-api", "security-headers", "www-to-apex", "static-assets")
    rules = (*rules, "api-settings", "admin-port", "office-networks")
    for name in ("demo-account", "example-com", "www", "mx-primary", "mx-backup", "sip-srv", "caa", *rules):
        assert name in final
    assert "False" not in final


def test_kflare_dev_once_fails_with_the_table_when_resources_cannot_converge(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    (tmp_path / "bad.yaml").write_text(
        """
apiVersion: kflare.dev/v1alpha1
kind: CloudflareAccount
metadata:
  name: wrong-account
spec:
  accountID: ffffffffffffffffffffffffffffffff
  tokenSecretRef: {name: cloudflare-api-token, namespace: kflare-system}
"""
    )
    kflare = Path(sys.executable).with_name("kflare")
    done = subprocess.run(
        [
            str(kflare),
            "dev",
            "--once",
            "--timeout",
            "15",
            "--apply",
            str(tmp_path),
            "--bin-dir",
            str(control_plane.bin_dir),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 1
    assert "wrong-account" in done.stdout
    assert "not all resources were Ready" in done.stderr


def test_kflare_dev_stops_everything_on_sigterm(control_plane: ControlPlane) -> None:
    kflare = Path(sys.executable).with_name("kflare")
    proc = subprocess.Popen(
        [str(kflare), "dev", "--bin-dir", str(control_plane.bin_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.stdout is not None
    workdir = ""
    deadline = time.monotonic() + 120
    for line in proc.stdout:  # read until the examples are Ready; the pipe never blocks the child for long
        if "--kubeconfig" in line and not workdir:
            workdir = line.split("--kubeconfig ")[1].split("/plane/")[0]
        if ("www" in line and "Synced" in line) or time.monotonic() > deadline:
            break
    assert workdir, "kflare dev did not print its kubeconfig"
    assert running_under(workdir), "the API server and etcd run from the working directory"
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    assert "stopped" in rest
    assert running_under(workdir) == []
    assert not Path(workdir).exists()


def running_under(workdir: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", workdir], capture_output=True, text=True, check=False)
    return found.stdout.split()
