"""docs/migrating-from-tunnel-gateway.md, tried on the one-node cluster: a cluster as cloudflare-tunnel-gateway-
controller leaves it (its kinds' CRDs, the `cloudflare-tunnel` GatewayClass naming a GatewayClassConfig, the
`cloudflare-tunnel-credentials` Secret with the API and connector tokens and no account ID, and the seed's Gateway
and HTTPRoute), with the tunnel the user made in Cloudflare; kflare installed as the guide's step 2 says; and a
visitor's request for the route's hostname answered by its backend through kflare's data plane, the account found
from the token."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.dev import DEV_ACCOUNT_ID, DEV_TOKEN, dev_secret_manifest
from tests.chart.helm import CHART, Helm, helm_binary
from tests.chart.test_install import Release
from tests.chart.test_package import package
from tests.e2e.cluster import Cluster
from tests.e2e.gateway import GatewayRelease, echo_image, tunnel_id
from tests.e2e.test_chart import deadline, overrides
from tests.fixtures.emulator import EmulatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

GUIDE = CHART.parents[1] / "docs" / "migrating-from-tunnel-gateway.md"
PACKAGE_CRDS = CHART.parents[1] / "config" / "crd" / "tunnel-gateway-package"
PKG_NS = "cozy-cloudflare-tunnel-gateway-controller"
TENANT = "tenant-example"
CONFIG = "cloudflare-tunnel"
DERIVED = f"tunnel-gateway-{CONFIG}"
HOST = "app.example.org"
"""In no zone a kflare Zone manages (the earlier modules' Zones hold example.com and example.net, which would ask for
their grant): the package publishes no DNS records either."""


def guide_values() -> dict[str, Any]:
    """The `--set` values of the guide's `helm install`, with $CONFIG as the class names it."""
    text = GUIDE.read_text()
    values: dict[str, Any] = {}
    for key, value in re.findall(r"--set ([\w.]+)=(\S+)", text):
        value = value.strip('"').replace("$CONFIG", CONFIG)
        node = values
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = {"true": True, "false": False}.get(value, value)
    return values


def package_side(gw: GatewayRelease, tunnel: str, token: str) -> list[dict[str, Any]]:
    """What the package's release and its user left in the cluster."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "cloudflare-tunnel-credentials", "namespace": PKG_NS},
        "stringData": {"api-token": DEV_TOKEN, "tunnel-token": token},
    }
    config = {
        "apiVersion": "cf.k8s.lex.la/v1alpha1",
        "kind": "GatewayClassConfig",
        "metadata": {"name": CONFIG},
        "spec": {"tunnelID": tunnel, "cloudflareCredentialsSecretRef": {"name": "cloudflare-tunnel-credentials"}},
    }
    cls = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "cloudflare-tunnel"},
        "spec": {
            "controllerName": "cf.k8s.lex.la/tunnel-controller",
            "parametersRef": {"group": "cf.k8s.lex.la", "kind": "GatewayClassConfig", "name": CONFIG},
        },
    }
    gateway = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "tunnel", "namespace": TENANT},
        "spec": {
            "gatewayClassName": "cloudflare-tunnel",
            "listeners": [{"name": "https", "protocol": "HTTPS", "port": 443}],
        },
    }
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "app", "namespace": TENANT},
        "spec": {
            "parentRefs": [{"name": "tunnel"}],
            "hostnames": [HOST],
            "rules": [{"backendRefs": [{"name": "app", "port": 80}]}],
        },
    }
    labels = {"app": "app"}
    backend = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "app", "namespace": TENANT},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "echo",
                            "image": gw.echo_image,
                            "env": [
                                {"name": "HTTP_PORT", "value": "80"},
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                            ],
                        }
                    ]
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "app", "namespace": TENANT},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": 80}]},
    }
    return [secret, config, cls, gateway, route, backend, service]


@pytest.fixture(scope="module")
def migrated(
    cluster: Cluster,
    image: str,
    node_emulator: EmulatorProcess,
    gateway_bins: Path,
    gateway_api: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[GatewayRelease, str]]:
    work = tmp_path_factory.mktemp("migration")
    helm = Helm(helm_binary(), work / "helm")
    archive = package(helm, work)
    release = Release(helm, cluster, "kflare", PKG_NS)
    gw = GatewayRelease(cluster, release, node_emulator, echo_image(gateway_bins), tunnel_name=DERIVED)
    for namespace in (PKG_NS, TENANT, "kflare-system"):
        gw.kubectl("create", "namespace", namespace, check=False)
    gw.apply(dev_secret_manifest())
    # The package's CRDs stay after its release (Helm keeps crds/): kflare's generation of them stands in here.
    gw.kubectl("apply", "--server-side", "-f", str(PACKAGE_CRDS))
    names = [f"crd/{yaml.safe_load(p.read_text())['metadata']['name']}" for p in sorted(PACKAGE_CRDS.glob("*.yaml"))]
    gw.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    # The tunnel the user made under Zero Trust, and its connector token.
    cf = node_emulator.client(token=DEV_TOKEN)
    made = cf.zero_trust.tunnels.cloudflared.create(account_id=DEV_ACCOUNT_ID, name="homelab", config_src="cloudflare")
    assert made.id is not None
    token = str(cf.zero_trust.tunnels.cloudflared.token.get(tunnel_id=made.id, account_id=DEV_ACCOUNT_ID))
    gw.apply(*package_side(gw, made.id, token))
    values = guide_values()
    assert values["gateway"]["tunnelGatewayPackage"]["enabled"] is True, values
    release.install(chart=archive, args=helm.values_args({**overrides(image, node_emulator), **values}))
    try:
        yield gw, made.id
    finally:
        # The guide's way out, kflare running: the Gateway first, then the package's objects (their derived
        # account and Tunnel go with them, the tunnel kept in Cloudflare), then the release.
        gw.cluster.kubectl(
            "delete", "gateway", "tunnel", "-n", TENANT, "--wait", "--timeout=120s", check=False, timeout=150
        )
        gw.cluster.kubectl(
            "delete", "gatewayclass", "cloudflare-tunnel", "--wait", "--timeout=120s", check=False, timeout=150
        )
        gw.cluster.kubectl("delete", "gatewayclassconfig", CONFIG, "--wait", "--timeout=120s", check=False, timeout=150)
        for _ in deadline(180):
            left = gw.cluster.kubectl("get", "tunnel", DERIVED, "-n", PKG_NS, check=False).returncode == 0
            if not left:
                break
        release.uninstall("--wait")
        gw.cluster.kubectl("delete", "namespace", TENANT, PKG_NS, "--wait", "--timeout=180s", check=False, timeout=200)


def test_the_packages_manifests_serve_their_route_through_kflare(migrated: tuple[GatewayRelease, str]) -> None:
    gw, made = migrated
    # The guide's step 3: the derived account (its ID found from the token), the adopted tunnel, the class.
    account: dict[str, Any] = {}
    tunnel: dict[str, Any] = {}
    for _ in deadline(180):  # kflare derives them from the GatewayClassConfig once it serves the class
        account = _found(gw, "cloudflareaccount", DERIVED)
        tunnel = _found(gw, "tunnel", DERIVED, "-n", PKG_NS)
        if _ready(account) and _ready(tunnel) and tunnel_id(tunnel) == made:
            break
    assert account["status"]["accountID"] == DEV_ACCOUNT_ID
    assert tunnel["metadata"]["annotations"]["kflare.dev/deletion-policy"] == "retain"
    for _ in deadline(120):
        cls = gw.get("gatewayclass", "cloudflare-tunnel")
        if any(c["type"] == "Accepted" and c["status"] == "True" for c in cls["status"].get("conditions") or []):
            break
    pods = gw.wait_data_plane_ready(2)
    for _ in deadline(180):
        status = gw.get("deployment", "app", "-n", TENANT).get("status", {})
        if status.get("availableReplicas") == 1:
            break
    document = gw.push_all()
    assert {"hostname": HOST, "service": "http://localhost:8080"} in document["config"]["ingress"]
    for pod in pods:
        reply = None
        for _ in deadline(60):  # Envoy takes the route and the endpoints once its xDS stream is open
            reply = gw.visit(pod, HOST, "/hello")
            if reply.status_code == 200:
                break
        assert reply is not None
        assert reply.status_code == 200, reply.text
        echo = reply.json()
        assert (echo["namespace"], echo["host"], echo["path"]) == (TENANT, HOST, "/hello")
        assert echo["pod"].startswith("app-")
    route = gw.get("httproute", "app", "-n", TENANT)
    (parent,) = route["status"]["parents"]
    assert parent["controllerName"] == "cf.k8s.lex.la/tunnel-controller"
    assert any(c["type"] == "Accepted" and c["status"] == "True" for c in parent["conditions"]), parent


def _found(gw: GatewayRelease, *args: str) -> dict[str, Any]:
    """The object, or {} while it does not exist."""
    done = gw.cluster.kubectl("get", "-o", "json", *args, check=False)
    found: dict[str, Any] = json.loads(done.stdout) if done.returncode == 0 else {}
    return found


def _ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
