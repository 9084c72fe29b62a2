"""The upstream Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance, the version of the tests'
CRDs) against the class, with its echo backends as pods, built by hack/gateway-e2e.sh.

The suite sends its requests to a Gateway's `status.addresses`: the class publishes the tunnel's hostname,
`<tunnel id>.cfargotunnel.com`, which Cloudflare's edge takes to the data plane. Here that name resolves, for the
suite's process only (a mount namespace with its own /etc/hosts), to a Service in front of the data plane pods' Envoy
on the listeners' port 80: the suite reaches the Gateway through the data plane's address, as cloudflared reaches
Envoy. The suite is run without a feature list, so it tests the features `GatewayClass.status` claims.

The report it writes goes to $CONFORMANCE_REPORT (what `make conformance` sets: docs/conformance/), else beside the
test's files; its totals by profile are printed. Failing tests of the suite fail no test here: the report is the
figure.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from app import __version__
from reconcilers.gateway.features import supported_features
from reconcilers.gateway.kinds import CLASS_NAME
from tests.e2e.gateway import NAMESPACE, RELEASE, GatewayRelease, tunnel_id
from tests.e2e.test_chart import deadline

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

PROFILES = "GATEWAY-HTTP,GATEWAY-GRPC"
SUITE_TIMEOUT = 2400


def data_plane_service(gw: GatewayRelease) -> str:
    """A Service on the listeners' port in front of the data plane pods' Envoy; returns its address."""
    name = f"{RELEASE}-kflare-data-plane"
    gw.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "selector": {
                    "app.kubernetes.io/instance": RELEASE,
                    "app.kubernetes.io/component": "data-plane",
                },
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
            },
        }
    )
    address: str = gw.get("service", name, "-n", NAMESPACE)["spec"]["clusterIP"]
    return address


def totals(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for profile in report.get("profiles") or []:
        core = profile.get("core") or {}
        extended = profile.get("extended") or {}
        out[profile["name"]] = {
            "result": core.get("result"),
            "core": core.get("statistics"),
            "extended": extended.get("statistics"),
            "failed core": core.get("failedTests") or [],
            "failed extended": extended.get("failedTests") or [],
        }
    return out


def test_the_upstream_conformance_suite(
    gateway_release: GatewayRelease, gateway_bins: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gw = gateway_release
    gw.wait_data_plane_ready(2)
    claimed: list[dict[str, str]] = []
    for _ in deadline(60):
        claimed = gw.get("gatewayclass", CLASS_NAME).get("status", {}).get("supportedFeatures") or []
        if claimed:
            break
    # The cluster has the standard channel's CRDs: what the class claims with them.
    assert claimed == supported_features("standard")
    tunnel_host = f"{tunnel_id(gw.tunnel())}.cfargotunnel.com"
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n{data_plane_service(gw)} {tunnel_host}\n")
    report = Path(os.environ.get("CONFORMANCE_REPORT") or tmp_path / "report.yaml").resolve()
    report.parent.mkdir(parents=True, exist_ok=True)
    suite = [
        str(gateway_bins / "conformance.test"),
        "-test.run=^TestConformance$",
        f"-test.timeout={SUITE_TIMEOUT}s",
        f"-gateway-class={CLASS_NAME}",
        f"-conformance-profiles={PROFILES}",
        f"-report-output={report}",
        "-organization=kflare",
        "-project=kflare",
        "-url=https://github.com/kflare/kflare",
        f"-version=v{__version__}",
        "-contact=kflare maintainers",
        # No feature list: the suite tests what GatewayClass.status claims.
    ]
    # The tunnel's hostname resolves to the data plane for the suite's process alone; the Go resolver reads hosts.
    script = 'mount --bind "$1" /etc/hosts && shift && exec "$@"'
    env = {**os.environ, "KUBECONFIG": str(gw.cluster.kubeconfig_path), "NO_PROXY": "*"}
    # Beside the report, for reading after the run (tmp_path goes with the session).
    log = report.with_suffix(".log")
    began = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(hosts), *suite],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp_path,
            timeout=SUITE_TIMEOUT + 120,
            check=False,
        )
    took = time.monotonic() - began
    text = log.read_text()
    assert report.exists(), f"no report (exit {done.returncode}):\n{text[-6000:]}"
    written = yaml.safe_load(report.read_text())
    assert written.get("profiles"), f"a report of no profile (exit {done.returncode}):\n{text[-6000:]}"
    with capsys.disabled():
        print(f"\nconformance suite: {took:.0f}s, exit {done.returncode}; report {report}")
        for name, figures in totals(written).items():
            print(f"  {name}: {yaml.safe_dump(figures, default_flow_style=True, width=1000).strip()}")
    assert {p["name"] for p in written["profiles"]} == set(PROFILES.split(","))
    assert written["gatewayAPIVersion"]
