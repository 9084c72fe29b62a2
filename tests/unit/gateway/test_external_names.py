"""ExternalName Services as route backends (CVE-2021-25740): refused unless the route's Gateway allows them (its
GatewayParameters for a plane of its own, the controller's flag for the shared plane), and even then held to the
ReferenceGrants a name inside the cluster would need, and never sent to loopback or link-local addresses."""

from __future__ import annotations

from typing import Any

import pytest

from app.cli import build_parser, settings_from
from reconcilers.gateway.envoy import CARES_RESOLVER
from reconcilers.gateway.gatewayapi.backends import EXTERNAL_NAMES_REFUSED, UNRESOLVED, in_cluster
from reconcilers.gateway.kinds import CONTROLLER_NAME, Classes
from reconcilers.gateway.planes import Plane, PlanePolicy, choose
from reconcilers.gateway.translate import Translation, translate
from tests.dataplane.world import CLASS_NAME, GATEWAY_GROUP, NS, backend, gateway, http_route, meta, world

BACKENDS = {"alpha": 9001}
REFUSED = f"Service {NS}/far: {EXTERNAL_NAMES_REFUSED}"


def external(host: str, name: str = "far", namespace: str = NS) -> dict[str, Any]:
    return {
        "kind": "Service",
        "metadata": meta(name, namespace),
        "spec": {"type": "ExternalName", "externalName": host},
    }


def grant(to_namespace: str, service: str | None = None) -> dict[str, Any]:
    to: dict[str, Any] = {"group": "", "kind": "Service"}
    if service is not None:
        to["name"] = service
    return {
        "metadata": {"name": "routes-in", "namespace": to_namespace},
        "spec": {"from": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute", "namespace": NS}], "to": [to]},
    }


def resolved(result: Translation, name: str = "r") -> dict[str, Any]:
    (entry,) = result.route_parents[("HTTPRoute", NS, name)]
    (condition,) = [c for c in entry["conditions"] if c["type"] == "ResolvedRefs"]
    return dict(condition)


def served(host: str, allowed: bool = True, *, revision: str | None = None, **extra: Any) -> Translation:
    """The translation of route `r` to ExternalName Service `far` (giving `host`) on the shared plane, the flag
    `allowed`; with `revision`, as the caches say it (the translation and the route's build are remembered)."""
    route = http_route("r", ["a.example.com"], [{"backendRefs": [backend("far", port=443)]}])
    if revision is not None:
        route["metadata"]["resourceVersion"] = revision
        extra |= {"revision": revision, "resolver_revision": revision}
    return translate(
        world(
            [route],
            BACKENDS,
            services=[external(host), *extra.pop("services", [])],
            allow_external_name_services=allowed,
            **extra,
        )
    )


def by_parent(result: Translation, name: str = "r") -> dict[str, dict[str, Any]]:
    """The ResolvedRefs condition of each parent entry of route `name`, by the parent's name."""
    return {
        entry["parentRef"]["name"]: dict(next(c for c in entry["conditions"] if c["type"] == "ResolvedRefs"))
        for entry in result.route_parents[("HTTPRoute", NS, name)]
    }


def dns_clusters(resources: dict[str, list[Any]]) -> list[dict[str, Any]]:
    return [c for c in resources["clusters"] if c.get("type") == "STRICT_DNS"]


def route_entry(resources: dict[str, list[Any]]) -> dict[str, Any]:
    (vhost,) = resources["routes"][0]["virtual_hosts"]
    entry: dict[str, Any] = vhost["routes"][0]
    return entry


def test_an_external_name_service_is_refused_by_default_and_its_traffic_answered_5xx() -> None:
    rules = [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/only"}}], "backendRefs": [backend("far", port=443)]},
        {"backendRefs": [backend("alpha", weight=1), backend("far", port=443, weight=1)]},
    ]
    result = translate(world([http_route("r", ["a.example.com"], rules)], BACKENDS, services=[external("example.org")]))
    condition = resolved(result)
    assert (condition["status"], condition["reason"]) == ("False", "InvalidKind")
    assert condition["message"] == (
        "Service apps/far: ExternalName Services are not followed unless the GatewayParameters allow them"
        " (allowExternalNameServices; for the class's shared data plane, the controller's"
        " --gateway-allow-external-name-services)"
    )
    (entry,) = result.route_parents[("HTTPRoute", NS, "r")]
    assert next(c for c in entry["conditions"] if c["type"] == "Accepted")["status"] == "True"
    # Never the external host: its routes answer 500, its share of a split goes to the cluster with no endpoints.
    assert not dns_clusters(result.resources)
    assert "example.org" not in str(result.resources)
    (vhost,) = result.resources["routes"][0]["virtual_hosts"]
    assert [r["direct_response"]["status"] for r in vhost["routes"] if "direct_response" in r] == [500]
    split = next(r for r in vhost["routes"] if "weighted_clusters" in r.get("route", {}))
    assert UNRESOLVED in {c["name"] for c in split["route"]["weighted_clusters"]["clusters"]}


def test_the_controllers_flag_lets_the_shared_plane_follow_them_by_the_name_as_written() -> None:
    result = served("api.example.org")
    assert resolved(result)["status"] == "True"
    (cluster,) = dns_clusters(result.resources)
    address = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
    assert address["socket_address"] == {"address": "api.example.org", "port_value": 443}
    # Not completed with the pod's search domains into another namespace's Service.
    resolver = cluster["typed_dns_resolver_config"]["typed_config"]
    assert resolver["@type"] == CARES_RESOLVER
    assert resolver["dns_resolver_options"]["no_default_search_domain"] is True
    assert route_entry(result.resources)["route"]["cluster"] == cluster["name"]


def test_a_gateways_own_plane_follows_them_only_when_its_gateway_parameters_allow_them() -> None:
    """One route on two Gateways: the one whose GatewayParameters allow ExternalName Services serves it, the shared
    plane (flag off) refuses it, each in its own parent entry."""
    own = gateway("own")
    own["metadata"] = meta("own", uid="uid-own")
    own["spec"]["infrastructure"] = {
        "parametersRef": {"group": "kflare.dev", "kind": "GatewayParameters", "name": "own"}
    }
    parameters = {
        "kind": "GatewayParameters",
        "metadata": meta("own"),
        "spec": {"accountRef": {"name": "acct"}, "allowExternalNameServices": True},
    }
    parents = [{"name": "own"}, {"name": "edge"}]
    route = http_route("r", ["a.example.com"], [{"backendRefs": [backend("far", port=443)]}], parents=parents)

    def translated(params: dict[str, Any]) -> tuple[Translation, Plane]:
        choices = choose([own, gateway("edge")], [params], {CLASS_NAME}, cap=1)
        plane = choices[(NS, "own")]
        assert isinstance(plane, Plane)
        w = world([route], {}, gateways=[own, gateway("edge")], planes=choices, services=[external("example.org")])
        return translate(w), plane

    result, plane = translated(parameters)
    conditions = by_parent(result)
    assert (conditions["own"]["status"], conditions["edge"]["status"]) == ("True", "False")
    assert conditions["edge"]["reason"] == "InvalidKind"
    (cluster,) = dns_clusters(result.planes[plane.cluster])
    assert route_entry(result.planes[plane.cluster])["route"]["cluster"] == cluster["name"]
    assert route_entry(result.resources)["direct_response"]["status"] == 500

    # Without the field (its default), the Gateway's own plane refuses them too.
    result, plane = translated({**parameters, "spec": {"accountRef": {"name": "acct"}}})
    assert by_parent(result)["own"]["reason"] == "InvalidKind"
    assert not dns_clusters(result.planes[plane.cluster])
    assert route_entry(result.planes[plane.cluster])["direct_response"]["status"] == 500


def test_a_gateway_configs_plane_follows_them_as_the_controller_says() -> None:
    """A GatewayConfig has no such field (the package follows them): its Gateway's own plane follows the controller's
    setting, as the shared plane of its class does."""
    own = gateway("own")
    own["metadata"] = meta("own", uid="uid-own")
    own["spec"]["infrastructure"] = {
        "parametersRef": {"group": "cf.k8s.lex.la", "kind": "GatewayConfig", "name": "own"}
    }
    config = {"kind": "GatewayConfig", "metadata": meta("own"), "spec": {"tunnelTokenSecretRef": {"name": "t"}}}
    route = http_route("r", ["a.example.com"], [{"backendRefs": [backend("far", port=443)]}], parents=[{"name": "own"}])
    policy = PlanePolicy(1, classes=Classes(frozenset({CONTROLLER_NAME}), "kflare-system"))
    choices = choose([own], [], {CLASS_NAME}, policy, configs=[config], accounts={CLASS_NAME: "acct"})
    plane = choices[(NS, "own")]
    assert isinstance(plane, Plane)
    for allowed in (True, False):
        w = world(
            [route],
            {},
            gateways=[own],
            planes=choices,
            services=[external("example.org")],
            allow_external_name_services=allowed,
        )
        result = translate(w)
        assert by_parent(result)["own"]["status"] == ("True" if allowed else "False")
        assert bool(dns_clusters(result.planes[plane.cluster])) is allowed


def test_a_translation_and_a_routes_build_remembered_are_those_of_the_same_allowance() -> None:
    """The translation is remembered per cache revision and a route's build per resolver revision: turning the flag
    on with the caches unchanged must not hand back what was translated with it off (nor the reverse)."""

    for allowed in (False, True, False):
        assert resolved(served("example.org", allowed, revision="7"))["status"] == ("True" if allowed else "False")


@pytest.mark.parametrize(
    "host",
    [
        "db.other.svc",
        "db.other.svc.cluster.local",
        "DB.Other.svc.cluster.local.",
        "db.other.svc.corp.internal",  # another cluster domain: kflare is not told the cluster's
        "pod-0.db.other.svc.cluster.local",
    ],
)
def test_a_name_of_another_namespaces_service_needs_a_reference_grant_even_allowed(host: str) -> None:
    result = served(host)
    condition = resolved(result)
    assert (condition["status"], condition["reason"]) == ("False", "RefNotPermitted")
    assert condition["message"] == (
        f"ExternalName Service apps/far: {host} is Service other/db: no ReferenceGrant lets apps in"
    )
    assert not dns_clusters(result.resources)
    assert route_entry(result.resources)["direct_response"]["status"] == 500

    for granted in (grant("other", "db"), grant("other")):
        result = served(host, grants=[granted])
        assert resolved(result)["status"] == "True"
        assert dns_clusters(result.resources)
    # A grant for another Service of that namespace, or from another namespace, is not one.
    result = served(host, grants=[grant("other", "cache"), grant("apps", "db")])
    assert resolved(result)["reason"] == "RefNotPermitted"


@pytest.mark.parametrize("host", ["10-0-0-1.other.pod.cluster.local", "kubernetes.cluster.local", "other.svc"])
def test_a_name_inside_the_cluster_not_of_a_service_is_refused_outside_the_routes_namespace(host: str) -> None:
    condition = resolved(served(host, grants=[grant("other")]))
    assert (condition["status"], condition["reason"]) == ("False", "RefNotPermitted")
    assert "is a name inside the cluster outside namespace apps" in condition["message"]


@pytest.mark.parametrize("host", ["db.apps.svc.cluster.local", "db.apps.svc", "10-0-0-1.apps.pod.cluster.local"])
def test_a_name_of_the_routes_own_namespace_needs_no_grant(host: str) -> None:
    assert resolved(served(host))["status"] == "True"


UNFOLLOWED = ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "::ffff:127.0.0.1", "169.254.169.254", "fe80::1", "::"]
UNFOLLOWED.append("0.0.0.0")  # noqa: S104 (a name a Service gives, not an address bound)


@pytest.mark.parametrize("host", UNFOLLOWED)
def test_loopback_link_local_and_unspecified_addresses_are_refused_even_allowed(host: str) -> None:
    condition = resolved(served(host))
    assert (condition["status"], condition["reason"]) == ("False", "InvalidKind")
    assert condition["message"] == (
        f"ExternalName Service apps/far: {host} is a loopback, link-local or unspecified address, never followed"
    )


@pytest.mark.parametrize("host", ["127.1", "2130706433"])
def test_numeric_forms_of_an_address_are_refused(host: str) -> None:
    condition = resolved(served(host))
    assert (condition["reason"], condition["message"]) == (
        "InvalidKind",
        f"ExternalName Service apps/far: {host} is neither a host name nor an IP address",
    )


@pytest.mark.parametrize("host", ["203.0.113.7", "10.1.2.3", "example.org", "svc.example.org", "api.svc-eu.io"])
def test_other_addresses_and_names_are_followed_when_allowed(host: str) -> None:
    assert resolved(served(host))["status"] == "True"


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("db.team.svc", ("team", "db")),
        ("db.team.svc.cluster.local", ("team", "db")),
        ("_http._tcp.db.team.svc.cluster.local", ("team", "db")),
        ("team.svc.cluster.local", ("team", None)),
        ("10-1-2-3.team.pod.cluster.local", ("team", None)),
        ("cluster.local", (None, None)),
        ("svc.cluster.local", (None, None)),
        ("example.org", None),
        ("svc.example.org", None),
    ],
)
def test_names_the_clusters_dns_answers(name: str, found: tuple[str | None, str | None] | None) -> None:
    assert in_cluster(name) == found


def test_the_flag_is_off_unless_given() -> None:
    def given(*argv: str) -> bool:
        return settings_from(build_parser().parse_args(["run", *argv])).gateway_allow_external_name_services

    assert given() is False
    assert given("--gateway-allow-external-name-services=true") is True
    assert given("--gateway-allow-external-name-services=false") is False
