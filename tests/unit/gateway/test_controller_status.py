"""The Gateway statuses the class's reconcile writes from what the data plane and the Cloudflare side say: Envoy
refusing its configuration makes every Gateway of the class `Programmed=False` naming what was refused, and a later
configuration it takes makes them Programmed again; a TunnelConfiguration of the class's tunnel makes its Gateways
report the conflict."""

from __future__ import annotations

from typing import Any

from app.kube.client import ResourceType
from app.kube.index import DependencyIndex, Ref
from reconcilers.gateway.controller import GatewayClassReconciler, GatewayOptions
from reconcilers.gateway.snapshot import SnapshotStore
from reconcilers.gateway.translate import TunnelState
from reconcilers.managed_kind import parents_of
from reconcilers.registry import KINDS, reconciler_of
from tests.dataplane.world import NS, backend, endpoint_slice, gateway, gateway_class, http_route, service
from tests.unit.gateway.test_backend_tls import config_map, policy
from tests.unit.gateway.test_listener_sets import http, listener_set

TUNNEL = ("infra", "edge-tunnel")
PARAMETERS = {"group": "kflare.dev", "kind": "Tunnel", "namespace": TUNNEL[0], "name": TUNNEL[1]}


class FakeKube:
    def __init__(self) -> None:
        self.patches: list[tuple[str, str, dict[str, Any]]] = []

    async def get(self, rt: ResourceType, name: str, namespace: str | None = None) -> dict[str, Any]:
        assert name == "httproutes.gateway.networking.k8s.io", name  # its channel says which fields routes have
        return {"metadata": {"annotations": {"gateway.networking.k8s.io/bundle-version": "v1.6.3"}}}

    async def patch(self, rt: ResourceType, name: str, patch: dict[str, Any], *args: Any, **kw: Any) -> dict[str, Any]:
        self.patches.append((rt.kind, name, patch))
        return {}


class FakeReferenced:
    """The Secrets or ConfigMaps the reconcile references, all already listed."""

    def __init__(self, objects: list[dict[str, Any]] | None = None) -> None:
        self.objects = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects or []}
        self.referenced: set[tuple[str, str]] = set()

    def reference(self, referrer: object, keys: Any) -> None:
        self.referenced = set(keys)

    async def wait_synced(self, key: tuple[str, str], timeout: float = 10.0) -> None:
        return None

    def get(self, key: tuple[str, str]) -> dict[str, Any] | None:
        return self.objects.get(key)

    def revision(self, keys: Any) -> tuple[int, ...]:
        return ()


KIND_NAMES = {kind.kind for kind in KINDS}


class FakeContext:
    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects, self.kube = objects, FakeKube()
        self.secrets, self.index = FakeReferenced(), DependencyIndex()
        self.configmaps = FakeReferenced(objects.get("ConfigMap"))
        for kind, listed in objects.items():  # the links of kflare's kinds, as the manager keeps them
            if kind in KIND_NAMES:
                for obj in listed:
                    ref = Ref(kind, obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
                    self.index.set_parents(ref, parents_of(reconciler_of(kind), obj))

    def cached(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        for obj in self.objects.get(kind, []):
            if obj["metadata"]["name"] == name and obj["metadata"].get("namespace") == namespace:
                return obj
        return None

    def cached_all(self, kind: str) -> list[dict[str, Any]]:
        return self.objects.get(kind, [])

    def informer_of(self, kind: str) -> None:
        return None  # no informers, so no cache revision: every reconcile translates afresh


def objects(parameters: dict[str, Any] | None = None, **more: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {
        "GatewayClass": [gateway_class(parameters=parameters)],
        "Gateway": [gateway()],
        "HTTPRoute": [http_route("web", ["web.example.com"], [{"backendRefs": [backend("alpha")]}])],
        "Service": [service("alpha")],
        "EndpointSlice": [endpoint_slice("alpha", 9001)],
        "Namespace": [{"metadata": {"name": NS}}],
        **more,
    }


def on_tunnel(ctx: FakeContext) -> GatewayClassReconciler:
    """The class's reconciler, its Tunnel Ready with ID t-1."""
    return GatewayClassReconciler(
        ctx,  # type: ignore[arg-type]
        SnapshotStore(),
        GatewayOptions("127.0.0.1", 8080),
        tunnels=lambda ns, name: TunnelState(True, "", "t-1.cfargotunnel.com"),
    )


def programmed(ctx: FakeContext) -> dict[str, Any]:
    status = next(p for kind, _, p in reversed(ctx.kube.patches) if kind == "Gateway")["status"]
    return next(c for c in status["conditions"] if c["type"] == "Programmed")


async def test_a_refused_configuration_makes_the_gateways_not_programmed_until_one_is_taken() -> None:
    ctx = FakeContext(objects())
    store = SnapshotStore()
    reconciler = GatewayClassReconciler(ctx, store, GatewayOptions("127.0.0.1", 8080))  # type: ignore[arg-type]
    await reconciler.reconcile(("", "data-plane"))
    assert programmed(ctx)["status"] == "True"

    store.refused("routes", "route: invalid regex '('", "data-plane-7d9f", "v2")
    await reconciler.reconcile(("", "data-plane"))
    found = programmed(ctx)
    assert (found["status"], found["reason"]) == ("False", "ConfigurationRefused")
    assert "Envoy data-plane-7d9f refused its routes configuration: route: invalid regex '('" in found["message"]
    assert "last one it accepted" in found["message"]

    store.accepted("routes", "data-plane-7d9f", "v3")
    await reconciler.reconcile(("", "data-plane"))
    assert programmed(ctx)["status"] == "True"


async def test_a_tunnel_configuration_of_the_same_tunnel_is_reported_on_the_gateway() -> None:
    tunnel = {
        "metadata": {"name": TUNNEL[1], "namespace": TUNNEL[0]},
        "spec": {"accountRef": {"name": "main"}},
        "status": {
            "cloudflareMetadata": {"tunnelID": "t-1"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Synced"}],
        },
    }
    configuration = {
        "metadata": {"name": "manual", "namespace": TUNNEL[0]},
        "spec": {"tunnelRef": {"name": TUNNEL[1]}},
    }
    ctx = FakeContext(objects(PARAMETERS, Tunnel=[tunnel], TunnelConfiguration=[configuration]))
    reconciler = on_tunnel(ctx)
    await reconciler.reconcile(("", "data-plane"))
    found = programmed(ctx)
    assert (found["status"], found["reason"]) == ("False", "TunnelAlreadyConfigured")
    assert "TunnelConfiguration infra/manual configures Tunnel infra/edge-tunnel" in found["message"]
    route = next(p for kind, _, p in ctx.kube.patches if kind == "HTTPRoute")["status"]["parents"][0]
    dns = next(c for c in route["conditions"] if c["type"] == "DNSPublished")
    assert dns["reason"] == "TunnelAlreadyConfigured"


async def test_the_reconcile_writes_a_policys_ancestors_beside_other_controllers_and_watches_its_ca() -> None:
    theirs = {
        "ancestorRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": NS, "name": "other"},
        "controllerName": "example.com/other",
        "conditions": [],
    }
    tls = {**policy(), "status": {"ancestors": [theirs]}}
    ctx = FakeContext(
        objects(
            BackendTLSPolicy=[tls],
            ConfigMap=[config_map()],
            ListenerSet=[listener_set("extra", [http("more", "more.example.com")])],
        )
    )
    reconciler = GatewayClassReconciler(ctx, SnapshotStore(), GatewayOptions("127.0.0.1", 8080))  # type: ignore[arg-type]
    await reconciler.reconcile(("", "data-plane"))
    assert ctx.configmaps.referenced == {(NS, "backend-ca")}
    written = next(p for kind, _, p in ctx.kube.patches if kind == "BackendTLSPolicy")["status"]["ancestors"]
    assert written[0] == theirs
    assert written[1]["ancestorRef"]["name"] == "edge"
    assert {c["type"]: c["status"] for c in written[1]["conditions"]} == {"Accepted": "True", "ResolvedRefs": "True"}
    assert all("lastTransitionTime" in c for c in written[1]["conditions"])
    listener_set_status = next(p for kind, _, p in ctx.kube.patches if kind == "ListenerSet")["status"]
    assert {c["type"]: c["reason"] for c in listener_set_status["conditions"]} == {
        "Accepted": "NotAllowed",
        "Programmed": "NotAllowed",
    }


def _route_conditions(ctx: FakeContext) -> dict[str, dict[str, Any]]:
    route = next(p for kind, _, p in reversed(ctx.kube.patches) if kind == "HTTPRoute")["status"]["parents"][0]
    return {c["type"]: c for c in route["conditions"]}


async def test_a_gateway_can_turn_dns_publishing_off_and_deep_hostnames_get_a_certificate_warning() -> None:
    """`kflare.dev/dns-publishing: disabled` on the Gateway: the route's DNSPublished says Disabled and its hostnames
    get no DNSRecord; a hostname two labels below its zone is flagged as beyond Universal SSL."""
    tunnel = {
        "metadata": {"name": TUNNEL[1], "namespace": TUNNEL[0]},
        "spec": {"accountRef": {"name": "main"}},
        "status": {"cloudflareMetadata": {"tunnelID": "t-1"}},
    }
    # The Zone is another namespace's: it grants the routes' namespace its names (else they are not served at all).
    grant = {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": NS}}}}
    zone = {
        "metadata": {"name": "example", "namespace": "dns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"name": "example.com", "accountRef": {"name": "main"}, "hostnameGrants": [grant]},
        "status": {"cloudflareMetadata": {"zoneID": "z" * 32}},
    }
    account = {"metadata": {"name": "main"}, "spec": {"accountID": "a" * 32}}
    route = http_route("web", ["web.example.com", "a.deep.example.com"], [{"backendRefs": [backend("alpha")]}])
    more = {"Tunnel": [tunnel], "Zone": [zone], "CloudflareAccount": [account], "HTTPRoute": [route]}
    ctx = FakeContext(objects(PARAMETERS, **more))
    reconciler = on_tunnel(ctx)
    await reconciler.reconcile(("", "data-plane"))
    said = _route_conditions(ctx)
    assert (said["DNSPublished"]["status"], said["DNSPublished"]["reason"]) == ("False", "Pending")
    certificate = said["UniversalSSL"]
    assert (certificate["status"], certificate["reason"]) == ("False", "BeyondUniversalSSL")
    assert "a.deep.example.com" in certificate["message"]
    assert "web.example.com" not in certificate["message"]
    hostnames = {h.hostname: h.dns for h in reconciler.last.hostnames}
    assert hostnames == {"a.deep.example.com": True, "web.example.com": True}

    ctx.objects["Gateway"][0]["metadata"]["annotations"] = {"kflare.dev/dns-publishing": "disabled"}
    await reconciler.reconcile(("", "data-plane"))
    said = _route_conditions(ctx)
    assert (said["DNSPublished"]["status"], said["DNSPublished"]["reason"]) == ("False", "Disabled")
    assert f"Gateway {NS}/edge says kflare.dev/dns-publishing: disabled" in said["DNSPublished"]["message"]
    assert not any(h.dns for h in reconciler.last.hostnames), "no DNSRecord is planned for them"
