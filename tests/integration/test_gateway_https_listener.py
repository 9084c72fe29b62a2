"""Clients reaching the data plane directly (in the cluster, through its Service) get each HTTPS listener's own
certificate, chosen by SNI: `kflare run --gateway-enabled` against the API server, a real Envoy on its xDS, and TLS
clients that check the certificate they are served against the listener's CA."""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio.client.api_client import ApiClient

from app.controlplane import CertificateAuthority, ControlPlane, free_port
from reconcilers.gateway import envoy
from reconcilers.gateway.kinds import GATEWAY_GROUP
from tests.fixtures.controller import controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.envoy import _Thread, echo_app, running_envoy
from tests.helpers import eventually
from tests.integration.test_gateway_class import V1, Gateways, gateway_manifest, new_class

pytestmark = pytest.mark.integration


@dataclass
class Plane:
    http_port: int
    https_port: int
    backends: dict[str, int]


@pytest.fixture(scope="module")
def direct_plane(
    control_plane: ControlPlane,
    emulator: EmulatorProcess,
    kflare_crds: None,
    gateway_api: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Plane]:
    workdir = tmp_path_factory.mktemp("gateway-https")
    token = workdir / "xds-token"
    token.write_text(uuid.uuid4().hex)
    xds_port, http_port, https_port = free_port(), free_port(), free_port()
    servers = _Thread()
    backends = {name: free_port() for name in ("secure", "plain")}
    for name, port in backends.items():
        servers.serve(echo_app(name, []), port)
    args = (
        "--gateway-enabled=true",
        f"--gateway-xds-bind-address=127.0.0.1:{xds_port}",
        f"--gateway-xds-token-file={token}",
        f"--gateway-data-plane-address=127.0.0.1:{http_port}",
        "--gateway-data-plane-tls-port=0",
        f"--gateway-data-plane-https-port={https_port}",
    )
    bootstrap = envoy.bootstrap(
        node_id="it-https", xds_host="127.0.0.1", xds_port=xds_port, token=token.read_text(), admin_port=free_port()
    )
    try:
        with controller_process(control_plane, emulator, workdir, *args), running_envoy(bootstrap):
            yield Plane(http_port, https_port, backends)
    finally:
        servers.stop()


@pytest.fixture
def gw(kube: ApiClient) -> Gateways:
    return Gateways(kube)


@dataclass(frozen=True)
class Certificate:
    ca: bytes
    cert: bytes
    key: bytes


def certificate(host: str) -> Certificate:
    authority = CertificateAuthority.create(f"{host} CA")
    key, cert = authority.issue(host, hosts=[host], server=True)
    return Certificate(authority.pem, cert, key)


async def tls_secret(gw: Gateways, namespace: str, name: str, made: Certificate) -> None:
    data = {"tls.crt": base64.b64encode(made.cert).decode(), "tls.key": base64.b64encode(made.key).decode()}
    body = {"metadata": {"name": name}, "type": "kubernetes.io/tls", "data": data}
    await gw.core.create_namespaced_secret(namespace, body)


def https_listener(name: str, hostname: str | None, secret: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "protocol": "HTTPS",
        "port": 443,
        "tls": {"mode": "Terminate", "certificateRefs": [{"name": secret}]},
    }
    if hostname is not None:
        out["hostname"] = hostname
    return out


def route(name: str, section: str, hostname: str, backend: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name},
        "spec": {
            "parentRefs": [{"name": "edge", "sectionName": section}],
            "hostnames": [hostname],
            "rules": [{"backendRefs": [{"name": backend, "port": 80}]}],
        },
    }


def served_certificate(port: int, server_name: str) -> bytes | None:
    """The certificate (DER) the data plane presents to a client saying `server_name`; None while it does not
    listen."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # what is served is compared, not trusted
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname=server_name) as tls,
        ):
            return tls.getpeercert(binary_form=True)
    except OSError:
        return None


def der(pem: bytes) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.decode())


async def over_tls(port: int, host: str, ca: bytes | None) -> httpx.Response | None:
    """GET / over TLS with SNI and Host `host`, the server checked against `ca` for `host` (None: not checked)."""
    if ca is None:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    else:
        context = ssl.create_default_context(cadata=ca.decode())
    async with httpx.AsyncClient(verify=context, timeout=5) as http:
        try:
            return await http.get(
                f"https://127.0.0.1:{port}/", headers={"Host": host}, extensions={"sni_hostname": host}
            )
        except httpx.TransportError:
            return None


async def catch_all_elsewhere(gw: Gateways, namespace: str) -> bool:
    """Whether a Gateway outside `namespace` has a listener without hostname, which matches any name."""
    listed = await gw.objects.list_cluster_custom_object(GATEWAY_GROUP, V1, "gateways")
    return any(
        not listener.get("hostname")
        for gateway in listed.get("items", [])
        if gateway["metadata"]["namespace"] != namespace
        for listener in gateway["spec"].get("listeners", [])
    )


async def test_each_hostname_gets_its_listeners_certificate_and_the_https_route(
    direct_plane: Plane, gw: Gateways, namespace: str
) -> None:
    class_name = await new_class(gw)
    for name, port in direct_plane.backends.items():
        await gw.backend(namespace, name, port)
    host, fallback = f"secure.{namespace}.test", f"fallback.{namespace}.test"
    site, default = certificate(host), certificate(fallback)
    await tls_secret(gw, namespace, "site", site)
    await tls_secret(gw, namespace, "default", default)
    listeners = [
        {"name": "http", "protocol": "HTTP", "port": 80, "hostname": host},
        https_listener("https", host, "site"),
        https_listener("any", None, "default"),
    ]
    await gw.create("gateways", gateway_manifest("edge", class_name, listeners), namespace)
    # One hostname, one route per scheme: a Gateway with HTTP and HTTPS listeners serves each its own.
    await gw.create("httproutes", route("secure", "https", host, "secure"), namespace)
    await gw.create("httproutes", route("plain", "http", host, "plain"), namespace)

    async def secure() -> httpx.Response | None:
        reply = await over_tls(direct_plane.https_port, host, site.ca)
        return reply if reply is not None and reply.status_code == 200 else None

    # Verified against the site's CA for its hostname: the listener's own certificate, and the HTTPS route.
    reply = await eventually(secure, what="the HTTPS listener's certificate and route", timeout=30)
    body = reply.json()
    assert body["backend"] == "secure"
    assert body["headers"]["x-forwarded-proto"] == "https"  # the connection's, not a hop's claim
    served = await asyncio.to_thread(served_certificate, direct_plane.https_port, host)
    assert served == der(site.cert)

    # Plain HTTP to the same hostname gets the HTTP listener's route.
    async def plain() -> str | None:
        async with httpx.AsyncClient(timeout=5) as http:
            reply = await http.get(f"http://127.0.0.1:{direct_plane.http_port}/", headers={"Host": host})
        return str(reply.json()["backend"]) if reply.status_code == 200 else None

    assert await eventually(plain, what="the HTTP listener's route") == "plain"

    # A client's X-Forwarded-Proto is not believed on the TLS listener.
    context = ssl.create_default_context(cadata=site.ca.decode())
    async with httpx.AsyncClient(verify=context, timeout=5) as http:
        claimed = await http.get(
            f"https://127.0.0.1:{direct_plane.https_port}/",
            headers={"Host": host, "X-Forwarded-Proto": "http"},
            extensions={"sni_hostname": host},
        )
    assert claimed.json()["backend"] == "secure"

    # A name no listener has gets the default chain (the listener without hostname), and no route: 404.
    unknown = f"unknown.{namespace}.test"
    served = await asyncio.to_thread(served_certificate, direct_plane.https_port, unknown)
    assert served == der(default.cert)

    # The shared plane serves every Gateway of the class in the cluster: a Gateway another test left, with a listener
    # without hostname, catches every name. Then only "none of this Gateway's routes" can be asserted.
    shared = await catch_all_elsewhere(gw, namespace)

    async def not_found() -> bool:
        missing = await over_tls(direct_plane.https_port, unknown, None)
        if missing is None:
            return False
        if missing.status_code == 404:
            return True
        if not shared:
            return False
        try:
            served_by = missing.json().get("backend")
        except ValueError:
            served_by = None
        return served_by not in direct_plane.backends

    await eventually(not_found, what="a 404 for a name no route has", timeout=30)

    # The certificate follows its Secret.
    renewed = certificate(host)
    data = {"tls.crt": base64.b64encode(renewed.cert).decode(), "tls.key": base64.b64encode(renewed.key).decode()}
    await gw.core.patch_namespaced_secret("site", namespace, {"data": data})

    async def rotated() -> bool:
        return await asyncio.to_thread(served_certificate, direct_plane.https_port, host) == der(renewed.cert)

    await eventually(rotated, what="the renewed certificate to be served", timeout=30)
    await gw.objects.delete_namespaced_custom_object(GATEWAY_GROUP, V1, namespace, "gateways", "edge")

    async def gone() -> bool:
        return await asyncio.to_thread(served_certificate, direct_plane.https_port, host) is None

    # Its last chain gone, the listener is too.
    await eventually(gone, what="the TLS listener to go with the Gateway", timeout=30)


async def test_a_name_claimed_twice_is_served_the_oldest_gateways_certificate(
    direct_plane: Plane, gw: Gateways, namespace: str
) -> None:
    class_name = await new_class(gw)
    host = f"shared.{namespace}.test"
    first, second = certificate(host), certificate(host)
    await tls_secret(gw, namespace, "first", first)
    await tls_secret(gw, namespace, "second", second)
    await gw.create("gateways", gateway_manifest("old", class_name, [https_listener("h", host, "first")]), namespace)

    async def first_served() -> bool:
        return await asyncio.to_thread(served_certificate, direct_plane.https_port, host) == der(first.cert)

    await eventually(first_served, what="the first Gateway's certificate", timeout=30)
    older = await gw.get("gateways", "old", namespace)
    made = datetime.fromisoformat(older["metadata"]["creationTimestamp"].replace("Z", "+00:00"))

    async def a_second_later() -> bool:  # creationTimestamp has a second's resolution
        return datetime.now(UTC) >= made + timedelta(seconds=1.1)

    await eventually(a_second_later, what="the next second of creationTimestamps", timeout=5)
    await gw.create("gateways", gateway_manifest("young", class_name, [https_listener("h", host, "second")]), namespace)

    async def both_programmed() -> bool:
        gateway = await gw.get("gateways", "young", namespace)
        listeners = (gateway.get("status") or {}).get("listeners") or []
        return bool(listeners) and any(
            c["type"] == "Programmed" and c["status"] == "True" for c in listeners[0]["conditions"]
        )

    await eventually(both_programmed, what="the younger Gateway to be programmed")
    # Envoy is never sent two chains for one name (it would refuse the listener): the older Gateway keeps it.
    assert await asyncio.to_thread(served_certificate, direct_plane.https_port, host) == der(first.cert)
    await gw.objects.delete_namespaced_custom_object(GATEWAY_GROUP, V1, namespace, "gateways", "old")

    async def second_served() -> bool:
        return await asyncio.to_thread(served_certificate, direct_plane.https_port, host) == der(second.cert)

    await eventually(second_served, what="the younger Gateway's certificate once the older one goes", timeout=30)
    await gw.objects.delete_namespaced_custom_object(GATEWAY_GROUP, V1, namespace, "gateways", "young")


async def with_client_certificate(port: int, host: str, ca: bytes, client: tuple[Path, Path] | None) -> int | None:
    """GET / over TLS to `host` presenting `client` (certificate and key files; None: no certificate): the status,
    or None when the handshake (or the connection) fails."""
    context = ssl.create_default_context(cadata=ca.decode())
    if client is not None:
        context.load_cert_chain(*client)
    async with httpx.AsyncClient(verify=context, timeout=5) as http:
        try:
            reply = await http.get(
                f"https://127.0.0.1:{port}/", headers={"Host": host}, extensions={"sni_hostname": host}
            )
        except (httpx.TransportError, ssl.SSLError):
            return None  # in TLS 1.3 a refused client certificate is an alert after the handshake: on the first read
    return reply.status_code


def client_files(directory: Path, authority: CertificateAuthority, name: str) -> tuple[Path, Path]:
    key, cert = authority.issue(name)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.crt").write_bytes(cert)
    (directory / f"{name}.key").write_bytes(key)
    return directory / f"{name}.crt", directory / f"{name}.key"


async def test_a_listener_checks_client_certificates_against_its_gateways_cas(
    direct_plane: Plane, gw: Gateways, namespace: str, tmp_path: Path
) -> None:
    """spec.tls.frontend: the HTTPS listener lets in a client whose certificate its CA signed, and refuses one
    without, or signed by another CA, at the handshake; AllowInsecureFallback lets both in (and the Gateway says
    so); a CA that does not resolve keeps the listener from being served at all."""
    class_name = await new_class(gw)
    await gw.backend(namespace, "secure", direct_plane.backends["secure"])
    host = f"mtls.{namespace}.test"
    site = certificate(host)
    await tls_secret(gw, namespace, "site", site)
    clients, strangers = CertificateAuthority.create("clients"), CertificateAuthority.create("strangers")
    trusted, stranger = client_files(tmp_path, clients, "trusted"), client_files(tmp_path, strangers, "stranger")
    await gw.core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "clients-ca"}, "data": {"ca.crt": clients.pem.decode()}}
    )
    manifest = gateway_manifest("edge", class_name, [https_listener("https", host, "site")])
    ca_ref = {"group": "", "kind": "ConfigMap", "name": "clients-ca"}
    manifest["spec"]["tls"] = {"frontend": {"default": {"validation": {"caCertificateRefs": [ca_ref]}}}}
    await gw.create("gateways", manifest, namespace)
    await gw.create("httproutes", route("secure", "https", host, "secure"), namespace)
    port = direct_plane.https_port

    async def let_in() -> bool:
        return await with_client_certificate(port, host, site.ca, trusted) == 200

    await eventually(let_in, what="a client with a certificate the listener's CA signed", timeout=30)
    assert await with_client_certificate(port, host, site.ca, None) is None
    assert await with_client_certificate(port, host, site.ca, stranger) is None

    fallback = {"caCertificateRefs": [ca_ref], "mode": "AllowInsecureFallback"}
    await gw.patch(
        "gateways", "edge", namespace, {"spec": {"tls": {"frontend": {"default": {"validation": fallback}}}}}
    )

    async def anyone() -> bool:
        return await with_client_certificate(port, host, site.ca, None) == 200

    await eventually(anyone, what="a client without a certificate, once the fallback is allowed", timeout=30)
    assert await with_client_certificate(port, host, site.ca, stranger) == 200

    async def insecure_said() -> bool:
        status = (await gw.get("gateways", "edge", namespace)).get("status") or {}
        return any(
            c["type"] == "InsecureFrontendValidationMode" and c["status"] == "True"
            for c in status.get("conditions", [])
        )

    await eventually(insecure_said, what="the Gateway to say it lets clients in without a valid certificate")

    gone = {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "no-such-ca"}]}
    await gw.patch("gateways", "edge", namespace, {"spec": {"tls": {"frontend": {"default": {"validation": gone}}}}})

    async def refused() -> bool:
        status = (await gw.get("gateways", "edge", namespace)).get("status") or {}
        (listener,) = status.get("listeners") or [{}]
        found = {c["type"]: c for c in listener.get("conditions", [])}
        accepted, resolved = found.get("Accepted", {}), found.get("ResolvedRefs", {})
        return (accepted.get("status"), accepted.get("reason"), resolved.get("reason")) == (
            "False",
            "NoValidCACertificate",
            "InvalidCACertificateRef",
        )

    await eventually(refused, what="the listener refused for want of a CA", timeout=30)

    async def not_served() -> bool:
        return await with_client_certificate(port, host, site.ca, trusted) is None

    await eventually(not_served, what="the listener to stop being served", timeout=30)


async def test_a_request_for_another_listeners_hostname_is_misdirected(
    direct_plane: Plane, gw: Gateways, namespace: str
) -> None:
    """A client that chose a listener's certificate by SNI and then asks for a hostname another listener serves gets
    421 Misdirected Request (it may then open a connection for that name), not the other listener's routes; asking
    for its own listener's names is served."""
    class_name = await new_class(gw)
    await gw.backend(namespace, "secure", direct_plane.backends["secure"])
    await gw.backend(namespace, "plain", direct_plane.backends["plain"])
    named, other = f"named.{namespace}.test", f"other.{namespace}.test"
    site = certificate(named)
    await tls_secret(gw, namespace, "site", site)
    await tls_secret(gw, namespace, "default", certificate(other))
    listeners = [https_listener("named", named, "site"), https_listener("any", None, "default")]
    await gw.create("gateways", gateway_manifest("edge", class_name, listeners), namespace)
    await gw.create("httproutes", route("named", "named", named, "secure"), namespace)
    await gw.create("httproutes", route("other", "any", other, "plain"), namespace)
    port = direct_plane.https_port

    async def served() -> bool:
        reply = await over_tls(port, named, site.ca)
        return reply is not None and reply.status_code == 200 and reply.json()["backend"] == "secure"

    await eventually(served, what="the named listener's route over its certificate", timeout=30)

    async def status(server_name: str, host: str, ca: bytes | None) -> int | None:
        context = ssl.create_default_context(cadata=ca.decode()) if ca is not None else ssl.create_default_context()
        if ca is None:
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        async with httpx.AsyncClient(verify=context, timeout=5) as http:
            try:
                reply = await http.get(
                    f"https://127.0.0.1:{port}/", headers={"Host": host}, extensions={"sni_hostname": server_name}
                )
            except httpx.TransportError:
                return None
        return reply.status_code

    async def misdirected() -> bool:
        return await status(named, other, site.ca) == 421

    await eventually(misdirected, what="a request of the named listener's connection for another name", timeout=30)
    # The default chain (whichever Gateway's it is on the shared plane) does not serve the named listener's name.
    assert await status(other, named, None) == 421
    # A client's own claim of a server name is not believed: the chain says it.
    context = ssl.create_default_context(cadata=site.ca.decode())
    async with httpx.AsyncClient(verify=context, timeout=5) as http:
        claimed = await http.get(
            f"https://127.0.0.1:{port}/",
            headers={"Host": other, envoy.SERVER_NAME_HEADER: "*"},
            extensions={"sni_hostname": named},
        )
    assert claimed.status_code == 421
