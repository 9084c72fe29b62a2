"""The xDS listener with `--gateway-xds-client-ca-file`, over real sockets: a client without a certificate, or with
one another CA signed, is refused in the handshake; Envoy's certificate, signed by the CA, gets its configuration."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from app.controlplane import free_port
from app.server import Runtime, Served, xds_listener
from app.settings import Settings
from app.tls import TLSError
from tests.fixtures.xds import Delta, channel, names
from tests.helpers import serving
from tests.unit.gateway.test_xds import TOKEN, store

HOST = "kflare-xds.kflare-system.svc"


class CA:
    def __init__(self, name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, directory: Path, cn: str, *, server: bool) -> tuple[Path, Path]:
        """A leaf signed by this CA, written as directory/tls.crt and tls.key."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(cn)]), critical=False)
        directory.mkdir(parents=True, exist_ok=True)
        cert, key_file = directory / "tls.crt", directory / "tls.key"
        cert.write_bytes(builder.sign(self.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return cert, key_file


@contextlib.asynccontextmanager
async def listening(settings: Settings) -> AsyncIterator[Served]:
    async with serving(xds_listener(settings, Runtime(settings, xds=store()), "127.0.0.1", free_port())) as served:
        yield served


def settings(tmp_path: Path, ca: CA) -> Settings:
    (tmp_path / "token").write_text(TOKEN)
    ca.issue(tmp_path / "server", HOST, server=True)
    (tmp_path / "ca.crt").write_bytes(ca.pem)
    return Settings(
        gateway_enabled=True,
        gateway_xds_token_file=tmp_path / "token",
        gateway_xds_cert_dir=tmp_path / "server",
        gateway_xds_client_ca_file=tmp_path / "ca.crt",
        http_header_timeout="5s",
    )


async def clusters(served: Served, credentials: grpc.ChannelCredentials) -> list[str]:
    """The clusters the listener sends; the stream's error status when it refuses (a failed handshake is
    UNAVAILABLE). The server's certificate names the Service host: connect to loopback, asking for (and checking)
    that name."""
    async with channel(served.port, credentials, host=HOST) as ch:
        stream = Delta(ch, TOKEN)
        await stream.send("clusters")
        return names(await stream.receive())


def client_context(ca: CA, cert: tuple[Path, Path] | None) -> grpc.ChannelCredentials:
    if cert is None:
        return grpc.ssl_channel_credentials(root_certificates=ca.pem)
    return grpc.ssl_channel_credentials(
        root_certificates=ca.pem, private_key=cert[1].read_bytes(), certificate_chain=cert[0].read_bytes()
    )


async def test_a_client_without_a_certificate_signed_by_the_ca_is_refused(tmp_path: Path) -> None:
    ca, other = CA("kflare-xds-ca"), CA("someone-else")
    async with listening(settings(tmp_path, ca)) as served:
        with pytest.raises(grpc.aio.AioRpcError):
            await clusters(served, client_context(ca, None))
        stranger = other.issue(tmp_path / "stranger", "envoy", server=False)
        with pytest.raises(grpc.aio.AioRpcError):
            await clusters(served, client_context(ca, stranger))

        envoy = ca.issue(tmp_path / "envoy", "envoy", server=False)
        assert await clusters(served, client_context(ca, envoy)) == ["a", "b"]


def test_the_client_ca_needs_tls_and_a_readable_file(tmp_path: Path) -> None:
    ca = CA("kflare-xds-ca")
    good = settings(tmp_path, ca)
    with pytest.raises(ValueError, match="needs --gateway-xds-cert-dir"):
        xds_listener(good.model_copy(update={"gateway_xds_cert_dir": None}), Runtime(good), "127.0.0.1", 0)
    (tmp_path / "bad.crt").write_text("not a certificate")
    bad = good.model_copy(update={"gateway_xds_client_ca_file": tmp_path / "bad.crt"})
    with pytest.raises(TLSError, match="client CA"):
        xds_listener(bad, Runtime(good), "127.0.0.1", 0)


async def test_a_rotated_ca_is_trusted_and_the_old_one_no_longer_without_a_restart(tmp_path: Path) -> None:
    ca, rotated = CA("kflare-xds-ca"), CA("kflare-xds-ca-2")
    old_envoy = ca.issue(tmp_path / "old", "envoy", server=False)
    new_envoy = rotated.issue(tmp_path / "new", "envoy", server=False)
    async with listening(settings(tmp_path, ca)) as served:
        assert served.tls is not None
        assert (await clusters(served, client_context(ca, old_envoy))) == ["a", "b"]

        (tmp_path / "ca.crt").write_text("half written")
        assert not served.tls.reload(), "a CA that does not load keeps the current one"
        assert (await clusters(served, client_context(ca, old_envoy))) == ["a", "b"]

        (tmp_path / "ca.crt").write_bytes(rotated.pem)
        assert served.tls.reload()
        # The server's own certificate is still the first CA's: the clients check it against that one.
        assert (await clusters(served, client_context(ca, new_envoy))) == ["a", "b"]
        with pytest.raises(grpc.aio.AioRpcError):
            await clusters(served, client_context(ca, old_envoy))

        rotated.issue(tmp_path / "server", HOST, server=True)  # the serving pair rotated too
        assert served.tls.reload()
        assert (await clusters(served, client_context(rotated, new_envoy))) == ["a", "b"]
        with pytest.raises(grpc.aio.AioRpcError):
            await clusters(served, client_context(rotated, old_envoy))
