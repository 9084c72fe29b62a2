"""The `cloudflare-tunnel` class end to end: `kflare run --gateway-enabled` against the API server with the Gateway
API CRDs installed, an Envoy polling its xDS listener, and an echo backend on loopback behind a Service and an
FQDN-type EndpointSlice (the API server refuses loopback in IP slices)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient

from app.controlplane import CertificateAuthority, ControlPlane, free_port
from app.dev_gateway import write_origin_tls
from reconcilers.gateway import envoy
from reconcilers.gateway.kinds import CONTROLLER_NAME, GATEWAY_EXISTS_FINALIZER, GATEWAY_GROUP
from tests.fixtures.controller import ControllerProcess, controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.envoy import _Thread, echo_app, running_envoy
from tests.helpers import eventually

pytestmark = pytest.mark.integration
TENANCY_LABEL = "tenant.kflare.dev/host"
V1 = "v1"


@dataclass
class Plane:
    controller: ControllerProcess
    envoy_port: int
    backend_port: int


@pytest.fixture(scope="module")
def gateway_plane(
    control_plane: ControlPlane,
    emulator: EmulatorProcess,
    kflare_crds: None,
    gateway_api: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Plane]:
    workdir = tmp_path_factory.mktemp("gateway")
    token = workdir / "xds-token"
    token.write_text(uuid.uuid4().hex)
    # The xDS listener serves TLS from a certificate directory; Envoy checks it against the CA.
    ca = CertificateAuthority.create("xds-ca")
    key_pem, cert_pem = ca.issue("xds", hosts=["127.0.0.1"], server=True)
    certs = workdir / "xds-certs"
    certs.mkdir()
    (certs / "tls.crt").write_bytes(cert_pem)
    (certs / "tls.key").write_bytes(key_pem)
    (workdir / "ca.crt").write_bytes(ca.pem)
    origin_tls = write_origin_tls(workdir / "origin-tls", "kflare-data-plane")
    xds_port, envoy_port = free_port(), free_port()
    servers = _Thread()
    backend_port = free_port()
    servers.serve(echo_app("echo", []), backend_port)
    args = (
        "--gateway-enabled=true",
        f"--gateway-xds-bind-address=127.0.0.1:{xds_port}",
        f"--gateway-xds-token-file={token}",
        f"--gateway-xds-cert-dir={certs}",
        f"--gateway-data-plane-address=127.0.0.1:{envoy_port}",
        f"--gateway-data-plane-tls-port={free_port()}",
        f"--gateway-origin-tls-dir={origin_tls}",
        f"--gateway-namespace-label={TENANCY_LABEL}",
    )
    bootstrap = envoy.bootstrap(
        node_id="it",
        xds_host="127.0.0.1",
        xds_port=xds_port,
        token=token.read_text(),
        admin_port=free_port(),
        ca_file=str(workdir / "ca.crt"),
    )
    try:
        with controller_process(control_plane, emulator, workdir, *args) as proc, running_envoy(bootstrap):
            yield Plane(proc, envoy_port, backend_port)
    finally:
        servers.stop()


class Gateways:
    def __init__(self, api: ApiClient) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.discovery = client.DiscoveryV1Api(api)

    async def create(self, plural: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        version = "v1beta1" if plural == "referencegrants" else V1
        if namespace is None:
            return dict(await self.objects.create_cluster_custom_object(GATEWAY_GROUP, version, plural, body))
        return dict(await self.objects.create_namespaced_custom_object(GATEWAY_GROUP, version, namespace, plural, body))

    async def get(self, plural: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        if namespace is None:
            return dict(await self.objects.get_cluster_custom_object(GATEWAY_GROUP, V1, plural, name))
        return dict(await self.objects.get_namespaced_custom_object(GATEWAY_GROUP, V1, namespace, plural, name))

    async def patch(self, plural: str, name: str, namespace: str, patch: dict[str, Any]) -> None:
        await self.objects.patch_namespaced_custom_object(
            GATEWAY_GROUP, V1, namespace, plural, name, patch, _content_type="application/merge-patch+json"
        )

    async def backend(self, namespace: str, name: str, port: int) -> None:
        await self.core.create_namespaced_service(
            namespace,
            {"metadata": {"name": name}, "spec": {"ports": [{"name": "http", "port": 80, "targetPort": port}]}},
        )
        await self.discovery.create_namespaced_endpoint_slice(
            namespace,
            {
                "metadata": {"name": f"{name}-loopback", "labels": {"kubernetes.io/service-name": name}},
                "addressType": "FQDN",
                "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            },
        )


@pytest.fixture
def gw(kube: ApiClient) -> Gateways:
    return Gateways(kube)


@pytest.fixture(autouse=True)
async def tenant_label(kube: ApiClient, namespace: str) -> None:
    """The controller runs with --gateway-namespace-label: a namespace without the label publishes no hostname
    outside managed zones (fail closed). The test's namespace owns `<namespace>.example.com`, which its routes'
    hostnames are under."""
    patch = {"metadata": {"labels": {TENANCY_LABEL: f"{namespace}.example.com"}}}
    await client.CoreV1Api(kube).patch_namespace(namespace, patch)


def cond(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def parent_cond(route: dict[str, Any], type_: str, controller: str = CONTROLLER_NAME) -> dict[str, Any] | None:
    for parent in (route.get("status") or {}).get("parents") or []:
        if parent.get("controllerName") == controller:
            return next((c for c in parent["conditions"] if c["type"] == type_), None)
    return None


def gateway_manifest(name: str, class_name: str, listeners: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "Gateway",
        "metadata": {"name": name},
        "spec": {"gatewayClassName": class_name, "listeners": listeners},
    }


def route_manifest(
    name: str, gateway_ns: str, hostnames: list[str] | None, rules: list[dict[str, Any]]
) -> dict[str, Any]:
    spec: dict[str, Any] = {"parentRefs": [{"name": "edge", "namespace": gateway_ns}], "rules": rules}
    if hostnames is not None:
        spec["hostnames"] = hostnames
    return {"apiVersion": f"{GATEWAY_GROUP}/v1", "kind": "HTTPRoute", "metadata": {"name": name}, "spec": spec}


async def new_class(gw: Gateways, parameters: dict[str, Any] | None = None) -> str:
    name = f"tunnel-{uuid.uuid4().hex[:8]}"
    spec: dict[str, Any] = {"controllerName": CONTROLLER_NAME}
    if parameters:
        spec["parametersRef"] = parameters
    await gw.create(
        "gatewayclasses",
        {"apiVersion": f"{GATEWAY_GROUP}/v1", "kind": "GatewayClass", "metadata": {"name": name}, "spec": spec},
    )
    return name


async def through_envoy(plane: Plane, host: str, path: str = "/") -> httpx.Response:
    async with httpx.AsyncClient(timeout=5) as http:
        return await http.get(f"http://127.0.0.1:{plane.envoy_port}{path}", headers={"Host": host})


async def through_envoy_is(plane: Plane, host: str, code: int) -> bool:
    return (await through_envoy(plane, host)).status_code == code


async def test_statuses_and_traffic_of_a_gateway_and_its_routes(
    gateway_plane: Plane, gw: Gateways, namespace: str
) -> None:
    class_name = await new_class(gw)

    async def class_accepted() -> dict[str, Any] | None:
        cls = await gw.get("gatewayclasses", class_name)
        accepted, supported = cond(cls, "Accepted"), cond(cls, "SupportedVersion")
        return (
            cls if accepted and accepted["status"] == "True" and supported and supported["status"] == "True" else None
        )

    await eventually(class_accepted, what="the GatewayClass to be Accepted with a SupportedVersion")
    await gw.backend(namespace, "echo", gateway_plane.backend_port)
    listeners = [
        {"name": "http", "protocol": "HTTP", "port": 80},
        {"name": "https", "protocol": "HTTPS", "port": 443},
        {
            "name": "passthrough",
            "protocol": "TLS",
            "port": 8443,
            "hostname": "tls.example.com",
            "tls": {"mode": "Passthrough"},
        },
        {
            "name": "terminate",
            "protocol": "HTTPS",
            "port": 9443,
            "tls": {"mode": "Terminate", "certificateRefs": [{"name": "cert"}]},
        },
    ]
    await gw.create("gateways", gateway_manifest("edge", class_name, listeners), namespace)
    host = f"{namespace}.example.com"
    await gw.create(
        "httproutes",
        route_manifest("web", namespace, [host], [{"backendRefs": [{"name": "echo", "port": 80}]}]),
        namespace,
    )

    async def gateway_status() -> dict[str, Any] | None:
        gateway = await gw.get("gateways", "edge", namespace)
        listeners = {entry["name"]: entry for entry in (gateway.get("status") or {}).get("listeners") or []}
        return gateway if len(listeners) == 4 and listeners["http"]["attachedRoutes"] == 1 else None

    gateway = await eventually(gateway_status, what="the Gateway's listener statuses")
    accepted = cond(gateway, "Accepted")
    assert accepted is not None
    assert (accepted["status"], accepted["reason"]) == ("True", "ListenersNotValid")
    assert "passthrough" in accepted["message"]
    assert "terminate" in accepted["message"]
    assert accepted["observedGeneration"] == gateway["metadata"]["generation"]
    by_name = {entry["name"]: entry for entry in gateway["status"]["listeners"]}
    refused = {name: next(c for c in by_name[name]["conditions"] if c["type"] == "Accepted") for name in by_name}
    assert refused["http"]["status"] == refused["https"]["status"] == "True"
    assert refused["passthrough"]["reason"] == "UnsupportedProtocol"
    # Its certificate is checked: there is no Secret `cert`.
    certificate = next(c for c in by_name["terminate"]["conditions"] if c["type"] == "ResolvedRefs")
    assert (certificate["status"], certificate["reason"]) == ("False", "InvalidCertificateRef")
    assert by_name["https"]["attachedRoutes"] == 1

    async def served() -> bool:
        reply = await through_envoy(gateway_plane, host)
        return reply.status_code == 200 and reply.json()["backend"] == "echo"

    await eventually(served, what="the route to be served by Envoy")
    route = await gw.get("httproutes", "web", namespace)
    for type_ in ("Accepted", "ResolvedRefs"):
        found = parent_cond(route, type_)
        assert found is not None, route["status"]
        assert found["status"] == "True", route["status"]
        assert found["observedGeneration"] == route["metadata"]["generation"]

    cls = await gw.get("gatewayclasses", class_name)
    assert GATEWAY_EXISTS_FINALIZER in cls["metadata"]["finalizers"]

    # A change of the route reaches Envoy with no restart.
    await gw.patch(
        "httproutes",
        "web",
        namespace,
        {
            "spec": {
                "rules": [
                    {
                        "matches": [{"path": {"type": "Exact", "value": "/only"}}],
                        "backendRefs": [{"name": "echo", "port": 80}],
                    }
                ]
            }
        },
    )

    async def changed() -> bool:
        return (await through_envoy(gateway_plane, host, "/other")).status_code == 404

    await eventually(changed, what="the changed route in Envoy", timeout=10)
    assert (await through_envoy(gateway_plane, host, "/only")).status_code == 200

    # Deleting the Gateway releases the class.
    await gw.objects.delete_namespaced_custom_object(GATEWAY_GROUP, V1, namespace, "gateways", "edge")

    async def released() -> bool:
        cls = await gw.get("gatewayclasses", class_name)
        return GATEWAY_EXISTS_FINALIZER not in (cls["metadata"].get("finalizers") or [])

    await eventually(released, what="the gateway-exists finalizer to go")
    await gw.objects.delete_cluster_custom_object(GATEWAY_GROUP, V1, "gatewayclasses", class_name)


async def test_refusals_are_reported_and_other_controllers_entries_kept(
    gateway_plane: Plane, gw: Gateways, namespace: str, kube: ApiClient
) -> None:
    class_name = await new_class(gw)
    listeners = [{"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}]
    await gw.create("gateways", gateway_manifest("edge", class_name, listeners), namespace)
    other = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(kube)
    labels = {"kflare-test": "on", TENANCY_LABEL: f"cross.{namespace}.example.com"}  # the name its route publishes
    await core.create_namespace({"metadata": {"name": other, "labels": labels}})
    await gw.backend(namespace, "echo", gateway_plane.backend_port)
    unsupported = {
        "filters": [{"type": "ExtensionRef", "extensionRef": {"group": "example.com", "kind": "Auth", "name": "x"}}],
        "backendRefs": [{"name": "echo", "port": 80}],
    }
    await gw.create(
        "httproutes", route_manifest("ext", namespace, [f"ext.{namespace}.example.com"], [unsupported]), namespace
    )
    cross = [{"backendRefs": [{"name": "echo", "namespace": namespace, "port": 80}]}]
    await gw.create("httproutes", route_manifest("cross", namespace, [f"cross.{namespace}.example.com"], cross), other)

    async def refused() -> bool:
        ext = parent_cond(await gw.get("httproutes", "ext", namespace), "Accepted")
        refs = parent_cond(await gw.get("httproutes", "cross", other), "ResolvedRefs")
        return bool(
            ext
            and ext["status"] == "False"
            and ext["reason"] == "UnsupportedValue"
            and "ExtensionRef" in ext["message"]
            and refs
            and refs["status"] == "False"
            and refs["reason"] == "RefNotPermitted"
        )

    await eventually(refused, what="the unsupported filter and the cross-namespace backend to be refused")
    # The traffic of a rule whose backends are refused gets 500, as the spec asks.

    async def answers_500() -> bool:
        return (await through_envoy(gateway_plane, f"cross.{namespace}.example.com")).status_code == 500

    await eventually(answers_500, what="Envoy to answer 500 for the refused backend")

    # Another controller's entry on the same route survives this controller's writes.
    route = await gw.get("httproutes", "cross", other)
    foreign = {
        "parentRef": {"name": "elsewhere", "namespace": other},
        "controllerName": "example.com/other",
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Accepted",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": 1,
            }
        ],
    }
    await gw.objects.patch_namespaced_custom_object_status(
        GATEWAY_GROUP,
        V1,
        other,
        "httproutes",
        "cross",
        {"status": {"parents": [*route["status"]["parents"], foreign]}},
        _content_type="application/merge-patch+json",
    )
    await gw.create(
        "referencegrants",
        {
            "apiVersion": f"{GATEWAY_GROUP}/v1beta1",
            "kind": "ReferenceGrant",
            "metadata": {"name": "let-in"},
            "spec": {
                "from": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute", "namespace": other}],
                "to": [{"group": "", "kind": "Service"}],
            },
        },
        namespace,
    )

    async def granted() -> dict[str, Any] | None:
        route = await gw.get("httproutes", "cross", other)
        refs = parent_cond(route, "ResolvedRefs")
        return route if refs and refs["status"] == "True" else None

    route = await eventually(granted, what="the ReferenceGrant to resolve the backend")
    assert parent_cond(route, "Accepted", "example.com/other") is not None

    async def served() -> bool:
        return (await through_envoy(gateway_plane, f"cross.{namespace}.example.com")).status_code == 200

    await eventually(served, what="the granted backend to be served")


async def test_tenancy_and_hostname_conflicts(
    gateway_plane: Plane, gw: Gateways, namespace: str, kube: ApiClient
) -> None:
    """With --gateway-namespace-label, a namespace publishes hostnames outside managed zones only under its label's
    value, and none without the label. Between two namespaces labelled alike, the older namespace owns a name
    whichever route is older: deleting and re-creating its route takes the name back."""
    class_name = await new_class(gw)
    listeners = [{"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}]
    await gw.create("gateways", gateway_manifest("edge", class_name, listeners), namespace)
    core = client.CoreV1Api(kube)
    # Created first, and named to sort first: creation times have a one-second grain, and on a tie the namespaces
    # are ordered by name, so the tenant's namespace is the older one either way.
    suffix = uuid.uuid4().hex[:10]
    tenant, rival, unlabelled = f"a-{suffix}", f"b-{suffix}", f"c-{suffix}"
    domain = f"{tenant}.example.com"
    for name, labels in ((tenant, {TENANCY_LABEL: domain}), (rival, {TENANCY_LABEL: domain}), (unlabelled, {})):
        await core.create_namespace({"metadata": {"name": name, "labels": {"kflare-test": "on", **labels}}})
        await gw.backend(name, "echo", gateway_plane.backend_port)
    rules = [{"backendRefs": [{"name": "echo", "port": 80}]}]
    # The rival's route is the older one, and answers with a redirect: who serves the name shows.
    redirect = [{"filters": [{"type": "RequestRedirect", "requestRedirect": {"hostname": "rival.example.net"}}]}]
    await gw.create("httproutes", route_manifest("late", namespace, [f"app.{domain}"], redirect), rival)
    await gw.create("httproutes", route_manifest("bare", namespace, None, rules), tenant)
    await gw.create("httproutes", route_manifest("outside", namespace, ["other.example.org"], rules), tenant)
    own = route_manifest("own", namespace, [f"*.{domain}", f"app.{domain}"], rules)
    await gw.create("httproutes", own, tenant)
    await gw.create(
        "httproutes", route_manifest("nolabel", namespace, [f"x.{unlabelled}.example.org"], rules), unlabelled
    )
    routes = (("bare", tenant), ("outside", tenant), ("own", tenant), ("late", rival), ("nolabel", unlabelled))

    async def settled() -> dict[str, dict[str, Any]] | None:
        found = {}
        for name, ns in routes:
            accepted = parent_cond(await gw.get("httproutes", name, ns), "Accepted")
            if accepted is None:
                return None
            found[name] = accepted
        return found if found["late"]["status"] == "False" else None

    found = await eventually(settled, what="every route's Accepted condition")
    assert found["bare"]["reason"] == "NotAllowedByListeners"
    assert "must declare hostnames" in found["bare"]["message"]
    assert found["outside"]["reason"] == "NotAllowedByListeners"
    assert f"other.example.org is not {domain} or under it" in found["outside"]["message"]
    assert found["own"]["status"] == "True"
    assert found["late"]["reason"] == "HostnameConflict"
    assert f"{tenant}/own" not in found["late"]["message"], "the owner's route is not named"
    assert "served by a route of another namespace" in found["late"]["message"]
    assert found["nolabel"]["reason"] == "NotAllowedByListeners"
    assert f"namespace {unlabelled} has no {TENANCY_LABEL} label" in found["nolabel"]["message"]

    async def answered(status: int) -> bool:
        return (await through_envoy(gateway_plane, f"app.{domain}")).status_code == status

    await eventually(lambda: answered(200), what="the tenant's own hostname to be served")
    assert (await through_envoy(gateway_plane, f"x.{unlabelled}.example.org")).status_code == 404

    # The owner's route deleted, the rival serves the name meanwhile; re-created (now the newer), it takes it back.
    await gw.objects.delete_namespaced_custom_object(GATEWAY_GROUP, V1, tenant, "httproutes", "own")
    await eventually(lambda: answered(302), what="the rival's route to serve the name meanwhile")
    await gw.create("httproutes", own, tenant)
    await eventually(lambda: answered(200), what="the owner's re-created route to take the name back")

    async def refused_again() -> bool:
        accepted = parent_cond(await gw.get("httproutes", "late", rival), "Accepted")
        return bool(accepted and accepted["reason"] == "HostnameConflict")

    await eventually(refused_again, what="the rival's route to be refused again")


async def test_a_class_naming_a_missing_tunnel_is_not_accepted(gateway_plane: Plane, gw: Gateways) -> None:
    class_name = await new_class(gw, {"group": "kflare.dev", "kind": "Tunnel", "name": "absent", "namespace": "infra"})

    async def refused() -> dict[str, Any] | None:
        accepted = cond(await gw.get("gatewayclasses", class_name), "Accepted")
        return accepted if accepted and accepted["status"] == "False" else None

    accepted = await eventually(refused, what="the class to be refused")
    assert accepted["reason"] == "InvalidParameters"
    assert "Tunnel infra/absent not found" in accepted["message"]
    await gw.objects.delete_cluster_custom_object(GATEWAY_GROUP, V1, "gatewayclasses", class_name)


async def test_an_https_listeners_certificate_ref_resolves_once_its_secret_exists(
    gateway_plane: Plane, gw: Gateways, namespace: str
) -> None:
    class_name = await new_class(gw)
    tls = {"mode": "Terminate", "certificateRefs": [{"name": "site-cert"}]}
    listeners = [
        {"name": "https", "protocol": "HTTPS", "port": 443, "hostname": f"s.{namespace}.example.com", "tls": tls}
    ]
    await gw.create("gateways", gateway_manifest("edge", class_name, listeners), namespace)

    def resolved(reason: str) -> Callable[[], Awaitable[dict[str, Any] | None]]:
        async def check() -> dict[str, Any] | None:
            status = (await gw.get("gateways", "edge", namespace)).get("status") or {}
            for listener in status.get("listeners") or []:
                found = next((c for c in listener["conditions"] if c["type"] == "ResolvedRefs"), None)
                if found and found["reason"] == reason:
                    return listener
            return None

        return check

    missing = await eventually(resolved("InvalidCertificateRef"), what="the missing Secret to be reported")
    assert next(c for c in missing["conditions"] if c["type"] == "Programmed")["status"] == "False"
    key, cert = CertificateAuthority.create("site CA").issue("site", hosts=[f"s.{namespace}.example.com"], server=True)
    data = {"tls.crt": base64.b64encode(cert).decode(), "tls.key": base64.b64encode(key).decode()}
    await gw.core.create_namespaced_secret(
        namespace, {"metadata": {"name": "site-cert"}, "type": "kubernetes.io/tls", "data": data}
    )
    served = await eventually(resolved("ResolvedRefs"), what="the new Secret to resolve the listener")
    conditions = {c["type"]: c for c in served["conditions"]}
    assert conditions["Programmed"]["status"] == "True"
    assert "served to clients reaching the data plane directly" in conditions["Accepted"]["message"]
    await gw.objects.delete_namespaced_custom_object(GATEWAY_GROUP, V1, namespace, "gateways", "edge")


async def test_a_backend_tls_policys_status_follows_its_ca_config_map_and_listener_sets_need_their_gateways_leave(
    gateway_plane: Plane, gw: Gateways, namespace: str
) -> None:
    class_name = await new_class(gw)
    listeners = [{"name": "http", "protocol": "HTTP", "port": 80}]
    await gw.create("gateways", gateway_manifest("edge", class_name, listeners), namespace)
    await gw.backend(namespace, "echo", gateway_plane.backend_port)
    host = f"tls.{namespace}.example.com"
    await gw.create(
        "httproutes",
        route_manifest("web", namespace, [host], [{"backendRefs": [{"name": "echo", "port": 80}]}]),
        namespace,
    )
    policy = {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "BackendTLSPolicy",
        "metadata": {"name": "echo-tls"},
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": "echo"}],
            "validation": {
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "echo-ca"}],
                "hostname": "echo.internal",
            },
        },
    }
    await gw.create("backendtlspolicies", policy, namespace)

    def policy_status(accepted: str) -> Callable[[], Awaitable[dict[str, dict[str, Any]] | None]]:
        async def check() -> dict[str, dict[str, Any]] | None:
            found = await gw.get("backendtlspolicies", "echo-tls", namespace)
            for ancestor in (found.get("status") or {}).get("ancestors") or []:
                conditions = {c["type"]: c for c in ancestor["conditions"]}
                if (
                    ancestor["controllerName"] == CONTROLLER_NAME
                    and ancestor["ancestorRef"]
                    == {"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": namespace, "name": "edge"}
                    and conditions["Accepted"]["status"] == accepted
                    and conditions["Accepted"]["observedGeneration"] == found["metadata"]["generation"]
                ):
                    return conditions
            return None

        return check

    missing = await eventually(policy_status("False"), what="the policy's missing CA to be reported")
    assert missing["Accepted"]["reason"] == "NoValidCACertificate"
    assert (missing["ResolvedRefs"]["status"], missing["ResolvedRefs"]["reason"]) == (
        "False",
        "InvalidCACertificateRef",
    )
    assert f"ConfigMap {namespace}/echo-ca not found" in missing["ResolvedRefs"]["message"]

    async def answered(code: int) -> bool:
        return (await through_envoy(gateway_plane, host)).status_code == code

    # A policy that cannot be honoured fails closed; the route itself stays accepted.
    await eventually(lambda: answered(500), what="the backend of an invalid policy to answer 500")
    assert (parent_cond(await gw.get("httproutes", "web", namespace), "Accepted") or {}).get("status") == "True"

    ca_pem = CertificateAuthority.create("echo CA").pem.decode()
    await gw.core.create_namespaced_config_map(namespace, {"metadata": {"name": "echo-ca"}, "data": {"ca.crt": ca_pem}})
    valid = await eventually(policy_status("True"), what="the new ConfigMap to make the policy valid")
    assert (valid["Accepted"]["reason"], valid["ResolvedRefs"]["status"]) == ("Accepted", "True")
    # The echo backend speaks plaintext: Envoy's TLS to it fails, and nothing is sent to it unencrypted.
    await eventually(lambda: answered(503), what="TLS to the plaintext backend to fail")

    listener_set = {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "ListenerSet",
        "metadata": {"name": "more"},
        "spec": {
            "parentRef": {"name": "edge"},
            "listeners": [
                {"name": "extra", "protocol": "HTTP", "port": 80, "hostname": f"more.{namespace}.example.com"}
            ],
        },
    }
    await gw.create("listenersets", listener_set, namespace)

    async def refused() -> dict[str, dict[str, Any]] | None:
        found = await gw.get("listenersets", "more", namespace)
        conditions = {c["type"]: c for c in (found.get("status") or {}).get("conditions") or []}
        return conditions if conditions.get("Accepted", {}).get("status") == "False" else None

    conditions = await eventually(refused, what="the ListenerSet to be refused")
    assert conditions["Accepted"]["reason"] == conditions["Programmed"]["reason"] == "NotAllowed"
    assert (await gw.get("gateways", "edge", namespace))["status"]["attachedListenerSets"] == 0

    # Once the Gateway allows ListenerSets of its namespace, the listener is merged and serves the routes naming it.
    more = f"more.{namespace}.example.com"
    await gw.backend(namespace, "plain", gateway_plane.backend_port)  # no BackendTLSPolicy names it
    on_set = route_manifest("on-set", namespace, [more], [{"backendRefs": [{"name": "plain", "port": 80}]}])
    on_set["spec"]["parentRefs"] = [{"group": GATEWAY_GROUP, "kind": "ListenerSet", "name": "more"}]
    await gw.create("httproutes", on_set, namespace)
    await gw.patch("gateways", "edge", namespace, {"spec": {"allowedListeners": {"namespaces": {"from": "Same"}}}})

    async def taken() -> dict[str, Any] | None:
        found = await gw.get("listenersets", "more", namespace)
        status = found.get("status") or {}
        accepted = cond(found, "Accepted") or {}
        ok = accepted.get("status") == "True" and accepted.get("observedGeneration") == found["metadata"]["generation"]
        return status if ok and [e["attachedRoutes"] for e in status["listeners"]] == [1] else None

    status = await eventually(taken, what="the ListenerSet to be taken, and the route attached to its listener")
    assert [entry["name"] for entry in status["listeners"]] == ["extra"]
    assert (await gw.get("gateways", "edge", namespace))["status"]["attachedListenerSets"] == 1
    await eventually(lambda: through_envoy_is(gateway_plane, more, 200), what="the ListenerSet's listener to serve")
    route = await gw.get("httproutes", "on-set", namespace)
    assert [entry["parentRef"]["kind"] for entry in route["status"]["parents"]] == ["ListenerSet"]
    assert (parent_cond(route, "Accepted") or {}).get("reason") == "Accepted"
    await gw.objects.delete_namespaced_custom_object(GATEWAY_GROUP, V1, namespace, "gateways", "edge")
    await gw.objects.delete_cluster_custom_object(GATEWAY_GROUP, V1, "gatewayclasses", class_name)
