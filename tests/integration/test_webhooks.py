"""The admission webhooks behind a real kube-apiserver: registered as a ValidatingWebhookConfiguration that points at
the webhook app served over TLS on loopback, driven with `kubectl apply` the way a user would.

Every configuration a test registers only matches that test's namespace (and, for the cluster-scoped
CloudflareAccount, objects with that test's label), and is deleted before the server stops, so a webhook that is
down never blocks another test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from app.api import KINDS
from app.controlplane import ControlPlane, free_port
from app.tls import ReloadingTLS
from tests.fixtures.controller import controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.kube import TEST_LABEL
from tests.helpers import eventually
from tests.unit.webhooks.reviews import review, sample
from tests.unit.webhooks.serving import client_context, handshake, serving
from webhooks import create_app
from webhooks.configuration import configuration as webhook_configuration
from webhooks.configuration import url_client_config

pytestmark = pytest.mark.integration

OBJECT_LABEL = "kflare-webhook-test"


class Recorder:
    """The webhook app, noting the path of every request it answers."""

    def __init__(self) -> None:
        self.app = create_app()
        self.paths: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.paths.append(scope["path"])
        await self.app(scope, receive, send)


@dataclass
class Webhook:
    """A running webhook server, its certificate directory and the test's kubectl."""

    plane: ControlPlane
    namespace: str
    port: int
    cert_dir: Path
    tls: ReloadingTLS
    recorder: Recorder
    workdir: Path
    label: str = field(default_factory=lambda: f"t{uuid.uuid4().hex[:10]}")

    async def kubectl(self, *args: str, stdin: str | None = None) -> tuple[int, str]:
        """Run kubectl without blocking the loop the webhook server runs in; (exit code, stdout + stderr)."""
        proc = await asyncio.create_subprocess_exec(
            str(self.plane.binary("kubectl")),
            f"--kubeconfig={self.plane.kubeconfig_path}",
            f"--cache-dir={self.workdir / 'kubectl-cache'}",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 60)
        assert proc.returncode is not None
        return proc.returncode, out.decode(errors="replace")

    async def apply(self, manifest: dict[str, Any], *extra: str) -> tuple[int, str]:
        return await self.kubectl("apply", "-f", "-", *extra, stdin=json.dumps(manifest))

    def manifest(self, kind: str, name: str, **spec: Any) -> dict[str, Any]:
        obj = sample(kind, **spec)
        obj["metadata"] = {"name": name, "labels": {OBJECT_LABEL: self.label}}
        if kind != "CloudflareAccount":
            obj["metadata"]["namespace"] = self.namespace
        return obj


def configuration(webhook: Webhook, name: str, *, failure_policy: str = "Fail") -> dict[str, Any]:
    """The webhooks as `kflare dev` and the chart register them, calling the test server, matching only this test's
    namespace (namespaced kinds) or objects with this test's label (cluster-scoped kinds)."""
    body = webhook_configuration(
        name,
        url_client_config(f"https://127.0.0.1:{webhook.port}", webhook.plane.ca.pem),
        labels={TEST_LABEL: "on"},
        failure_policy=failure_policy,
        timeout_seconds=5,
    )
    for hook, model in zip(body["webhooks"], sorted(KINDS, key=lambda m: m.info.namespaced), strict=True):
        if model.info.namespaced:
            hook["namespaceSelector"] = {
                "matchLabels": {TEST_LABEL: "on", "kubernetes.io/metadata.name": webhook.namespace}
            }
        else:  # a namespaceSelector does not apply to cluster-scoped objects
            hook["objectSelector"] = {"matchLabels": {OBJECT_LABEL: webhook.label}}
    return body


@contextlib.asynccontextmanager
async def registered(kube: ApiClient, webhook: Webhook, *, failure_policy: str = "Fail") -> AsyncIterator[str]:
    api = client.AdmissionregistrationV1Api(kube)
    name = f"kflare-test-{webhook.label}"
    body: Any = configuration(webhook, name, failure_policy=failure_policy)
    await api.create_validating_webhook_configuration(body)
    try:
        yield name
    finally:
        with contextlib.suppress(ApiException):
            await api.delete_validating_webhook_configuration(name)


def _write_pair(directory: Path, pair: tuple[bytes, bytes]) -> None:
    key, cert = pair
    (directory / "tls.key").write_bytes(key)
    (directory / "tls.crt").write_bytes(cert)


@pytest.fixture
async def webhook(
    control_plane: ControlPlane, namespace: str, kflare_crds: None, tmp_path: Path
) -> AsyncIterator[Webhook]:
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    _write_pair(cert_dir, control_plane.ca.issue("webhook", hosts=["127.0.0.1"], server=True))
    tls = ReloadingTLS(cert_dir, ["127.0.0.1"], interval=0.1)
    recorder = Recorder()
    async with serving(recorder, tls) as port:
        yield Webhook(control_plane, namespace, port, cert_dir, tls, recorder, tmp_path)


DENIED = 'admission webhook "dnsrecords.validate.kflare.dev" denied the request: '


async def until_denied(webhook: Webhook, manifest: dict[str, Any], needle: str) -> str:
    """Dry-run `manifest` on the server until the API server, having picked up the configuration, shows `needle`."""

    async def attempt() -> str:
        code, out = await webhook.apply(manifest, "--dry-run=server")
        assert code != 0, out
        assert needle in out, out
        return out

    return await eventually(attempt, timeout=30, what=f"the API server to refuse with {needle!r}")


async def test_cross_field_rules_are_refused_naming_the_field(kube: ApiClient, webhook: Webhook) -> None:
    async with registered(kube, webhook):
        proxied_txt = webhook.manifest("DNSRecord", "txt", type="TXT", content="hello", proxied=True)
        out = await until_denied(webhook, proxied_txt, DENIED)
        assert DENIED + "spec.proxied: only A, AAAA and CNAME records can be proxied, not TXT" in out

        code, out = await webhook.apply(proxied_txt)  # for real this time: refused, nothing stored
        assert code != 0
        assert out.strip() == (
            'The request is invalid: error when creating "STDIN": '
            + DENIED
            + "spec.proxied: only A, AAAA and CNAME records can be proxied, not TXT"
        )
        code, out = await webhook.kubectl("get", "dnsrecords", "-n", webhook.namespace, "-o", "name")
        assert "txt" not in out

        two = webhook.manifest("DNSRecord", "mx", type="TXT", content="v=spf1 -all", proxied=True, priority=10)
        code, out = await webhook.apply(two)
        assert code != 0
        assert (
            DENIED + "spec.proxied: only A, AAAA and CNAME records can be proxied, not TXT; "
            "spec.priority: only MX, SRV and URI records have a priority" in out
        )


async def test_a_bad_ttl_is_refused_naming_the_field(kube: ApiClient, webhook: Webhook) -> None:
    async with registered(kube, webhook):
        await until_denied(webhook, webhook.manifest("DNSRecord", "probe", type="TXT", proxied=True), DENIED)
        code, out = await webhook.apply(webhook.manifest("DNSRecord", "ttl", ttl=5))
        # The CRD's schema carries the same rule, and the API server checks the schema before calling webhooks.
        assert code != 0
        assert "spec.ttl" in out
        assert "ttl must be 1 (automatic) or between 30 and 86400" in out


async def test_good_objects_pass_and_can_change(kube: ApiClient, webhook: Webhook) -> None:
    async with registered(kube, webhook):
        await until_denied(webhook, webhook.manifest("DNSRecord", "probe", type="TXT", proxied=True), DENIED)
        before = len(webhook.recorder.paths)
        for kind, name in (("CloudflareAccount", f"acct-{webhook.label}"), ("Zone", "zone"), ("DNSRecord", "www")):
            code, out = await webhook.apply(webhook.manifest(kind, name))
            assert code == 0, out
        record = webhook.manifest("DNSRecord", "www", content="192.0.2.99", ttl=300)
        code, out = await webhook.apply(record)
        assert code == 0, out
        assert "configured" in out
        code, out = await webhook.kubectl(
            "label", "dnsrecord", "www", "-n", webhook.namespace, "team=a"
        )  # metadata-only
        assert code == 0, out
        seen = webhook.recorder.paths[before:]
        for plural in ("cloudflareaccounts", "zones", "dnsrecords"):
            assert f"/validate/{plural}" in seen, seen  # each went through the webhook, the account by its label
        await webhook.kubectl("delete", "cloudflareaccount", f"acct-{webhook.label}", "--wait=false")


async def test_an_immutable_change_is_refused_naming_the_field(kube: ApiClient, webhook: Webhook) -> None:
    async with registered(kube, webhook):
        await until_denied(webhook, webhook.manifest("DNSRecord", "probe", type="TXT", proxied=True), DENIED)
        code, out = await webhook.apply(webhook.manifest("DNSRecord", "www"))
        assert code == 0, out
        changed = webhook.manifest("DNSRecord", "www", type="AAAA", content="2001:db8::1")
        code, out = await webhook.apply(changed)
        assert code != 0
        # Both the CRD's CEL rule and the webhook refuse it; the API server checks the schema first, so its message
        # is the one kubectl shows when the CRD carries the rule.
        assert "spec.type" in out
        assert "type is immutable" in out


async def test_with_the_webhook_down_and_ignored_cel_still_refuses_immutable_changes(
    kube: ApiClient, control_plane: ControlPlane, namespace: str, kflare_crds: None, tmp_path: Path
) -> None:
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    _write_pair(cert_dir, control_plane.ca.issue("webhook", hosts=["127.0.0.1"], server=True))
    tls = ReloadingTLS(cert_dir, ["127.0.0.1"])
    recorder = Recorder()
    async with contextlib.AsyncExitStack() as stack:
        port = await stack.enter_async_context(serving(recorder, tls))
        hook = Webhook(control_plane, namespace, port, cert_dir, tls, recorder, tmp_path)
        async with registered(kube, hook, failure_policy="Ignore"):
            await until_denied(hook, hook.manifest("DNSRecord", "probe", type="TXT", proxied=True), DENIED)
            await stack.aclose()  # the webhook server goes away; its configuration stays
            with pytest.raises(ConnectionRefusedError):  # nothing listens any more
                await handshake(port, control_plane.ca.pem)

            code, out = await hook.apply(hook.manifest("DNSRecord", "www"))
            assert code == 0, out  # Ignore: the dead webhook does not block
            code, out = await hook.apply(hook.manifest("DNSRecord", "www", type="AAAA", content="2001:db8::1"))
            assert code != 0
            assert "spec.type" in out
            assert "type is immutable" in out
            assert "denied the request" not in out  # the CRD's rule, not the webhook
            code, out = await hook.apply(hook.manifest("DNSRecord", "txt", type="TXT", content="x", proxied=True))
            assert code == 0, out  # what only the webhook refuses gets through while it is down


async def test_with_no_webhook_answering_pausing_works_and_every_other_change_is_refused(
    kube: ApiClient, control_plane: ControlPlane, namespace: str, kflare_crds: None, tmp_path: Path
) -> None:
    """failurePolicy Fail while no kflare pod serves (a crash loop, a rollout gone wrong): an operator can still
    pause and unpause a resource, and other tools can still annotate it; a spec change, a label or a deletion
    policy still needs the webhook, and is refused."""
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    _write_pair(cert_dir, control_plane.ca.issue("webhook", hosts=["127.0.0.1"], server=True))
    tls = ReloadingTLS(cert_dir, ["127.0.0.1"])
    async with contextlib.AsyncExitStack() as stack:
        port = await stack.enter_async_context(serving(Recorder(), tls))
        hook = Webhook(control_plane, namespace, port, cert_dir, tls, Recorder(), tmp_path)
        async with registered(kube, hook, failure_policy="Fail"):
            await until_denied(hook, hook.manifest("DNSRecord", "probe", type="TXT", proxied=True), DENIED)
            code, out = await hook.apply(hook.manifest("DNSRecord", "www"))
            assert code == 0, out
            await stack.aclose()  # no webhook answers any more; its configuration stays
            with pytest.raises(ConnectionRefusedError):
                await handshake(port, control_plane.ca.pem)
            record = ("dnsrecord", "www", "-n", namespace)

            async def refused_for_want_of_the_webhook() -> str:
                code, out = await hook.kubectl("annotate", *record, "kflare.dev/deletion-policy=retain")
                assert code != 0, out
                assert "failed calling webhook" in out, out
                return out

            await eventually(refused_for_want_of_the_webhook, timeout=30, what="the webhook call to fail")
            for change in (["kflare.dev/paused=true"], ["kflare.dev/paused-"], ["team.example.com/owner=web"]):
                code, out = await hook.kubectl("annotate", *record, *change)
                assert code == 0, (change, out)
            # As a GitOps tool or `kubectl apply` pauses: the manifest, with the annotation added.
            paused = hook.manifest("DNSRecord", "www")
            paused["metadata"]["annotations"] = {"kflare.dev/paused": "true"}
            code, out = await hook.apply(paused)
            assert code == 0, out
            code, out = await hook.kubectl("get", *record, "-o", "jsonpath={.metadata.annotations}")
            annotations = json.loads(out)
            assert (annotations["team.example.com/owner"], annotations["kflare.dev/paused"]) == ("web", "true")
            refused = [
                ["annotate", *record, "kflare.dev/deletion-policy=keep"],
                ["annotate", *record, "kflare.dev/adoption-policy=adopt"],
                ["label", *record, "team=web"],
                ["patch", *record, "--type=merge", "-p", '{"spec": {"ttl": 300}}'],
                ["annotate", *record, "kflare.dev/paused=true", "kflare.dev/deletion-policy=delete"],
            ]
            for command in refused:
                code, out = await hook.kubectl(*command)
                assert code != 0, (command, out)
                assert "failed calling webhook" in out, (command, out)


async def test_a_replaced_certificate_is_served_without_a_restart(
    kube: ApiClient, webhook: Webhook, control_plane: ControlPlane
) -> None:
    def der(pem: bytes) -> bytes:
        return x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)

    first = (webhook.cert_dir / "tls.crt").read_bytes()
    assert (await handshake(webhook.port, control_plane.ca.pem))[0] == der(first)
    renewed = control_plane.ca.issue("webhook-renewed", hosts=["127.0.0.1"], server=True)
    _write_pair(webhook.cert_dir, renewed)

    async def presented() -> bool:
        return (await handshake(webhook.port, control_plane.ca.pem))[0] == der(renewed[1])

    await eventually(presented, timeout=20, what="the renewed certificate to be presented")
    async with registered(kube, webhook):  # the API server verifies the renewed certificate too
        await until_denied(webhook, webhook.manifest("DNSRecord", "t", type="TXT", proxied=True), DENIED)


async def test_kflare_run_serves_the_webhook_over_tls(
    control_plane: ControlPlane, fresh_emulator: EmulatorProcess, kflare_crds: None, tmp_path: Path
) -> None:
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    _write_pair(cert_dir, control_plane.ca.issue("webhook", hosts=["127.0.0.1"], server=True))
    port = free_port()
    args = (f"--webhook-port={port}", f"--webhook-cert-dir={cert_dir}")
    sent = review("CREATE", sample("DNSRecord", type="TXT", content="x", proxied=True))
    with controller_process(control_plane, fresh_emulator, tmp_path, *args):
        async with httpx.AsyncClient(verify=client_context(control_plane.ca.pem), timeout=10) as http:

            async def answered() -> httpx.Response:
                try:
                    return await http.post(f"https://127.0.0.1:{port}/validate/dnsrecords", content=json.dumps(sent))
                except httpx.TransportError as exc:
                    raise AssertionError(f"not serving yet: {exc!r}") from exc

            reply = await eventually(answered, timeout=30, what="kflare run's webhook listener")
            assert reply.status_code == 200
            response = reply.json()["response"]
            assert response["uid"] == sent["request"]["uid"]
            assert response["allowed"] is False
            assert response["status"]["message"] == (
                "spec.proxied: only A, AAAA and CNAME records can be proxied, not TXT"
            )
            assert reply.extensions["http_version"] == b"HTTP/1.1"
