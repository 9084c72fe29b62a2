"""A cluster moving from cloudflare-tunnel-gateway-controller keeps its manifests: `kflare run
--gateway-tunnel-gateway-package` against the API server (the Gateway API CRDs and the package's, as kflare generates
them) and the emulator, with an Envoy on its xDS listener. The package's shapes are applied as they are: a
GatewayClass of its controllerName naming a GatewayClassConfig (a tunnel made outside kflare, the credentials Secret
with `api-token` and `account-id`), a Gateway with an HTTPS listener on 443 and no tls block, a route with hostnames
and a Service backend, an ExternalBackend with a base path, and an ExternalName Service on 443."""

from __future__ import annotations

import base64
import json
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient

from app.api.crds import render_package_crds
from app.controlplane import ControlPlane, free_port
from reconcilers.gateway import envoy
from reconcilers.gateway.kinds import GATEWAY_GROUP, PACKAGE_CONTROLLER_NAME, derived_name
from tests.fixtures.controller import SYSTEM_NAMESPACE, ControllerProcess, controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.envoy import _Thread, echo_app, running_envoy
from tests.helpers import crd_names, eventually
from tests.integration.test_gateway_class import Gateways, parent_cond
from tests.kinds import cf

pytestmark = pytest.mark.integration
PACKAGE = "cf.k8s.lex.la"
ORIGIN = "http://localhost:8080"


@dataclass
class Plane:
    controller: ControllerProcess
    envoy_port: int
    admin_port: int
    backend_port: int
    seen: list[dict[str, Any]]


@pytest.fixture(scope="module")
def package_plane(
    control_plane: ControlPlane,
    emulator: EmulatorProcess,
    kflare_crds: None,
    gateway_api: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Plane]:
    kubectl = [str(control_plane.binary("kubectl")), f"--kubeconfig={control_plane.kubeconfig_path}"]
    applied = subprocess.run(
        [*kubectl, "apply", "--server-side", "-o", "name", "-f", "-"],
        input="\n---\n".join(render_package_crds().values()),
        text=True,
        check=True,
        capture_output=True,
    )
    control_plane.wait_established(crd_names(applied.stdout))
    workdir = tmp_path_factory.mktemp("tunnel-gateway-package")
    token = workdir / "xds-token"
    token.write_text(uuid.uuid4().hex)
    xds_port, envoy_port, admin_port, backend_port = free_port(), free_port(), free_port(), free_port()
    seen: list[dict[str, Any]] = []
    servers = _Thread()
    servers.serve(echo_app("echo", seen), backend_port)
    args = (
        "--gateway-enabled=true",
        "--gateway-tunnel-gateway-package=true",
        "--gateway-allow-external-name-services=true",
        f"--gateway-xds-bind-address=127.0.0.1:{xds_port}",
        f"--gateway-xds-token-file={token}",
        f"--gateway-data-plane-address=127.0.0.1:{envoy_port}",
        "--gateway-data-plane-tls-port=0",
        "--gateway-origin-url=http://localhost:8080",
    )
    bootstrap = envoy.bootstrap(
        node_id="package", xds_host="127.0.0.1", xds_port=xds_port, token=token.read_text(), admin_port=admin_port
    )
    try:
        with controller_process(control_plane, emulator, workdir, *args) as proc, running_envoy(bootstrap):
            yield Plane(proc, envoy_port, admin_port, backend_port, seen)
    finally:
        servers.stop()


def envoy_clusters(plane: Plane) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{plane.admin_port}/config_dump?resource=dynamic_active_clusters"
    with urllib.request.urlopen(url, timeout=5) as reply:
        return [c["cluster"] for c in json.loads(reply.read())["configs"]]


async def test_the_packages_manifests_are_served_as_they_are(
    package_plane: Plane, kube: ApiClient, namespace: str, emulator: EmulatorProcess
) -> None:
    plane, gw, ns = package_plane, Gateways(kube), namespace
    objects, core = client.CustomObjectsApi(kube), client.CoreV1Api(kube)
    tunnel = cf(
        emulator,
        "POST",
        f"/accounts/{emulator.account_id}/cfd_tunnel",
        json={
            "name": f"made-by-hand-{ns}",
            "config_src": "cloudflare",
            "tunnel_secret": base64.b64encode(b"s" * 32).decode(),
        },
    )
    config_name = f"cloudflare-tunnel-{ns}"
    # The package's credentials Secret and GatewayClassConfig, in the controller's namespace (no namespace given).
    secret = f"cloudflare-tunnel-credentials-{ns}"
    await core.create_namespaced_secret(
        SYSTEM_NAMESPACE,
        {
            "metadata": {"name": secret},
            "stringData": {"api-token": emulator.token, "tunnel-token": "unused", "account-id": emulator.account_id},
        },
    )
    await objects.create_cluster_custom_object(
        PACKAGE,
        "v1alpha1",
        "gatewayclassconfigs",
        {
            "apiVersion": f"{PACKAGE}/v1alpha1",
            "kind": "GatewayClassConfig",
            "metadata": {"name": config_name},
            "spec": {"cloudflareCredentialsSecretRef": {"name": secret}, "tunnelID": tunnel["id"]},
        },
    )
    class_name = f"cloudflare-tunnel-{uuid.uuid4().hex[:6]}"
    await gw.create(
        "gatewayclasses",
        {
            "apiVersion": f"{GATEWAY_GROUP}/v1",
            "kind": "GatewayClass",
            "metadata": {"name": class_name},
            "spec": {
                "controllerName": PACKAGE_CONTROLLER_NAME,
                "parametersRef": {"group": PACKAGE, "kind": "GatewayClassConfig", "name": config_name},
            },
        },
    )
    # The seed's Gateway and route, unchanged: an HTTPS listener on 443 with no tls block, a Service backend.
    await gw.create(
        "gateways",
        {
            "apiVersion": f"{GATEWAY_GROUP}/v1",
            "kind": "Gateway",
            "metadata": {"name": "tunnel"},
            "spec": {
                "gatewayClassName": class_name,
                "listeners": [{"name": "https", "protocol": "HTTPS", "port": 443}],
            },
        },
        ns,
    )
    await gw.backend(ns, "app", plane.backend_port)
    app_host = f"app.{ns}.example.com"

    def route(name: str, host: str, backend: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": f"{GATEWAY_GROUP}/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": name},
            "spec": {"parentRefs": [{"name": "tunnel"}], "hostnames": [host], "rules": [{"backendRefs": [backend]}]},
        }

    await gw.create("httproutes", route("app", app_host, {"name": "app", "port": 80}), ns)

    # kflare's own objects, derived: the account of the Secret, and the Tunnel adopting the tunnel by its ID, kept.
    derived = derived_name(config_name)

    async def adopted() -> dict[str, Any] | None:
        found = await objects.get_namespaced_custom_object(
            "kflare.dev", "v1alpha1", SYSTEM_NAMESPACE, "tunnels", derived
        )
        metadata = (found.get("status") or {}).get("cloudflareMetadata") or {}
        return dict(found) if metadata.get("tunnelID") == tunnel["id"] else None

    kept = await eventually(adopted, what="the derived Tunnel to adopt the tunnel by its ID", timeout=60)
    assert kept["metadata"]["annotations"]["kflare.dev/deletion-policy"] == "retain"
    assert kept["metadata"]["ownerReferences"][0]["kind"] == "GatewayClassConfig"
    account = await objects.get_cluster_custom_object("kflare.dev", "v1alpha1", "cloudflareaccounts", derived)
    assert account["spec"]["accountID"] == emulator.account_id
    assert account["spec"]["tokenSecretRef"] == {"name": secret, "namespace": SYSTEM_NAMESPACE, "key": "api-token"}

    # The class and the route report under the package's controllerName; the tunnel's document routes the hostname
    # to the data plane, and the traffic reaches the Service, as kflare's own manifests would have it.
    async def route_accepted(name: str) -> dict[str, Any] | None:
        found = parent_cond(await gw.get("httproutes", name, ns), "Accepted", PACKAGE_CONTROLLER_NAME)
        return found if found is not None and found["status"] == "True" else None

    await eventually(lambda: route_accepted("app"), what="the package's route accepted", timeout=60)
    accepted = next(
        c for c in (await gw.get("gatewayclasses", class_name))["status"]["conditions"] if c["type"] == "Accepted"
    )
    assert accepted["status"] == "True"

    def document() -> list[dict[str, Any]]:
        path = f"/accounts/{emulator.account_id}/cfd_tunnel/{tunnel['id']}/configurations"
        return list((cf(emulator, "GET", path)["config"] or {}).get("ingress") or [])

    async def published(rules: list[dict[str, Any]]) -> bool:
        return document() == rules

    await eventually(
        lambda: published([{"hostname": app_host, "service": ORIGIN}, {"service": "http_status:404"}]),
        what="the tunnel's ingress document",
        timeout=30,
    )

    async def through_envoy(host: str, path: str) -> httpx.Response | None:
        async with httpx.AsyncClient(timeout=5) as http:
            reply = await http.get(f"http://127.0.0.1:{plane.envoy_port}{path}", headers={"Host": host})
        return reply if reply.status_code == 200 else None

    served = await eventually(lambda: through_envoy(app_host, "/hello"), what="the route served by Envoy")
    assert served.json()["path"] == "/hello"

    # An ExternalBackend with a base path: the request's path follows it.
    await objects.create_namespaced_custom_object(
        PACKAGE,
        "v1alpha1",
        ns,
        "externalbackends",
        {
            "apiVersion": f"{PACKAGE}/v1alpha1",
            "kind": "ExternalBackend",
            "metadata": {"name": "outside"},
            "spec": {"scheme": "http", "host": "localhost", "port": plane.backend_port, "path": "/base"},
        },
    )
    ext_host = f"ext.{ns}.example.com"
    await gw.create(
        "httproutes",
        route("ext", ext_host, {"group": PACKAGE, "kind": "ExternalBackend", "name": "outside", "port": 1}),
        ns,
    )
    reply = await eventually(lambda: through_envoy(ext_host, "/x?q=1"), what="the ExternalBackend served")
    assert (reply.json()["path"], reply.json()["query"]) == ("/base/x", "q=1")

    # An ExternalName Service on 443: a TLS cluster to the name, checked against the system's CAs.
    await core.create_namespaced_service(
        ns, {"metadata": {"name": "origin"}, "spec": {"type": "ExternalName", "externalName": "origin.example.net"}}
    )
    await gw.create("httproutes", route("far", f"far.{ns}.example.com", {"name": "origin", "port": 443}), ns)

    async def tls_cluster() -> dict[str, Any] | None:
        found = [c for c in envoy_clusters(plane) if c["name"].startswith(f"{ns}/origin:443/dns")]
        return found[0] if found else None

    cluster = await eventually(tls_cluster, what="the ExternalName Service's TLS cluster in Envoy", timeout=30)
    tls = cluster["transport_socket"]["typed_config"]
    assert tls["sni"] == "origin.example.net"
    validation = tls["common_tls_context"]["validation_context"]
    assert validation["match_typed_subject_alt_names"][0]["matcher"]["exact"] == "origin.example.net"

    # Deleting the package's objects deletes nothing in Cloudflare: the tunnel stays.
    await objects.delete_cluster_custom_object(PACKAGE, "v1alpha1", "gatewayclassconfigs", config_name)
    await gw.objects.delete_cluster_custom_object(GATEWAY_GROUP, "v1", "gatewayclasses", class_name)
    assert cf(emulator, "GET", f"/accounts/{emulator.account_id}/cfd_tunnel/{tunnel['id']}")["deleted_at"] is None
