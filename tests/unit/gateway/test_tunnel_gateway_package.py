"""The class answers to the controllerNames it is given (kflare's own, and cloudflare-tunnel-gateway-controller's),
writes each class's own controllerName in its routes' statuses, and reads a GatewayClassConfig as the Tunnel kflare
derives from it."""

from __future__ import annotations

from typing import Any

from app.settings import GATEWAY_CONTROLLER_NAME, PACKAGE_CONTROLLER_NAME, Settings
from reconcilers.gateway import kinds
from reconcilers.gateway.kinds import CONTROLLER_NAME, Classes, derived_name
from reconcilers.gateway.publish import gateway_tunnels
from reconcilers.gateway.status_stamps import stamped
from reconcilers.gateway.translate import TunnelState, translate
from tests.dataplane.world import NS, backend, gateway, gateway_class, http_route, world

PACKAGE = "cf.k8s.lex.la/tunnel-controller"
BOTH = Classes(frozenset({CONTROLLER_NAME, PACKAGE}), "kflare-system")
CONFIG_REF = {"group": "cf.k8s.lex.la", "kind": "GatewayClassConfig", "name": "cloudflare-tunnel"}


def package_class(parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    cls = gateway_class(parameters=parameters)
    cls["spec"]["controllerName"] = PACKAGE
    return cls


def routed(cls: dict[str, Any], classes: Classes, **extra: Any) -> Any:
    route = http_route("app", ["app.example.com"], [{"backendRefs": [backend("app")]}])
    served = world([route], {"app": 9000}, ours=classes, **extra)
    served.classes = [cls]
    return translate(served)


def test_settings_name_the_controllers_the_reconcilers_do() -> None:
    assert (GATEWAY_CONTROLLER_NAME, PACKAGE_CONTROLLER_NAME) == (kinds.CONTROLLER_NAME, kinds.PACKAGE_CONTROLLER_NAME)
    assert Settings().gateway_controller_name_set == {CONTROLLER_NAME}
    names = Settings(gateway_controller_names="example.com/a, example.com/b").gateway_controller_name_set
    assert names == {CONTROLLER_NAME, "example.com/a", "example.com/b"}
    assert Settings(gateway_tunnel_gateway_package=True).gateway_controller_name_set == {CONTROLLER_NAME, PACKAGE}


def test_a_class_of_another_controller_name_is_served_only_when_answered_to() -> None:
    assert not routed(package_class(), Classes()).class_status
    result = routed(package_class(), BOTH)
    accepted = result.class_status["cloudflare-tunnel"]["conditions"][0]
    assert (accepted["type"], accepted["status"]) == ("Accepted", "True")
    (entry,) = result.route_parents[("HTTPRoute", NS, "app")]
    assert entry["controllerName"] == PACKAGE
    assert {c["type"]: c["status"] for c in entry["conditions"]}["Accepted"] == "True"
    assert [h.hostname for h in result.hostnames] == ["app.example.com"]


def test_a_gateway_class_config_names_the_tunnel_kflare_derives_from_it() -> None:
    derived = ("kflare-system", derived_name("cloudflare-tunnel"))
    assert BOTH.tunnel(package_class(CONFIG_REF)) == derived
    # Without the package's kinds read, a GatewayClassConfig names nothing kflare knows.
    assert Classes(BOTH.names).tunnel(package_class(CONFIG_REF)) is None
    waiting = routed(package_class(CONFIG_REF), BOTH).class_status["cloudflare-tunnel"]["conditions"][0]
    assert (waiting["status"], waiting["reason"]) == ("False", "InvalidParameters")

    def tunnel(namespace: str, name: str) -> TunnelState | None:
        return TunnelState(True, address="abc.cfargotunnel.com") if (namespace, name) == derived else None

    result = routed(package_class(CONFIG_REF), BOTH, tunnel=tunnel)
    accepted = result.class_status["cloudflare-tunnel"]["conditions"][0]
    assert accepted["status"] == "True"
    assert "GatewayClassConfig cloudflare-tunnel" in accepted["message"]
    assert result.hostnames[0].tunnel == derived
    assert result.gateway_status[(NS, "edge")]["addresses"] == [{"type": "Hostname", "value": "abc.cfargotunnel.com"}]
    assert gateway_tunnels([package_class(CONFIG_REF)], [gateway()], BOTH) == {(NS, "edge"): derived}


def test_long_config_names_derive_names_that_fit_a_label() -> None:
    name = derived_name("x" * 253)
    assert len(name + "-token") <= 63
    assert name != derived_name("x" * 252)


def test_entries_of_every_name_answered_to_are_this_controllers() -> None:
    ref = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": NS, "name": "edge"}
    other = {"parentRef": {**ref, "name": "other"}, "controllerName": "example.com/else", "conditions": []}
    stale = {"parentRef": ref, "controllerName": PACKAGE, "conditions": []}
    ours = {"parentRef": ref, "controllerName": PACKAGE, "conditions": [{"type": "Accepted", "status": "True"}]}
    written = stamped([other, stale], [ours], "parentRef", "2026-01-01T00:00:00Z", BOTH.names)
    assert written is not None
    assert written[0] == other
    assert written[1]["conditions"][0]["status"] == "True"
    assert len(written) == 2


def external(name: str, scheme: str, host: str, port: int, path: str | None = None, namespace: str = NS) -> Any:
    spec: dict[str, Any] = {"scheme": scheme, "host": host, "port": port}
    if path is not None:
        spec["path"] = path
    return {"kind": "ExternalBackend", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def to_external(name: str, namespace: str | None = None) -> dict[str, Any]:
    ref = {"group": "cf.k8s.lex.la", "kind": "ExternalBackend", "name": name, "port": 1}
    return {**ref, "namespace": namespace} if namespace else ref


def served(routes: list[Any], backends: list[Any] | None, **extra: Any) -> Any:
    return translate(world(routes, {}, external_backends=backends, **extra))


def cluster_named(result: Any, part: str) -> dict[str, Any]:
    (found,) = [c for c in result.resources["clusters"] if part in c["name"]]
    return dict(found)


def test_an_https_external_backend_is_reached_over_tls_with_its_base_path_prepended() -> None:
    route = http_route("r", ["a.example.com"], [{"backendRefs": [to_external("api")]}])
    result = served([route], [external("api", "https", "api.example.net", 8443, "/v1/")])
    assert {c["type"]: c["status"] for c in result.route_parents[("HTTPRoute", NS, "r")][0]["conditions"]} == {
        "Accepted": "True",
        "ResolvedRefs": "True",
    }
    cluster = cluster_named(result, "external")
    assert cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"] == {
        "address": "api.example.net",
        "port_value": 8443,
    }
    tls = cluster["transport_socket"]["typed_config"]
    assert tls["sni"] == "api.example.net"
    validation = tls["common_tls_context"]["validation_context"]
    assert validation["trusted_ca"] == {"filename": "/etc/ssl/certs/ca-certificates.crt"}
    assert validation["match_typed_subject_alt_names"] == [{"san_type": "DNS", "matcher": {"exact": "api.example.net"}}]
    (vhost,) = result.resources["routes"][0]["virtual_hosts"]
    action = vhost["routes"][0]["route"]
    assert action["cluster"] == cluster["name"]
    assert action["regex_rewrite"] == {"pattern": {"regex": "^(.*)$"}, "substitution": "/v1\\1"}


def test_an_http_external_backend_is_plaintext_and_without_a_path_rewrites_nothing() -> None:
    route = http_route("r", ["a.example.com"], [{"backendRefs": [to_external("api")]}])
    result = served([route], [external("api", "http", "10.0.0.5", 8080)])
    assert "transport_socket" not in cluster_named(result, "external")
    assert "regex_rewrite" not in result.resources["routes"][0]["virtual_hosts"][0]["routes"][0]["route"]


def test_external_backends_need_the_package_a_grant_across_namespaces_and_no_loopback() -> None:
    def resolved(route: Any, backends: list[Any] | None, **extra: Any) -> dict[str, Any]:
        entry = served([route], backends, **extra).route_parents[("HTTPRoute", NS, "r")][0]
        return {c["type"]: c for c in entry["conditions"]}["ResolvedRefs"]

    here = http_route("r", ["a.example.com"], [{"backendRefs": [to_external("api")]}])
    assert resolved(here, None)["reason"] == "InvalidKind"  # the package's kinds are not read
    assert resolved(here, [])["reason"] == "BackendNotFound"
    assert resolved(here, [external("api", "http", "127.0.0.1", 9901)])["reason"] == "InvalidKind"
    far = http_route("r", ["a.example.com"], [{"backendRefs": [to_external("api", "other")]}])
    backends = [external("api", "http", "api.example.net", 80, namespace="other")]
    assert resolved(far, backends)["reason"] == "RefNotPermitted"
    grant = {
        "kind": "ReferenceGrant",
        "metadata": {"name": "g", "namespace": "other"},
        "spec": {
            "from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": NS}],
            "to": [{"group": "cf.k8s.lex.la", "kind": "ExternalBackend"}],
        },
    }
    assert resolved(far, backends, grants=[grant])["status"] == "True"
    service_grant = {**grant, "spec": {**grant["spec"], "to": [{"group": "", "kind": "ExternalBackend"}]}}
    assert resolved(far, backends, grants=[service_grant])["reason"] == "RefNotPermitted"


def test_a_base_path_beside_another_backend_leaves_the_rule_out() -> None:
    rules = [{"backendRefs": [to_external("api"), to_external("web")]}]
    result = served(
        [http_route("r", ["a.example.com"], rules)],
        [external("api", "http", "a.example.net", 80, "/v1"), external("web", "http", "b.example.net", 80)],
    )
    accepted = {c["type"]: c for c in result.route_parents[("HTTPRoute", NS, "r")][0]["conditions"]}["Accepted"]
    assert accepted["status"] == "False"
    assert "an ExternalBackend with a path must be the rule's only backend" in accepted["message"]


def test_an_external_name_service_on_443_is_reached_over_tls_to_its_name() -> None:
    svc = {
        "kind": "Service",
        "metadata": {"name": "far", "namespace": NS},
        "spec": {"type": "ExternalName", "externalName": "origin.example.net", "ports": [{"port": 443}]},
    }
    routes = [
        http_route("r", ["a.example.com"], [{"backendRefs": [{"name": "far", "port": 443}]}]),
        http_route("p", ["b.example.com"], [{"backendRefs": [{"name": "far", "port": 80}]}]),
    ]
    result = translate(world(routes, {}, services=[svc], allow_external_name_services=True))
    tls = cluster_named(result, ":443/dns")["transport_socket"]["typed_config"]
    assert tls["sni"] == "origin.example.net"
    names = tls["common_tls_context"]["validation_context"]["match_typed_subject_alt_names"]
    assert names == [{"san_type": "DNS", "matcher": {"exact": "origin.example.net"}}]
    assert "transport_socket" not in cluster_named(result, ":80/dns")
