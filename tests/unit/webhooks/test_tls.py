"""Serving TLS: a certificate directory reloaded on change, a self-signed fallback, HTTP/1.1 only."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from fastapi import FastAPI

from app.controlplane import CertificateAuthority
from app.tls import ReloadingTLS, TLSError, self_signed
from tests.unit.webhooks.serving import client_context, handshake, serving


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/ping")
    async def ping() -> dict[str, str]:
        return {"pong": "yes"}

    return app


def _der(pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)


def _write(directory: Path, key: bytes, cert: bytes) -> None:
    (directory / "tls.key").write_bytes(key)
    (directory / "tls.crt").write_bytes(cert)


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.create("test-ca")


async def test_serves_the_directory_certificate_over_http11(ca: CertificateAuthority, tmp_path: Path) -> None:
    key, cert = ca.issue("first", hosts=["127.0.0.1"], server=True)
    _write(tmp_path, key, cert)
    tls = ReloadingTLS(tmp_path, ["127.0.0.1"])
    async with serving(_app(), tls) as port:
        der, alpn = await handshake(port, ca.pem)
        assert der == _der(cert)
        assert alpn == "http/1.1"  # offered h2 first: HTTP/2 stays off
        async with httpx.AsyncClient(verify=client_context(ca.pem)) as http:
            reply = await http.get(f"https://127.0.0.1:{port}/ping")
        assert reply.json() == {"pong": "yes"}


async def test_a_replaced_certificate_is_presented_to_new_handshakes(ca: CertificateAuthority, tmp_path: Path) -> None:
    key, cert = ca.issue("first", hosts=["127.0.0.1"], server=True)
    _write(tmp_path, key, cert)
    tls = ReloadingTLS(tmp_path, ["127.0.0.1"], interval=0.05)
    async with serving(_app(), tls) as port:
        assert (await handshake(port, ca.pem))[0] == _der(cert)
        new_key, new_cert = ca.issue("second", hosts=["127.0.0.1"], server=True)
        _write(tmp_path, new_key, new_cert)
        deadline = time.monotonic() + 20
        while (await handshake(port, ca.pem))[0] != _der(new_cert):
            assert time.monotonic() < deadline, "the new certificate was never presented"
            await asyncio.sleep(0.05)
        assert tls.reloads >= 1
        assert tls.certificate.subject.rfc4514_string() == "CN=second"


def test_a_pair_that_does_not_match_is_skipped_and_the_old_one_kept(ca: CertificateAuthority, tmp_path: Path) -> None:
    key, cert = ca.issue("first", hosts=["127.0.0.1"], server=True)
    _write(tmp_path, key, cert)
    tls = ReloadingTLS(tmp_path, ["127.0.0.1"])
    other_key, _ = ca.issue("other", server=True)
    _, new_cert = ca.issue("second", hosts=["127.0.0.1"], server=True)
    _write(tmp_path, other_key, new_cert)  # half way through a rotation: the key does not match
    assert tls.reload() is False
    assert tls.cert_pem == cert
    (tmp_path / "tls.crt").unlink()
    assert tls.reload() is False  # missing file: keep serving
    _write(tmp_path, key, cert)
    assert tls.reload() is False  # unchanged
    new_key, new_cert = ca.issue("third", hosts=["127.0.0.1"], server=True)
    _write(tmp_path, new_key, new_cert)
    assert tls.reload() is True
    assert tls.cert_pem == new_cert
    assert tls.reloads == 1


def test_a_directory_without_a_usable_pair_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TLSError, match=r"cannot read"):
        ReloadingTLS(tmp_path, ["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(b"not a certificate")
    (tmp_path / "tls.key").write_bytes(b"not a key")
    with pytest.raises(TLSError, match=r"do not load"):
        ReloadingTLS(tmp_path, ["127.0.0.1"])


async def test_without_a_directory_a_self_signed_certificate_is_served() -> None:
    tls = ReloadingTLS(None, ["localhost", "127.0.0.1"])
    assert tls.is_self_signed
    sans = tls.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    await tls.watch()  # nothing to watch: returns at once
    async with serving(_app(), tls) as port:
        der, alpn = await handshake(port, tls.cert_pem)
    assert der == _der(tls.cert_pem)
    assert alpn == "http/1.1"


def test_self_signed_makes_a_pair_a_directory_can_serve(tmp_path: Path) -> None:
    cert, key = self_signed(["kflare-webhook.kflare-system.svc"])
    _write(tmp_path, key, cert)
    tls = ReloadingTLS(tmp_path)
    assert tls.cert_pem == cert
    assert not tls.is_self_signed


def test_apply_overrides_the_config_files(tmp_path: Path) -> None:
    tls = ReloadingTLS(None, ["127.0.0.1"])
    config = uvicorn.Config(_app(), ssl_certfile=str(tmp_path / "missing.crt"))
    tls.apply(config)
    config.load()
    assert config.ssl is tls.ssl_context
    loaded = uvicorn.Config(_app())
    loaded.load()
    tls.apply(loaded)
    assert loaded.ssl is tls.ssl_context
