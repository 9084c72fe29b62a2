"""Certificates: an ECDSA P-256 certificate authority that issues server and client certificates, and can be stored
(its certificate and key as PEM) and loaded again to renew what it issued. The test control plane's CA, and the
serving certificates the controller makes and keeps for itself (`app.certificates`), are this one."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _new_key() -> ec.EllipticCurvePrivateKey:
    # P-256: accepted by Go's TLS stack, by kube-apiserver for ServiceAccount signing (ES256), and cheap to make.
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_usage(ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, days: int
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())  # positive, as Go >= 1.23 demands
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


@dataclass(frozen=True)
class CertificateAuthority:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls, common_name: str, days: int = 30) -> CertificateAuthority:
        key = _new_key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        cert = (
            _builder(name, name, key.public_key(), days)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_key_usage(True), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    @property
    def pem(self) -> bytes:
        return cert_pem(self.cert)

    @property
    def key_pem(self) -> bytes:
        return key_pem(self.key)

    @classmethod
    def load(cls, cert: bytes, key: bytes) -> CertificateAuthority:
        """The CA stored as (`pem`, `key_pem`); ValueError when they are no ECDSA CA pair."""
        loaded = serialization.load_pem_private_key(key, password=None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise ValueError("the CA key is not an ECDSA key")
        certificate = x509.load_pem_x509_certificate(cert)
        if certificate.public_key() != loaded.public_key():
            raise ValueError("the CA certificate is not the key's")
        return cls(loaded, certificate)

    def issue(
        self,
        common_name: str,
        *,
        groups: Iterable[str] = (),
        hosts: Iterable[str] = (),
        server: bool = False,
        days: int = 30,
    ) -> tuple[bytes, bytes]:
        """A leaf certificate as (key PEM, cert PEM): CN is the user and O the groups for a client; hosts become
        SANs for a server (an IP SAN for an address: Go ignores the CN when checking hosts)."""
        key = _new_key()
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            _builder(x509.Name(attrs), self.cert.subject, key.public_key(), days)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
        )
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return key_pem(key), cert_pem(builder.sign(self.key, hashes.SHA256()))


def not_after(pem: bytes) -> dt.datetime:
    """When the (first) certificate of `pem` expires (UTC)."""
    return x509.load_pem_x509_certificate(pem).not_valid_after_utc


def names_of(pem: bytes) -> set[str]:
    """The DNS and IP names a certificate is for."""
    cert = x509.load_pem_x509_certificate(pem)
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {*sans.get_values_for_type(x509.DNSName), *(str(ip) for ip in sans.get_values_for_type(x509.IPAddress))}
