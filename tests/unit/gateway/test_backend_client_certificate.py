"""A Gateway's backend client certificate (`spec.tls.backend.clientCertificateRef`) in the translation: presented by
the clusters its routes send to over TLS, and only theirs; the Gateway's ResolvedRefs when the reference does not
resolve, as the upstream suite's GatewayInvalidTLSBackendConfiguration cases make it."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from reconcilers.gateway.translate import Translation, translate
from tests.dataplane.world import NS, backend, gateway, http_route, meta, reference_grant
from tests.unit.gateway.test_backend_tls import policy, tls_world
from tests.unit.gateway.test_xds_mtls import CA

JSON = dict[str, Any]


@pytest.fixture(scope="module")
def client_secret(tmp_path_factory: pytest.TempPathFactory) -> JSON:
    cert, key = CA("client-ca").issue(Path(tmp_path_factory.mktemp("client")), "edge-client", server=False)
    data = {
        "tls.crt": base64.b64encode(cert.read_bytes()).decode(),
        "tls.key": base64.b64encode(key.read_bytes()).decode(),
    }
    return {"kind": "Secret", "metadata": meta("edge-client"), "type": "kubernetes.io/tls", "data": data}


def with_client(ref: JSON | None, secrets: dict[tuple[str, str], JSON], **extra: Any) -> Translation:
    edge = gateway("edge")
    if ref is not None:
        edge["spec"]["tls"] = {"backend": {"clientCertificateRef": ref}}
    return translate(
        tls_world([policy()], gateways=[edge], secret=lambda namespace, name: secrets.get((namespace, name)), **extra)
    )


def resolved(result: Translation) -> list[tuple[str, str]]:
    return [
        (c["status"], c["reason"])
        for c in result.gateway_status[(NS, "edge")]["conditions"]
        if c["type"] == "ResolvedRefs"
    ]


def accepted(result: Translation) -> tuple[str, str]:
    (found,) = [c for c in result.gateway_status[(NS, "edge")]["conditions"] if c["type"] == "Accepted"]
    return found["status"], found["reason"]


def tls_clusters(result: Translation) -> dict[str, JSON]:
    return {
        c["name"]: c["transport_socket"]["typed_config"]["common_tls_context"]
        for c in result.resources["clusters"]
        if "transport_socket" in c
    }


def test_the_clusters_of_a_gateways_tls_backends_present_its_certificate(client_secret: JSON) -> None:
    result = with_client({"group": "", "kind": "Secret", "name": "edge-client"}, {(NS, "edge-client"): client_secret})
    assert resolved(result) == [("True", "ResolvedRefs")]
    ((name, context),) = tls_clusters(result).items()
    assert name.endswith(f"/client/{NS}/edge-client")
    (presented,) = context["tls_certificates"]
    assert (
        presented["certificate_chain"]["inline_string"] == base64.b64decode(client_secret["data"]["tls.crt"]).decode()
    )
    assert presented["private_key"]["inline_string"] == base64.b64decode(client_secret["data"]["tls.key"]).decode()


def test_a_gateway_naming_no_certificate_presents_none_and_has_no_resolved_refs(client_secret: JSON) -> None:
    result = with_client(None, {(NS, "edge-client"): client_secret})
    assert resolved(result) == []
    ((name, context),) = tls_clusters(result).items()
    assert "/client/" not in name
    assert "tls_certificates" not in context


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ({"group": "", "kind": "Secret", "name": "nonexistent"}, "InvalidClientCertificateRef"),
        ({"group": "wrong.group.company.io", "kind": "Secret", "name": "edge-client"}, "InvalidClientCertificateRef"),
        ({"group": "", "kind": "WrongKind", "name": "edge-client"}, "InvalidClientCertificateRef"),
        ({"group": "", "kind": "Secret", "name": "malformed"}, "InvalidClientCertificateRef"),
        ({"group": "", "kind": "Secret", "name": "edge-client", "namespace": "elsewhere"}, "RefNotPermitted"),
    ],
    ids=["missing", "group", "kind", "malformed", "no-grant"],
)
def test_a_reference_that_does_not_resolve_is_said_and_the_gateway_stays_accepted(
    client_secret: JSON, ref: JSON, reason: str
) -> None:
    malformed = {"kind": "Secret", "metadata": meta("malformed"), "type": "Opaque", "data": {}}
    secrets = {
        (NS, "edge-client"): client_secret,
        (NS, "malformed"): malformed,
        ("elsewhere", "edge-client"): client_secret,
    }
    result = with_client(ref, secrets)
    assert resolved(result) == [("False", reason)]
    assert accepted(result) == ("True", "Accepted")
    ((_, context),) = tls_clusters(result).items()
    assert "tls_certificates" not in context  # the backend is still spoken to, without a certificate


def test_another_namespaces_certificate_is_presented_once_a_reference_grant_lets_the_gateway_in(
    client_secret: JSON,
) -> None:
    grant = reference_grant("elsewhere", "Secret", "edge-client")
    ref = {"group": "", "kind": "Secret", "name": "edge-client", "namespace": "elsewhere"}
    result = with_client(ref, {("elsewhere", "edge-client"): client_secret}, grants=[grant])
    assert resolved(result) == [("True", "ResolvedRefs")]
    ((name, context),) = tls_clusters(result).items()
    assert name.endswith("/client/elsewhere/edge-client")
    assert context["tls_certificates"]


def test_two_gateways_of_one_plane_presenting_different_certificates_get_a_cluster_each(client_secret: JSON) -> None:
    edge, plain = gateway("edge"), gateway("plain")
    edge["spec"]["tls"] = {"backend": {"clientCertificateRef": {"name": "edge-client"}}}
    rules = [{"backendRefs": [backend("alpha")]}]
    routes = [
        http_route("a", ["a.example.com"], rules),
        http_route("b", ["b.example.com"], rules, parents=[{"name": "plain", "namespace": NS}]),
    ]
    w = tls_world([policy()], gateways=[edge, plain], secret=lambda namespace, name: client_secret)
    w.http_routes = routes
    names = sorted(tls_clusters(translate(w)))
    assert len(names) == 2
    assert names[1] == names[0] + f"/client/{NS}/edge-client"
