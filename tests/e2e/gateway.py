"""The Gateway class on the one-node cluster: the chart installed with `gateway.enabled` and its defaults in the
examples' Tunnel's namespace, its data plane Deployment running Envoy and the cloudflared stand-in
(tests/e2e/cloudflared, under the chart's cloudflared image name), and what the tests ask of them.

The stand-in is run exactly as the chart runs cloudflared. The edge's part is played from here: the tunnel's ingress
document is read from the emulator (where kflare wrote it) and pushed to each pod's connector, as Cloudflare's edge
pushes a remotely managed configuration; visitors' requests are sent to the connector's edge port with the public
hostname as Host, and it hands them to the origin its ingress rules name (Envoy, `localhost` in the same pod).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from app.dev import DEV_TOKEN, dev_secret_manifest
from tests.chart.helm import Helm, helm_binary
from tests.chart.test_install import Release
from tests.chart.test_package import package
from tests.e2e.cluster import Cluster
from tests.e2e.test_chart import EXAMPLES, deadline, overrides
from tests.fixtures.emulator import EmulatorProcess

NAMESPACE = "demo"
GRANTED = (NAMESPACE, "kflare-system", "team-e2e")
"""The namespaces the release (in the examples' namespace) grants Secrets, ConfigMaps and data planes in: its own,
the account token's, and the team whose Gateway has a plane of its own (tests/e2e/test_gateway.py)."""
"""The examples' Tunnel's namespace: the data plane reads the Tunnel's token Secret, so the release goes there."""
TUNNEL = "gateway"
RELEASE = "gw"
EDGE_PORT = 7844
"""Where the stand-in takes the edge's requests (the port number cloudflared dials the edge on)."""
CONTROL_PORT = 7845
"""Where the stand-in takes the edge's configuration pushes."""
METRICS_PORT = 2000
"""The pod's port for cloudflared's /ready and /metrics (Envoy passes them on to cloudflared's loopback listener)."""


@dataclass
class GatewayRelease:
    cluster: Cluster
    release: Release
    emulator: EmulatorProcess
    echo_image: str
    tunnel_name: str = TUNNEL
    """The kflare Tunnel the class publishes through (the chart's gateway.tunnel.name), in the release's namespace."""

    def kubectl(self, *args: str, input_text: str | None = None, check: bool = True) -> str:
        done = self.cluster.kubectl(*args, input_text=input_text, check=check, timeout=120)
        return done.stdout + done.stderr

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args))

    def apply(self, *manifests: dict[str, Any] | str) -> None:
        docs = [m if isinstance(m, str) else yaml.safe_dump(m) for m in manifests]
        self.kubectl("apply", "-f", "-", input_text="\n---\n".join(docs))

    def data_plane_pods(self) -> list[dict[str, Any]]:
        selector = f"app.kubernetes.io/instance={self.release.name},app.kubernetes.io/component=data-plane"
        items: list[dict[str, Any]] = self.get("pods", "-n", self.release.namespace, "-l", selector)["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def tunnel(self) -> dict[str, Any]:
        tunnel: dict[str, Any] = self.get("tunnel", self.tunnel_name, "-n", self.release.namespace)
        return tunnel

    def ingress_document(self, tunnel: dict[str, Any] | None = None) -> dict[str, Any]:
        """The tunnel's configuration (the class's Tunnel's by default) as Cloudflare's API returns it: what the edge
        pushes to its connectors."""
        tunnel = tunnel or self.tunnel()
        identity = tunnel_id(tunnel)
        found = self.get("cloudflareaccount", tunnel["spec"]["accountRef"]["name"])
        account = found["spec"].get("accountID") or found["status"]["accountID"]  # given, or detected
        url = f"{self.emulator.base_url}/accounts/{account}/cfd_tunnel/{identity}/configurations"
        with httpx.Client(timeout=10, trust_env=False) as http:
            reply = http.get(url, headers={"Authorization": f"Bearer {DEV_TOKEN}"})
        reply.raise_for_status()
        result: dict[str, Any] = reply.json()["result"]
        return result

    def edge_document(self, tunnel: dict[str, Any]) -> dict[str, Any]:
        """The tunnel's configuration as the edge reads it for its connectors: the same document, outside the API
        (no token, and none of the account's rate limit, which the controller's calls alone spend)."""
        return self.emulator.tunnel_configuration(tunnel_id(tunnel))

    def push(self, pod: dict[str, Any], document: dict[str, Any]) -> httpx.Response:
        with httpx.Client(timeout=10, trust_env=False) as http:
            return http.put(f"http://{pod['status']['podIP']}:{CONTROL_PORT}/configuration", json=document)

    def push_all(self) -> dict[str, Any]:
        """The current ingress document to every data plane pod's connector; returns the document."""
        document = self.ingress_document()
        for pod in self.data_plane_pods():
            reply = self.push(pod, document)
            assert reply.status_code == 204, reply.text
        return document

    def visit(self, pod: dict[str, Any], host: str, path: str = "/", **kwargs: Any) -> httpx.Response:
        """A visitor's request for `host`, as the edge hands it to the pod's connector."""
        with httpx.Client(timeout=10, trust_env=False) as http:
            return http.get(f"http://{pod['status']['podIP']}:{EDGE_PORT}{path}", headers={"Host": host}, **kwargs)

    def wait_data_plane_ready(self, count: int, seconds: float = 240) -> list[dict[str, Any]]:
        """Every data plane pod Ready: Envoy has its configuration from kflare's xDS, the connector its ingress
        document (pushed again on each poll, as the edge does whenever a connector connects)."""
        pods: list[dict[str, Any]] = []
        try:
            for _ in deadline(seconds):
                pods = self.data_plane_pods()
                running = [p for p in pods if p["status"].get("podIP") and _started(p, "cloudflared")]
                if running and tunnel_id(self.tunnel()):
                    document = self.ingress_document()
                    for pod in running:
                        self.push(pod, document)
                if len(pods) == count and all(_ready(p) for p in pods):
                    return pods
        except AssertionError as exc:
            raise AssertionError(f"{exc}: the data plane is not Ready\n{self.describe(pods)}") from None
        raise AssertionError  # unreachable: deadline raises

    def describe(self, pods: list[dict[str, Any]]) -> str:
        """Each pod's containers (ready, state, restarts) and the end of their logs: why a data plane is not Ready."""
        lines: list[str] = []
        for pod in pods:
            name = pod["metadata"]["name"]
            for status in pod["status"].get("containerStatuses") or []:
                lines.append(
                    f"{name}/{status['name']}: ready={status.get('ready')} restarts={status.get('restartCount')}"
                    f" state={json.dumps(status.get('state'))}"
                )
                logs = self.kubectl(
                    "logs", name, "-n", self.release.namespace, "-c", status["name"], "--tail=20", check=False
                )
                lines += [f"  {line}" for line in logs.splitlines()]
        # The controller serves the data plane its configuration: its warnings and errors say why Envoy has none.
        selector = f"app.kubernetes.io/instance={self.release.name},app.kubernetes.io/component=controller"
        for pod in self.get("pods", "-n", self.release.namespace, "-l", selector)["items"]:
            name = pod["metadata"]["name"]
            for status in pod["status"].get("containerStatuses") or []:
                lines.append(f"{name}: ready={status.get('ready')} restarts={status.get('restartCount')}")
            logs = self.kubectl("logs", name, "-n", self.release.namespace, "--tail=400", check=False)
            wanted = [line for line in logs.splitlines() if '"info"' not in line and '"debug"' not in line]
            lines += [f"{name}: {line}" for line in wanted][-25:]
        return "\n".join(lines) or "no data plane pod"


def tunnel_id(tunnel: dict[str, Any]) -> str | None:
    """The Cloudflare ID kflare recorded in the Tunnel's status, once it has one."""
    found = ((tunnel.get("status") or {}).get("cloudflareMetadata") or {}).get("tunnelID")
    return str(found) if found else None


def _started(pod: dict[str, Any], container: str) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return any(s["name"] == container and "running" in (s.get("state") or {}) for s in statuses)


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _examples() -> str:
    """The examples the class needs: the account, zones and records, and the Gateway example (its Tunnel, Gateway
    and route)."""
    paths = [*sorted(EXAMPLES.glob("*.yaml")), *sorted((EXAMPLES / "gateway").glob("*.yaml"))]
    return "\n---\n".join(p.read_text() for p in paths)


def _merged(base: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in more.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def echo_image(gateway_bins: Path) -> str:
    """The echo-basic image the conformance suite's manifests name: the examples' backends run it too."""
    return next(r for r in (gateway_bins / "conformance.images").read_text().split() if "/echo-basic:" in r)


def install(
    cluster: Cluster,
    image: str,
    emulator: EmulatorProcess,
    gateway_bins: Path,
    work: Path,
    more: dict[str, Any] | None = None,
) -> Iterator[GatewayRelease]:
    """The release, with `more` values over the tests' own (merged key by key, a list replaced whole)."""
    helm = Helm(helm_binary(), work / "helm")
    archive = package(helm, work)
    release = Release(helm, cluster, RELEASE, NAMESPACE)
    state = GatewayRelease(cluster, release, emulator, echo_image(gateway_bins))
    for namespace in ("kflare-system", *GRANTED):  # the granted namespaces get the release's Roles: they must exist
        state.kubectl("create", "namespace", namespace, check=False)
    state.apply(dev_secret_manifest())
    # The kflare CRDs before the examples (kflare objects), as the chart renders them; the release adopts them. The
    # Tunnel then exists when the chart is installed, so the chart reads its token Secret from it.
    rendered = helm.run("template", RELEASE, str(archive), "--namespace", NAMESPACE).stdout
    crds = [d for d in yaml.safe_load_all(rendered) if d and d.get("kind") == "CustomResourceDefinition"]
    state.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input_text=yaml.safe_dump_all(crds))
    names = [f"crd/{d['metadata']['name']}" for d in crds]
    state.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    state.apply(_examples())
    values = {
        **overrides(image, emulator),
        "gateway": {"enabled": True, "tunnel": {"name": TUNNEL}},
        # The class under the narrowed roles: Secrets, ConfigMaps and planes in the namespaces the tests use only.
        "rbac": {"namespaces": list(GRANTED)},
    }
    release.install(chart=archive, args=helm.values_args(_merged(values, more or {})))
    try:
        yield state
    finally:
        release.uninstall()
