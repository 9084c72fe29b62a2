"""A Gateway's own data plane end to end: `kflare run --gateway-enabled` against the API server and the emulator. A
Gateway whose `spec.infrastructure.parametersRef` names a GatewayParameters gets its own Tunnel (in Cloudflare too),
Deployment, PodDisruptionBudget, ServiceAccount, Service and Secrets in its namespace, labelled and annotated as its
infrastructure says; its hostnames go through its own tunnel; a namespace past the cap is refused; and deleting the
Gateway takes the plane down in order (DNS records before the tunnel) and frees the cap for the next Gateway."""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from app.controlplane import ControlPlane
from reconcilers.gateway import envoy as envoy_config
from reconcilers.gateway.kinds import GATEWAY_GROUP
from reconcilers.gateway.planes import plane_name
from tests.fixtures.controller import SYSTEM_NAMESPACE, ControllerProcess, Kflare, controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.gateway import gateway_args, tunnel_class
from tests.helpers import eventually
from tests.integration.test_tunnels import make_tunnel
from tests.kinds import cf

pytestmark = pytest.mark.integration
V1 = "v1"
ORIGIN = "http://localhost:8080"


DEFAULT_PARAMETERS = "default-plane"
"""The controller's default GatewayParameters; it exists only during the test of the default."""


@pytest.fixture(scope="module")
def planes_controller(
    control_plane: ControlPlane,
    emulator: EmulatorProcess,
    kflare_crds: None,
    gateway_api: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    workdir = tmp_path_factory.mktemp("gateway-planes")
    args = gateway_args(
        workdir,
        "--gateway-planes-per-namespace=1",
        f"--gateway-default-parameters={SYSTEM_NAMESPACE}/{DEFAULT_PARAMETERS}",
        "--gateway-plane-network-policy=true",
        "--gateway-plane-envoy-image=registry.test/envoy@sha256:" + "a" * 64,
    )
    with controller_process(control_plane, emulator, workdir, *args) as proc:
        yield proc


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def _source_secrets(core: client.CoreV1Api) -> None:
    """The chart's xDS and origin-certificate Secrets in the controller's namespace, which each plane gets a copy of."""
    bootstrap = envoy_config.bootstrap(
        node_id="data-plane", xds_host="kflare-xds", xds_port=18000, token="t", admin_port=9901
    )
    xds = {k: _b64(f"{k} content") for k in ("ca.crt", "client.crt", "client.key")}
    for name, data in (
        ("kflare-xds", {**xds, "bootstrap.json": _b64(json.dumps(bootstrap))}),
        ("kflare-origin-tls", {k: _b64(f"{k} content") for k in ("ca.crt", "tls.crt", "tls.key")}),
    ):
        with contextlib.suppress(ApiException):  # made by an earlier test of the session
            await core.create_namespaced_secret(
                SYSTEM_NAMESPACE, {"metadata": {"name": name}, "data": {**data, "token": _b64("t")}}
            )


class Planes:
    """One test's account, Zone, shared Tunnel, class, GatewayParameters and Service."""

    def __init__(self, kflare: Kflare, zone_id: str, shared_tunnel: str, class_name: str) -> None:
        self.kflare, self.zone_id, self.shared_tunnel, self.class_name = kflare, zone_id, shared_tunnel, class_name
        self.objects = client.CustomObjectsApi(kflare.api)
        self.apps = client.AppsV1Api(kflare.api)
        self.core = client.CoreV1Api(kflare.api)
        self.policy = client.PolicyV1Api(kflare.api)
        self.ns = kflare.namespace
        self.domain = f"{self.ns}.com"

    @property
    def emulator(self) -> EmulatorProcess:
        return self.kflare.emulator

    async def gateway(self, name: str, **infrastructure: Any) -> None:
        spec: dict[str, Any] = {
            "gatewayClassName": self.class_name,
            "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}],
        }
        if infrastructure:
            spec["infrastructure"] = infrastructure
        body = {"apiVersion": f"{GATEWAY_GROUP}/{V1}", "kind": "Gateway", "metadata": {"name": name}, "spec": spec}
        await self.objects.create_namespaced_custom_object(GATEWAY_GROUP, V1, self.ns, "gateways", body)

    async def get_gateway(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(await self.objects.get_namespaced_custom_object(GATEWAY_GROUP, V1, self.ns, "gateways", name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def condition(self, gateway: str, kind: str) -> dict[str, Any] | None:
        found = await self.get_gateway(gateway)
        conditions = ((found or {}).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == kind), None)

    async def route(self, name: str, gateway: str, hostname: str) -> None:
        body = {
            "apiVersion": f"{GATEWAY_GROUP}/{V1}",
            "kind": "HTTPRoute",
            "metadata": {"name": name},
            "spec": {
                "parentRefs": [{"name": gateway}],
                "hostnames": [hostname],
                "rules": [{"backendRefs": [{"name": "echo", "port": 80}]}],
            },
        }
        await self.objects.create_namespaced_custom_object(GATEWAY_GROUP, V1, self.ns, "httproutes", body)

    def document(self, tunnel_id: str) -> list[dict[str, Any]]:
        path = f"/accounts/{self.emulator.account_id}/cfd_tunnel/{tunnel_id}/configurations"
        config = cf(self.emulator, "GET", path)["config"] or {}
        return list(config.get("ingress") or [])

    def records(self, name: str) -> list[dict[str, Any]]:
        return list(cf(self.emulator, "GET", f"/zones/{self.zone_id}/dns_records", params={"name": name}))

    async def deployment(self, name: str) -> Any:
        try:
            return await self.apps.read_namespaced_deployment(name, self.ns)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise


@pytest.fixture
async def planes(
    planes_controller: ControllerProcess, kube: ApiClient, namespace: str, emulator: EmulatorProcess
) -> AsyncIterator[Planes]:
    kflare = Kflare(kube, namespace, emulator)
    zone_id = await kflare.ready_zone(domain=f"{namespace}.com")
    shared = await make_tunnel(kflare)
    objects = client.CustomObjectsApi(kube)
    class_name = await tunnel_class(objects, "planes", namespace)
    core = client.CoreV1Api(kube)
    await _source_secrets(core)
    await core.create_namespaced_service(
        namespace, {"metadata": {"name": "echo"}, "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 9}]}}
    )
    await objects.create_namespaced_custom_object(
        "kflare.dev",
        "v1alpha1",
        namespace,
        "gatewayparameters",
        {
            "apiVersion": "kflare.dev/v1alpha1",
            "kind": "GatewayParameters",
            "metadata": {"name": "own"},
            "spec": {
                "accountRef": {"name": kflare.account},
                "tunnelName": "edge",
                "tunnelDeletionPolicy": "delete",
                "replicas": 1,
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
            },
        },
    )
    world = Planes(kflare, zone_id, shared, class_name)
    yield world
    for plural in ("httproutes", "gateways"):
        listing = await objects.list_namespaced_custom_object(GATEWAY_GROUP, V1, namespace, plural)
        for item in listing["items"]:
            await objects.delete_namespaced_custom_object(
                GATEWAY_GROUP, V1, namespace, plural, item["metadata"]["name"]
            )

    async def gateways_gone() -> bool:
        listing = await objects.list_namespaced_custom_object(GATEWAY_GROUP, V1, namespace, "gateways")
        return not listing["items"]

    await eventually(gateways_gone, what="the Gateways (and their planes) to go", timeout=60)
    await objects.delete_cluster_custom_object(GATEWAY_GROUP, V1, "gatewayclasses", class_name)
    await kflare.cleanup()


OWN = {"parametersRef": {"group": "kflare.dev", "kind": "GatewayParameters", "name": "own"}}


async def test_a_gateway_gets_its_own_tunnel_and_data_plane_and_loses_them_in_order(planes: Planes) -> None:
    p, d = planes, planes.domain
    await p.gateway("edge", **OWN, labels={"team": "payments"}, annotations={"example.com/owner": "payments"})
    await p.route("web", "edge", f"app.{d}")

    # Its own Tunnel, made in Cloudflare under the parameters' name, labelled as the Gateway's infrastructure says.
    tunnel = await p.kflare.ready("Tunnel", "kflare-gw-edge", timeout=60)
    assert tunnel["spec"]["name"] == f"edge-{p.ns}-edge"
    assert tunnel["spec"]["credentialsSecretRef"] == {"name": "kflare-gw-edge-tunnel-token"}
    assert tunnel["metadata"]["labels"]["team"] == "payments"
    assert tunnel["metadata"]["annotations"]["example.com/owner"] == "payments"
    assert tunnel["metadata"]["annotations"]["kflare.dev/deletion-policy"] == "delete"
    gateway = await p.get_gateway("edge")
    assert gateway is not None
    assert tunnel["metadata"]["ownerReferences"][0]["uid"] == gateway["metadata"]["uid"]
    own_id = str(tunnel["status"]["cloudflareMetadata"]["tunnelID"])
    assert own_id != p.shared_tunnel
    assert "kflare.dev/data-plane" in gateway["metadata"]["finalizers"]

    # Its Deployment (Envoy told which plane it is, cloudflared the plane's token), PDB, ServiceAccount and Secrets.
    deployment = await eventually(lambda: p.deployment("kflare-gw-edge"), what="the plane's Deployment")
    assert deployment.spec.replicas == 1
    assert deployment.metadata.labels["team"] == "payments"
    assert deployment.spec.template.metadata.labels["team"] == "payments"
    assert deployment.metadata.annotations["example.com/owner"] == "payments"
    envoy, cloudflared = deployment.spec.template.spec.containers
    assert envoy.image == "registry.test/envoy@sha256:" + "a" * 64
    assert ["--service-cluster", f"kflare-gateway/{p.ns}/edge"] == envoy.args[4:6]
    assert envoy.resources.requests == {"cpu": "50m", "memory": "64Mi"}
    assert cloudflared.env[0].value_from.secret_key_ref.name == "kflare-gw-edge-tunnel-token"
    assert deployment.spec.template.spec.service_account_name == "kflare-gw-edge"
    assert (await p.core.read_namespaced_service_account("kflare-gw-edge", p.ns)).metadata.labels["team"] == "payments"
    # Applied after the Deployment, in the same reconcile: a moment later.
    budget = await eventually(
        lambda: p.policy.read_namespaced_pod_disruption_budget("kflare-gw-edge", p.ns), what="the plane's PDB"
    )
    assert budget.spec.max_unavailable == 1
    network = client.NetworkingV1Api(p.kflare.api)
    policy = await eventually(
        lambda: network.read_namespaced_network_policy("kflare-gw-edge", p.ns), what="the plane's NetworkPolicy"
    )
    assert policy.spec.pod_selector.match_labels["kflare.dev/data-plane"] == "kflare-gw-edge"
    # Its Service, for clients reaching the Gateway directly: the listener's port on Envoy's plaintext listener.
    service = await eventually(
        lambda: p.core.read_namespaced_service("kflare-gw-edge", p.ns), what="the plane's Service"
    )
    assert [(port.name, port.port, port.target_port) for port in service.spec.ports] == [("http-80", 80, "http")]
    assert service.spec.selector.items() <= deployment.spec.template.metadata.labels.items()
    assert service.metadata.labels["gateway.networking.k8s.io/gateway-name"] == "edge"
    assert deployment.spec.template.metadata.labels["gateway.networking.k8s.io/gateway-name"] == "edge"
    # A listener more, a port more (an HTTPS one reaches the listener serving the Gateway's certificates).
    listeners = [
        {"name": "http", "protocol": "HTTP", "port": 80},
        {"name": "https", "protocol": "HTTPS", "port": 443, "tls": {"certificateRefs": [{"name": "absent"}]}},
    ]
    await p.objects.patch_namespaced_custom_object(
        GATEWAY_GROUP, V1, p.ns, "gateways", "edge", {"spec": {"listeners": listeners}},
        _content_type="application/merge-patch+json",
    )  # fmt: skip

    async def two_ports() -> list[tuple[str, int, str]] | None:
        found = await p.core.read_namespaced_service("kflare-gw-edge", p.ns)
        ports = [(port.name, port.port, port.target_port) for port in found.spec.ports]
        return ports if len(ports) == 2 else None

    assert await eventually(two_ports, what="the Service to follow the listeners") == [
        ("http-80", 80, "http"),
        ("https-443", 443, "gateway-https"),
    ]
    xds = await p.core.read_namespaced_secret("kflare-gw-edge-xds", p.ns)
    assert sorted(xds.data) == ["bootstrap.json", "ca.crt", "client.crt", "client.key"]  # not the xDS token
    # Its bootstrap presents the plane's own credential, never the installation's token (which it does not hold).
    own = json.loads(base64.b64decode(xds.data["bootstrap.json"]))
    (service,) = own["dynamic_resources"]["ads_config"]["grpc_services"]
    (credential,) = [m["value"] for m in service["initial_metadata"] if m["key"] == envoy_config.TOKEN_HEADER]
    assert credential == f"Bearer {envoy_config.plane_token('t', 'kflare-gateway/' + p.ns + '/edge')}"
    assert "Bearer t" not in json.dumps(own)
    origin = await p.core.read_namespaced_secret("kflare-gw-edge-origin-tls", p.ns)
    assert sorted(origin.data) == ["ca.crt", "tls.crt", "tls.key"]
    # The token Secret the Tunnel writes, which cloudflared reads.
    await eventually(
        lambda: p.core.read_namespaced_secret("kflare-gw-edge-tunnel-token", p.ns), what="the plane's token Secret"
    )

    # Its hostnames go through its own tunnel, not the class's.
    async def own_document() -> bool:
        return p.document(own_id) == [{"hostname": f"app.{d}", "service": ORIGIN}, {"service": "http_status:404"}]

    await eventually(own_document, what="the Gateway's own tunnel to carry its route", timeout=30)
    await p.kflare.ready("DNSRecord", f"gw.app.{d}", reason="Synced")
    (cname,) = p.records(f"app.{d}")
    assert cname["content"] == f"{own_id}.cfargotunnel.com"
    assert not any(rule.get("hostname") == f"app.{d}" for rule in p.document(p.shared_tunnel))

    async def programmed() -> dict[str, Any] | None:
        found = await p.condition("edge", "Programmed")
        return found if found is not None and found["status"] == "True" else None

    await eventually(programmed, what="the Gateway to be Programmed through its own tunnel")

    # Another route changes the tunnel's document, not the plane's objects.
    version = deployment.metadata.resource_version
    await p.route("api", "edge", f"api.{d}")

    async def two_routes() -> bool:
        return {r.get("hostname") for r in p.document(own_id)} == {f"app.{d}", f"api.{d}", None}

    await eventually(two_routes, what="the second route in the Gateway's own tunnel", timeout=30)
    assert (await p.deployment("kflare-gw-edge")).metadata.resource_version == version

    # The cap is one plane per namespace here: a second Gateway asking for one is refused, and gets nothing.
    await p.gateway("second", **OWN)

    async def refused() -> dict[str, Any] | None:
        found = await p.condition("second", "Accepted")
        return found if found is not None and found["status"] == "False" else None

    accepted = await eventually(refused, what="the Gateway past the cap to be refused")
    assert accepted["reason"] == "InvalidParameters"
    assert "already has 1 Gateway(s) with a data plane of their own" in accepted["message"]
    assert await p.deployment("kflare-gw-second") is None

    # Deleting the Gateway: its DNS records and ingress rules, then its Deployment, then its tunnel, then it.
    started = time.time()
    await p.objects.delete_namespaced_custom_object(GATEWAY_GROUP, V1, p.ns, "gateways", "edge")

    async def edge_gone() -> bool:
        return await p.get_gateway("edge") is None

    await eventually(edge_gone, what="the Gateway to be let go once its plane is down", timeout=60)
    assert await p.deployment("kflare-gw-edge") is None
    names = [n.metadata.name for n in (await network.list_namespaced_network_policy(p.ns)).items]
    assert "kflare-gw-edge" not in names
    assert "kflare-gw-edge" not in [s.metadata.name for s in (await p.core.list_namespaced_service(p.ns)).items]
    await p.kflare.gone("Tunnel", "kflare-gw-edge")
    assert p.records(f"app.{d}") == []
    calls = p.emulator.calls(since=started)
    # (DNS records are deleted in batches: a POST to dns_records/batch.)
    order = [f"{c['method']} {c['path']}" for c in calls if c["method"] != "GET"]
    records = [i for i, call in enumerate(order) if "/dns_records" in call]
    rules = [
        i for i, call in enumerate(order) if call.startswith("PUT") and f"/cfd_tunnel/{own_id}/configurations" in call
    ]
    tunnel = [i for i, call in enumerate(order) if call.startswith("DELETE") and call.endswith(f"/cfd_tunnel/{own_id}")]
    assert records, order
    assert rules, order
    assert len(tunnel) == 1, order
    assert max(records + rules) < tunnel[0], order
    assert p.document(own_id) == [{"service": "http_status:404"}] or not _tunnel_exists(p, own_id)

    # The cap is free again: the second Gateway gets its plane.
    await eventually(lambda: p.deployment("kflare-gw-second"), what="the second Gateway's plane", timeout=60)
    await p.kflare.ready("Tunnel", "kflare-gw-second", timeout=60)


def _tunnel_exists(p: Planes, tunnel_id: str) -> bool:
    listing = cf(p.emulator, "GET", f"/accounts/{p.emulator.account_id}/cfd_tunnel", params={"is_deleted": "false"})
    return any(t["id"] == tunnel_id for t in listing)


async def test_a_default_gateway_parameters_gives_a_gateway_naming_none_a_plane_of_its_own(planes: Planes) -> None:
    """`--gateway-default-parameters` names a GatewayParameters: a Gateway of the class that names none gets its
    own Deployment made of it; once that GatewayParameters is gone, the plane is taken down and the shared plane
    serves the Gateway again."""
    body = {
        "apiVersion": "kflare.dev/v1alpha1",
        "kind": "GatewayParameters",
        "metadata": {"name": DEFAULT_PARAMETERS},
        "spec": {
            "accountRef": {"name": planes.kflare.account},
            "tunnelName": "dflt",
            "tunnelDeletionPolicy": "delete",
            "replicas": 1,
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
        },
    }
    await planes.objects.create_namespaced_custom_object(
        "kflare.dev", "v1alpha1", SYSTEM_NAMESPACE, "gatewayparameters", body
    )
    try:
        await planes.gateway("plain")

        async def made() -> bool:
            deployment = await planes.deployment(plane_name("plain"))
            return deployment is not None and deployment.spec.replicas == 1

        await eventually(made, what="the default's data plane of the Gateway", timeout=60)
    finally:
        await planes.objects.delete_namespaced_custom_object(
            "kflare.dev", "v1alpha1", SYSTEM_NAMESPACE, "gatewayparameters", DEFAULT_PARAMETERS
        )

    async def taken_down() -> bool:
        return await planes.deployment(plane_name("plain")) is None

    await eventually(taken_down, what="the plane to go with the default GatewayParameters", timeout=90)
