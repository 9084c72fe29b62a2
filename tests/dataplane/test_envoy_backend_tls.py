"""BackendTLSPolicies through a real Envoy to a real HTTPS backend: the policy's CA and names let the request
through (with the policy's hostname as SNI); another CA (the system trust store included), a name the certificate
does not carry, or a policy with no valid CA, and the request fails with a 5xx, never in plaintext."""

from __future__ import annotations

import base64
import datetime as dt
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.dataplane.world import NS, backend, gateway, http_route, meta, world
from tests.fixtures.envoy import DataPlane
from tests.helpers import eventually
from tests.unit.gateway.test_backend_tls import config_map, policy
from tests.unit.gateway.test_xds_mtls import CA

HOST = "tls.example.com"
NAME = "secure.internal"
URI = "spiffe://cluster.local/ns/apps/sa/secure"


def leaf(ca: CA, directory: Path) -> tuple[Path, Path]:
    """A server certificate for NAME (DNS) and URI, signed by `ca`."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, NAME)]))
        .issuer_name(ca.name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(NAME), x509.UniformResourceIdentifier(URI)]), critical=False
        )
        .sign(ca.key, hashes.SHA256())
    )
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


class _Handler(BaseHTTPRequestHandler):
    """Answers with what it saw of the request and its connection: the SNI, and the client certificate's name."""

    def do_GET(self) -> None:
        peer = self.connection.getpeercert() or {}  # type: ignore[attr-defined]
        client = dict(item for part in peer.get("subject", ()) for item in part).get("commonName")
        sni = getattr(self.connection, "sni", None)
        body = json.dumps({"backend": "secure", "path": self.path, "sni": sni, "client": client})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the handshakes the tests make fail on purpose


@pytest.fixture
def https_backend(tmp_path: Path) -> Iterator[tuple[int, CA]]:
    """An HTTPS server on loopback whose certificate the returned CA signed; it answers with the SNI it was sent."""
    ca = CA("backend-ca")
    cert, key = leaf(ca, tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    def remember_sni(sock: Any, name: str | None, _: ssl.SSLContext) -> None:
        sock.sni = name

    context.sni_callback = remember_sni
    server = _Server(("127.0.0.1", 0), _Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="https-backend")
    thread.start()
    try:
        yield server.server_address[1], ca
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def test_a_backend_tls_policy_verifies_the_backend_and_a_wrong_ca_or_name_fails(
    dataplane: DataPlane, https_backend: tuple[int, CA]
) -> None:
    port, ca = https_backend
    other_ca = CA("someone-else").pem.decode()
    cases = {
        "good": policy("good", "good", hostname=NAME),
        "uri-san": policy("uri-san", "uri-san", hostname=NAME, subjectAltNames=[{"type": "URI", "uri": URI}]),
        "wrong-ca": policy(
            "wrong-ca", "wrong-ca", hostname=NAME, refs=[{"group": "", "kind": "ConfigMap", "name": "other-ca"}]
        ),
        "wrong-name": policy("wrong-name", "wrong-name", hostname="other.internal"),
        "wrong-san": policy(
            "wrong-san", "wrong-san", hostname=NAME, subjectAltNames=[{"type": "URI", "uri": "spiffe://x/y"}]
        ),
        "no-ca": policy("no-ca", "no-ca", hostname=NAME, refs=[{"group": "", "kind": "ConfigMap", "name": "gone"}]),
        # The system trust store (which Envoy loads) does not hold the test's private CA.
        "system": policy("system", "system", hostname=NAME, refs=None, wellKnownCACertificates="System"),
    }
    maps = {
        ("apps", "backend-ca"): config_map("backend-ca", {"ca.crt": ca.pem.decode()}),
        ("apps", "other-ca"): config_map("other-ca", {"ca.crt": other_ca}),
    }
    rules = [
        {"matches": [{"path": {"type": "PathPrefix", "value": f"/{name}"}}], "backendRefs": [backend(name)]}
        for name in cases
    ]
    w = world(
        [http_route("secure", [HOST], rules)],
        dict.fromkeys(cases, port),
        backend_tls_policies=list(cases.values()),
        config_map=lambda namespace, name: maps.get((namespace, name)),
    )
    result = await dataplane.apply(w)
    accepted = {key[1]: entry[0]["conditions"][0]["status"] for key, entry in result.policy_ancestors.items()}
    assert accepted == {name: "False" if name == "no-ca" else "True" for name in cases}

    async def get(path: str) -> httpx.Response:
        async with httpx.AsyncClient(base_url=dataplane.url, timeout=10) as client:
            return await client.get(path, headers={"Host": HOST})

    async def through() -> bool:
        return (await get("/good")).status_code == 200

    await eventually(through, what="a request through the policy's TLS")
    reply = (await get("/good/x")).json()
    assert (reply["backend"], reply["path"], reply["sni"]) == ("secure", "/good/x", NAME)
    assert (await get("/uri-san")).status_code == 200
    for name in ("wrong-ca", "wrong-name", "wrong-san", "system"):
        failed = await get(f"/{name}")
        assert failed.status_code == 503, (name, failed.status_code, failed.text)
    assert (await get("/no-ca")).status_code == 500


@pytest.fixture
def mtls_backend(tmp_path: Path) -> Iterator[tuple[int, CA, CA]]:
    """An HTTPS server on loopback that requires a client certificate of the second CA, and answers with its name."""
    ca, clients = CA("backend-ca"), CA("client-ca")
    cert, key = leaf(ca, tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=clients.pem.decode())
    server = _Server(("127.0.0.1", 0), _Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="mtls-backend")
    thread.start()
    try:
        yield server.server_address[1], ca, clients
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def test_a_gateway_presents_its_client_certificate_to_a_backend_that_requires_one(
    dataplane: DataPlane, mtls_backend: tuple[int, CA, CA], tmp_path: Path
) -> None:
    """Two Gateways of one plane send to one backend over TLS: the one naming a client certificate
    (`spec.tls.backend.clientCertificateRef`) is let in, presenting that certificate; the other is refused by the
    backend (a 5xx), and says nothing of a certificate in its status."""
    port, ca, clients = mtls_backend
    cert, key = clients.issue(tmp_path / "client", "edge-client", server=False)
    secret = {
        "kind": "Secret",
        "metadata": meta("edge-client"),
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(cert.read_bytes()).decode(),
            "tls.key": base64.b64encode(key.read_bytes()).decode(),
        },
    }
    edge, plain = gateway("edge"), gateway("plain")
    edge["spec"]["tls"] = {"backend": {"clientCertificateRef": {"group": "", "kind": "Secret", "name": "edge-client"}}}
    rules = [{"backendRefs": [backend("mtls")]}]
    w = world(
        [
            http_route("with-cert", [HOST], rules),
            http_route("without", ["plain.example.com"], rules, parents=[{"name": "plain", "namespace": NS}]),
        ],
        {"mtls": port},
        gateways=[edge, plain],
        backend_tls_policies=[policy("mtls", "mtls", hostname=NAME)],
        config_map=lambda namespace, name: config_map("backend-ca", {"ca.crt": ca.pem.decode()}),
        secret=lambda namespace, name: secret if (namespace, name) == (NS, "edge-client") else None,
    )
    result = await dataplane.apply(w)
    statuses = result.gateway_status
    resolved = [c for c in statuses[(NS, "edge")]["conditions"] if c["type"] == "ResolvedRefs"]
    assert [(c["status"], c["reason"]) for c in resolved] == [("True", "ResolvedRefs")]
    assert not [c for c in statuses[(NS, "plain")]["conditions"] if c["type"] == "ResolvedRefs"]

    async def get(host: str) -> httpx.Response:
        async with httpx.AsyncClient(base_url=dataplane.url, timeout=10) as client:
            return await client.get("/", headers={"Host": host})

    async def through() -> bool:
        return (await get(HOST)).status_code == 200

    await eventually(through, what="a request presenting the Gateway's client certificate")
    assert (await get(HOST)).json()["client"] == "edge-client"
    refused = await get("plain.example.com")
    assert refused.status_code == 503, (refused.status_code, refused.text)
