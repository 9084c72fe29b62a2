"""Hostnames on the class have owners: a hostname in a zone a kflare Zone manages is served and published only for
routes of the Zone's namespace and of the namespaces its `hostnameGrants` grant it to; under no managed Zone the
per-namespace suffix policy decides (failing closed for a namespace without the label); between namespaces that may
both publish a name, the Zone decides, never the routes' age. The DNS records follow the same owners, and a Zone
going away does not take with it the Cloudflare record of a name routes still publish."""

from __future__ import annotations

from typing import Any

from app.kube.client import ResourceType
from app.kube.informer import Informer
from reconcilers.gateway import publish
from reconcilers.gateway.caches import DNS_RECORDS
from reconcilers.gateway.translate import Translation, TunnelState, World, translate
from reconcilers.gateway.tunnels import TunnelOptions, TunnelPublisher
from tests.dataplane.world import NS, backend, gateway_class, http_route, world

TUNNEL = ("infra", "edge-tunnel")
PARAMETERS = {"group": "kflare.dev", "kind": "Tunnel", "namespace": TUNNEL[0], "name": TUNNEL[1]}
TARGET = publish.TunnelTarget(TUNNEL, "6f7c3a8e-0000-4000-8000-000000000001", "main", "a" * 32)
OWNER = "team-dns"
"""The namespace of the Zone of example.com (the routes' namespace, NS, is another)."""
RULES = [{"backendRefs": [backend("alpha")]}]


def zone(
    domain: str = "example.com",
    namespace: str = OWNER,
    grants: list[dict[str, Any]] | None = None,
    *,
    name: str = "example",
    deleting: bool = False,
) -> dict[str, Any]:
    """A Zone holding its Cloudflare zone (a zone ID in its status): it manages the names in it."""
    out: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"name": domain, "accountRef": {"name": "main"}},
        "status": {"cloudflareMetadata": {"zoneID": f"{name}-id"}},
    }
    if grants is not None:
        out["spec"]["hostnameGrants"] = grants
    if deleting:
        out["metadata"]["deletionTimestamp"] = "2026-03-01T00:00:00Z"
    return out


def to(*names: str, hostnames: list[str] | None = None) -> dict[str, Any]:
    """A grant to the namespaces named (by the label the API server sets), of `hostnames` or every name."""
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(names)}]}
    grant: dict[str, Any] = {"namespaces": {"from": "Selector", "selector": selector}}
    if hostnames is not None:
        grant["hostnames"] = hostnames
    return grant


def namespace(name: str, created: str = "2026-01-01T00:00:00Z", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "creationTimestamp": created, "labels": labels}}


NAMESPACES = [namespace(NS), namespace(OWNER), namespace("team-b", "2025-06-01T00:00:00Z")]


def tunnel(namespace: str, name: str) -> TunnelState | None:
    return TunnelState(True, "", f"{TARGET.tunnel_id}.cfargotunnel.com") if (namespace, name) == TUNNEL else None


def of(routes: list[dict[str, Any]], zones: list[dict[str, Any]], **extra: Any) -> World:
    namespaces = extra.pop("namespaces", NAMESPACES)
    w = world(routes, {"alpha": 9001}, zones=zones, namespaces=namespaces, tunnel=tunnel, **extra)
    w.classes = [gateway_class(parameters=PARAMETERS)]
    return w


def accepted(result: Translation, name: str, namespace: str = NS) -> dict[str, Any]:
    (entry,) = result.route_parents[("HTTPRoute", namespace, name)]
    return next(c for c in entry["conditions"] if c["type"] == "Accepted")


def served(result: Translation) -> dict[str, list[str]]:
    """Each virtual host of the shared plane, with the routes its Envoy routes come from."""
    return {
        vh["name"]: sorted({r["name"].split("/")[2] for r in vh["routes"]})
        for vh in result.resources["routes"][0]["virtual_hosts"]
    }


def records(result: Translation, zones: list[dict[str, Any]]) -> dict[str, str]:
    """hostname -> `namespace/name` of the DNSRecord the class would make for it."""
    accounts = {"main": {"spec": {"accountID": "a" * 32}}}
    plans = publish.plan_records(TARGET, result.hostnames, zones, [], accounts.get)
    return {p.hostname: f"{p.namespace}/{p.name}" for p in plans if p.body is not None}


def test_a_name_in_another_namespaces_zone_is_refused_without_a_grant() -> None:
    zones = [zone()]
    result = translate(of([http_route("web", ["app.example.com"], RULES)], zones))
    said = accepted(result, "web")
    assert (said["status"], said["reason"]) == ("False", "NotAllowedByListeners")
    assert "app.example.com is in zone example.com, which a Zone in another namespace manages" in said["message"]
    assert f"grants namespace {NS} no such name" in said["message"]
    assert OWNER not in said["message"], "the Zone's namespace is not named to another namespace"
    # Nothing of it is served or published: no virtual host, no ingress rule, no DNS record.
    assert "app.example.com" not in served(result)
    assert result.hostnames == []
    assert publish.ingress_document(result.hostnames, "http://localhost:8080")["ingress"] == [
        {"service": "http_status:404"}
    ]
    assert records(result, zones) == {}
    # A Zone that holds no Cloudflare zone (refused as ClaimedElsewhere, or not made yet) manages nothing.
    squatter = zone()
    del squatter["status"]
    assert accepted(translate(of([http_route("web", ["app.example.com"], RULES)], [squatter])), "web")["status"] == (
        "True"
    )


def test_a_grant_lets_the_namespace_publish_the_names_it_grants() -> None:
    zones = [zone(grants=[to(NS, hostnames=["*.shop.example.com"])])]
    routes = [http_route("web", ["a.shop.example.com"], RULES), http_route("apex", ["shop.example.com"], RULES)]
    result = translate(of(routes, zones))
    assert accepted(result, "web")["status"] == "True"
    assert served(result)["a.shop.example.com"] == ["web"]
    assert [(h.hostname, h.routes) for h in result.hostnames] == [("a.shop.example.com", (("HTTPRoute", NS, "web"),))]
    # Its DNS record goes into the Zone that manages the name, in the Zone's namespace.
    assert records(result, zones) == {"a.shop.example.com": f"{OWNER}/gw.a.shop.example.com"}
    # `*.shop.example.com` is every name below shop.example.com, not shop.example.com itself.
    assert accepted(result, "apex")["reason"] == "NotAllowedByListeners"
    # A grant without hostnames grants every name of the zone; the Zone's own namespace needs none.
    everything = [zone(grants=[to(NS)])]
    assert accepted(translate(of(routes, everything)), "apex")["status"] == "True"
    own = [http_route("web", ["app.example.com"], RULES, namespace=OWNER)]
    assert accepted(translate(of(own, [zone()])), "web", OWNER)["status"] == "True"


def test_the_owners_route_deleted_and_re_created_takes_its_name_back() -> None:
    """The Zone decides between the namespaces that may publish a name, not the routes' age: its own namespace
    first, then the namespaces of its grants in their order."""
    zones = [zone(grants=[{"namespaces": {"from": "All"}}])]  # team-b is granted everything too
    theirs = http_route("theirs", ["app.example.com"], RULES, namespace="team-b", created="2026-01-01T00:00:00Z")

    def owner(created: str) -> dict[str, Any]:
        return http_route("mine", ["app.example.com"], RULES, namespace=OWNER, created=created)

    result = translate(of([theirs, owner("2026-02-01T00:00:00Z")], zones))
    assert served(result)["app.example.com"] == ["mine"]
    said = accepted(result, "theirs", "team-b")
    assert (said["status"], said["reason"]) == ("False", "HostnameConflict")
    assert "served by a route of another namespace" in said["message"]
    assert OWNER not in said["message"]
    # The owner's route deleted: the granted namespace serves the name meanwhile...
    result = translate(of([theirs], zones))
    assert served(result)["app.example.com"] == ["theirs"]
    # ...and re-created, newer than the other's, it takes the name back: nothing flips for good.
    result = translate(of([theirs, owner("2026-03-01T00:00:00Z")], zones))
    assert served(result)["app.example.com"] == ["mine"]
    assert accepted(result, "theirs", "team-b")["reason"] == "HostnameConflict"
    assert [h.routes for h in result.hostnames] == [(("HTTPRoute", OWNER, "mine"),)]

    # Not granted, the other namespace's older route never serves it, whether the owner's route is there or not.
    private = [zone()]
    for present in ([], [owner("2026-03-01T00:00:00Z")]):
        result = translate(of([theirs, *present], private))
        assert accepted(result, "theirs", "team-b")["reason"] == "NotAllowedByListeners"
        assert served(result).get("app.example.com", ["mine"]) == ["mine"]

    # Between two granted namespaces, the earlier grant ranks first.
    ordered = [zone(grants=[to(NS), to("team-b")])]
    mine = http_route("web", ["app.example.com"], RULES, created="2026-05-01T00:00:00Z")
    assert served(translate(of([theirs, mine], ordered)))["app.example.com"] == ["web"]


def test_the_suffix_policy_fails_closed_for_a_namespace_without_its_label() -> None:
    label = "tenant/host"
    namespaces = [namespace(NS), namespace(OWNER), namespace("tenant", **{label: "t.example.org"})]

    def said(route: dict[str, Any], namespace: str = NS, zones: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        result = translate(of([route], zones or [], namespaces=namespaces, tenancy_label=label))
        return accepted(result, str(route["metadata"]["name"]), namespace)

    unlabelled = said(http_route("web", ["app.example.org"], RULES))
    assert (unlabelled["status"], unlabelled["reason"]) == ("False", "NotAllowedByListeners")
    assert f"namespace {NS} has no {label} label" in unlabelled["message"]
    # A route naming no hostname on a listener without one (every name) is no exception.
    assert said(http_route("web", None, RULES))["reason"] == "NotAllowedByListeners"
    # The labelled namespace publishes under its label's value, and only there.
    assert said(http_route("own", ["a.t.example.org"], RULES, namespace="tenant"), "tenant")["status"] == "True"
    outside = said(http_route("out", ["x.example.org"], RULES, namespace="tenant"), "tenant")
    assert outside["reason"] == "NotAllowedByListeners"
    assert "x.example.org is not t.example.org or under it" in outside["message"]
    # In a zone a Zone manages, the Zone decides, label or not.
    assert said(http_route("web", ["app.example.com"], RULES, namespace=OWNER), OWNER, [zone()])["status"] == "True"
    granted = said(http_route("web", ["app.example.com"], RULES), NS, [zone(grants=[to(NS)])])
    assert granted["status"] == "True"
    # Without the policy, a name in no managed zone is anyone's (as before).
    assert accepted(translate(of([http_route("web", ["app.example.org"], RULES)], [])), "web")["status"] == "True"


def test_a_route_partly_refused_serves_the_names_its_namespace_owns() -> None:
    zones = [zone(), zone("example.net", NS, name="mine")]
    route = http_route("web", ["app.example.net", "app.example.com"], RULES)
    result = translate(of([route], zones))
    said = accepted(result, "web")
    assert (said["status"], said["reason"]) == ("True", "Accepted")
    assert said["message"].startswith("hostnames not served: app.example.com is in zone example.com")
    assert OWNER not in said["message"]
    assert list(served(result)) == ["app.example.net"]
    assert [h.hostname for h in result.hostnames] == ["app.example.net"]
    assert records(result, zones) == {"app.example.net": f"{NS}/gw.app.example.net"}
    # Every name allowed: nothing to say.
    assert accepted(translate(of([http_route("web", ["app.example.net"], RULES)], zones)), "web")["message"] == ""


class FakeKube:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    async def create(self, rt: Any, body: dict[str, Any], namespace: str) -> dict[str, Any]:
        self.calls.append(("create", body["metadata"]["name"], None))
        return body

    async def patch(self, rt: Any, name: str, patch: dict[str, Any], *args: Any, **kw: Any) -> dict[str, Any]:
        self.calls.append(("patch", name, patch))
        return {}

    async def delete(self, rt: Any, name: str, namespace: str | None = None) -> None:
        self.calls.append(("delete", name, None))


class FakeContext:
    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects, self.kube = objects, FakeKube()

    def cached(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        for obj in self.objects.get(kind, []):
            if obj["metadata"]["name"] == name and obj["metadata"].get("namespace") == namespace:
                return obj
        return None

    def cached_all(self, kind: str) -> list[dict[str, Any]]:
        return self.objects.get(kind, [])

    def informer_of(self, kind: str) -> Informer:
        informer = Informer(None, ResourceType("kflare.dev", "v1alpha1", kind.lower() + "s", kind))  # type: ignore[arg-type]
        for obj in self.objects.get(kind, []):
            informer.put(obj)
        return informer


def class_record(hostname: str, namespace: str = OWNER, zone_name: str = "example") -> dict[str, Any]:
    return {
        "metadata": {
            "name": publish.record_object_name(hostname),
            "namespace": namespace,
            "resourceVersion": "7",
            "labels": {publish.TUNNEL_LABEL: publish.tunnel_label(TUNNEL)},
            "annotations": {publish.HOSTNAME_ANNOTATION: hostname},
        },
        "spec": {"zoneRef": {"name": zone_name}, "name": hostname, "type": "CNAME"},
    }


async def test_a_zone_going_away_does_not_delete_the_cloudflare_record_of_a_name_routes_still_publish() -> None:
    """The Zone's deletion waits for its records, so the class lets go of them; the CNAME a granted namespace's route
    still uses is kept in Cloudflare (the records go with `kflare.dev/deletion-policy: retain`), while a record no
    route claims any more goes with its Cloudflare record."""
    going = zone(grants=[to(NS)], deleting=True)
    ctx = FakeContext(
        {"Zone": [going], DNS_RECORDS.kind: [class_record("app.example.com"), class_record("old.example.com")]}
    )
    publisher = TunnelPublisher(ctx, TunnelOptions("http://localhost:8080"))  # type: ignore[arg-type]
    plans = publish.plan_records(TARGET, [], [going], [], lambda name: None)
    await publisher._records(TUNNEL, plans, {"app.example.com"})
    app, old = publish.record_object_name("app.example.com"), publish.record_object_name("old.example.com")
    assert ctx.kube.calls == [
        ("patch", app, {"metadata": {"annotations": {"kflare.dev/deletion-policy": "retain"}, "resourceVersion": "7"}}),
        ("delete", app, None),
        ("delete", old, None),
    ]
    # A Zone that stays: a record no plan keeps goes with its Cloudflare record.
    assert not publish.keeps_cloudflare_record(class_record("app.example.com"), zone(), {"app.example.com"})
    assert publish.keeps_cloudflare_record(class_record("app.example.com"), None, {"app.example.com"})
    assert not publish.keeps_cloudflare_record(class_record("app.example.com"), going, set())


def test_each_translation_follows_the_zones_and_namespaces_as_they_are_now() -> None:
    """The rules are remembered between translations while nothing they read changes (`Owners.of`): a grant added,
    a label set or a Zone gone changes the next translation's answer, and going back gives the first answer again."""
    route = http_route("web", ["app.example.com"], RULES)
    assert accepted(translate(of([route], [zone()])), "web")["status"] == "False"
    assert accepted(translate(of([route], [zone(grants=[to(NS)])])), "web")["status"] == "True"
    assert accepted(translate(of([route], [zone()])), "web")["status"] == "False"
    assert accepted(translate(of([route], [])), "web")["status"] == "True"
    labelled = [namespace(NS, **{"kflare.dev/domain": "example.org"}), namespace(OWNER)]
    policy = {"tenancy_label": "kflare.dev/domain"}
    assert accepted(translate(of([route], [], namespaces=labelled, **policy)), "web")["status"] == "False"
    relabelled = [namespace(NS, **{"kflare.dev/domain": "example.com"}), namespace(OWNER)]
    assert accepted(translate(of([route], [], namespaces=relabelled, **policy)), "web")["status"] == "True"
