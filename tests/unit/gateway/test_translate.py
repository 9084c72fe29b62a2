"""The translation's statuses and published hostnames, from Gateway API objects as the caches hold them."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from app.controlplane import CertificateAuthority
from reconcilers.gateway.translate import TunnelState, World, hostname_matches, regex_error, translate
from reconcilers.gateway.translate import certificate_refs as translate_refs
from tests.dataplane.world import (
    GATEWAY_GROUP,
    NS,
    backend,
    gateway,
    gateway_class,
    grpc_route,
    http_route,
    service,
    world,
)

BACKENDS = {"alpha": 9001}


def parent(result: Any, name: str, kind: str = "HTTPRoute", namespace: str = NS) -> dict[str, dict[str, Any]]:
    entries = result.route_parents[(kind, namespace, name)]
    assert len(entries) == 1
    return {c["type"]: c for c in entries[0]["conditions"]}


def one_rule(**rule: Any) -> list[dict[str, Any]]:
    return [{"backendRefs": [backend("alpha")], **rule}]


@pytest.mark.parametrize(
    ("rule", "named"),
    [
        ({"filters": [{"type": "ExtensionRef", "extensionRef": {"name": "x"}}]}, "ExtensionRef"),
        ({"sessionPersistence": {"sessionName": "s"}}, "sessionPersistence"),
        ({"retry": {"backoff": "soon"}}, "retry.backoff"),
        ({"matches": [{"path": {"type": "RegularExpression", "value": "/(?=x)"}}]}, "RE2"),
        ({"matches": [{"headers": [{"type": "Prefix", "name": "a", "value": "b"}]}]}, "type Prefix"),
        (
            {
                "filters": [
                    {
                        "type": "RequestHeaderModifier",
                        "requestHeaderModifier": {"set": [{"name": "Host", "value": "x"}]},
                    }
                ]
            },
            "Host header",
        ),
    ],
)
def test_what_the_data_plane_cannot_do_refuses_the_route_naming_it(rule: dict[str, Any], named: str) -> None:
    result = translate(world([http_route("r", ["a.example.com"], one_rule(**rule))], BACKENDS))
    accepted = parent(result, "r")["Accepted"]
    assert accepted["status"] == "False"
    assert accepted["reason"] == "UnsupportedValue"
    assert named in accepted["message"]
    assert not result.resources["routes"][0]["virtual_hosts"]


def test_a_rule_the_data_plane_cannot_serve_is_left_out_and_the_route_partially_invalid() -> None:
    rules = [
        {"backendRefs": [backend("alpha")], "sessionPersistence": {"sessionName": "s"}},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/ok"}}], "backendRefs": [backend("alpha")]},
        {"backendRefs": [{**backend("alpha"), "filters": [{"type": "RequestMirror"}]}]},
    ]
    result = translate(world([http_route("r", ["a.example.com"], rules)], BACKENDS))
    conds = parent(result, "r")
    assert conds["Accepted"]["status"] == "True"
    partial = conds["PartiallyInvalid"]
    assert (partial["status"], partial["reason"]) == ("True", "UnsupportedValue")
    assert "spec.rules[0].sessionPersistence" in partial["message"]
    assert "spec.rules[2].backendRefs[0].filters[0]: filter RequestMirror of a backend" in partial["message"]
    (vhost,) = result.resources["routes"][0]["virtual_hosts"]
    assert [r["name"] for r in vhost["routes"]] == ["HTTPRoute/apps/r/rule/1/match/0"]


def test_listeners_the_class_cannot_serve_are_refused_and_the_rest_served() -> None:
    listeners = [
        {"name": "web", "protocol": "HTTP", "port": 80},
        {"name": "tcp", "protocol": "TCP", "port": 5432},
        {"name": "udp", "protocol": "UDP", "port": 53},
        {
            "name": "tls",
            "protocol": "HTTPS",
            "port": 443,
            "tls": {"mode": "Terminate", "certificateRefs": [{"name": "c"}]},
        },
        {"name": "kinds", "protocol": "HTTP", "port": 81, "allowedRoutes": {"kinds": [{"kind": "TCPRoute"}]}},
    ]
    result = translate(
        world([http_route("r", ["a.example.com"], one_rule())], BACKENDS, gateways=[gateway(listeners=listeners)])
    )
    status = result.gateway_status[(NS, "edge")]
    conds = {c["type"]: c for c in status["conditions"]}
    assert (conds["Accepted"]["status"], conds["Accepted"]["reason"]) == ("True", "ListenersNotValid")
    assert conds["Programmed"]["status"] == "True"
    by_name = {entry["name"]: {c["type"]: c for c in entry["conditions"]} for entry in status["listeners"]}
    assert by_name["tcp"]["Accepted"]["reason"] == "UnsupportedProtocol"
    assert by_name["udp"]["Accepted"]["reason"] == "UnsupportedProtocol"
    assert by_name["tls"]["ResolvedRefs"]["reason"] == "InvalidCertificateRef"  # no such Secret
    assert by_name["kinds"]["ResolvedRefs"]["reason"] == "InvalidRouteKinds"
    assert by_name["web"]["Programmed"]["status"] == "True"
    attached = {entry["name"]: entry["attachedRoutes"] for entry in status["listeners"]}
    # A listener whose references do not resolve still counts the routes attached to it (it serves none).
    assert attached == {"web": 1, "tcp": 0, "udp": 0, "tls": 1, "kinds": 0}


def test_allowed_routes_namespaces_same_all_and_selector() -> None:
    listeners = [
        {"name": "same", "protocol": "HTTP", "port": 80},
        {"name": "all", "protocol": "HTTP", "port": 81, "allowedRoutes": {"namespaces": {"from": "All"}}},
        {
            "name": "selected",
            "protocol": "HTTP",
            "port": 82,
            "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"team": "web"}}}},
        },
    ]

    def attach(section: str, namespace: str) -> str:
        route = http_route(
            "r",
            ["a.example.com"],
            one_rule(),
            namespace=namespace,
            parents=[{"name": "edge", "namespace": NS, "sectionName": section}],
        )
        namespaces = [
            {"metadata": {"name": NS}},
            {"metadata": {"name": "web", "labels": {"team": "web"}}},
            {"metadata": {"name": "other"}},
        ]
        w = world([route], BACKENDS, gateways=[gateway(listeners=listeners)], namespaces=namespaces)
        return str(parent(translate(w), "r", namespace=namespace)["Accepted"]["reason"])

    assert attach("same", NS) == "Accepted"
    assert attach("same", "other") == "NotAllowedByListeners"
    assert attach("all", "other") == "Accepted"
    assert attach("selected", "web") == "Accepted"
    assert attach("selected", "other") == "NotAllowedByListeners"
    assert attach("missing", NS) == "NoMatchingParent"


def test_hostname_intersection_with_the_listener() -> None:
    assert hostname_matches("*.example.com", "app.example.com") == "app.example.com"
    assert hostname_matches("app.example.com", "*.example.com") == "app.example.com"
    assert hostname_matches("*.example.com", "*.a.example.com") == "*.a.example.com"
    assert hostname_matches("*.example.com", "example.com") is None
    assert hostname_matches(None, "x.example.org") == "x.example.org"
    listeners = [{"name": "h", "protocol": "HTTP", "port": 80, "hostname": "*.example.com"}]
    result = translate(
        world(
            [
                http_route("in", ["a.example.com", "b.example.org"], one_rule()),
                http_route("out", ["x.example.org"], one_rule()),
            ],
            BACKENDS,
            gateways=[gateway(listeners=listeners)],
        )
    )
    assert parent(result, "in")["Accepted"]["status"] == "True"
    assert parent(result, "out")["Accepted"]["reason"] == "NoMatchingListenerHostname"
    domains = [vh["domains"] for vh in result.resources["routes"][0]["virtual_hosts"]]
    assert domains == [["a.example.com"]]


def test_backends_unresolved_are_reported() -> None:
    rules = [
        {"backendRefs": [backend("missing")]},
        {"backendRefs": [{"group": "example.com", "kind": "Bucket", "name": "b"}]},
        {"backendRefs": [backend("alpha", namespace="elsewhere")]},
    ]
    for rule, reason in zip(rules, ("BackendNotFound", "InvalidKind", "RefNotPermitted"), strict=True):
        result = translate(world([http_route("r", ["a.example.com"], [rule])], BACKENDS))
        conds = parent(result, "r")
        assert conds["Accepted"]["status"] == "True"
        assert conds["ResolvedRefs"]["reason"] == reason
        route = result.resources["routes"][0]["virtual_hosts"][0]["routes"][0]
        assert route["direct_response"]["status"] == 500


@pytest.mark.parametrize(("channel", "retry_claimed"), [("experimental", True), ("standard", False), (None, False)])
def test_the_class_claims_retries_only_where_the_crds_can_carry_them(channel: str | None, retry_claimed: bool) -> None:
    """The standard channel's HTTPRoute has no `retry` (the API server drops it), so HTTPRouteRetry is claimed
    with the experimental channel's CRDs only; features of both channels are claimed with either."""
    w = World(classes=[gateway_class()], installed_bundle="v1.6.3", installed_channel=channel)
    claimed = {f["name"] for f in translate(w).class_status["cloudflare-tunnel"]["supportedFeatures"]}
    assert ("HTTPRouteRetry" in claimed) is retry_claimed
    assert {"Gateway", "HTTPRoute", "HTTPRouteCORS", "GRPCRoute"} <= claimed


def test_class_versions_and_tunnel() -> None:
    w = World(classes=[gateway_class()], installed_bundle="v1.5.1")
    conds = {c["type"]: c for c in translate(w).class_status["cloudflare-tunnel"]["conditions"]}
    assert conds["Accepted"]["status"] == "True"
    assert conds["SupportedVersion"]["reason"] == "UnsupportedVersion"
    assert "v1.6" in conds["SupportedVersion"]["message"]
    assert {
        c["type"]: c
        for c in translate(World(classes=[gateway_class()], installed_bundle="v1.6.0")).class_status[
            "cloudflare-tunnel"
        ]["conditions"]
    }["SupportedVersion"]["status"] == "True"

    ref = {"group": "kflare.dev", "kind": "Tunnel", "name": "t", "namespace": "infra"}
    tunnels = {("infra", "t"): TunnelState(ready=True, address="abc.cfargotunnel.com")}
    w = world(
        [http_route("r", ["a.example.com"], one_rule())], BACKENDS, tunnel=lambda ns, name: tunnels.get((ns, name))
    )
    w.classes = [gateway_class(parameters=ref)]
    result = translate(w)
    assert result.gateway_status[(NS, "edge")]["addresses"] == [{"type": "Hostname", "value": "abc.cfargotunnel.com"}]
    assert [(h.hostname, h.grpc, h.tunnel) for h in result.hostnames] == [("a.example.com", False, ("infra", "t"))]
    tunnels.clear()
    result = translate(w)
    assert {c["type"]: c for c in result.class_status["cloudflare-tunnel"]["conditions"]}["Accepted"][
        "reason"
    ] == "InvalidParameters"
    assert result.gateway_status[(NS, "edge")]["conditions"][0]["reason"] == "Pending"
    assert not result.hostnames


def test_published_hostnames_say_which_carry_grpc() -> None:
    w = world(
        [http_route("web", ["web.example.com"], one_rule())],
        BACKENDS,
        grpc=[grpc_route("rpc", ["rpc.example.com"], [{"backendRefs": [backend("alpha")]}])],
    )
    result = translate(w)
    assert [(h.hostname, h.grpc) for h in result.hostnames] == [("rpc.example.com", True), ("web.example.com", False)]
    assert any(c["name"].endswith("/h2c") for c in result.resources["clusters"])


def test_grpc_and_http_routes_on_one_hostname_the_oldest_wins() -> None:
    w = world(
        [http_route("web", ["same.example.com"], one_rule(), created="2026-01-02T00:00:00Z")],
        BACKENDS,
        grpc=[grpc_route("rpc", ["same.example.com"], [{"backendRefs": [backend("alpha")]}])],
    )
    result = translate(w)
    assert parent(result, "rpc", "GRPCRoute")["Accepted"]["status"] == "True"
    assert parent(result, "web")["Accepted"]["reason"] == "HostnameConflict"


def test_tenancy_label_binds_hostnames_to_the_namespace() -> None:
    namespaces = [{"metadata": {"name": NS, "labels": {"tenant/host": "t.example.com"}}}]

    def reason(hostnames: list[str] | None, kind: str = "HTTPRoute") -> str:
        if kind == "GRPCRoute":
            w = world(
                [],
                BACKENDS,
                grpc=[grpc_route("r", hostnames or [], [{"backendRefs": [backend("alpha")]}])],
                namespaces=namespaces,
                tenancy_label="tenant/host",
            )
        else:
            w = world(
                [http_route("r", hostnames, one_rule())], BACKENDS, namespaces=namespaces, tenancy_label="tenant/host"
            )
        return str(parent(translate(w), "r", kind)["Accepted"]["reason"])

    # Gateway API's reason for a route the Gateway's policy does not let attach.
    assert reason(None) == "NotAllowedByListeners"
    assert reason([], "GRPCRoute") == "NotAllowedByListeners"
    assert reason(["t.example.com", "*.t.example.com", "a.b.t.example.com"]) == "Accepted"
    assert reason(["evilt.example.com"]) == "NotAllowedByListeners"
    assert reason(["x.example.com"], "GRPCRoute") == "NotAllowedByListeners"


def test_regex_checks() -> None:
    assert regex_error("/v[0-9]+/.*") is None
    assert regex_error("(a)\\1") is not None
    assert regex_error("[") is not None


def test_observed_generation_everywhere() -> None:
    route = http_route("r", ["a.example.com"], one_rule())
    route["metadata"]["generation"] = 7
    gw = gateway()
    gw["metadata"]["generation"] = 3
    result = translate(world([route], BACKENDS, gateways=[gw]))
    assert {c["observedGeneration"] for c in parent(result, "r").values()} == {7}
    status = result.gateway_status[(NS, "edge")]
    assert {c["observedGeneration"] for c in status["conditions"]} == {3}
    assert {c["observedGeneration"] for entry in status["listeners"] for c in entry["conditions"]} == {3}


def test_routes_of_other_classes_are_left_alone() -> None:
    other = gateway("theirs")
    other["spec"]["gatewayClassName"] = "cilium"
    route = http_route("r", ["a.example.com"], one_rule(), parents=[{"name": "theirs", "namespace": NS}])
    result = translate(world([route], BACKENDS, gateways=[other]))
    assert ("HTTPRoute", NS, "r") not in result.route_parents
    assert (NS, "theirs") not in result.gateway_status


def test_a_translation_is_remembered_per_cache_revision_and_its_statuses_are_the_callers_own() -> None:
    route = http_route("r", ["a.example.com"], one_rule())
    w = world([route], BACKENDS, revision=("caches", 1))
    first = translate(w)
    first.route_parents[("HTTPRoute", NS, "r")][0]["conditions"].clear()  # a caller amending its statuses
    route["spec"]["hostnames"] = ["b.example.com"]  # unseen: the revision says the caches did not change
    again = translate(w)
    assert [h.hostname for h in again.hostnames] == ["a.example.com"]
    assert parent(again, "r")["Accepted"]["status"] == "True"
    w.revision = ("caches", 2)
    assert [h.hostname for h in translate(w).hostnames] == ["b.example.com"]


def test_the_class_claims_its_conformance_features_in_order() -> None:
    status = translate(world([], BACKENDS)).class_status["cloudflare-tunnel"]
    names = [f["name"] for f in status["supportedFeatures"]]
    assert names == sorted(names)
    assert {"HTTPRoute", "GRPCRoute", "HTTPRouteBackendProtocolWebSocket", "GatewayHTTPListenerIsolation"} <= set(names)


def listener_conditions(result: Any, name: str) -> dict[str, dict[str, Any]]:
    (entry,) = [e for e in result.gateway_status[(NS, "edge")]["listeners"] if e["name"] == name]
    return {c["type"]: c for c in entry["conditions"]}


def test_listeners_that_cannot_be_told_apart_are_conflicted_and_the_others_served() -> None:
    listeners = [
        {"name": "a", "protocol": "HTTP", "port": 80, "hostname": "a.example.com"},
        {"name": "a-again", "protocol": "HTTP", "port": 80, "hostname": "a.example.com"},
        {"name": "b", "protocol": "HTTP", "port": 80, "hostname": "b.example.com"},
        {"name": "plain", "protocol": "HTTP", "port": 8443},
        {"name": "secure", "protocol": "HTTPS", "port": 8443},
        {"name": "tcp", "protocol": "TCP", "port": 5432},
    ]
    result = translate(world([], BACKENDS, gateways=[gateway(listeners=listeners)]))
    for name, reason in (("a", "HostnameConflict"), ("a-again", "HostnameConflict"), ("plain", "ProtocolConflict")):
        conds = listener_conditions(result, name)
        assert (conds["Conflicted"]["status"], conds["Conflicted"]["reason"]) == ("True", reason)
        assert conds["Programmed"]["status"] == "False"
    assert listener_conditions(result, "secure")["Conflicted"]["reason"] == "ProtocolConflict"
    assert listener_conditions(result, "b")["Conflicted"]["status"] == "False"
    assert listener_conditions(result, "b")["Programmed"]["status"] == "True"
    kinds = {e["name"]: e["supportedKinds"] for e in result.gateway_status[(NS, "edge")]["listeners"]}
    assert kinds["tcp"] == []  # no route kind attaches to a protocol the class does not serve
    assert kinds["b"] == [{"group": GATEWAY_GROUP, "kind": "HTTPRoute"}, {"group": GATEWAY_GROUP, "kind": "GRPCRoute"}]


def test_an_address_without_a_value_is_the_tunnels_and_one_with_a_value_is_refused() -> None:
    def accepted(addresses: list[dict[str, str]]) -> str:
        edge = gateway()
        edge["spec"]["addresses"] = addresses
        conds = translate(world([], BACKENDS, gateways=[edge])).gateway_status[(NS, "edge")]["conditions"]
        return str(next(c["reason"] for c in conds if c["type"] == "Accepted"))

    assert accepted([{"type": "IPAddress", "value": ""}]) == "Accepted"
    assert accepted([{"type": "IPAddress", "value": "192.0.2.1"}]) == "UnsupportedAddress"


def test_a_route_hostname_a_narrower_listener_owns_is_left_to_that_listener() -> None:
    listeners = [
        {"name": "wild", "protocol": "HTTP", "port": 80, "hostname": "*.example.com"},
        {"name": "abc", "protocol": "HTTP", "port": 80, "hostname": "abc.example.com"},
    ]
    to_wild = [{"name": "edge", "namespace": NS, "sectionName": "wild"}]
    routes = [
        http_route("both", ["abc.example.com", "x.example.com"], one_rule(), parents=to_wild),
        http_route("only", ["abc.example.com"], one_rule(), parents=to_wild),
    ]
    result = translate(world(routes, BACKENDS, gateways=[gateway(listeners=listeners)]))
    assert [h.hostname for h in result.hostnames] == ["x.example.com"]
    assert parent(result, "only")["Accepted"]["reason"] == "NoMatchingListenerHostname"


def tls_secret(name: str, namespace: str = NS, *, valid: bool = True) -> dict[str, Any]:
    key, cert = CertificateAuthority.create("test CA").issue("app.example.com", hosts=["app.example.com"], server=True)
    data = {"tls.crt": cert if valid else b"not a certificate", "tls.key": key}
    encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
    return {"metadata": {"name": name, "namespace": namespace}, "type": "kubernetes.io/tls", "data": encoded}


def test_an_https_listeners_certificate_refs_are_checked_and_the_certificate_not_served() -> None:
    def refs(*certificate_refs: dict[str, str]) -> dict[str, Any]:
        return {"mode": "Terminate", "certificateRefs": list(certificate_refs)}

    listeners = [
        {"name": "good", "protocol": "HTTPS", "port": 443, "hostname": "a.example.com", "tls": refs({"name": "cert"})},
        {"name": "missing", "protocol": "HTTPS", "port": 443, "hostname": "b.example.com", "tls": refs({"name": "x"})},
        {
            "name": "kind",
            "protocol": "HTTPS",
            "port": 443,
            "hostname": "c.example.com",
            "tls": refs({"kind": "ConfigMap", "name": "cert"}),
        },
        {
            "name": "broken",
            "protocol": "HTTPS",
            "port": 443,
            "hostname": "d.example.com",
            "tls": refs({"name": "junk"}),
        },
        {
            "name": "far",
            "protocol": "HTTPS",
            "port": 443,
            "hostname": "e.example.com",
            "tls": refs({"name": "cert", "namespace": "certs"}),
        },
        {
            "name": "granted",
            "protocol": "HTTPS",
            "port": 443,
            "hostname": "f.example.com",
            "tls": refs({"name": "shared", "namespace": "certs"}),
        },
        {
            "name": "passthrough",
            "protocol": "HTTPS",
            "port": 443,
            "hostname": "g.example.com",
            "tls": {"mode": "Passthrough"},
        },
    ]
    secrets = {(NS, "cert"): tls_secret("cert"), (NS, "junk"): tls_secret("junk", valid=False)}
    secrets |= {("certs", "cert"): tls_secret("cert", "certs"), ("certs", "shared"): tls_secret("shared", "certs")}
    grant = {
        "metadata": {"name": "gateways", "namespace": "certs"},
        "spec": {
            "from": [{"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": NS}],
            "to": [{"group": "", "kind": "Secret", "name": "shared"}],
        },
    }
    w = world([], BACKENDS, gateways=[gateway(listeners=listeners)], grants=[grant])
    w.secret = lambda namespace, name: secrets.get((namespace, name))  # type: ignore[assignment,return-value]
    assert translate_refs(w) == {(NS, "cert"), (NS, "x"), (NS, "junk"), ("certs", "cert"), ("certs", "shared")}
    result = translate(w)
    expected = {
        "good": ("True", "ResolvedRefs"),
        "missing": ("False", "InvalidCertificateRef"),
        "kind": ("False", "InvalidCertificateRef"),
        "broken": ("False", "InvalidCertificateRef"),
        "far": ("False", "RefNotPermitted"),
        "granted": ("True", "ResolvedRefs"),
    }
    for name, (status, reason) in expected.items():
        resolved = listener_conditions(result, name)["ResolvedRefs"]
        assert (resolved["status"], resolved["reason"]) == (status, reason), name
        assert listener_conditions(result, name)["Programmed"]["status"] == status
    accepted = listener_conditions(result, "good")["Accepted"]
    assert accepted["status"] == "True"
    assert "served to clients reaching the data plane directly" in accepted["message"]
    assert listener_conditions(result, "passthrough")["Accepted"]["reason"] == "UnsupportedValue"


def test_routes_of_a_listener_whose_certificate_does_not_resolve_are_counted_but_not_served() -> None:
    """The spec counts a listener's routes in attachedRoutes even when its references do not resolve; the listener
    is not Programmed, so its routes get no traffic there."""
    listeners = [
        {"name": "tls", "protocol": "HTTPS", "port": 443, "tls": {"certificateRefs": [{"name": "does-not-exist"}]}},
        {"name": "web", "protocol": "HTTP", "port": 80, "hostname": "web.example.com"},
    ]
    routes = [
        http_route("on-tls", ["tls.example.com"], one_rule(), parents=[{"name": "edge", "sectionName": "tls"}]),
        http_route("on-web", ["web.example.com"], one_rule(), parents=[{"name": "edge", "sectionName": "web"}]),
    ]
    result = translate(world(routes, BACKENDS, gateways=[gateway(listeners=listeners)]))
    status = {entry["name"]: entry for entry in result.gateway_status[(NS, "edge")]["listeners"]}
    assert status["tls"]["attachedRoutes"] == 1
    assert status["web"]["attachedRoutes"] == 1
    assert listener_conditions(result, "tls")["Programmed"]["status"] == "False"
    assert parent(result, "on-tls")["Accepted"]["status"] == "True"
    domains = {d for vh in result.resources["routes"][0]["virtual_hosts"] for d in vh["domains"]}
    assert "web.example.com" in domains
    assert "tls.example.com" not in domains


def test_a_service_whose_slices_hold_no_ports_or_endpoints_yet_has_no_healthy_backend() -> None:
    """The API server writes an EndpointSlice of a Service before its pods with `ports: null` and `endpoints:
    null`: the route is served (503 from Envoy, no healthy upstream) rather than the whole translation failing."""
    empty = {
        "kind": "EndpointSlice",
        "metadata": {"name": "beta-x", "namespace": NS, "labels": {"kubernetes.io/service-name": "beta"}},
        "addressType": "IPv4",
        "ports": None,
        "endpoints": None,
    }
    routes = [http_route("r", ["a.example.com"], [{"backendRefs": [backend("beta")]}])]
    result = translate(world(routes, {"alpha": 9001}, services=[service("beta")], slices=[empty]))
    assert parent(result, "r")["Accepted"]["status"] == "True"
    assignments = {a["cluster_name"]: a for a in result.resources["endpoints"]}
    assert [name for name in assignments if "beta" in name]
    assert all(
        not a.get("endpoints") or not a["endpoints"][0].get("lb_endpoints")
        for n, a in assignments.items()
        if "beta" in n
    )


def test_the_tunnels_and_the_class_translate_the_same_certificates() -> None:
    """The tunnels' reconcile reads the certificate Secrets the class's reconcile watches (read_referenced): a
    route on an HTTPS listener whose certificate exists is published, exactly as the class serves it."""
    from reconcilers.gateway.caches import read_referenced

    class Referenced:
        def __init__(self, objects: dict[tuple[str, str], Any]) -> None:
            self.objects = objects

        def get(self, key: tuple[str, str]) -> Any:
            return self.objects.get(key)

        def revision(self, keys: Any) -> tuple[int, ...]:
            return tuple(1 for _ in keys)

    class Ctx:
        secrets = Referenced({(NS, "cert"): tls_secret("cert")})
        configmaps = Referenced({})

    listeners = [{"name": "tls", "protocol": "HTTPS", "port": 443, "tls": {"certificateRefs": [{"name": "cert"}]}}]
    routes = [http_route("app", ["app.example.com"], one_rule())]

    def published(read: bool) -> list[str]:
        w = world(routes, BACKENDS, gateways=[gateway(listeners=listeners)])
        if read:
            read_referenced(Ctx(), w)  # type: ignore[arg-type]
        return [h.hostname for h in translate(w).hostnames]

    assert published(read=False) == []  # what the tunnels' reconcile published before: no certificate seen
    assert published(read=True) == ["app.example.com"]


def test_a_change_to_one_route_builds_that_route_only_and_the_result_is_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import reconcilers.gateway.gatewayapi.builds as stage

    routes = [
        http_route(f"r{i}", [f"app{i}.example.com"], [{"backendRefs": [backend("alpha" if i % 2 else "beta")]}])
        for i in range(20)
    ]
    for route in routes:
        route["metadata"]["resourceVersion"] = "1"
    builds: list[str] = []
    real = stage.build_route

    def counting(kind: str, route: Any, resolver: Any) -> Any:
        builds.append(route["metadata"]["name"])
        return real(kind, route, resolver)

    monkeypatch.setattr(stage, "build_route", counting)

    def translated(revision: object, resolver_revision: object) -> Any:
        w = world(routes, {"alpha": 8001, "beta": 8002}, revision=revision, resolver_revision=resolver_revision)
        return translate(w)

    first = translated(1, "services-1")
    assert len(builds) == 20
    builds.clear()
    routes[3] = {**routes[3], "metadata": {**routes[3]["metadata"], "resourceVersion": "2"}}
    routes[3]["spec"] = {**routes[3]["spec"], "rules": [{"backendRefs": [backend("beta")]}]}
    second = translated(2, "services-1")
    assert builds == ["r3"]
    # Every backend of the routes not built again is still resolved: their clusters and endpoints are there.
    uncached = translate(world(routes, {"alpha": 8001, "beta": 8002}))
    assert second.resources == uncached.resources
    assert second.route_parents == uncached.route_parents
    assert first.resources != second.resources
    # Another state of the Services (or grants, or TLS policies) builds every route again.
    builds.clear()
    translated(3, "services-2")
    assert len(builds) == 20
