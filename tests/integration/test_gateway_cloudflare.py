"""The `cloudflare-tunnel` class's Cloudflare side end to end: `kflare run --gateway-enabled` against the API server
(Gateway API CRDs installed) and the emulator. A GatewayClass names a kflare Tunnel; the tunnel's ingress document
follows the routes of its Gateways (one write per change, none when nothing changed), each hostname inside a kflare
Zone gets a DNSRecord in the Zone's namespace, an existing record is reported on the route and never overwritten, and
a TunnelConfiguration of the same tunnel is a conflict the Gateway reports."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from app.controlplane import ControlPlane
from reconcilers.gateway.kinds import CONTROLLER_NAME, GATEWAY_GROUP
from tests.fixtures.controller import ControllerProcess, Kflare, controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.gateway import gateway_args, tunnel_class
from tests.helpers import eventually
from tests.integration.test_tunnels import make_config, make_tunnel
from tests.kinds import cf

pytestmark = pytest.mark.integration
V1 = "v1"
ORIGIN = "http://localhost:8080"  # cloudflared and Envoy share the data plane's pod


@pytest.fixture(scope="module")
def gateway_controller(
    control_plane: ControlPlane,
    emulator: EmulatorProcess,
    kflare_crds: None,
    gateway_api: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    workdir = tmp_path_factory.mktemp("gateway-cloudflare")
    args = gateway_args(workdir)
    with controller_process(control_plane, emulator, workdir, *args) as proc:
        yield proc


@pytest.fixture
async def cloud(kube: ApiClient, namespace: str, emulator: EmulatorProcess) -> AsyncIterator[Kflare]:
    helper = Kflare(kube, namespace, emulator)
    yield helper
    await helper.cleanup()


class Published:
    """One test's Tunnel, Zone, GatewayClass and Gateway, and what Cloudflare holds for them."""

    def __init__(self, kflare: Kflare, tunnel_id: str, zone_id: str, class_name: str) -> None:
        self.kflare, self.tunnel_id, self.zone_id, self.class_name = kflare, tunnel_id, zone_id, class_name
        self.objects = client.CustomObjectsApi(kflare.api)
        self.ns = kflare.namespace
        self.domain = f"{self.ns}.com"

    @property
    def emulator(self) -> EmulatorProcess:
        return self.kflare.emulator

    def document(self) -> list[dict[str, Any]]:
        path = f"/accounts/{self.emulator.account_id}/cfd_tunnel/{self.tunnel_id}/configurations"
        config = cf(self.emulator, "GET", path)["config"] or {}
        return list(config.get("ingress") or [])

    def writes(self) -> int:
        return len(self.emulator.calls(method="PUT", path=f"/cfd_tunnel/{self.tunnel_id}/configurations"))

    def records(self, name: str) -> list[dict[str, Any]]:
        return list(cf(self.emulator, "GET", f"/zones/{self.zone_id}/dns_records", params={"name": name}))

    async def route(self, name: str, hostnames: list[str], kind: str = "HTTPRoute", **extra: Any) -> None:
        plural = "httproutes" if kind == "HTTPRoute" else "grpcroutes"
        body = {
            "apiVersion": f"{GATEWAY_GROUP}/{V1}",
            "kind": kind,
            "metadata": {"name": name},
            "spec": {
                "parentRefs": [{"name": "edge"}],
                "hostnames": hostnames,
                "rules": [{"backendRefs": [{"name": "echo", "port": 80}], **extra}],
            },
        }
        await self.objects.create_namespaced_custom_object(GATEWAY_GROUP, V1, self.ns, plural, body)

    async def get_route(self, name: str, kind: str = "HTTPRoute") -> dict[str, Any]:
        plural = "httproutes" if kind == "HTTPRoute" else "grpcroutes"
        return dict(await self.objects.get_namespaced_custom_object(GATEWAY_GROUP, V1, self.ns, plural, name))

    async def patch_route(self, name: str, patch: dict[str, Any]) -> None:
        await self.objects.patch_namespaced_custom_object(
            GATEWAY_GROUP, V1, self.ns, "httproutes", name, patch, _content_type="application/merge-patch+json"
        )

    async def delete_route(self, name: str) -> None:
        await self.objects.delete_namespaced_custom_object(GATEWAY_GROUP, V1, self.ns, "httproutes", name)

    async def dns(self, name: str, kind: str = "HTTPRoute") -> dict[str, Any] | None:
        """The route's DNSPublished condition, once it is for the route's current generation."""
        route = await self.get_route(name, kind)
        for parent in (route.get("status") or {}).get("parents") or []:
            if parent.get("controllerName") == CONTROLLER_NAME:
                for cond in parent["conditions"]:
                    if cond["type"] == "DNSPublished" and cond["observedGeneration"] == route["metadata"]["generation"]:
                        return dict(cond)
        return None

    async def programmed(self) -> dict[str, Any] | None:
        gateway = await self.objects.get_namespaced_custom_object(GATEWAY_GROUP, V1, self.ns, "gateways", "edge")
        return next(
            (c for c in (gateway.get("status") or {}).get("conditions") or [] if c["type"] == "Programmed"), None
        )

    async def record_object(self, name: str) -> dict[str, Any] | None:
        try:
            return await self.kflare.get("DNSRecord", name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def close(self) -> None:
        for plural in ("httproutes", "grpcroutes"):
            listing = await self.objects.list_namespaced_custom_object(GATEWAY_GROUP, V1, self.ns, plural)
            for item in listing["items"]:
                await self.objects.delete_namespaced_custom_object(
                    GATEWAY_GROUP, V1, self.ns, plural, item["metadata"]["name"]
                )
        await self.objects.delete_namespaced_custom_object(GATEWAY_GROUP, V1, self.ns, "gateways", "edge")

        async def records_gone() -> bool:
            listing = await self.objects.list_namespaced_custom_object("kflare.dev", "v1alpha1", self.ns, "dnsrecords")
            return not [r for r in listing["items"] if r["metadata"]["name"].startswith("gw")]

        # The class deletes its DNSRecords before the test's cleanup deletes the Zone under them.
        await eventually(records_gone, what="the class's DNSRecords to go", timeout=30)
        await self.objects.delete_cluster_custom_object(GATEWAY_GROUP, V1, "gatewayclasses", self.class_name)


@pytest.fixture
async def published(gateway_controller: ControllerProcess, cloud: Kflare) -> AsyncIterator[Published]:
    ns = cloud.namespace
    zone_id = await cloud.ready_zone(domain=f"{ns}.com")
    tunnel_id = await make_tunnel(cloud)
    objects = client.CustomObjectsApi(cloud.api)
    class_name = await tunnel_class(objects, "tunnel", ns)
    await objects.create_namespaced_custom_object(
        GATEWAY_GROUP,
        V1,
        ns,
        "gateways",
        {
            "apiVersion": f"{GATEWAY_GROUP}/{V1}",
            "kind": "Gateway",
            "metadata": {"name": "edge"},
            "spec": {"gatewayClassName": class_name, "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]},
        },
    )
    core = client.CoreV1Api(cloud.api)
    await core.create_namespaced_service(
        ns, {"metadata": {"name": "echo"}, "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 9}]}}
    )
    world = Published(cloud, tunnel_id, zone_id, class_name)
    yield world
    await world.close()


async def test_the_ingress_document_and_dns_records_follow_the_routes(published: Published) -> None:
    p, d = published, published.domain
    await p.route("web", [f"app.{d}"])
    await p.route("rpc", [f"rpc.{d}"], kind="GRPCRoute")
    await p.route("ext", ["ext.example.org"])
    expected = [
        {"hostname": f"app.{d}", "service": ORIGIN},
        {"hostname": "ext.example.org", "service": ORIGIN},
        # gRPC to Envoy's TLS listener (the defaults: port 8443, the chart's origin certificate), checked.
        {
            "hostname": f"rpc.{d}",
            "service": "https://localhost:8443",
            "originRequest": {
                "http2Origin": True,
                "originServerName": "kflare-data-plane",
                "caPool": "/etc/kflare/origin-tls/ca.crt",
            },
        },
        {"service": "http_status:404"},
    ]

    async def document_is(rules: list[dict[str, Any]]) -> bool:
        return p.document() == rules

    await eventually(lambda: document_is(expected), what="the ingress document of the three routes", timeout=30)

    # A DNSRecord per hostname in the Zone, in the Zone's namespace, labelled with its route: a proxied CNAME.
    record = await p.kflare.ready("DNSRecord", f"gw.app.{d}", reason="Synced")
    assert record["metadata"]["labels"]["kflare.dev/gateway-route"] == f"HTTPRoute.{p.ns}.web"
    assert record["metadata"]["labels"]["kflare.dev/gateway-tunnel"] == f"{p.ns}.tunnel"
    (cname,) = p.records(f"app.{d}")
    assert (cname["type"], cname["content"], cname["proxied"]) == ("CNAME", f"{p.tunnel_id}.cfargotunnel.com", True)
    await p.kflare.ready("DNSRecord", f"gw.rpc.{d}", reason="Synced")

    async def dns(name: str, status: str, kind: str = "HTTPRoute") -> dict[str, Any] | None:
        found = await p.dns(name, kind)
        return found if found is not None and found["status"] == status else None

    published_ = await eventually(lambda: dns("web", "True"), what="the route's DNS to be Published")
    assert published_["reason"] == "Published"
    assert f"gw.app.{d}" in published_["message"]
    outside = await eventually(lambda: dns("ext", "Unknown"), what="the hostname outside every kflare Zone")
    assert outside["reason"] == "ZoneNotManaged"
    assert "ext.example.org" in outside["message"]
    assert await p.record_object("gw.ext.example.org") is None

    # A Zone of the account in another namespace: its names are that namespace's. The route is refused (not served,
    # no DNS record) until the Zone grants the route's namespace the name; then the DNSRecord is made beside the Zone.
    other = f"dns-{p.ns}"
    await client.CoreV1Api(p.kflare.api).create_namespace(
        {"metadata": {"name": other, "labels": {"kflare-test": "on"}}}
    )
    remote = Kflare(p.kflare.api, other, p.emulator)
    remote.account = p.kflare.account
    await remote.make_zone("remote", f"{p.ns}.net")
    await remote.ready("Zone", "remote")
    await p.route("far", [f"far.{p.ns}.net"])

    async def accepted(name: str, status: str) -> dict[str, Any] | None:
        route = await p.get_route(name)
        for parent in (route.get("status") or {}).get("parents") or []:
            if parent.get("controllerName") == CONTROLLER_NAME:
                found = next((c for c in parent["conditions"] if c["type"] == "Accepted"), None)
                if found and found["status"] == status:
                    return dict(found)
        return None

    refused = await eventually(lambda: accepted("far", "False"), what="the route in another namespace's zone refused")
    assert refused["reason"] == "NotAllowedByListeners"
    assert f"far.{p.ns}.net is in zone {p.ns}.net, which a Zone in another namespace manages" in refused["message"]
    assert other not in refused["message"]
    assert not (await p.objects.list_namespaced_custom_object("kflare.dev", "v1alpha1", other, "dnsrecords"))["items"]
    assert all(r.get("hostname") != f"far.{p.ns}.net" for r in p.document())
    grant = {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": p.ns}}}}
    await remote.patch("Zone", "remote", {"spec": {"hostnameGrants": [grant]}})
    far = await remote.ready("DNSRecord", f"gw.far.{p.ns}.net", reason="Synced")
    assert far["metadata"]["labels"]["kflare.dev/gateway-route"] == f"HTTPRoute.{p.ns}.far"
    await eventually(lambda: dns("far", "True"), what="the far route's DNS to be Published")
    await p.delete_route("far")
    await remote.gone("DNSRecord", f"gw.far.{p.ns}.net")
    await remote.delete("Zone", "remote")
    await remote.gone("Zone", "remote")
    await eventually(lambda: document_is(expected), what="the document without the far route", timeout=30)

    # A change that leaves the hostnames alone writes nothing; the next that changes them writes once.
    before = p.writes()
    await p.patch_route("web", {"spec": {"rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/v2"}}],
                                                    "backendRefs": [{"name": "echo", "port": 80}]}]}})  # fmt: skip
    await eventually(lambda: dns("web", "True"), what="the changed route's status")
    await p.patch_route("web", {"spec": {"hostnames": [f"app.{d}", f"*.{d}"]}})
    with_wildcard = [expected[0], expected[1], expected[2], {"hostname": f"*.{d}", "service": ORIGIN}, expected[3]]
    await eventually(lambda: document_is(with_wildcard), what="the wildcard in the document", timeout=30)
    assert p.writes() - before == 1, "one write for the hostname change, none for the rule change"
    wildcard = await p.kflare.ready("DNSRecord", f"gw-wildcard.{d}", reason="Synced")
    assert wildcard["spec"]["name"] == f"*.{d}"
    assert [r["type"] for r in p.records(f"*.{d}")] == ["CNAME"]

    # The last route claiming a hostname goes: its rule and its DNSRecord (and the CNAME) go with it.
    before = p.writes()
    await p.delete_route("web")
    await eventually(lambda: document_is([expected[1], expected[2], expected[3]]), what="the rules of web to go")
    await p.kflare.gone("DNSRecord", f"gw.app.{d}")
    await p.kflare.gone("DNSRecord", f"gw-wildcard.{d}")

    async def cname_gone() -> bool:
        return not p.records(f"app.{d}")

    await eventually(cname_gone, what="the CNAME to be deleted in Cloudflare")
    assert p.writes() - before == 1


async def test_an_existing_record_is_reported_on_the_route_and_never_overwritten(published: Published) -> None:
    p, d = published, published.domain
    cf(p.emulator, "POST", f"/zones/{p.zone_id}/dns_records",
       json={"type": "CNAME", "name": f"taken.{d}", "content": "elsewhere.example.net", "proxied": False})  # fmt: skip
    await p.kflare.make_record("mine", "zone", name=f"user.{d}", type="A", content="192.0.2.1")
    await p.kflare.ready("DNSRecord", "mine", reason="Synced")
    await p.route("taken", [f"taken.{d}"])
    await p.route("user", [f"user.{d}"])

    async def refused(name: str) -> dict[str, Any] | None:
        found = await p.dns(name)
        return found if found is not None and found["reason"] == "AlreadyExists" else None

    taken = await eventually(lambda: refused("taken"), what="the existing record reported on the route", timeout=30)
    assert taken["status"] == "False"
    assert f"zone {d} already has a record of that name that kflare does not own" in taken["message"]
    assert "not overwritten" in taken["message"]
    user = await eventually(lambda: refused("user"), what="the user's DNSRecord reported on the route")
    assert f"DNSRecord {p.ns}/mine already publishes it" in user["message"]
    assert await p.record_object(f"gw.user.{d}") is None, "no DNSRecord beside the user's"
    (kept,) = p.records(f"taken.{d}")
    assert (kept["content"], kept["proxied"]) == ("elsewhere.example.net", False)
    (users,) = p.records(f"user.{d}")
    assert users["content"] == "192.0.2.1"

    # The route goes: the class's DNSRecord goes, the record it never owned stays in Cloudflare.
    await p.delete_route("taken")
    await p.kflare.gone("DNSRecord", f"gw.taken.{d}")
    assert [r["content"] for r in p.records(f"taken.{d}")] == ["elsewhere.example.net"]
    await p.kflare.delete("DNSRecord", "mine")
    await p.kflare.gone("DNSRecord", "mine")


async def test_a_tunnel_configuration_of_the_same_tunnel_is_a_conflict_the_gateway_reports(
    published: Published,
) -> None:
    p, d = published, published.domain
    await make_config(p.kflare, "manual", host=f"manual.{d}")
    await p.kflare.ready("TunnelConfiguration", "manual", reason="Synced")
    await p.route("web", [f"app.{d}"])

    async def conflicted() -> dict[str, Any] | None:
        found = await p.programmed()
        return found if found is not None and found["reason"] == "TunnelAlreadyConfigured" else None

    found = await eventually(conflicted, what="the Gateway to report the TunnelConfiguration", timeout=30)
    assert found["status"] == "False"
    assert f"TunnelConfiguration {p.ns}/manual configures Tunnel {p.ns}/tunnel" in found["message"]

    async def route_says_so() -> bool:
        dns = await p.dns("web")
        return dns is not None and dns["reason"] == "TunnelAlreadyConfigured"

    await eventually(route_says_so, what="the route to say why its hostname is not published")
    assert [r.get("hostname") for r in p.document()] == [f"manual.{d}", None], "the class wrote nothing"
    assert await p.record_object(f"gw.app.{d}") is None

    # The TunnelConfiguration goes: the class takes the tunnel over.
    await p.kflare.delete("TunnelConfiguration", "manual")

    async def taken_over() -> bool:
        return [r.get("hostname") for r in p.document()] == [f"app.{d}", None]

    await eventually(taken_over, what="the class's document once the TunnelConfiguration is gone", timeout=30)
    await p.kflare.ready("DNSRecord", f"gw.app.{d}", reason="Synced")

    async def programmed() -> bool:
        found = await p.programmed()
        return found is not None and found["status"] == "True"

    await eventually(programmed, what="the Gateway to be Programmed again")


async def test_dns_publishing_turned_off_then_the_class_letting_go_of_its_tunnel(published: Published) -> None:
    """A Gateway annotated `kflare.dev/dns-publishing: disabled` keeps its hostnames in the ingress document and
    takes their DNS records away (the route says Disabled); a class that stops naming the tunnel takes its ingress
    rules away, leaving the catch-all."""
    p, d = published, published.domain
    await p.route("web", [f"app.{d}"])
    await p.kflare.ready("DNSRecord", f"gw.app.{d}", reason="Synced")

    async def in_document() -> bool:
        return [r.get("hostname") for r in p.document()] == [f"app.{d}", None]

    await eventually(in_document, what="the route's hostname in the ingress document", timeout=30)
    await p.objects.patch_namespaced_custom_object(
        GATEWAY_GROUP, V1, p.ns, "gateways", "edge",
        {"metadata": {"annotations": {"kflare.dev/dns-publishing": "disabled"}}},
        _content_type="application/merge-patch+json",
    )  # fmt: skip

    async def disabled() -> dict[str, Any] | None:
        found = await p.dns("web")
        return found if found is not None and found["reason"] == "Disabled" else None

    said = await eventually(disabled, what="the route to say its DNS is not published", timeout=30)
    assert said["status"] == "False"
    await p.kflare.gone("DNSRecord", f"gw.app.{d}")
    assert p.records(f"app.{d}") == []
    assert [r.get("hostname") for r in p.document()] == [f"app.{d}", None], "still in the ingress document"

    await p.objects.patch_cluster_custom_object(
        GATEWAY_GROUP, V1, "gatewayclasses", p.class_name, {"spec": {"parametersRef": None}},
        _content_type="application/merge-patch+json",
    )  # fmt: skip

    async def cleared() -> bool:
        return p.document() == [{"service": "http_status:404"}]

    await eventually(cleared, what="the class's rules to leave the tunnel's ingress document", timeout=30)
