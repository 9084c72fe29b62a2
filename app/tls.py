"""Serving TLS for the listeners: a certificate directory that is reloaded when its files change, or a self-signed
certificate when there is none.

A Kubernetes Secret mounted as a volume (cert-manager's, or the chart's) is updated in place: the kubelet swaps
the files while the Pod runs. `ReloadingTLS.watch` notices the change and loads the new pair into the same
`ssl.SSLContext`, so every handshake after that presents the new certificate while open connections and the
listening socket stay as they are. A pair that does not load (a key that does not match the certificate, a file
half written) is ignored and the previous one keeps being served until a good pair appears.

With `require_client_certificates` the listener refuses a client without a certificate of a CA file's, and the
watch reloads that file too: a rotated CA is trusted, and the old one no longer, from the next handshake on. The
CA store of a live `SSLContext` can only grow, so each handshake is handed (in the SNI callback, which runs for
every ClientHello) a context built from the current pair and CA.

    tls = ReloadingTLS(settings.webhook_cert_dir, hosts=["kflare-webhook.kflare-system.svc"])
    config = uvicorn.Config(app, host="0.0.0.0", port=9443)
    tls.apply(config)
    task = asyncio.create_task(tls.watch())
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import ipaddress
import logging
import os
import shutil
import ssl
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = logging.getLogger(__name__)

CERT_FILE: Final = "tls.crt"
KEY_FILE: Final = "tls.key"
DEFAULT_INTERVAL: Final = 3.0
"""Seconds between two looks at the certificate directory."""


class TLSError(RuntimeError):
    """The certificate directory holds no usable certificate and key."""


def self_signed(hosts: Sequence[str], *, days: int = 365) -> tuple[bytes, bytes]:
    """A self-signed serving certificate for `hosts` (IP SANs for addresses, DNS SANs for names) as
    (certificate PEM, key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    names = list(hosts) or ["localhost"]
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0][:64])])
    sans: list[x509.GeneralName] = []
    for host in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def server_context() -> ssl.SSLContext:
    """An empty server context: TLS 1.2 or later, HTTP/1.1 only (no HTTP/2 over ALPN), no client certificates."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    return context


def _verifying(cert_pem: bytes, key_pem: bytes, ca_pem: bytes) -> ssl.SSLContext:
    """A server context presenting the pair and requiring a client certificate signed by the CA."""
    context = server_context()
    _load_pem(context, cert_pem, key_pem)
    context.load_verify_locations(cadata=ca_pem.decode("ascii", errors="replace"))
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _load_pem(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """`load_cert_chain` from memory: `ssl` reads only files, so the pair goes through a private temp directory
    (mode 0700) that is gone when this returns."""
    scratch = Path(tempfile.mkdtemp(prefix="kflare-tls-"))
    try:
        cert_path, key_path = scratch / CERT_FILE, scratch / KEY_FILE
        for path, data in ((cert_path, cert_pem), (key_path, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        context.load_cert_chain(cert_path, key_path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class ReloadingTLS:
    """The `ssl.SSLContext` of one listener, kept in step with `cert_dir/tls.crt` and `cert_dir/tls.key`.

    Without a directory the context serves a self-signed certificate for `hosts`, made once in memory. With one,
    the pair must load now (a `TLSError` says why not), and `watch()` reloads it whenever the files' contents
    change.
    """

    def __init__(
        self,
        cert_dir: Path | None,
        hosts: Sequence[str] = ("localhost", "127.0.0.1"),
        *,
        interval: float = DEFAULT_INTERVAL,
        cert_name: str = CERT_FILE,
        key_name: str = KEY_FILE,
    ) -> None:
        self.cert_dir = cert_dir
        self.hosts = tuple(hosts)
        self.interval = interval
        self.cert_name, self.key_name = cert_name, key_name
        self.ssl_context: ssl.SSLContext = server_context()
        self.reloads = 0
        """How many times a changed pair or client CA was loaded (the first loads not counted)."""
        self._digest = b""
        self._cert_pem = self._key_pem = b""
        self.client_ca: Path | None = None
        self._ca_pem = b""
        self._handshakes: ssl.SSLContext | None = None
        """What each handshake is handed when client certificates are required: the current pair and CA."""
        if cert_dir is None:
            cert_pem, key_pem = self_signed(self.hosts)
            _load_pem(self.ssl_context, cert_pem, key_pem)
            self._cert_pem, self._key_pem = cert_pem, key_pem
            log.info("serving a self-signed certificate for %s", ", ".join(self.hosts))
        else:
            try:
                pair = self._read()
            except OSError as exc:
                raise TLSError(f"cannot read the certificate in {cert_dir}: {exc}") from exc
            try:
                self._load(*pair)
            except (ssl.SSLError, ValueError) as exc:
                raise TLSError(f"{cert_dir}/{cert_name} and {key_name} do not load: {exc}") from exc

    @property
    def is_self_signed(self) -> bool:
        return self.cert_dir is None

    @property
    def cert_pem(self) -> bytes:
        """The certificate (chain) new handshakes present."""
        return self._cert_pem

    @property
    def key_pem(self) -> bytes:
        """The key of `cert_pem`."""
        return self._key_pem

    @property
    def client_ca_pem(self) -> bytes:
        """The CA client certificates must be signed by (empty when none is asked for)."""
        return self._ca_pem

    @property
    def certificate(self) -> x509.Certificate:
        """The leaf certificate new handshakes present."""
        return x509.load_pem_x509_certificate(self._cert_pem)

    def _read(self) -> tuple[bytes, bytes]:
        assert self.cert_dir is not None
        return (self.cert_dir / self.cert_name).read_bytes(), (self.cert_dir / self.key_name).read_bytes()

    def _load(self, cert_pem: bytes, key_pem: bytes) -> None:
        # Try the pair on a scratch context first: a failed load_cert_chain can leave a context with the new
        # certificate and no key, which would break every handshake until the next good pair.
        _load_pem(server_context(), cert_pem, key_pem)
        handshakes = _verifying(cert_pem, key_pem, self._ca_pem) if self.client_ca is not None else None
        _load_pem(self.ssl_context, cert_pem, key_pem)
        self._cert_pem, self._key_pem, self._handshakes = cert_pem, key_pem, handshakes
        self._digest = hashlib.sha256(cert_pem + b"\0" + key_pem).digest()

    def require_client_certificates(self, ca_file: Path) -> None:
        """Refuse, in the handshake, a client without a certificate signed by the CA in `ca_file` (a `TLSError`
        when it does not load); `watch()` follows the file from then on."""
        try:
            ca_pem = ca_file.read_bytes()
            handshakes = _verifying(self._cert_pem, self._key_pem, ca_pem)
            # The listener's own context verifies with the first CA too, should a handshake skip the callback.
            self.ssl_context.load_verify_locations(cadata=ca_pem.decode("ascii", errors="replace"))
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise TLSError(f"cannot load the client CA {ca_file}: {exc}") from exc
        self.ssl_context.verify_mode = ssl.CERT_REQUIRED
        self.client_ca, self._ca_pem, self._handshakes = ca_file, ca_pem, handshakes
        self.ssl_context.sni_callback = self._hand_over

    def _hand_over(self, connection: ssl.SSLObject | ssl.SSLSocket, _name: str | None, _ctx: ssl.SSLContext) -> None:
        if self._handshakes is not None:
            connection.context = self._handshakes

    def reload(self) -> bool:
        """Load the directory's pair, and the client CA, if their contents changed since the last load; True when
        a new pair or CA is in use.

        A pair or CA that cannot be read or does not load is logged and skipped: the current one stays.
        """
        reloaded = self._reload_pair()
        return self._reload_ca() or reloaded

    def _reload_ca(self) -> bool:
        if self.client_ca is None:
            return False
        try:
            ca_pem = self.client_ca.read_bytes()
        except OSError as exc:
            log.warning("cannot read the client CA %s, keeping the current one: %s", self.client_ca, exc)
            return False
        if ca_pem == self._ca_pem:
            return False
        try:
            self._handshakes = _verifying(self._cert_pem, self._key_pem, ca_pem)
        except (ssl.SSLError, ValueError) as exc:
            log.warning("the client CA %s does not load, keeping the current one: %s", self.client_ca, exc)
            return False
        self._ca_pem = ca_pem
        self.reloads += 1
        log.info("reloaded the client CA from %s", self.client_ca)
        return True

    def _reload_pair(self) -> bool:
        if self.cert_dir is None:
            return False
        try:
            cert_pem, key_pem = self._read()
        except OSError as exc:
            log.warning("cannot read the certificate in %s, keeping the current one: %s", self.cert_dir, exc)
            return False
        if hashlib.sha256(cert_pem + b"\0" + key_pem).digest() == self._digest:
            return False
        try:
            self._load(cert_pem, key_pem)
        except (ssl.SSLError, ValueError) as exc:
            log.warning("the certificate in %s does not load, keeping the current one: %s", self.cert_dir, exc)
            return False
        self.reloads += 1
        log.info("reloaded the serving certificate from %s", self.cert_dir)
        return True

    async def watch(self) -> None:
        """Reload on change until cancelled (run it as a task next to the listener). Returns at once with nothing
        to follow (a self-signed certificate, no client CA)."""
        if self.cert_dir is None and self.client_ca is None:
            return
        while True:
            await asyncio.sleep(self.interval)
            self.reload()

    def apply(self, config: uvicorn.Config) -> None:
        """Make `config` (before `Server.serve` loads it) serve TLS with this context, ignoring its `ssl_*` files."""
        context = self.ssl_context

        def factory(_config: uvicorn.Config, _default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
            return context

        if config.loaded:
            config.ssl = context
        elif hasattr(config, "ssl_context_factory"):
            config.ssl_context_factory = factory
        else:  # uvicorn before ssl_context_factory: set the context once Config.load() has run
            load = config.load

            def load_then_set() -> None:
                load()
                config.ssl = context

            setattr(config, "load", load_then_set)  # noqa: B010 (a method of this one instance)
