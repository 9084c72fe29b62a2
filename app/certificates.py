"""The certificates the controller makes and keeps itself before its listeners start, so that the chart carries no
generated material and renders the same bytes every time (Argo CD renders charts with `helm template`, where a chart
that generates a certificate makes a new one on every sync): the serving certificate (below) and, with the Gateway
class, its xDS and origin material (`kept_gateway_material`, reconcilers/gateway/material.py).

With `--webhook-cert-secret`, the webhook and metrics listeners' certificate lives in that Secret of the
controller's namespace (`ca.crt`, `ca.key`, `tls.crt`, `tls.key`):

- the first replica that finds none makes it (a CA for ten years, a certificate for `--webhook-cert-names` for a
  year); a replica that loses the race to create it reads the winner's;
- any replica that finds the certificate within RENEW_BEFORE of its end, or not for the names it must serve, renews
  it, signed by the same CA (so what the API server trusts does not change), with a precondition on the Secret's
  resourceVersion (two replicas never both renew);
- each replica writes the pair into `--webhook-cert-dir`, which the listeners reload on change, and looks again every
  CHECK_EVERY seconds;
- the CA is put in the caBundle of every webhook of `--webhook-configuration` (a strategic merge patch of that field
  alone), keeping one CA that was there before, so that pods serving an earlier certificate (a rolling upgrade, or
  the move from a chart that generated its own) are still trusted while they run.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Final, TypeVar

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from app.kube.client import KubeClient, KubeError, ResourceType
from app.kube.kept import Keeper, keep_secret, replace_files
from app.pki import CertificateAuthority, names_of, not_after
from app.settings import Settings, split_bind_address
from app.tls import self_signed

if TYPE_CHECKING:
    from reconcilers.gateway.material import GatewayMaterial

log = logging.getLogger(__name__)

WEBHOOK_CONFIGURATIONS: Final = ResourceType(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
K = TypeVar("K", bound=Keeper)
STRATEGIC_MERGE: Final = "application/strategic-merge-patch+json"
CA_DAYS: Final = 3650
CERT_DAYS: Final = 365
RENEW_BEFORE: Final = dt.timedelta(days=90)
KEYS: Final = ("ca.crt", "ca.key", "tls.crt", "tls.key")
MANAGED_BY: Final = {"app.kubernetes.io/managed-by": "kflare", "app.kubernetes.io/component": "webhook"}


def _certificates(bundle: bytes) -> list[bytes]:
    """The PEM certificates of a bundle, each as its own PEM block."""
    try:
        return [c.public_bytes(serialization.Encoding.PEM) for c in x509.load_pem_x509_certificates(bundle)]
    except ValueError:
        return []


@dataclass
class ServingCertificate(Keeper):
    """One listener certificate kept in a Secret; see the module's description."""

    WHAT: ClassVar[str] = "the webhook's serving certificate"

    kube: KubeClient
    namespace: str
    secret: str
    names: Sequence[str]
    directory: Path
    webhook_configuration: str | None = None
    failing: bool = False
    """The last look at the Secret failed (the listeners may serve a self-signed certificate meanwhile)."""

    def _issue(self, ca: CertificateAuthority) -> dict[str, bytes]:
        key, cert = ca.issue(self.names[0], hosts=self.names, server=True, days=CERT_DAYS)
        return {"ca.crt": ca.pem, "ca.key": ca.key_pem, "tls.crt": cert, "tls.key": key}

    def _new(self) -> dict[str, bytes]:
        return self._issue(CertificateAuthority.create(f"kflare-webhook-ca-{self.namespace}", days=CA_DAYS))

    def _due(self, material: Mapping[str, bytes], now: dt.datetime) -> bool:
        try:
            return not_after(material["tls.crt"]) - now < RENEW_BEFORE or not set(self.names) <= names_of(
                material["tls.crt"]
            )
        except ValueError:
            return True

    def _wanted(self, current: dict[str, bytes] | None) -> dict[str, bytes] | None:
        """None when the Secret's certificate will do; else a new one, signed by its CA while that is good."""
        material = None if current is None or not set(KEYS) <= current.keys() else {k: current[k] for k in KEYS}
        if material is not None and not self._due(material, dt.datetime.now(dt.UTC)):
            return None
        ca = self._ca(material)
        return self._issue(ca) if ca is not None else self._new()

    async def material(self) -> dict[str, bytes]:
        """The Secret's certificate, made or renewed first when it must be."""
        data, wrote = await keep_secret(
            self.kube, self.namespace, self.secret, self._wanted, labels=MANAGED_BY, tls=True
        )
        if wrote:
            log.info("made or renewed the webhook's serving certificate", extra={"secret": self.secret})
        return {key: data[key] for key in KEYS}

    @staticmethod
    def _ca(decoded: Mapping[str, bytes] | None) -> CertificateAuthority | None:
        if decoded is None:
            return None
        try:
            ca = CertificateAuthority.load(decoded["ca.crt"], decoded["ca.key"])
        except ValueError:
            return None
        if not_after(decoded["ca.crt"]) - dt.datetime.now(dt.UTC) < RENEW_BEFORE:
            return None  # a CA near its end makes a new one (and the caBundle keeps the old one a while)
        return ca

    def write(self, material: Mapping[str, bytes]) -> bool:
        """Write the pair (and the CA) into the directory the listeners read; True when anything changed."""
        return replace_files(self.directory, material, ("ca.crt", "tls.key", "tls.crt"))

    async def publish_ca(self, ca: bytes) -> None:
        """The CA in the caBundle of every webhook of the configuration, with one CA that was there before."""
        if not self.webhook_configuration:
            return
        try:
            config = await self.kube.get(WEBHOOK_CONFIGURATIONS, self.webhook_configuration)
        except KubeError as exc:
            if exc.not_found:
                log.warning(
                    "no webhook configuration to publish the CA in", extra={"configuration": self.webhook_configuration}
                )
                return
            raise
        patches = []
        for webhook in config.get("webhooks") or []:
            current = base64.b64decode((webhook.get("clientConfig") or {}).get("caBundle") or "")
            kept = [c for c in _certificates(current) if c.strip() != ca.strip()][:1]
            wanted = b"".join([ca if ca.endswith(b"\n") else ca + b"\n", *kept])
            if wanted != current:
                encoded = base64.b64encode(wanted).decode()
                patches.append({"name": webhook["name"], "clientConfig": {"caBundle": encoded}})
        if patches:
            await self.kube.patch(
                WEBHOOK_CONFIGURATIONS,
                self.webhook_configuration,
                {"webhooks": patches},
                content_type=STRATEGIC_MERGE,
            )
            log.info("published the webhook's CA", extra={"webhooks": len(patches)})

    async def ensure(self) -> bool:
        """Make or renew the certificate as needed, write it for the listeners, publish the CA; True when the
        files changed."""
        material = await self.material()
        changed = self.write(material)
        try:
            await self.publish_ca(material["ca.crt"])
        except KubeError as exc:
            # The listeners serve the certificate all the same (whoever else keeps the caBundle may trust it); said
            # loudly, and tried again at the next look.
            log.error("could not publish the webhook's CA in %s: %s", self.webhook_configuration, exc.message)
        return changed

    async def start(self) -> None:
        """The first `ensure`, before the listeners load the files. When the Secret cannot be read or written (the
        API server away, a role without Secrets), the listeners start on a self-signed certificate instead, so the
        probes and metrics still answer, and `keep` tries again every RETRY seconds."""
        try:
            await self.ensure()
        except (KubeError, OSError, ValueError) as exc:
            self.failing = True
            log.error("could not make or read the webhook's serving certificate: %s; serving a self-signed one", exc)
            cert, key = self_signed(self.names)
            self.write({"ca.crt": cert, "tls.crt": cert, "tls.key": key})


async def kept_certificate(settings: Settings) -> ServingCertificate | None:
    """With --webhook-cert-secret: the serving certificate, made or read and written into --webhook-cert-dir before
    the listeners load it."""
    if not settings.webhook_cert_secret:
        return None
    if settings.webhook_cert_dir is None:
        raise ValueError("--webhook-cert-secret needs --webhook-cert-dir, where the listeners read the certificate")
    names = [n.strip() for n in settings.webhook_cert_names.split(",") if n.strip()]
    if not names:
        raise ValueError("--webhook-cert-secret needs --webhook-cert-names, the names the certificate is for")
    secret, directory = settings.webhook_cert_secret, settings.webhook_cert_dir
    return await _started(
        settings,
        lambda kube: ServingCertificate(
            kube, settings.namespace, secret, names, directory, settings.webhook_configuration
        ),
    )


async def kept_gateway_material(settings: Settings) -> GatewayMaterial | None:
    """With --gateway-xds-host: the Gateway class's xDS and origin material, made or read, and the xDS listener's
    part written into --gateway-xds-cert-dir before the listener loads it."""
    if not (settings.gateway_enabled and settings.gateway_xds_host and settings.gateway_xds_cert_dir):
        return None
    from reconcilers.gateway.material import GatewayMaterial  # see Runtime.start: only with the Gateway class

    host, directory = settings.gateway_xds_host, settings.gateway_xds_cert_dir
    return await _started(
        settings,
        lambda kube: GatewayMaterial(
            kube,
            settings.namespace,
            settings.gateway_plane_xds_secret,
            settings.gateway_plane_origin_secret,
            host,
            (split_bind_address(settings.gateway_xds_bind_address) or ("", 18000))[1],
            settings.gateway_origin_server_name,
            directory,
        ),
    )


async def _started(settings: Settings, make: Callable[[KubeClient], K]) -> K:
    """`make`'s keeper on a client of its own (the runtime's does not exist yet: the listeners load what it writes
    first), started; the client is closed when the start fails."""
    kube = await KubeClient.connect(settings.kubeconfig)
    kept = make(kube)
    try:
        await kept.start()
    except BaseException:
        await kube.close()
        raise
    return kept
