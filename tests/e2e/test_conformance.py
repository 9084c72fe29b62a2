"""The upstream Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance, the version of the tests'
CRDs) against the class, with its echo backends as pods, built by hack/gateway-e2e.sh.

The configuration (`CONFIGURATION`, written at the head of the report and in docs/conformance/README.md): the chart
with the class on, and `gateway.dedicatedPlanes.defaultParameters` naming a GatewayParameters of one replica, so that
every Gateway the suite makes gets a data plane of its own: its own Tunnel, so its own address
(`<tunnel id>.cfargotunnel.com`, the first of its `status.addresses`), and its own Envoy, which serves its HTTPS
listeners' certificates. A Gateway on the class's shared plane shares the class's Tunnel and address with every other
one there, so two Gateways whose listeners have no hostname cannot be told apart (HTTPRouteMultipleGateways).

The suite sends its requests to a Gateway's address, which Cloudflare's edge takes to the Gateway's data plane. Here
each address resolves, for the suite's process only (a mount namespace with its own /etc/hosts, kept up to date as
Gateways come and go: the Go resolver reads the file again when it changes), to the Service the class gives the
Gateway's plane, in front of its Envoy on the Gateway's listener ports: the suite reaches the Gateway through the data
plane's address, as cloudflared reaches Envoy, and as in-cluster clients do.

The suite runs without a feature list, so it tests the features `GatewayClass.status` claims. The report goes to
$CONFORMANCE_REPORT (what `make conformance` sets: docs/conformance/), else beside the test's files; its totals by
profile are printed, and the test fails unless every profile's result is success.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
import yaml

from app import __version__
from reconcilers.gateway.features import SupportedFeature, supported_features
from reconcilers.gateway.kinds import CLASS_NAME
from reconcilers.gateway.plane_manifests import PLANE_APP, PLANE_LABEL
from reconcilers.gateway.planes import plane_name
from tests.e2e.cluster import Cluster
from tests.e2e.gateway import NAMESPACE, RELEASE, GatewayRelease, install, tunnel_id
from tests.e2e.test_chart import deadline
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.gateway import gateway_api_dir

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

PROFILES = "GATEWAY-HTTP,GATEWAY-GRPC"
SUITE_TIMEOUT = 2400
PARAMETERS = "conformance"
"""The GatewayParameters (in the release's namespace) every Gateway of the run gets its data plane from."""
CONFIGURATION: Final[dict[str, Any]] = {
    "gateway": {
        "enabled": True,
        "dedicatedPlanes": {"perNamespace": 64, "defaultParameters": f"{NAMESPACE}/{PARAMETERS}"},
    },
    # Planes in whichever namespace the suite makes Gateways in.
    "rbac": {"namespaces": []},
}
"""The chart's values the run adds to the e2e release's (tests/e2e/gateway.py)."""
PARAMETERS_SPEC: Final[dict[str, Any]] = {"replicas": 1, "tunnelDeletionPolicy": "delete"}
SUITE_NAMESPACES: Final = tuple(f"gateway-conformance-{n}" for n in ("infra", "app-backend", "web-backend"))
ZONE: Final = ("example-com", "example.com")
"""The examples' Zone (in the release's namespace), whose zone holds most of the suite's hostnames: a name in a zone a
kflare Zone manages is published only for the namespaces it grants (docs/security.md), so it grants the suite's."""
ZONE_GRANT: Final[dict[str, Any]] = {
    "namespaces": {
        "from": "Selector",
        "selector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(SUITE_NAMESPACES)}
            ]
        },
    }
}
MODE: Final = "dedicated-planes"


@pytest.fixture(scope="module")
def conformance_release(
    cluster: Cluster,
    image: str,
    node_emulator: EmulatorProcess,
    gateway_bins: Path,
    gateway_api: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayRelease]:
    yield from install(
        cluster, image, node_emulator, gateway_bins, tmp_path_factory.mktemp("conformance"), more=CONFIGURATION
    )


def shared_plane_service(gw: GatewayRelease) -> str:
    """A Service on the listeners' port in front of the shared data plane's Envoy (for a Gateway the shared plane
    serves: none, while the parameters are there); returns its address."""
    name = f"{RELEASE}-kflare-data-plane"
    address: str = gw.get("service", name, "-n", NAMESPACE)["spec"]["clusterIP"]
    return address


class Edge(threading.Thread):
    """Cloudflare's edge, for the suite: keeps `hosts` resolving each Gateway's address to its plane's Service (the
    shared plane's `shared` for the class's Tunnel's), and pushes each plane's tunnel document to its pods'
    connectors (the stand-in is Ready once pushed, as cloudflared once connected; pushed again when the document
    changes). `hosts` is written in place (the suite's /etc/hosts is a bind mount of it), only when it changes: the Go
    resolver reads the file again when its modification time changes."""

    def __init__(self, gw: GatewayRelease, hosts: Path, shared: tuple[str, str]) -> None:
        super().__init__(daemon=True)
        self.gw, self.hosts, self.shared = gw, hosts, shared
        self.stopped = threading.Event()
        self.written = ""
        self.pushed: dict[str, tuple[str, Any]] = {}
        """Pod UID -> (tunnel ID, document version) last pushed to it."""
        self.errors: list[str] = []
        self.write({shared[1]: shared[0]})

    def poll(self) -> None:
        services = {
            (s["metadata"]["namespace"], s["metadata"]["name"]): s["spec"].get("clusterIP")
            for s in self.gw.get("services", "-A", "-l", f"app.kubernetes.io/name={PLANE_APP}")["items"]
        }
        entries = {self.shared[1]: self.shared[0]}
        for gateway in self.gw.get("gateways.gateway.networking.k8s.io", "-A")["items"]:
            addresses = (gateway.get("status") or {}).get("addresses") or []
            if not addresses or addresses[0].get("type") != "Hostname":
                continue
            meta = gateway["metadata"]
            ip = services.get((meta["namespace"], plane_name(meta["name"])))
            if ip and ip != "None":
                entries[addresses[0]["value"]] = ip
        self.write(entries)
        tunnels = {
            (t["metadata"]["namespace"], t["metadata"]["name"]): t
            for t in self.gw.get("tunnels.kflare.dev", "-A")["items"]
            if tunnel_id(t)
        }
        documents: dict[tuple[str, str], dict[str, Any]] = {}
        for pod in self.gw.get("pods", "-A", "-l", f"app.kubernetes.io/name={PLANE_APP}")["items"]:
            meta = pod["metadata"]
            key = (meta["namespace"], (meta.get("labels") or {}).get(PLANE_LABEL, ""))
            if key not in tunnels or not pod["status"].get("podIP") or meta.get("deletionTimestamp"):
                continue
            if key not in documents:
                documents[key] = self.gw.edge_document(tunnels[key])
            document = documents[key]
            version = (str(document.get("tunnel_id")), document.get("version"))
            if self.pushed.get(meta["uid"]) != version and self.gw.push(pod, document).status_code == 204:
                self.pushed[meta["uid"]] = version

    def write(self, entries: dict[str, str]) -> None:
        text = "127.0.0.1 localhost\n" + "".join(f"{ip} {host}\n" for host, ip in sorted(entries.items()))
        if text == self.written:
            return
        # In place, never empty: the new text over the old, then cut to its length.
        with self.hosts.open("r+" if self.hosts.exists() else "w") as out:
            out.write(text)
            out.truncate()
        self.written = text

    def run(self) -> None:
        while not self.stopped.wait(1):
            try:
                self.poll()
            except (RuntimeError, httpx.HTTPError, subprocess.SubprocessError, ValueError, KeyError) as exc:
                # A connector not listening yet, the API server busy for a moment: polled again.
                self.errors.append(repr(exc))


def totals(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for profile in report.get("profiles") or []:
        core = profile.get("core") or {}
        extended = profile.get("extended") or {}
        out[profile["name"]] = {
            "result": core.get("result"),
            "core": core.get("statistics"),
            "extended": extended.get("statistics"),
            "extended result": extended.get("result"),
            "failed core": core.get("failedTests") or [],
            "failed extended": extended.get("failedTests") or [],
        }
    return out


def outcome(report: dict[str, Any]) -> dict[str, Any]:
    """What a report says of the class, without when it was made."""
    keep = ("gatewayAPIChannel", "gatewayAPIVersion", "mode")
    # The suite lists profiles in the order its goroutines finish them, which differs from run to run.
    profiles = sorted(report.get("profiles") or [], key=lambda p: str(p.get("name")))
    return (
        {key: report.get(key) for key in keep}
        | {"profiles": profiles}
        | {"version": (report.get("implementation") or {}).get("version")}
    )


def header() -> str:
    """The configuration the report was produced with, as YAML comments at its head."""
    values = yaml.safe_dump(CONFIGURATION, sort_keys=False).splitlines()
    parameters = yaml.safe_dump({"spec": PARAMETERS_SPEC}, sort_keys=False).splitlines()
    lines = [
        f"Produced by `make conformance` (tests/e2e/test_conformance.py), mode {MODE}: the chart with these values",
        "over the e2e release's (tests/e2e/gateway.py):",
        *(f"  {line}" for line in values),
        f"and the GatewayParameters {NAMESPACE}/{PARAMETERS}:",
        *(f"  {line}" for line in parameters),
        f"The Zone {NAMESPACE}/{ZONE[0]} ({ZONE[1]}, where most of the suite's hostnames are) grants the suite's",
        f"namespaces every name in it: hostnameGrants: [{json.dumps(ZONE_GRANT)}]",
        "Every Gateway gets a data plane of its own: its own Tunnel and address, its own Envoy. The suite reaches a",
        "Gateway's address through the Service of its plane.",
    ]
    return "".join(f"# {line}\n" for line in lines)


@pytest.fixture(scope="module")
def prepared(conformance_release: GatewayRelease) -> GatewayRelease:
    """The release with the run's GatewayParameters and the Zone's grant to the suite's namespaces."""
    gw = conformance_release
    gw.wait_data_plane_ready(2)
    account = gw.tunnel()["spec"]["accountRef"]["name"]
    gw.apply(
        {
            "apiVersion": "kflare.dev/v1alpha1",
            "kind": "GatewayParameters",
            "metadata": {"name": PARAMETERS, "namespace": NAMESPACE},
            "spec": {"accountRef": {"name": account}, **PARAMETERS_SPEC},
        }
    )
    patch = json.dumps({"spec": {"hostnameGrants": [ZONE_GRANT]}})
    gw.kubectl("patch", "zone", ZONE[0], "-n", NAMESPACE, "--type=merge", "-p", patch)
    return gw


def claimed_once(gw: GatewayRelease, wanted: list[SupportedFeature]) -> None:
    """Waits for the class to claim `wanted` (it reads the CRDs' channel again once a minute, on a reconcile: the
    class is touched until it has)."""
    claimed: list[SupportedFeature] = []
    for _ in deadline(180, interval=2):
        claimed = gw.get("gatewayclass", CLASS_NAME).get("status", {}).get("supportedFeatures") or []
        if claimed == wanted:
            return
        gw.kubectl("annotate", "--overwrite", "gatewayclass", CLASS_NAME, f"kflare.dev/poked={time.monotonic()}")


def run_suite(gw: GatewayRelease, gateway_bins: Path, tmp_path: Path, report: Path) -> None:
    """The suite against the class, its report written to `report` (with the configuration at its head); fails
    unless every profile passes, core and extended, and unless the report there before says the same."""
    tunnel_host = f"{tunnel_id(gw.tunnel())}.cfargotunnel.com"
    tmp_path.mkdir(parents=True, exist_ok=True)
    hosts = tmp_path / "hosts"
    edge = Edge(gw, hosts, (shared_plane_service(gw), tunnel_host))
    edge.start()
    report.parent.mkdir(parents=True, exist_ok=True)
    committed = yaml.safe_load(report.read_text()) if report.exists() else None
    suite = [
        str(gateway_bins / "conformance.test"),
        "-test.run=^TestConformance$",
        f"-test.timeout={SUITE_TIMEOUT}s",
        f"-gateway-class={CLASS_NAME}",
        f"-conformance-profiles={PROFILES}",
        f"-report-output={report}",
        f"-mode={MODE}",
        "-organization=kflare",
        "-project=kflare",
        "-url=https://github.com/kflare/kflare",
        f"-version=v{__version__}",
        "-contact=kflare maintainers",
        # No feature list: the suite tests what GatewayClass.status claims.
    ]
    # The addresses resolve to the planes for the suite's process alone; the Go resolver reads hosts.
    script = 'mount --bind "$1" /etc/hosts && shift && exec "$@"'
    env = {**os.environ, "KUBECONFIG": str(gw.cluster.kubeconfig_path), "NO_PROXY": "*"}
    # Beside the report, for reading after the run (tmp_path goes with the session).
    log = report.with_suffix(".log")
    began = time.monotonic()
    try:
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
    finally:
        edge.stopped.set()
    took = time.monotonic() - began
    text = log.read_text()
    assert report.exists(), f"no report (exit {done.returncode}):\n{text[-6000:]}"
    written = yaml.safe_load(report.read_text())
    report.write_text(header() + report.read_text())
    assert written.get("profiles"), (
        f"a report of no profile (exit {done.returncode}):\n{text[-6000:]}\nthe edge's last errors: {edge.errors[-5:]}"
    )
    figures = totals(written)
    print(f"\nconformance suite: {took:.0f}s, exit {done.returncode}; report {report}")
    for name, figure in figures.items():
        print(f"  {name}: {yaml.safe_dump(figure, default_flow_style=True, width=1000).strip()}")
    assert {p["name"] for p in written["profiles"]} == set(PROFILES.split(","))
    assert written["gatewayAPIVersion"]
    failed = {name: f for name, f in figures.items() if f["result"] != "success" or f["failed extended"]}
    assert not failed, f"profiles not passed: {failed}\n(log {log}; the edge's last errors: {edge.errors[-5:]})"
    if committed is not None:
        # The committed report is the output of the code beside it: a change of what passes, is claimed or is run
        # shows here, and the report rewritten by this run is the one to commit.
        assert outcome(committed) == outcome(written), f"{report} is stale: commit the one this run wrote"


def report_path(tmp_path: Path, channel: str) -> Path:
    """$CONFORMANCE_REPORT (the standard channel's), or `-experimental` beside it; else in tmp_path."""
    base = Path(os.environ.get("CONFORMANCE_REPORT") or tmp_path / "report.yaml").resolve()
    return base if channel == "standard" else base.with_name(f"{base.stem}-{channel}{base.suffix}")


def test_the_upstream_conformance_suite(prepared: GatewayRelease, gateway_bins: Path, tmp_path: Path) -> None:
    """First with the standard channel's CRDs, which the cluster has (as the chart documents); then with the
    experimental channel's over them, with which the class claims what only they can express (HTTPRouteRetry), and
    the suite tests it (one test: the second run needs the first's cluster, and the order cannot be shuffled)."""
    claimed_once(prepared, supported_features("standard", every_gateway_own_plane=True))
    run_suite(prepared, gateway_bins, tmp_path / "standard", report_path(tmp_path, "standard"))
    crds = sorted((gateway_api_dir() / "experimental").glob("gateway.networking.k8s.io_*.yaml"))
    files = [f"--filename={c}" for c in crds if "vap" not in c.name]  # the safe-upgrades policy is not a CRD
    prepared.kubectl("apply", "--server-side", "--force-conflicts", *files)
    claimed_once(prepared, supported_features("experimental", every_gateway_own_plane=True))
    run_suite(prepared, gateway_bins, tmp_path / "experimental", report_path(tmp_path, "experimental"))
