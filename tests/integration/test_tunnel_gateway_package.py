"""A cluster moving from cloudflare-tunnel-gateway-controller keeps its manifests: `kflare run
--gateway-tunnel-gateway-package` against the API server (the Gateway API CRDs and the package's, as kflare generates
them) and the emulator, with an Envoy on its xDS listener. The package's shapes are applied as they are: a
GatewayClass of its controllerName naming a GatewayClassConfig (a tunnel made outside kflare, the credentials Secret
with `api-token` and `account-id`), a Gateway with an HTTPS listener on 443 and no tls block, a route with hostnames
and a Service backend, an ExternalBackend with a base path, an ExternalName Service on 443, and a Gateway naming a
GatewayConfig (a data plane of its own, running a tunnel the user made)."""

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
from kubernetes_asyncio.client.exceptions import ApiException

from app.api.crds import render_package_crds
from app.controlplane import ControlPlane, free_port
from reconcilers.gateway import envoy
from reconcilers.gateway.kinds import GATEWAY_GROUP, PACKAGE_CONTROLLER_NAME, derived_name
from reconcilers.gateway.planes import plane_name
from tests.fixtures.controller import SYSTEM_NAMESPACE, ControllerProcess, controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.envoy import _Thread, echo_app, running_envoy
from tests.helpers import crd_names, eventually
from tests.integration.test_gateway_class import Gateways, parent_cond
from tests.integration.test_gateway_planes import _source_secrets
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


async def package_class(
    kube: ApiClient, config_name: str, secret: str, credentials: dict[str, str], tunnel_id: str
) -> str:
    """The package's credentials Secret (in the controller's namespace), a GatewayClassConfig naming it and the
    tunnel, and a GatewayClass of the package's controllerName naming the config; returns the class's name."""
    await client.CoreV1Api(kube).create_namespaced_secret(
        SYSTEM_NAMESPACE, {"metadata": {"name": secret}, "stringData": credentials}
    )
    await client.CustomObjectsApi(kube).create_cluster_custom_object(
        PACKAGE,
        "v1alpha1",
        "gatewayclassconfigs",
        {
            "apiVersion": f"{PACKAGE}/v1alpha1",
            "kind": "GatewayClassConfig",
            "metadata": {"name": config_name},
            "spec": {"cloudflareCredentialsSecretRef": {"name": secret}, "tunnelID": tunnel_id},
        },
    )
    class_name = f"cloudflare-tunnel-{uuid.uuid4().hex[:6]}"
    await Gateways(kube).create(
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
    return class_name


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
    # The package's credentials Secret and GatewayClassConfig, in the controller's namespace (no namespace given).
    config_name, secret = f"cloudflare-tunnel-{ns}", f"cloudflare-tunnel-credentials-{ns}"
    credentials = {"api-token": emulator.token, "tunnel-token": "unused", "account-id": emulator.account_id}
    class_name = await package_class(kube, config_name, secret, credentials, tunnel["id"])
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


def hand_made_tunnel(emulator: EmulatorProcess, name: str) -> tuple[dict[str, Any], str]:
    """A tunnel made outside kflare, as a user makes one in the dashboard, and its connector token."""
    secret = base64.b64encode(uuid.uuid4().bytes * 2).decode()
    tunnel = cf(
        emulator,
        "POST",
        f"/accounts/{emulator.account_id}/cfd_tunnel",
        json={"name": name, "config_src": "cloudflare", "tunnel_secret": secret},
    )
    token = base64.b64encode(json.dumps({"a": emulator.account_id, "t": tunnel["id"], "s": secret}).encode()).decode()
    return dict(tunnel), token


async def test_a_gateway_config_gives_its_gateway_a_plane_running_the_users_tunnel(
    package_plane: Plane, kube: ApiClient, namespace: str, emulator: EmulatorProcess
) -> None:
    """A Gateway naming a GatewayConfig gets a data plane of its own in its namespace (as a GatewayParameters would
    give it) whose Tunnel adopts the tunnel of the connector token in the GatewayConfig's Secret, under the account
    of the class's GatewayClassConfig; deleting the Gateway takes the plane down and leaves the tunnel in
    Cloudflare."""
    plane, gw, ns = package_plane, Gateways(kube), namespace
    objects, core, apps = client.CustomObjectsApi(kube), client.CoreV1Api(kube), client.AppsV1Api(kube)
    await _source_secrets(core)
    shared, _ = hand_made_tunnel(emulator, f"shared-{ns}")
    own, token = hand_made_tunnel(emulator, f"own-{ns}")
    # The account ID given: the session's emulator holds other tests' accounts, which the token reaches too (finding
    # it from the token is tests/integration/test_account_detection.py's, and make e2e's migration's).
    credentials = {"api-token": emulator.token, "account-id": emulator.account_id}
    config_name = f"planes-{ns}"
    class_name = await package_class(
        kube, config_name, f"cloudflare-tunnel-credentials-{ns}", credentials, shared["id"]
    )
    # The package's GatewayConfig as a user writes it: the Secret of the tunnel's connector token, and the plane's
    # size. (The proxy image it names is the package's; kflare runs its own Envoy and cloudflared.)
    await objects.create_namespaced_custom_object(
        PACKAGE,
        "v1alpha1",
        ns,
        "gatewayconfigs",
        {
            "apiVersion": f"{PACKAGE}/v1alpha1",
            "kind": "GatewayConfig",
            "metadata": {"name": "own"},
            "spec": {
                "tunnelTokenSecretRef": {"name": "own-tunnel"},
                "replicas": 1,
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                "image": "ghcr.io/example/proxy:v1",
            },
        },
    )
    await gw.create(
        "gateways",
        {
            "apiVersion": f"{GATEWAY_GROUP}/v1",
            "kind": "Gateway",
            "metadata": {"name": "edge"},
            "spec": {
                "gatewayClassName": class_name,
                "listeners": [{"name": "https", "protocol": "HTTPS", "port": 443}],
                "infrastructure": {
                    "parametersRef": {"group": PACKAGE, "kind": "GatewayConfig", "name": "own"},
                    "labels": {"team": "payments"},
                },
            },
        },
        ns,
    )
    await gw.backend(ns, "app", plane.backend_port)
    app_host = f"own.{ns}.example.com"
    await gw.create(
        "httproutes",
        {
            "apiVersion": f"{GATEWAY_GROUP}/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "app"},
            "spec": {
                "parentRefs": [{"name": "edge"}],
                "hostnames": [app_host],
                "rules": [{"backendRefs": [{"name": "app", "port": 80}]}],
            },
        },
        ns,
    )
    name = plane_name("edge")

    # Until the token's Secret exists, the Gateway says what its plane waits for, and nothing is made.
    async def waiting() -> dict[str, Any] | None:
        conditions = ((await gw.get("gateways", "edge", ns)).get("status") or {}).get("conditions") or []
        found = next((c for c in conditions if c["type"] == "Programmed"), None)
        return found if found is not None and f"Secret {ns}/own-tunnel" in found["message"] else None

    programmed = await eventually(waiting, what="the Gateway to say its plane waits for the token", timeout=90)
    assert (programmed["status"], programmed["reason"]) == ("False", "Pending")

    async def told() -> Any:
        events = (await client.EventsV1Api(kube).list_namespaced_event(ns)).items
        return [e for e in events if e.reason == "TunnelNotAdopted" and e.regarding.name == "edge"]

    (event,) = await eventually(told, what="the Gateway's TunnelNotAdopted event", timeout=90)
    assert event.type == "Warning"
    assert f"Secret {ns}/own-tunnel (the GatewayConfig's tunnelTokenSecretRef) not found" in event.note
    with pytest.raises(ApiException):
        await apps.read_namespaced_deployment(name, ns)
    await core.create_namespaced_secret(ns, {"metadata": {"name": "own-tunnel"}, "stringData": {"tunnel-token": token}})

    # The plane's Tunnel adopts the user's tunnel, by the ID in the token, under the class's account, and keeps it.
    async def adopted() -> dict[str, Any] | None:
        found = await objects.get_namespaced_custom_object("kflare.dev", "v1alpha1", ns, "tunnels", name)
        metadata = (found.get("status") or {}).get("cloudflareMetadata") or {}
        return dict(found) if metadata.get("tunnelID") == own["id"] else None

    tunnel = await eventually(adopted, what="the plane's Tunnel to adopt the user's tunnel", timeout=90)
    assert tunnel["metadata"]["annotations"]["kflare.dev/adoption-policy"] == "adopt"
    assert tunnel["metadata"]["annotations"]["kflare.dev/deletion-policy"] == "retain"
    assert tunnel["spec"]["name"] == f"own-{ns}"
    assert tunnel["spec"]["accountRef"] == {"name": derived_name(config_name)}
    assert tunnel["metadata"]["labels"]["team"] == "payments"
    gateway = await gw.get("gateways", "edge", ns)
    assert tunnel["metadata"]["ownerReferences"][0]["uid"] == gateway["metadata"]["uid"]

    # Its Deployment, of the GatewayConfig's replicas and resources; cloudflared runs the adopted Tunnel's token.
    async def deployment() -> Any:
        return await apps.read_namespaced_deployment(name, ns)

    made = await eventually(deployment, what="the plane's Deployment", timeout=90)
    assert made.spec.replicas == 1
    envoy_container, cloudflared = made.spec.template.spec.containers
    assert envoy_container.resources.requests == {"cpu": "50m", "memory": "64Mi"}
    assert ["--service-cluster", f"kflare-gateway/{ns}/edge"] == envoy_container.args[4:6]
    assert "ghcr.io/example/proxy:v1" not in (envoy_container.image, cloudflared.image)
    assert cloudflared.env[0].value_from.secret_key_ref.name == f"{name}-tunnel-token"
    written = await eventually(
        lambda: core.read_namespaced_secret(f"{name}-tunnel-token", ns), what="the adopted Tunnel's token Secret"
    )
    assert written.data["TUNNEL_TOKEN"]
    # Its bootstrap presents the plane's own xDS credential, as any plane's.
    xds = await core.read_namespaced_secret(f"{name}-xds", ns)
    (service,) = json.loads(base64.b64decode(xds.data["bootstrap.json"]))["dynamic_resources"]["ads_config"][
        "grpc_services"
    ]
    (credential,) = [m["value"] for m in service["initial_metadata"] if m["key"] == envoy.TOKEN_HEADER]
    assert credential == f"Bearer {envoy.plane_token('t', f'kflare-gateway/{ns}/edge')}"

    # The route is in the user's tunnel's ingress document, not in the class's tunnel's.
    def document(tunnel_id: str) -> list[dict[str, Any]]:
        path = f"/accounts/{emulator.account_id}/cfd_tunnel/{tunnel_id}/configurations"
        return list((cf(emulator, "GET", path)["config"] or {}).get("ingress") or [])

    async def published() -> bool:
        return document(own["id"]) == [{"hostname": app_host, "service": ORIGIN}, {"service": "http_status:404"}]

    await eventually(published, what="the route in the user's tunnel's ingress document", timeout=90)
    assert not any(rule.get("hostname") == app_host for rule in document(shared["id"]))

    async def route_accepted() -> dict[str, Any] | None:
        found = parent_cond(await gw.get("httproutes", "app", ns), "Accepted", PACKAGE_CONTROLLER_NAME)
        return found if found is not None and found["status"] == "True" else None

    await eventually(route_accepted, what="the route accepted on the Gateway with a plane of its own", timeout=90)

    async def gateway_address() -> list[Any] | None:
        addresses = ((await gw.get("gateways", "edge", ns)).get("status") or {}).get("addresses") or []
        return addresses if addresses else None

    addresses = await eventually(gateway_address, what="the Gateway's address", timeout=90)
    assert addresses == [{"type": "Hostname", "value": f"{own['id']}.cfargotunnel.com"}]

    # Deleting the Gateway takes its plane down and leaves the user's tunnel, and its Secret, as they were.
    await gw.objects.delete_namespaced_custom_object(GATEWAY_GROUP, "v1", ns, "gateways", "edge")

    async def gateway_gone() -> bool:
        try:
            await gw.get("gateways", "edge", ns)
        except ApiException as exc:
            return exc.status == 404
        return False

    await eventually(gateway_gone, what="the Gateway to be let go once its plane is down", timeout=90)
    for read in (
        apps.read_namespaced_deployment(name, ns),
        client.PolicyV1Api(kube).read_namespaced_pod_disruption_budget(name, ns),
        core.read_namespaced_service_account(name, ns),
        core.read_namespaced_secret(f"{name}-xds", ns),
        objects.get_namespaced_custom_object("kflare.dev", "v1alpha1", ns, "tunnels", name),
    ):
        with pytest.raises(ApiException) as gone:
            await read
        assert gone.value.status == 404
    assert cf(emulator, "GET", f"/accounts/{emulator.account_id}/cfd_tunnel/{own['id']}")["deleted_at"] is None
    assert document(own["id"]) == [{"service": "http_status:404"}]
    assert (await core.read_namespaced_secret("own-tunnel", ns)).data["tunnel-token"]
    # The connector token, and the tunnel secret inside it, are read for the tunnel's ID and never logged.
    logged = plane.controller.log_path.read_text()
    assert token not in logged
    assert json.loads(base64.b64decode(token))["s"] not in logged
    await gw.objects.delete_cluster_custom_object(GATEWAY_GROUP, "v1", "gatewayclasses", class_name)
    await objects.delete_cluster_custom_object(PACKAGE, "v1alpha1", "gatewayclassconfigs", config_name)
