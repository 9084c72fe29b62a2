"""The Cloudflare side of the class as pure functions: the tunnel's ingress document from the published hostnames,
the DNSRecord each hostname in a kflare Zone gets, what a route's status says of them, and the Programmed condition
of a Gateway whose data plane refuses its configuration."""

from __future__ import annotations

from typing import Any

from app.api.validation import validate_object
from reconcilers.gateway import publish
from reconcilers.gateway.snapshot import SnapshotStore
from reconcilers.gateway.translate import Hostname, TunnelState, translate
from reconcilers.tunnel_document import normalise
from tests.dataplane.world import NS, backend, gateway_class, grpc_route, http_route, world

TUNNEL = ("infra", "edge-tunnel")
ORIGIN = "http://localhost:8080"
ID = "6f7c3a8e-0000-4000-8000-000000000001"


def host(name: str, grpc: bool = False, *routes: tuple[str, str, str]) -> Hostname:
    return Hostname(name, grpc, TUNNEL, routes or (("HTTPRoute", NS, "web"),))


def zone(
    name: str,
    domain: str,
    namespace: str = "dns",
    account: str = "main",
    created: str = "2026-01-01",
    *,
    holds: bool = True,
    deleting: bool = False,
) -> Any:
    """A kflare Zone; `holds`: it holds its Cloudflare zone (a zone ID in its status), so it manages the names in
    it."""
    out: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
        "spec": {"name": domain, "accountRef": {"name": account}},
    }
    if holds:
        out["status"] = {"cloudflareMetadata": {"zoneID": f"{name}-id"}}
    if deleting:
        out["metadata"]["deletionTimestamp"] = "2026-03-01T00:00:00Z"
    return out


def accounts(name: str) -> Any:
    return {"main": {"spec": {"accountID": "a" * 32}}, "alias": {"spec": {"accountID": "a" * 32}}}.get(name)


TARGET = publish.TunnelTarget(TUNNEL, ID, "main", "a" * 32)


def test_the_ingress_document_has_a_rule_per_hostname_then_the_catch_all() -> None:
    document = publish.ingress_document(
        [host("*.example.com"), host("rpc.example.com", True), host("a.example.com"), host("*.b.example.com")], ORIGIN
    )
    assert document == {
        "ingress": [
            {"hostname": "a.example.com", "service": ORIGIN},
            {"hostname": "rpc.example.com", "service": ORIGIN, "originRequest": {"http2Origin": True}},
            # A narrower wildcard before a wider one: cloudflared takes the first rule that matches.
            {"hostname": "*.b.example.com", "service": ORIGIN},
            {"hostname": "*.example.com", "service": ORIGIN},
            {"service": "http_status:404"},
        ]
    }
    assert publish.ingress_document([], ORIGIN) == {"ingress": [{"service": "http_status:404"}]}


def test_grpc_hostnames_go_to_the_tls_origin_with_its_certificate_checked() -> None:
    tls = publish.TLSOrigin("https://localhost:8443", "kflare-data-plane", "/etc/kflare/origin-tls/ca.crt")
    document = publish.ingress_document([host("rpc.example.com", True), host("a.example.com")], ORIGIN, tls)
    assert document["ingress"][:2] == [
        {"hostname": "a.example.com", "service": ORIGIN},
        {
            "hostname": "rpc.example.com",
            "service": "https://localhost:8443",
            "originRequest": {
                "http2Origin": True,
                "originServerName": "kflare-data-plane",
                "caPool": "/etc/kflare/origin-tls/ca.crt",
            },
        },
    ]


def test_the_document_follows_the_routes_of_every_gateway_on_the_tunnel() -> None:
    parameters = {"group": "kflare.dev", "kind": "Tunnel", "namespace": TUNNEL[0], "name": TUNNEL[1]}
    w = world(
        [http_route("web", ["web.example.com"], [{"backendRefs": [backend("alpha")]}])],
        {"alpha": 9001},
        grpc=[grpc_route("rpc", ["rpc.example.com"], [{"backendRefs": [backend("alpha")]}])],
        tunnel=lambda ns, name: TunnelState(True, "", f"{ID}.cfargotunnel.com") if (ns, name) == TUNNEL else None,
    )
    w.classes = [gateway_class(parameters=parameters)]
    hostnames = translate(w).hostnames
    assert {h.tunnel for h in hostnames} == {TUNNEL}
    document = publish.ingress_document(hostnames, ORIGIN)
    assert [r.get("hostname") for r in document["ingress"]] == ["rpc.example.com", "web.example.com", None]
    # The same routes make the same document, so a reconcile with nothing changed writes nothing.
    assert normalise(publish.ingress_document(translate(w).hostnames, ORIGIN)) == normalise(document)


def test_a_hostname_gets_the_zone_that_manages_it_when_it_is_of_the_tunnels_account() -> None:
    zones = [
        zone("example", "example.com"),
        zone("sub", "sub.example.com", created="2026-02-01"),
        zone("other-account", "deep.sub.example.com", account="elsewhere"),
        zone("alias", "example.org", account="alias"),  # another CloudflareAccount object of the same account
        # Zones that hold no Cloudflare zone (refused as ClaimedElsewhere, or not made yet) manage nothing, however
        # deep or old they are.
        zone("squatter", "a.sub.example.com", namespace="elsewhere", created="2025-01-01", holds=False),
        zone("older", "example.com", namespace="elsewhere", created="2025-01-01", holds=False),
        zone("going", "going.example.com", deleting=True),
    ]
    assert publish.zone_of("a.sub.example.com", zones, TARGET, accounts)["metadata"]["name"] == "sub"
    assert publish.zone_of("*.example.com", zones, TARGET, accounts)["metadata"]["name"] == "example"
    assert publish.zone_of("example.org", zones, TARGET, accounts)["metadata"]["name"] == "alias"
    assert publish.zone_of("notexample.com", zones, TARGET, accounts) is None
    # Another account's Zone manages the deepest zone: its names get no record here, nor in a zone above it.
    assert publish.zone_of("x.deep.sub.example.com", zones, TARGET, accounts) is None
    # A Zone being deleted gets no record (its deletion waits for its records), nor does the zone above it.
    assert publish.zone_of("a.going.example.com", zones, TARGET, accounts) is None


def test_records_are_proxied_cnames_labelled_with_their_routes() -> None:
    routes = (("HTTPRoute", NS, "web"), ("HTTPRoute", NS, "api"))
    plans = publish.plan_records(
        TARGET,
        [host("app.example.com", False, *routes), host("*.example.com"), host("app.example.net")],
        [zone("example", "example.com")],
        [],
        accounts,
    )
    by_host = {p.hostname: p for p in plans}
    body = by_host["app.example.com"].body
    assert body is not None
    assert body["metadata"]["namespace"] == "dns"
    assert body["metadata"]["name"] == "gw.app.example.com"
    assert body["metadata"]["labels"] == {
        publish.TUNNEL_LABEL: "infra.edge-tunnel",
        publish.ROUTE_LABEL: f"HTTPRoute.{NS}.api",
    }
    assert body["metadata"]["annotations"][publish.ROUTES_ANNOTATION] == f"HTTPRoute.{NS}.api,HTTPRoute.{NS}.web"
    assert body["spec"] == {
        "zoneRef": {"name": "example"},
        "name": "app.example.com",
        "type": "CNAME",
        "content": f"{ID}.cfargotunnel.com",
        "proxied": True,
        "comment": f"cloudflare-tunnel Gateway class: {NS}/api, {NS}/web",
    }
    assert validate_object("DNSRecord", body) == [], "what admission would refuse is never written"
    assert by_host["*.example.com"].name == "gw-wildcard.example.com"
    assert by_host["*.example.com"].body["spec"]["name"] == "*.example.com"  # type: ignore[index]
    assert by_host["app.example.net"].zone is None
    assert by_host["app.example.net"].body is None


def test_a_record_the_class_did_not_make_is_never_taken_over() -> None:
    users = {
        "metadata": {"name": "mine", "namespace": "dns"},
        "spec": {"zoneRef": {"name": "example"}, "name": "App.example.com.", "type": "A", "content": "192.0.2.1"},
    }
    same_name = {"metadata": {"name": "gw.b.example.com", "namespace": "dns"}, "spec": {"name": "other"}}
    # A DNSRecord of a namespace the Zone grants names to, naming the Zone across namespaces.
    granted = {
        "metadata": {"name": "theirs", "namespace": "team"},
        "spec": {"zoneRef": {"name": "example", "namespace": "dns"}, "name": "c.example.com", "type": "A"},
    }
    own = ("HTTPRoute", "dns", "web")  # routes of the Zone's own namespace
    plans = publish.plan_records(
        TARGET,
        [host("app.example.com", False, own), host("b.example.com", False, own), host("c.example.com")],
        [zone("example", "example.com")],
        [users, same_name, granted],
        accounts,
    )
    assert [(p.taken_by, p.body) for p in plans] == [
        ("dns/mine", None),
        ("dns/gw.b.example.com", None),
        ("in another namespace", None),  # never named to the routes of another namespace
    ]
    found = publish.dns_condition(plans[:2], {}, TARGET, 3)
    assert found is not None
    assert (found["type"], found["status"], found["reason"]) == ("DNSPublished", "False", "AlreadyExists")
    assert "DNSRecord dns/mine already publishes it" in found["message"]
    assert found["observedGeneration"] == 3
    elsewhere = publish.dns_condition(plans[2:], {}, TARGET, 3)
    assert elsewhere is not None
    assert "team" not in elsewhere["message"]
    assert "DNSRecord in another namespace already publishes it" in elsewhere["message"]


def test_what_a_route_says_of_its_dns_records() -> None:
    zones = [zone("example", "example.com")]
    plans = publish.plan_records(TARGET, [host("app.example.com")], zones, [], accounts)

    def record(status: str, reason: str, message: str = "") -> dict[tuple[str, str], Any]:
        ready = {"type": "Ready", "status": status, "reason": reason, "message": message}
        return {("dns", "gw.app.example.com"): {"status": {"conditions": [ready]}}}

    def said(records: dict[tuple[str, str], Any], these: list[publish.RecordPlan] = plans) -> tuple[str, str, str]:
        found = publish.dns_condition(these, records, TARGET, 1)
        assert found is not None
        return found["status"], found["reason"], found["message"]

    assert said({})[:2] == ("False", "Pending")
    status, reason, message = said(record("True", "Synced"))
    assert (status, reason) == ("True", "Published")
    assert f"proxied CNAME to {ID}.cfargotunnel.com" in message
    status, reason, message = said(record("False", "AlreadyExists", "a record exists"))
    assert (status, reason) == ("False", "AlreadyExists")
    assert "not overwritten" in message
    assert said(record("False", "ZoneNotReady", "Zone example is not Ready"))[2].endswith("Zone example is not Ready")
    outside = publish.plan_records(TARGET, [host("app.example.net")], zones, [], accounts)
    status, reason, message = said({}, outside)
    assert (status, reason) == ("Unknown", "ZoneNotManaged")
    assert "app.example.net" in message
    assert "managed elsewhere" in message
    assert publish.dns_condition(plans, {}, None, 1) is None, "a class without a Tunnel publishes no DNS"
    conflict = publish.dns_condition(plans, {}, TARGET, 1, conflict="infra/manual")
    assert conflict is not None
    assert conflict["reason"] == "TunnelAlreadyConfigured"


def test_a_tunnel_configuration_of_the_same_tunnel_is_a_conflict() -> None:
    configurations = [
        {
            "metadata": {"name": "b", "namespace": "infra", "creationTimestamp": "2026-01-02"},
            "spec": {"tunnelRef": {"name": "edge-tunnel"}},
        },
        {
            "metadata": {"name": "a", "namespace": "infra", "creationTimestamp": "2026-01-03"},
            "spec": {"tunnelRef": {"name": "edge-tunnel"}},
        },
        {
            "metadata": {"name": "c", "namespace": "other", "creationTimestamp": "2026-01-01"},
            "spec": {"tunnelRef": {"name": "edge-tunnel"}},
        },
    ]
    assert publish.configured_by(TUNNEL, configurations) == "infra/b"
    assert publish.configured_by(TUNNEL, configurations[2:]) is None


def test_record_changes_touch_only_what_differs() -> None:
    (plan,) = publish.plan_records(TARGET, [host("app.example.com")], [zone("example", "example.com")], [], accounts)
    assert plan.body is not None
    assert publish.record_changes(plan.body, plan.body) is None
    moved = publish.plan_records(
        publish.TunnelTarget(TUNNEL, "new-id", "main", None),
        [host("app.example.com")],
        [zone("example", "example.com")],
        [],
        accounts,
    )[0].body
    assert moved is not None
    assert publish.record_changes(plan.body, moved) == {"spec": {"content": "new-id.cfargotunnel.com"}}


def test_names_and_label_values_stay_within_kubernetes_limits() -> None:
    long = ".".join(["a" * 60] * 4) + ".example.com"
    assert len(publish.record_object_name(long)) <= 253
    value = publish.route_label(("HTTPRoute", "n" * 63, "r" * 200))
    assert len(value) <= 63
    assert value[-1].isalnum()


def test_refusals_are_held_per_envoy_until_a_later_configuration_is_taken() -> None:
    changes: list[str | None] = []
    store = SnapshotStore()
    store.on_change = lambda: changes.append(store.refusal())
    store.refused("routes", "malformed regex", "node-a", "v2")
    store.refused("routes", "malformed regex", "node-a", "v2")  # every poll repeats it: reported once
    assert len(changes) == 1
    message = store.refusal()
    assert message is not None
    assert "Envoy node-a refused its routes configuration: malformed regex" in message
    store.accepted("routes", "node-a", "v2")  # it cannot hold what it refused: nothing changes
    assert store.refusal() is not None
    store.accepted("routes", "node-a", "v3")
    assert store.refusal() is None
    assert changes[-1] is None


class FakeTunnelClient:
    """What Cloudflare holds for one tunnel, and the calls made to it."""

    def __init__(self, config: dict[str, Any] | None) -> None:
        self.config, self.calls = config, []  # type: ignore[var-annotated]

    async def get_tunnel_configuration(self, account_id: str, tunnel_id: str) -> Any:
        from app.cloudflare.models import TunnelConfiguration

        self.calls.append("GET")
        return TunnelConfiguration(tunnel_id=tunnel_id, config=self.config)

    async def put_tunnel_configuration(self, account_id: str, tunnel_id: str, config: dict[str, Any]) -> Any:
        from app.cloudflare.models import TunnelConfiguration

        self.calls.append("PUT")
        self.config = dict(config)
        return TunnelConfiguration(tunnel_id=tunnel_id, config=self.config)


async def test_a_document_is_read_once_then_written_only_when_it_changes() -> None:
    from reconcilers.tunnel_document import KnownDocuments

    cloudflare = FakeTunnelClient({"ingress": [{"service": "http_status:404"}]})
    known = KnownDocuments()
    one = publish.ingress_document([host("a.example.com")], ORIGIN)
    assert await known.sync(cloudflare, "acct", ID, one)  # type: ignore[arg-type]
    assert not await known.sync(cloudflare, "acct", ID, one)  # type: ignore[arg-type]
    # Cloudflare's own spelling of the same document (host case, an empty originRequest) is the same document.
    same = {
        "ingress": [
            {"hostname": "A.example.com", "service": ORIGIN, "originRequest": {}},
            {"service": "http_status:404"},
        ]
    }
    assert not await known.sync(cloudflare, "acct", ID, same)  # type: ignore[arg-type]
    assert cloudflare.calls == ["GET", "PUT"]
    known.forget(ID)  # another writer may have written it: read again
    assert not await known.sync(cloudflare, "acct", ID, one)  # type: ignore[arg-type]
    assert cloudflare.calls == ["GET", "PUT", "GET"]


def test_a_hostname_without_dns_gets_no_record_and_deep_hostnames_are_beyond_universal_ssl() -> None:
    off = Hostname("app.example.com", False, TUNNEL, (("HTTPRoute", NS, "web"),), dns=False)
    (plan,) = publish.plan_records(TARGET, [off], [zone("example", "example.com")], [], accounts)
    assert (plan.zone, plan.body) == (None, None), "in the ingress document only: an existing record of ours goes"
    covered = publish.certificate_condition([("example.com", "example.com"), ("*.example.com", "example.com")], 2)
    assert covered is not None
    assert (covered["status"], covered["reason"], covered["observedGeneration"]) == ("True", "Covered", 2)
    deep = publish.certificate_condition([("a.example.com", "example.com"), ("*.b.example.com", "example.com")], 2)
    assert deep is not None
    assert (deep["status"], deep["reason"]) == ("False", "BeyondUniversalSSL")
    assert "*.b.example.com" in deep["message"]
    assert "a.example.com," not in deep["message"]
    assert publish.certificate_condition([], 2) is None


def test_only_a_document_of_the_class_rules_alone_is_cleared_when_no_class_names_the_tunnel() -> None:
    ours = publish.ingress_document([host("app.example.com")], ORIGIN)
    assert publish.written_by_class(ours, ORIGIN, None)
    mixed = {"ingress": [*ours["ingress"][:-1], {"hostname": "ssh.example.com", "service": "ssh://bastion:22"}]}
    assert not publish.written_by_class(mixed, ORIGIN, None), "a rule of someone else's: left as it is"
    assert not publish.written_by_class(publish.ingress_document([], ORIGIN), ORIGIN, None), "nothing to clear"
