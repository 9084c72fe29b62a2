"""ListenerSets on the class's Gateways: which a Gateway takes (`allowedListeners`), their listeners merged after the
Gateway's own in precedence order (the later listener loses a conflict, the earlier keeps serving), routes attached
through a ListenerSet parentRef to its listeners only, and the statuses each side reads."""

from __future__ import annotations

from typing import Any

from reconcilers.gateway.kinds import GATEWAY_GROUP
from reconcilers.gateway.translate import Translation, translate
from tests.dataplane.world import NS, backend, gateway, http_route, meta, reference_grant, world
from tests.unit.gateway.test_https_listeners import https, secret

JSON = dict[str, Any]


def http(name: str, hostname: str | None, origin: str = "All", port: int = 80, protocol: str = "HTTP") -> JSON:
    out: JSON = {"name": name, "port": port, "protocol": protocol, "allowedRoutes": {"namespaces": {"from": origin}}}
    if hostname is not None:
        out["hostname"] = hostname
    return out


def allowing(origin: str = "All", listeners: list[JSON] | None = None, **selector: Any) -> JSON:
    found = gateway(listeners=listeners or [http("http", "gw.example.com")])
    found["spec"]["allowedListeners"] = {"namespaces": {"from": origin, **selector}}
    return found


def listener_set(
    name: str, listeners: list[JSON], namespace: str = NS, created: str = "2026-01-01T00:00:00Z", parent: str = "edge"
) -> JSON:
    return {
        "kind": "ListenerSet",
        "metadata": meta(name, namespace, created),
        "spec": {
            "parentRef": {"group": GATEWAY_GROUP, "kind": "Gateway", "name": parent, "namespace": NS},
            "listeners": listeners,
        },
    }


def on_set(name: str, section: str | None = None, namespace: str = NS) -> JSON:
    out: JSON = {"group": GATEWAY_GROUP, "kind": "ListenerSet", "name": name, "namespace": namespace}
    if section is not None:
        out["sectionName"] = section
    return out


def on_gateway(section: str | None = None) -> JSON:
    out: JSON = {"group": GATEWAY_GROUP, "kind": "Gateway", "name": "edge", "namespace": NS}
    if section is not None:
        out["sectionName"] = section
    return out


def route(name: str, parents: list[JSON], namespace: str = NS, service: str = "alpha") -> JSON:
    rules = [{"matches": [{"path": {"type": "PathPrefix", "value": f"/{name}"}}], "backendRefs": [backend(service)]}]
    return http_route(name, None, rules, namespace=namespace, parents=parents)


def translated(gw: JSON, sets: list[JSON], routes: list[JSON] | None = None, **extra: Any) -> Translation:
    namespaces = extra.pop("namespaces", [{"metadata": {"name": NS}}])
    return translate(
        world(routes or [], {"alpha": 9001}, gateways=[gw], listener_sets=sets, namespaces=namespaces, **extra)
    )


def set_conditions(result: Translation, name: str, namespace: str = NS) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in result.listener_set_status[(namespace, name)]["conditions"]}


def set_listeners(result: Translation, name: str, namespace: str = NS) -> dict[str, JSON]:
    found = result.listener_set_status[(namespace, name)]["listeners"]
    return {entry["name"]: {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]} for entry in found}


def attached(result: Translation, name: str, namespace: str = NS) -> dict[str, int]:
    found = result.listener_set_status[(namespace, name)]["listeners"]
    return {entry["name"]: entry["attachedRoutes"] for entry in found}


def route_parent(result: Translation, name: str, kind: str, namespace: str = NS) -> tuple[str, str]:
    entries = result.route_parents[("HTTPRoute", namespace, name)]
    entry = next(e for e in entries if e["parentRef"].get("kind", "Gateway") == kind)
    accepted = next(c for c in entry["conditions"] if c["type"] == "Accepted")
    return accepted["status"], accepted["reason"]


def served_paths(result: Translation) -> dict[str, set[str]]:
    """Each virtual host of the shared plane, with the path prefixes its routes match."""
    return {
        vhost["name"]: {r["match"].get("path_separated_prefix", "") for r in vhost["routes"]}
        for vhost in result.resources["routes"][0]["virtual_hosts"]
    }


READY = {"Accepted": ("True", "Accepted"), "Programmed": ("True", "Programmed")}


def test_a_gateway_takes_no_listener_set_unless_its_allowed_listeners_say_so() -> None:
    for gw in (gateway(), allowing("None")):
        result = translated(gw, [listener_set("extra", [http("more", "more.example.com")])])
        assert set_conditions(result, "extra") == {
            "Accepted": ("False", "NotAllowed"),
            "Programmed": ("False", "NotAllowed"),
        }
        assert result.gateway_status[(NS, "edge")]["attachedListenerSets"] == 0
        assert "more.example.com" not in served_paths(result)


def test_same_takes_the_gateways_namespace_and_a_selector_the_namespaces_it_selects() -> None:
    sets = [
        listener_set("here", [http("a", "a.example.com")]),
        listener_set("there", [http("b", "b.example.com")], namespace="labelled"),
        listener_set("elsewhere", [http("c", "c.example.com")], namespace="plain"),
    ]
    namespaces = [
        {"metadata": {"name": NS}},
        {"metadata": {"name": "labelled", "labels": {"allowed": "ns"}}},
        {"metadata": {"name": "plain"}},
    ]
    same = translated(allowing("Same"), sets, namespaces=namespaces)
    assert set_conditions(same, "here") == READY
    assert set_conditions(same, "there", "labelled")["Accepted"] == ("False", "NotAllowed")
    assert same.gateway_status[(NS, "edge")]["attachedListenerSets"] == 1
    selected = translated(
        allowing("Selector", selector={"matchLabels": {"allowed": "ns"}}), sets, namespaces=namespaces
    )
    assert set_conditions(selected, "there", "labelled") == READY
    assert set_conditions(selected, "here")["Accepted"] == ("False", "NotAllowed")  # the Gateway's own is not implied
    assert set_conditions(selected, "elsewhere", "plain")["Accepted"] == ("False", "NotAllowed")
    assert set_listeners(selected, "there", "labelled")["b"]["ResolvedRefs"] == ("True", "ResolvedRefs")


def test_a_later_listener_loses_a_hostname_conflict_and_the_earlier_keeps_serving() -> None:
    gw = allowing("Same", [http("http", "gw.example.com"), http("taken", "taken.example.com")])
    sets = [
        listener_set("first", [http("own", "own.example.com"), http("taken", "taken.example.com"), http("x", "x.com")]),
        listener_set("second", [http("taken", "taken.example.com")], created="2026-01-02T00:00:00Z"),
        listener_set("third", [http("x", "x.com")], created="2026-01-03T00:00:00Z"),
    ]
    result = translated(gw, sets, [route("web", [on_set("first"), on_set("second"), on_set("third"), on_gateway()])])
    gateway_listeners = result.gateway_status[(NS, "edge")]["listeners"]
    assert all(c["status"] == "True" for e in gateway_listeners for c in e["conditions"] if c["type"] == "Programmed")
    lost = {"Accepted": ("False", "HostnameConflict"), "Programmed": ("False", "HostnameConflict")}
    first = set_listeners(result, "first")
    assert first["taken"]["Conflicted"] == ("True", "HostnameConflict")
    assert {k: first["taken"][k] for k in lost} == lost
    assert first["x"]["Programmed"] == ("True", "Programmed")  # the first by precedence
    assert set_conditions(result, "first") == READY
    assert set_conditions(result, "second") == {
        "Accepted": ("False", "ListenersNotValid"),
        "Programmed": ("False", "ListenersNotValid"),
    }
    assert set_listeners(result, "third")["x"]["Conflicted"] == ("True", "HostnameConflict")
    assert result.gateway_status[(NS, "edge")]["attachedListenerSets"] == 1
    # The winner keeps its name: the Gateway's listener serves taken.example.com, not the ListenerSet's.
    assert served_paths(result)["taken.example.com"] == {"/web"}
    assert attached(result, "first") == {"own": 1, "taken": 0, "x": 1}


def test_a_listener_of_another_protocol_on_a_taken_port_loses_with_protocol_conflict() -> None:
    gw = allowing("Same")
    sets = [listener_set("tcp", [http("tcp", None, protocol="TCP"), http("fine", "fine.example.com")])]
    result = translated(gw, sets)
    found = set_listeners(result, "tcp")
    assert found["tcp"]["Accepted"] == found["tcp"]["Programmed"] == ("False", "ProtocolConflict")
    assert found["tcp"]["Conflicted"] == ("True", "ProtocolConflict")
    assert found["fine"]["Programmed"] == ("True", "Programmed")
    assert set_conditions(result, "tcp") == READY


def test_a_route_reaches_only_the_listeners_of_the_parent_it_names() -> None:
    gw = allowing("All", [http("g1", "g1.example.com"), http("g2", "g2.example.com")])
    sets = [listener_set("one", [http("a1", "a1.example.com"), http("a2", "a2.example.com")])]
    routes = [
        route("everywhere", [on_gateway(), on_set("one")]),
        route("gateway", [on_gateway()]),
        route("set", [on_set("one")]),
        route("section", [on_set("one", "a1")]),
        route("astray", [on_gateway("a1")]),  # a ListenerSet's listener is no section of the Gateway
    ]
    result = translated(gw, sets, routes)
    paths = served_paths(result)
    assert paths["g1.example.com"] == paths["g2.example.com"] == {"/everywhere", "/gateway"}
    assert paths["a1.example.com"] == {"/everywhere", "/set", "/section"}
    assert paths["a2.example.com"] == {"/everywhere", "/set"}
    assert attached(result, "one") == {"a1": 3, "a2": 2}
    assert route_parent(result, "everywhere", "Gateway") == route_parent(result, "everywhere", "ListenerSet")
    assert route_parent(result, "set", "ListenerSet") == ("True", "Accepted")
    assert [e["parentRef"]["kind"] for e in result.route_parents[("HTTPRoute", NS, "set")]] == ["ListenerSet"]
    assert route_parent(result, "astray", "Gateway") == ("False", "NoMatchingParent")
    assert [h.hostname for h in result.hostnames] == sorted(paths)
    assert result.gateway_status[(NS, "edge")]["attachedListenerSets"] == 1
    gateway_counts = {e["name"]: e["attachedRoutes"] for e in result.gateway_status[(NS, "edge")]["listeners"]}
    assert gateway_counts == {"g1": 2, "g2": 2}


def test_same_on_a_listener_set_listener_means_the_listener_sets_namespace() -> None:
    sets = [listener_set("cross", [http("same", "same.example.com", origin="Same")], namespace="team")]
    routes = [
        route("theirs", [on_set("cross", namespace="team")], namespace="team"),
        route("gateways", [on_set("cross", namespace="team")]),
    ]
    namespaces = [{"metadata": {"name": NS}}, {"metadata": {"name": "team"}}]
    result = translated(allowing("All"), sets, routes, namespaces=namespaces)
    assert route_parent(result, "theirs", "ListenerSet", "team") == ("True", "Accepted")
    assert route_parent(result, "gateways", "ListenerSet") == ("False", "NotAllowedByListeners")
    assert attached(result, "cross", "team") == {"same": 1}


def test_a_route_on_a_refused_listener_set_is_not_served() -> None:
    result = translated(
        gateway(), [listener_set("extra", [http("more", "more.example.com")])], [route("web", [on_set("extra")])]
    )
    assert route_parent(result, "web", "ListenerSet") == ("False", "NotAllowedByListeners")
    assert "more.example.com" not in served_paths(result)


def test_a_listener_sets_certificate_in_another_namespace_needs_a_grant_from_listener_sets() -> None:
    gw = allowing("All", [https("https", "gw.example.com", "cert")])
    gw["spec"]["listeners"][0]["tls"]["certificateRefs"][0]["namespace"] = "certs"
    listener = https("secure", "secure.example.com", "cert")
    listener["tls"]["certificateRefs"][0]["namespace"] = "certs"
    held = {("certs", "cert"): secret("cert", "secure.example.com", "certs")}
    grants = [reference_grant("certs", "Secret", "cert", from_kind="Gateway")]
    sets = [
        listener_set("granted", [listener]),
        listener_set("other", [dict(listener, hostname="o.example.com")], "team"),
    ]
    namespaces = [{"metadata": {"name": NS}}, {"metadata": {"name": "team"}}]

    def with_grants(found: list[JSON]) -> Translation:
        return translated(gw, sets, grants=found, namespaces=namespaces, secret=lambda ns, name: held.get((ns, name)))

    gateway_only = with_grants(grants)  # a grant to Gateways does not cover ListenerSets
    assert set_listeners(gateway_only, "granted")["secure"]["ResolvedRefs"] == ("False", "RefNotPermitted")
    assert set_conditions(gateway_only, "granted")["Accepted"] == ("False", "ListenersNotValid")
    both = with_grants([*grants, reference_grant("certs", "Secret", "cert", from_kind="ListenerSet")])
    assert set_conditions(both, "granted") == READY
    assert set_listeners(both, "granted")["secure"]["ResolvedRefs"] == ("True", "ResolvedRefs")
    assert set_conditions(both, "other", "team")["Accepted"] == ("False", "ListenersNotValid")  # the grant is for apps
    assert "apps/granted/secure" in [c.gateway for c in both.https_chains[""]]


def test_a_listener_set_on_another_classes_gateway_is_left_alone() -> None:
    result = translated(allowing(), [listener_set("extra", [http("more", "m.example.com")], parent="elsewhere")])
    assert result.listener_set_status == {}


def test_routes_of_every_namespace_a_listener_admits_share_its_own_hostname() -> None:
    """A listener's hostname that routes inherit (they declare none) is claimed for the listener's owner, which chose
    it and which namespaces may attach: routes of three namespaces serve it side by side."""
    sets = [listener_set("shared", [http("all", "all.example.net")])]
    routes = [
        route("mine", [on_set("shared")]),
        route("theirs", [on_set("shared")], namespace="team-b"),
        route("others", [on_set("shared")], namespace="team-c"),
    ]
    namespaces = [{"metadata": {"name": n}} for n in (NS, "team-b", "team-c")]
    result = translated(allowing("All"), sets, routes, namespaces=namespaces)
    assert served_paths(result)["all.example.net"] == {"/mine", "/theirs", "/others"}
    assert attached(result, "shared") == {"all": 3}
    assert route_parent(result, "others", "ListenerSet", "team-c") == ("True", "Accepted")


def test_a_listener_set_cannot_take_a_hostname_of_a_zone_another_namespace_manages() -> None:
    """An attacker's ListenerSet on a Gateway open to every namespace names a hostname in a zone a Zone of another
    namespace manages: no chain, no virtual host, no published name, for its routes or anyone's through it."""
    zone = {
        "metadata": {"name": "example", "namespace": "team-dns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"name": "example.com", "accountRef": {"name": "main"}},
        "status": {"cloudflareMetadata": {"zoneID": "example-id"}},
    }
    sets = [listener_set("grab", [http("victim", "shop.example.com")], namespace="attacker")]
    routes = [route("steal", [on_set("grab", namespace="attacker")], namespace="attacker")]
    namespaces = [{"metadata": {"name": n}} for n in (NS, "attacker", "team-dns")]
    result = translated(allowing("All"), sets, routes, namespaces=namespaces, zones=[zone])
    assert route_parent(result, "steal", "ListenerSet", "attacker") == ("False", "NotAllowedByListeners")
    assert "shop.example.com" not in served_paths(result)
    assert result.hostnames == []


def test_a_route_or_listener_set_change_reaches_the_tunnel_of_the_listener_sets_gateway() -> None:
    """The tunnel's ingress document and DNS records are rebuilt when a route naming a ListenerSet changes, or the
    ListenerSet itself: both map to the tunnel of the ListenerSet's Gateway."""
    from reconcilers.gateway.kinds import GATEWAY_CLASSES, GATEWAYS, HTTP_ROUTES, LISTENER_SETS
    from reconcilers.gateway.tunnels import TunnelOptions, TunnelPublisher
    from tests.dataplane.world import gateway_class
    from tests.unit.gateway.test_hostname_owners import PARAMETERS, TUNNEL, FakeContext

    sets = [listener_set("extra", [http("more", "more.example.com")])]
    ctx = FakeContext(
        {
            GATEWAY_CLASSES.kind: [gateway_class(parameters=PARAMETERS)],
            GATEWAYS.kind: [allowing("All")],
            LISTENER_SETS.kind: sets,
        }
    )
    inputs = TunnelPublisher(ctx, TunnelOptions("http://localhost:8080")).inputs()  # type: ignore[arg-type]
    tunnel = f"{TUNNEL[0]}/{TUNNEL[1]}"
    of_route, of_set = inputs[HTTP_ROUTES], inputs[LISTENER_SETS]
    assert callable(of_route)
    assert callable(of_set)
    assert of_route(route("web", [on_set("extra")])) == [tunnel]
    assert of_route(route("lost", [on_set("missing")])) == []
    assert of_set(sets[0]) == [tunnel]
    assert of_set(listener_set("elsewhere", [http("x", "x.example.com")], parent="other")) == []
