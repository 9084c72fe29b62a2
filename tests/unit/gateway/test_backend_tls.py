"""BackendTLSPolicies in the translation: the TLS of the clusters to the Services they target, which policy wins a
port, failing closed when a policy cannot be honoured, and each policy's status per Gateway."""

from __future__ import annotations

from typing import Any

import pytest

from reconcilers.gateway.gatewayapi.policies import SYSTEM_CA_FILE
from reconcilers.gateway.kinds import CONTROLLER_NAME, GATEWAY_GROUP
from reconcilers.gateway.translate import Translation, World, translate
from tests.dataplane.world import NS, backend, grpc_route, http_route, meta, world
from tests.unit.gateway.test_xds_mtls import CA

CA_PEM = CA("backend-ca").pem.decode()
JSON = dict[str, Any]


def config_map(name: str = "backend-ca", data: dict[str, str] | None = None) -> JSON:
    return {"kind": "ConfigMap", "metadata": meta(name), "data": {"ca.crt": CA_PEM} if data is None else data}


def policy(
    name: str = "tls",
    service: str = "alpha",
    *,
    section: str | None = None,
    hostname: str = "alpha.internal",
    refs: list[JSON] | None = None,
    created: str = "2026-01-01T00:00:00Z",
    **validation: Any,
) -> JSON:
    target: JSON = {"group": "", "kind": "Service", "name": service}
    if section is not None:
        target["sectionName"] = section
    if refs is None and "wellKnownCACertificates" not in validation:
        refs = [{"group": "", "kind": "ConfigMap", "name": "backend-ca"}]
    spec_validation: JSON = {"hostname": hostname, **validation}
    if refs is not None:
        spec_validation["caCertificateRefs"] = refs
    return {
        "kind": "BackendTLSPolicy",
        "metadata": meta(name, created=created),
        "spec": {"targetRefs": [target], "validation": spec_validation},
    }


def tls_world(
    policies: list[JSON], maps: list[JSON] | None = None, rules: list[JSON] | None = None, **extra: Any
) -> World:
    listed = [config_map()] if maps is None else maps
    found = {(m["metadata"]["namespace"], m["metadata"]["name"]): m for m in listed}
    routes = [http_route("web", ["web.example.com"], rules or [{"backendRefs": [backend("alpha")]}])]
    return world(
        routes,
        {"alpha": 9443, "beta": 9444},
        backend_tls_policies=policies,
        config_map=lambda namespace, name: found.get((namespace, name)),
        **extra,
    )


def cluster(result: Translation, prefix: str) -> JSON:
    found = [c for c in result.resources["clusters"] if c["name"].startswith(prefix)]
    assert len(found) == 1, [c["name"] for c in result.resources["clusters"]]
    return found[0]


def tls_context(result: Translation, prefix: str = f"{NS}/alpha:80") -> JSON:
    return cluster(result, prefix)["transport_socket"]["typed_config"]


def ancestors(result: Translation, name: str = "tls") -> list[JSON]:
    return list(result.policy_ancestors[(NS, name)])


def conditions(result: Translation, name: str = "tls") -> dict[str, tuple[str, str]]:
    (entry,) = ancestors(result, name)
    return {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}


def route_action(result: Translation) -> JSON:
    (vhost,) = result.resources["routes"][0]["virtual_hosts"]
    return dict(vhost["routes"][0])


def test_a_valid_policy_makes_the_cluster_speak_tls_with_its_hostname_as_sni_and_san() -> None:
    result = translate(tls_world([policy()]))
    context = tls_context(result)
    assert context["sni"] == "alpha.internal"
    validation = context["common_tls_context"]["validation_context"]
    assert validation["trusted_ca"] == {"inline_string": CA_PEM.strip() + "\n"}
    assert validation["match_typed_subject_alt_names"] == [{"san_type": "DNS", "matcher": {"exact": "alpha.internal"}}]
    assert route_action(result)["route"]["cluster"] == cluster(result, f"{NS}/alpha:80")["name"]
    (entry,) = ancestors(result)
    assert entry["ancestorRef"] == {"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": NS, "name": "edge"}
    assert entry["controllerName"] == CONTROLLER_NAME
    assert conditions(result) == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}
    assert all(c["observedGeneration"] == 1 for c in entry["conditions"])


def test_subject_alt_names_replace_the_hostname_in_the_certificate_check() -> None:
    sans = [{"type": "Hostname", "hostname": "a.internal"}, {"type": "URI", "uri": "spiffe://cluster/ns/apps/sa/a"}]
    result = translate(tls_world([policy(subjectAltNames=sans)]))
    context = tls_context(result)
    assert context["sni"] == "alpha.internal"
    assert context["common_tls_context"]["validation_context"]["match_typed_subject_alt_names"] == [
        {"san_type": "DNS", "matcher": {"exact": "a.internal"}},
        {"san_type": "URI", "matcher": {"exact": "spiffe://cluster/ns/apps/sa/a"}},
    ]


def test_the_system_trust_store_is_the_images_ca_bundle() -> None:
    result = translate(tls_world([policy(refs=None, wellKnownCACertificates="System")], maps=[]))
    assert tls_context(result)["common_tls_context"]["validation_context"]["trusted_ca"] == {"filename": SYSTEM_CA_FILE}
    assert conditions(result)["Accepted"] == ("True", "Accepted")


def test_a_grpc_backend_over_tls_asks_for_h2_in_alpn() -> None:
    w = tls_world([policy()])
    w.http_routes = []
    w.grpc_routes = [grpc_route("rpc", ["rpc.example.com"], [{"backendRefs": [backend("alpha")]}])]
    result = translate(w)
    found = cluster(result, f"{NS}/alpha:80")
    assert found["name"].endswith("/h2")
    assert found["transport_socket"]["typed_config"]["common_tls_context"]["alpn_protocols"] == ["h2"]
    assert "http2_protocol_options" in str(found["typed_extension_protocol_options"])


@pytest.mark.parametrize(
    ("maps", "refs", "reason", "named"),
    [
        ([], None, "InvalidCACertificateRef", "ConfigMap apps/backend-ca not found"),
        ([config_map(data={"other": CA_PEM})], None, "InvalidCACertificateRef", "has no ca.crt"),
        ([config_map(data={"ca.crt": "not a certificate"})], None, "InvalidCACertificateRef", "not a PEM certificate"),
        ([], [{"group": "invalid.io", "kind": "InvalidKind", "name": "x"}], "InvalidKind", "only ConfigMaps"),
    ],
)
def test_a_policy_without_a_valid_ca_is_not_accepted_and_its_backend_fails_closed(
    maps: list[JSON], refs: list[JSON] | None, reason: str, named: str
) -> None:
    result = translate(tls_world([policy(refs=refs)], maps=maps))
    assert conditions(result) == {"Accepted": ("False", "NoValidCACertificate"), "ResolvedRefs": ("False", reason)}
    (entry,) = ancestors(result)
    assert named in next(c["message"] for c in entry["conditions"] if c["type"] == "ResolvedRefs")
    # Never plaintext: the backend's requests get a 500, and the route itself stays accepted and resolved.
    assert route_action(result)["direct_response"] == {"status": 500}
    assert not [c for c in result.resources["clusters"] if c["name"].startswith(f"{NS}/alpha")]
    (parent,) = result.route_parents[("HTTPRoute", NS, "web")]
    assert {c["type"]: c["status"] for c in parent["conditions"]} == {"Accepted": "True", "ResolvedRefs": "True"}


def test_a_failed_closed_backend_of_a_split_gets_its_share_as_503s() -> None:
    rules = [{"backendRefs": [backend("alpha", weight=1), backend("beta", weight=1)]}]
    result = translate(tls_world([policy()], maps=[], rules=rules))
    clusters = route_action(result)["route"]["weighted_clusters"]["clusters"]
    assert [c["name"] for c in clusters] == ["kflare-unresolved", f"{NS}/beta:80"]


def test_one_invalid_ca_ref_beside_a_valid_one_is_reported_but_the_policy_is_accepted() -> None:
    refs = [
        {"group": "", "kind": "ConfigMap", "name": "backend-ca"},
        {"group": "", "kind": "ConfigMap", "name": "missing"},
    ]
    result = translate(tls_world([policy(refs=refs)]))
    assert conditions(result) == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("False", "InvalidCACertificateRef"),
    }
    assert "inline_string" in tls_context(result)["common_tls_context"]["validation_context"]["trusted_ca"]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"refs": None, "wellKnownCACertificates": "example.com/private"}, "wellKnownCACertificates"),
        ({"options": {"example.com/min-version": "1.3"}}, "options.example.com/min-version"),
    ],
)
def test_what_the_data_plane_cannot_honour_makes_the_policy_invalid(extra: JSON, named: str) -> None:
    options = extra.pop("options", None)
    found = policy(**extra)
    if options:
        found["spec"]["options"] = options
    result = translate(tls_world([found]))
    assert conditions(result)["Accepted"] == ("False", "Invalid")
    (entry,) = ancestors(result)
    assert named in entry["conditions"][0]["message"]
    assert route_action(result)["direct_response"] == {"status": 500}


def test_the_older_policy_wins_a_conflict_and_the_other_is_conflicted() -> None:
    newer = policy("a-newer", hostname="newer.internal", created="2026-01-02T00:00:00Z")
    older = policy("z-older", hostname="older.internal", created="2026-01-01T00:00:00Z")
    result = translate(tls_world([newer, older]))
    assert tls_context(result)["sni"] == "older.internal"
    assert conditions(result, "z-older")["Accepted"] == ("True", "Accepted")
    assert conditions(result, "a-newer")["Accepted"] == ("False", "Conflicted")
    (entry,) = ancestors(result, "a-newer")
    assert "apps/z-older" in entry["conditions"][0]["message"]


def test_a_conflict_between_policies_of_the_same_age_goes_to_the_first_by_name() -> None:
    result = translate(tls_world([policy("second", hostname="b.internal"), policy("first", hostname="a.internal")]))
    assert tls_context(result)["sni"] == "a.internal"
    assert conditions(result, "second")["Accepted"] == ("False", "Conflicted")


def test_a_policy_naming_a_port_wins_that_port_and_one_for_the_whole_service_takes_the_others() -> None:
    two_ports = {
        "kind": "Service",
        "metadata": meta("multi"),
        "spec": {"ports": [{"name": "https-1", "port": 443}, {"name": "https-2", "port": 8443}]},
    }
    rules = [
        {"matches": [{"path": {"value": "/one"}}], "backendRefs": [backend("multi", 443)]},
        {"matches": [{"path": {"value": "/two"}}], "backendRefs": [backend("multi", 8443)]},
    ]
    policies = [
        policy("by-port", "multi", section="https-1", hostname="one.internal", created="2026-01-02T00:00:00Z"),
        policy("whole", "multi", hostname="whole.internal"),
    ]
    result = translate(tls_world(policies, rules=rules, services=[two_ports]))
    assert tls_context(result, f"{NS}/multi:443")["sni"] == "one.internal"
    assert tls_context(result, f"{NS}/multi:8443")["sni"] == "whole.internal"
    assert conditions(result, "by-port")["Accepted"] == ("True", "Accepted")
    assert conditions(result, "whole")["Accepted"] == ("True", "Accepted")


def test_a_policy_no_route_of_the_class_uses_has_no_ancestor_and_others_are_plaintext() -> None:
    result = translate(tls_world([policy("unused", "beta")]))
    assert ancestors(result, "unused") == []
    assert "transport_socket" not in cluster(result, f"{NS}/alpha:80")


def test_a_mirror_to_a_targeted_service_speaks_tls_too() -> None:
    rules = [
        {
            "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": backend("beta")}}],
            "backendRefs": [backend("alpha")],
        }
    ]
    result = translate(tls_world([policy("mirror", "beta", hostname="beta.internal")], rules=rules))
    assert tls_context(result, f"{NS}/beta:80")["sni"] == "beta.internal"
    assert conditions(result, "mirror")["Accepted"] == ("True", "Accepted")
