"""The data plane's TLS listener for clients reaching it directly: one filter chain per HTTPS listener hostname, with
that listener's certificate, and none of it for a listener whose certificate does not resolve."""

from __future__ import annotations

import base64
import functools
from typing import Any

from app.pki import CertificateAuthority
from app.xds_encoding import Encoder
from reconcilers.gateway import envoy
from reconcilers.gateway.controller import GatewayOptions
from reconcilers.gateway.planes import Plane, choose
from reconcilers.gateway.translate import Translation, translate
from reconcilers.gateway.xds import https_listeners
from tests.dataplane.world import CLASS_NAME, NS, backend, gateway, http_route, meta, world

JSON = dict[str, Any]
OPTIONS = GatewayOptions("0.0.0.0", 8080, tls_port=8443, https_port=10443)  # noqa: S104 (a listen address)


@functools.cache
def certificate(name: str) -> tuple[str, str]:
    """(cert PEM, key PEM) of a certificate for `name`."""
    key, cert = CertificateAuthority.create(f"{name} CA").issue(name, hosts=[name], server=True)
    return cert.decode(), key.decode()


def secret(name: str, host: str, namespace: str = NS) -> JSON:
    cert, key = certificate(host)
    data = {"tls.crt": base64.b64encode(cert.encode()).decode(), "tls.key": base64.b64encode(key.encode()).decode()}
    return {"kind": "Secret", "metadata": meta(name, namespace), "type": "kubernetes.io/tls", "data": data}


def https(name: str, hostname: str | None, cert: str, port: int = 443) -> JSON:
    out: JSON = {
        "name": name,
        "protocol": "HTTPS",
        "port": port,
        "tls": {"mode": "Terminate", "certificateRefs": [{"name": cert}]},
        "allowedRoutes": {"namespaces": {"from": "All"}},
    }
    if hostname is not None:
        out["hostname"] = hostname
    return out


def dated(gw: JSON, created: str) -> JSON:
    gw["metadata"]["creationTimestamp"] = created
    return gw


def translated(
    gateways: list[JSON], secrets: list[JSON], routes: list[JSON] | None = None, **extra: Any
) -> Translation:
    held = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in secrets}
    w = world(routes or [], {"alpha": 8001}, gateways=gateways, secret=lambda ns, name: held.get((ns, name)), **extra)
    return translate(w)


def https_listener(result: Translation, plane: str = "") -> JSON | None:
    found = [
        entry
        for entry in OPTIONS.listeners(result.https_chains.get(plane, ()))
        if entry["name"] == https_listeners.GATEWAY_HTTPS
    ]
    return found[0] if found else None


def served(chain: JSON) -> tuple[str, str]:
    """(certificate, key) a filter chain presents."""
    tls = chain["transport_socket"]["typed_config"]["common_tls_context"]
    (pair,) = tls["tls_certificates"]
    return pair["certificate_chain"]["inline_string"], pair["private_key"]["inline_string"]


def sni(chain: JSON) -> list[str] | None:
    match: JSON | None = chain.get("filter_chain_match")
    return None if match is None else list(match["server_names"])


def test_each_https_listener_hostname_gets_a_chain_with_its_own_certificate() -> None:
    listeners = [
        https("one", "example.org", "one-cert"),
        https("two", "*.second-example.org", "two-cert"),
        {"name": "http", "protocol": "HTTP", "port": 80},
    ]
    result = translated(
        [gateway("edge", listeners)],
        [secret("one-cert", "example.org"), secret("two-cert", "*.second-example.org")],
    )
    listener = https_listener(result)
    assert listener is not None
    assert listener["address"]["socket_address"] == {"address": "0.0.0.0", "port_value": 10443}  # noqa: S104
    chains = {tuple(sni(c) or ()): c for c in listener["filter_chains"]}
    assert set(chains) == {("example.org",), ("*.second-example.org",)}
    assert served(chains[("example.org",)]) == certificate("example.org")
    assert served(chains[("*.second-example.org",)]) == certificate("*.second-example.org")
    # The SNI is read before a chain is chosen.
    assert [f["name"] for f in listener["listener_filters"]] == ["envoy.filters.listener.tls_inspector"]
    for chain in listener["filter_chains"]:
        tls = chain["transport_socket"]["typed_config"]["common_tls_context"]
        assert tls["alpn_protocols"] == ["h2", "http/1.1"]
        (hcm,) = chain["filters"]
        config = hcm["typed_config"]
        # The same routes as cloudflared's listeners, but the client's scheme and address are the connection's.
        assert config["rds"]["route_config_name"] == envoy.INGRESS
        assert (config["use_remote_address"], config["xff_num_trusted_hops"]) == (True, 0)


def test_a_listener_without_hostname_gives_the_default_chain() -> None:
    listeners = [https("named", "example.org", "named-cert"), https("any", None, "any-cert", port=8443)]
    result = translated(
        [gateway("edge", listeners)], [secret("named-cert", "example.org"), secret("any-cert", "default.example")]
    )
    listener = https_listener(result)
    assert listener is not None
    by_sni = {tuple(sni(c) or ("<default>",)): c for c in listener["filter_chains"]}
    assert set(by_sni) == {("example.org",), ("<default>",)}
    assert served(by_sni[("<default>",)]) == certificate("default.example")


def test_a_name_claimed_twice_goes_to_the_oldest_gateway_and_envoy_gets_it_once() -> None:
    young = dated(
        gateway("young", [https("a", "example.org", "young-cert"), https("b", None, "young-cert")]),
        "2026-02-01T00:00:00Z",
    )
    old = dated(
        gateway("old", [https("a", "example.org", "old-cert"), https("b", None, "old-cert")]), "2026-01-01T00:00:00Z"
    )
    result = translated([young, old], [secret("young-cert", "young.example"), secret("old-cert", "old.example")])
    listener = https_listener(result)
    assert listener is not None
    names = [tuple(sni(c) or ()) for c in listener["filter_chains"]]
    assert sorted(names) == [(), ("example.org",)]  # one chain per name, one default chain
    for chain in listener["filter_chains"]:
        assert served(chain) == certificate("old.example")
    # Within one Gateway, the first listener claiming a name keeps it.
    first = gateway("edge", [https("a", "example.org", "old-cert"), https("b", "example.org", "young-cert", port=8443)])
    (chain,) = translated(
        [first], [secret("young-cert", "young.example"), secret("old-cert", "old.example")]
    ).https_chains[""]
    assert chain.gateway == f"{NS}/edge/a"


def test_no_listener_without_a_certificate_to_serve() -> None:
    # An HTTPS listener whose Secret is missing is not valid, and an HTTP one has no certificate.
    missing = gateway("edge", [https("a", "example.org", "absent"), {"name": "http", "protocol": "HTTP", "port": 80}])
    result = translated([missing], [])
    assert result.https_chains == {}
    assert [entry["name"] for entry in OPTIONS.listeners(result.https_chains.get("", ()))] == [
        envoy.INGRESS,
        envoy.INGRESS_TLS,
    ]
    # A malformed Secret neither.
    broken = secret("broken", "example.org")
    broken["data"]["tls.key"] = base64.b64encode(b"not a key").decode()
    assert translated([gateway("edge", [https("a", "example.org", "broken")])], [broken]).https_chains == {}
    # Nor with the listener turned off.
    result = translated([gateway("edge", [https("a", "example.org", "c")])], [secret("c", "example.org")])
    assert result.https_chains
    off = GatewayOptions("0.0.0.0", 8080)  # noqa: S104
    assert [e["name"] for e in off.listeners(result.https_chains[""])] == [envoy.INGRESS]


def test_a_route_change_leaves_the_listener_as_it_is() -> None:
    listeners = [https("a", "example.org", "c"), {"name": "http", "protocol": "HTTP", "port": 80}]
    before = translated(
        [gateway("edge", listeners)],
        [secret("c", "example.org")],
        [http_route("web", ["example.org"], [{"backendRefs": [backend("alpha")]}])],
    )
    after = translated(
        [gateway("edge", listeners)],
        [secret("c", "example.org")],
        [
            http_route("web", ["example.org"], [{"backendRefs": [backend("alpha")]}]),
            http_route(
                "more",
                ["example.org"],
                [{"matches": [{"path": {"type": "PathPrefix", "value": "/x"}}], "backendRefs": [backend("alpha")]}],
            ),
        ],
    )
    assert before.resources["routes"] != after.resources["routes"]
    assert https_listener(before) == https_listener(after)


def test_a_gateway_with_a_plane_of_its_own_is_served_its_certificates_there_only() -> None:
    params = {"kind": "GatewayParameters", "metadata": meta("own"), "spec": {"accountRef": {"name": "acct"}}}
    own = gateway("own", [https("a", "own.example.org", "own-cert")])
    own["metadata"]["uid"] = "uid-own"
    own["spec"]["infrastructure"] = {
        "parametersRef": {"group": "kflare.dev", "kind": "GatewayParameters", "name": "own"}
    }
    shared = gateway("edge", [https("a", "shared.example.org", "shared-cert")])
    choices = choose([own, shared], [params], {CLASS_NAME}, cap=1)
    plane = choices[(NS, "own")]
    assert isinstance(plane, Plane)
    result = translated(
        [own, shared],
        [secret("own-cert", "own.example.org"), secret("shared-cert", "shared.example.org")],
        planes=choices,
    )
    assert [c.server_name for c in result.https_chains[""]] == ["shared.example.org"]
    assert [c.server_name for c in result.https_chains[plane.cluster]] == ["own.example.org"]


def test_the_listener_encodes_for_envoy_and_a_chain_never_prints_its_key() -> None:
    result = translated(
        [gateway("edge", [https("a", "example.org", "c"), https("b", None, "c", port=8443)])],
        [secret("c", "example.org")],
    )
    listener = https_listener(result)
    assert listener is not None
    encoder = Encoder()
    encoder.encode(1, {key: {} for key in envoy.TYPES} | {"listeners": {listener["name"]: listener}})
    assert encoder.failures == []
    (chain, *_) = result.https_chains[""]
    assert "PRIVATE KEY" not in repr(chain)
    assert "PRIVATE KEY" not in repr(result.https_chains)


def test_a_listener_for_a_name_its_namespace_may_not_publish_gets_no_chain() -> None:
    """A team's HTTPS listener for a name in another team's Zone (that grants it nothing) serves no certificate for
    it: the owner's own listener keeps the name, whichever Gateway is older."""
    from tests.unit.gateway.test_hostname_owners import OWNER, namespace, zone

    intruder = dated(gateway("intruder", [https("https", "shop.example.com", "fake")]), "2025-01-01T00:00:00Z")
    owner = gateway("edge", [https("https", "shop.example.com", "real")], namespace=OWNER)
    result = translated(
        [intruder, owner],
        [secret("fake", "shop.example.com"), secret("real", "shop.example.com", OWNER)],
        zones=[zone()],
        namespaces=[namespace(NS), namespace(OWNER)],
    )
    listener = https_listener(result)
    assert listener is not None
    (chain,) = listener["filter_chains"]
    assert sni(chain) == ["shop.example.com"]
    assert served(chain)[0] == certificate("shop.example.com")[0]
    assert result.https_chains[""][0].gateway == f"{OWNER}/edge/https"


def test_a_listener_without_hostname_is_the_default_chain_only_for_a_namespace_that_may_publish_every_name() -> None:
    """Under the suffix policy, a labelled team's HTTPS listener without hostname would be the shared plane's default
    chain, shown to clients asking for any other team's names: it gets no chain; a listener for a name under its
    label keeps its own."""
    from tests.unit.gateway.test_hostname_owners import namespace

    label = "tenant/host"
    team = gateway("team", [https("any", None, "cert"), https("own", "a.t.example.org", "cert")])
    result = translated(
        [team],
        [secret("cert", "a.t.example.org")],
        namespaces=[namespace(NS, **{label: "t.example.org"})],
        tenancy_label=label,
    )
    assert [chain.server_name for chain in result.https_chains[""]] == ["a.t.example.org"]
    without_policy = translated([team], [secret("cert", "a.t.example.org")])
    assert [chain.server_name for chain in without_policy.https_chains[""]] == ["a.t.example.org", None]
