"""A Gateway's client certificate validation (`spec.tls.frontend`): each HTTPS listener's chain checks clients
against the CAs of its port (a `perPort` entry, else the default), and a listener whose CAs do not resolve is not
served, with the reasons the upstream suite's GatewayInvalidFrontendClientCertificateValidation and
GatewayFrontendInvalidDefaultClientCertificateValidation cases read."""

from __future__ import annotations

from typing import Any

import pytest

from app.pki import CertificateAuthority
from reconcilers.gateway.translate import Translation
from tests.dataplane.world import NS, gateway, meta, reference_grant
from tests.unit.gateway.test_https_listeners import https, https_listener, secret, sni, translated

JSON = dict[str, Any]
DEFAULT_CA = CertificateAuthority.create("default clients").pem.decode()
PORT_CA = CertificateAuthority.create("8443 clients").pem.decode()


def ca_map(name: str, pem: str, namespace: str = NS) -> JSON:
    return {"kind": "ConfigMap", "metadata": meta(name, namespace), "data": {"ca.crt": pem}}


def ref(name: str, kind: str = "ConfigMap", namespace: str | None = None) -> JSON:
    out: JSON = {"group": "", "kind": kind, "name": name}
    if namespace is not None:
        out["namespace"] = namespace
    return out


def validating(listeners: list[JSON], default: list[JSON] | None, per_port: dict[int, list[JSON]], **mode: str) -> JSON:
    gw = gateway("edge", listeners)
    frontend: JSON = {"default": {"validation": {"caCertificateRefs": default, **mode}} if default else {}}
    if per_port:
        frontend["perPort"] = [
            {"port": port, "tls": {"validation": {"caCertificateRefs": refs, **mode}}}
            for port, refs in per_port.items()
        ]
    gw["spec"]["tls"] = {"frontend": frontend}
    return gw


def run(gw: JSON, maps: list[JSON], **extra: Any) -> Translation:
    held = {(m["metadata"]["namespace"], m["metadata"]["name"]): m for m in maps}
    secrets = [secret("site", "example.org")]
    return translated([gw], secrets, config_map=lambda namespace, name: held.get((namespace, name)), **extra)


def listener_conditions(result: Translation, name: str) -> dict[str, tuple[str, str]]:
    (found,) = [item for item in result.gateway_status[(NS, "edge")]["listeners"] if item["name"] == name]
    return {c["type"]: (c["status"], c["reason"]) for c in found["conditions"]}


def validation_of(result: Translation, server_name: str | None) -> JSON | None:
    listener = https_listener(result)
    assert listener is not None
    (chain,) = [c for c in listener["filter_chains"] if sni(c) == ([server_name] if server_name else None)]
    tls: JSON = chain["transport_socket"]["typed_config"]
    context = tls["common_tls_context"].get("validation_context")
    return None if context is None else {**context, "require": tls.get("require_client_certificate")}


def test_each_listener_checks_clients_against_the_cas_of_its_port() -> None:
    listeners = [https("https", None, "site"), https("https-with-hostname", "second-example.org", "site", port=8443)]
    gw = validating(listeners, [ref("default-ca")], {8443: [ref("port-ca")]})
    result = run(gw, [ca_map("default-ca", DEFAULT_CA), ca_map("port-ca", PORT_CA)])
    assert validation_of(result, None) == {"trusted_ca": {"inline_string": DEFAULT_CA.strip() + "\n"}, "require": True}
    assert validation_of(result, "second-example.org") == {
        "trusted_ca": {"inline_string": PORT_CA.strip() + "\n"},
        "require": True,
    }
    for name in ("https", "https-with-hostname"):
        assert listener_conditions(result, name)["ResolvedRefs"] == ("True", "ResolvedRefs")
    assert "InsecureFrontendValidationMode" not in {
        c["type"] for c in result.gateway_status[(NS, "edge")]["conditions"]
    }


def test_the_insecure_fallback_asks_for_a_certificate_lets_any_in_and_the_gateway_says_so() -> None:
    gw = validating([https("https", None, "site")], [ref("default-ca")], {}, mode="AllowInsecureFallback")
    result = run(gw, [ca_map("default-ca", DEFAULT_CA)])
    assert validation_of(result, None) == {
        "trusted_ca": {"inline_string": DEFAULT_CA.strip() + "\n"},
        "trust_chain_verification": "ACCEPT_UNTRUSTED",
        "require": False,
    }
    (said,) = [
        c for c in result.gateway_status[(NS, "edge")]["conditions"] if c["type"] == "InsecureFrontendValidationMode"
    ]
    assert (said["status"], said["reason"]) == ("True", "ConfigurationChanged")


@pytest.mark.parametrize(
    ("listener", "port", "refs", "reason"),
    [
        ("https-unresolved", 7443, [ref("non-exisitng-cm")], "InvalidCACertificateRef"),
        ("https-invalid-kind", 8443, [ref("infra-backend-v2", kind="Service")], "InvalidCACertificateKind"),
        ("https-grant-missing", 6443, [ref("web-backend-cm", namespace="web")], "RefNotPermitted"),
    ],
)
def test_a_listener_whose_cas_do_not_resolve_is_not_served_and_says_why(
    listener: str, port: int, refs: list[JSON], reason: str
) -> None:
    listeners = [https("https", None, "site"), https(listener, f"{port}.example.org", "site", port=port)]
    gw = validating(listeners, [ref("default-ca")], {port: refs})
    result = run(gw, [ca_map("default-ca", DEFAULT_CA), ca_map("web-backend-cm", PORT_CA, "web")])
    assert listener_conditions(result, "https")["Accepted"] == ("True", "Accepted")
    conditions = listener_conditions(result, listener)
    assert conditions["ResolvedRefs"] == ("False", reason)
    assert conditions["Accepted"] == ("False", "NoValidCACertificate")
    assert conditions["Programmed"][0] == "False"
    https_chains = https_listener(result)
    assert https_chains is not None
    assert [sni(c) for c in https_chains["filter_chains"]] == [None]  # the refused listener has no chain


def test_a_reference_grant_lets_a_listener_check_against_another_namespaces_ca() -> None:
    grant = reference_grant("web", "ConfigMap", "web-backend-cm")
    gw = validating([https("https", None, "site")], [ref("web-backend-cm", namespace="web")], {})
    result = run(gw, [ca_map("web-backend-cm", PORT_CA, "web")], grants=[grant])
    assert listener_conditions(result, "https")["ResolvedRefs"] == ("True", "ResolvedRefs")
    assert validation_of(result, None) is not None


def test_an_invalid_default_leaves_the_http_listener_alone() -> None:
    listeners = [https("https", None, "site"), {"name": "http", "protocol": "HTTP", "port": 80}]
    gw = validating(listeners, [ref("does-not-exist")], {80: [ref("default-ca")]})
    result = run(gw, [ca_map("default-ca", DEFAULT_CA)])
    assert listener_conditions(result, "http")["Accepted"] == ("True", "Accepted")
    assert listener_conditions(result, "http")["ResolvedRefs"] == ("True", "ResolvedRefs")
    assert listener_conditions(result, "https")["Accepted"] == ("False", "NoValidCACertificate")
    assert https_listener(result) is None  # nothing to serve over TLS: no TLS listener at all
