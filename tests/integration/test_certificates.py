"""The serving certificate the controller keeps itself (`--webhook-cert-secret`), on the real API server: made once
whichever replica comes first, renewed under the same CA before its end, written for the listeners, and its CA
published in the webhooks' caBundle next to the one that was there (pods of the release before keep being trusted
during an upgrade)."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from app.certificates import WEBHOOK_CONFIGURATIONS, ServingCertificate
from app.controlplane import ControlPlane
from app.kube.client import SECRETS, KubeClient
from app.pki import CertificateAuthority

pytestmark = pytest.mark.integration

NAMESPACE = "default"
NAMES = ["kflare-webhook.kflare-system.svc", "kflare-metrics.kflare-system.svc"]


@pytest.fixture
async def client(control_plane: ControlPlane) -> AsyncIterator[KubeClient]:
    kube = await KubeClient.connect(control_plane.kubeconfig_path)
    try:
        yield kube
    finally:
        await kube.close()


def configuration(name: str, ca_bundle: bytes | None) -> dict[str, object]:
    """Two webhooks that never match a request (an unserved group): only their clientConfig matters here."""
    config: dict[str, object] = {"service": {"name": "kflare-webhook", "namespace": "kflare-system", "path": "/x"}}
    if ca_bundle is not None:
        config["caBundle"] = base64.b64encode(ca_bundle).decode()
    rule = {"apiGroups": ["never.kflare.test"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["x"]}
    webhook = {
        "clientConfig": config,
        "rules": [rule],
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Ignore",
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{**webhook, "name": f"{i}.{name}.kflare.test"} for i in ("a", "b")],
    }


async def bundles(kube: KubeClient, name: str) -> list[list[bytes]]:
    config = await kube.get(WEBHOOK_CONFIGURATIONS, name)
    out = []
    for webhook in config["webhooks"]:
        pem = base64.b64decode(webhook["clientConfig"].get("caBundle") or "")
        certificates = x509.load_pem_x509_certificates(pem) if pem else []
        out.append([c.public_bytes(serialization.Encoding.PEM) for c in certificates])
    return out


def kept(kube: KubeClient, secret: str, directory: Path, webhooks: str | None = None) -> ServingCertificate:
    return ServingCertificate(kube, NAMESPACE, secret, NAMES, directory, webhooks)


async def test_replicas_starting_together_make_one_certificate_and_publish_its_ca(
    client: KubeClient, tmp_path: Path
) -> None:
    secret, name = f"webhook-tls-{uuid.uuid4().hex[:6]}", f"kflare-{uuid.uuid4().hex[:6]}"
    helm_ca = CertificateAuthority.create("the chart's CA, from before")
    await client.create(WEBHOOK_CONFIGURATIONS, configuration(name, helm_ca.pem))
    try:
        replicas = [kept(client, secret, tmp_path / f"replica-{i}", name) for i in range(3)]
        await asyncio.gather(*(r.ensure() for r in replicas))
        stored = await client.get(SECRETS, secret, NAMESPACE)
        assert stored["type"] == "kubernetes.io/tls"
        ca = base64.b64decode(stored["data"]["ca.crt"])
        served = {(tmp_path / f"replica-{i}" / "tls.crt").read_bytes() for i in range(3)}
        assert served == {base64.b64decode(stored["data"]["tls.crt"])}, "the replicas serve different certificates"
        leaf = x509.load_pem_x509_certificate(served.pop())
        assert set(
            leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
        ) == set(NAMES)
        assert leaf.issuer == x509.load_pem_x509_certificate(ca).subject
        # Every webhook trusts the new CA, and the chart's from before (pods of the previous release still serve it).
        assert await bundles(client, name) == [[ca, helm_ca.pem]] * 2
        # Again: nothing changes (no write when the bundle is as wanted).
        before = (await client.get(WEBHOOK_CONFIGURATIONS, name))["metadata"]["resourceVersion"]
        assert await replicas[0].ensure() is False
        assert (await client.get(WEBHOOK_CONFIGURATIONS, name))["metadata"]["resourceVersion"] == before
    finally:
        await client.delete(WEBHOOK_CONFIGURATIONS, name)
        await client.delete(SECRETS, secret, NAMESPACE)


async def test_a_certificate_near_its_end_is_renewed_under_the_same_ca(client: KubeClient, tmp_path: Path) -> None:
    secret = f"webhook-tls-{uuid.uuid4().hex[:6]}"
    ca = CertificateAuthority.create("kflare-webhook-ca", days=3650)
    key, cert = ca.issue(NAMES[0], hosts=NAMES, server=True, days=30)  # within the renewal window
    data = {"ca.crt": ca.pem, "ca.key": ca.key_pem, "tls.crt": cert, "tls.key": key}
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret},
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }
    await client.create(SECRETS, body, NAMESPACE)
    try:
        keeper = kept(client, secret, tmp_path)
        assert await keeper.ensure() is True
        renewed = (tmp_path / "tls.crt").read_bytes()
        assert renewed != cert
        leaf = x509.load_pem_x509_certificate(renewed)
        assert leaf.not_valid_after_utc - dt.datetime.now(dt.UTC) > dt.timedelta(days=300)
        assert leaf.issuer == ca.cert.subject, "renewed under another CA: the caBundle would have to change"
        stored = await client.get(SECRETS, secret, NAMESPACE)
        assert base64.b64decode(stored["data"]["ca.crt"]) == ca.pem
        assert base64.b64decode(stored["data"]["tls.crt"]) == renewed
        # A certificate for other names than those it must serve is renewed as well.
        other = ServingCertificate(client, NAMESPACE, secret, [*NAMES, "kflare-webhook.other.svc"], tmp_path)
        assert await other.ensure() is True
        names = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes()).extensions
        assert "kflare-webhook.other.svc" in names.get_extension_for_class(
            x509.SubjectAlternativeName
        ).value.get_values_for_type(x509.DNSName)
    finally:
        await client.delete(SECRETS, secret, NAMESPACE)
