"""Tenancy as an attacker meets it: two teams, each a ServiceAccount `tenant` in its own namespace (team-a, team-b)
with the built-in `edit` role and every namespaced kflare kind (the chart's `kflare-edit` rules), acting through
impersonation with kubectl. The cluster administrator (the fixture's kubeconfig, which the controller runs as too)
makes the CloudflareAccounts and their token Secrets.

Each attack compares what Cloudflare holds (the emulator's objects and its log of writes) before and after, and
reads the condition the attacking team would see. One controller, serving its admission webhooks registered with
the API server for the two namespaces, serves every case; each case has a Cloudflare account of its own, so no
listing the controller kept from an earlier case hides what a case makes, and deletes what it made.

The last cases go past the webhook the one way it lets a tenant: an object being deleted is never sent to it
(`webhooks.configuration.NOT_BEING_DELETED`), so a tenant may write kflare's create intent or a claim label into its
own resource while it waits in deletion (kflare's finalizer, which any tenant may set, and the pause hold it there).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from app.api.claim import claim_name
from app.api.grant import Grant
from app.api.registry import KINDS
from app.api.tunnel import TOKEN_KEY
from app.controlplane import ControlPlane, free_port
from tests.fixtures.controller import (
    GROUP,
    SYSTEM_NAMESPACE,
    VERSION,
    ControllerProcess,
    Kflare,
    controller_process,
)
from tests.fixtures.driver import token_data
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.kube import TEST_LABEL
from tests.helpers import eventually
from tests.kinds import cf, workers
from webhooks.configuration import configuration as webhook_configuration
from webhooks.configuration import url_client_config

pytestmark = pytest.mark.integration

TENANTS = ("team-a", "team-b")
TENANT_ROLE = "kflare-tenancy-edit"
"""The chart's `kflare-edit` rules: the test API server runs no controller-manager, so `edit` aggregates nothing."""
NAMESPACED_PLURALS = sorted(model.info.plural for model in KINDS if model.info.namespaced)
TENANT_PLURALS = [*NAMESPACED_PLURALS, Grant.info.plural]
"""What `kflare-edit` names: the namespaced kinds and, as the chart adds, Grants (a configuration kind)."""
EDIT_SECRETS_ROLE = "kflare-tenancy-edit-secrets"
"""What the built-in `edit` holds on a real cluster (from `system:aggregate-to-edit`) for a namespace's Secrets, which
a team writes its own token into for an `Account`: without a controller-manager, `edit` holds nothing here."""
ACCOUNT_LABEL = "kflare-tenancy-test"
"""On this module's CloudflareAccounts: what the webhook for the cluster-scoped kind selects."""
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
CLAIMS = "cloudflareclaims"
ADOPT = {"kflare.dev/adoption-policy": "adopt"}
ADOPTION_FIELD = "metadata.annotations[kflare.dev/adoption-policy]: CloudflareAccount"
ZONE_ID_LABEL = "kflare.dev/zone-id"
NAME_LABEL = "kubernetes.io/metadata.name"
CREATE_INTENT = "kflare.dev/create-intent"
ADOPTED = "kflare.dev/adopted"


def user_of(namespace: str) -> str:
    return f"system:serviceaccount:{namespace}:tenant"


def impersonation(namespace: str) -> list[str]:
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]
    return [f"--as={user_of(namespace)}", *(f"--as-group={group}" for group in groups)]


def kubectl_argv(plane: ControlPlane, cache: Path, *args: str) -> list[str]:
    return [str(plane.binary("kubectl")), f"--kubeconfig={plane.kubeconfig_path}", f"--cache-dir={cache}", *args]


def kubectl_sync(
    plane: ControlPlane, cache: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        kubectl_argv(plane, cache, *args), input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def tenant_objects() -> list[dict[str, Any]]:
    """The two namespaces, their ServiceAccounts, the kflare role, the stand-in for `edit`'s Secret rules and the
    bindings (to them and to `edit`)."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": TENANT_ROLE},
            "rules": [
                {
                    "apiGroups": [GROUP],
                    "resources": TENANT_PLURALS,
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": EDIT_SECRETS_ROLE},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["secrets"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"],
                }
            ],
        },
    ]
    for namespace in TENANTS:
        objects += [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {TEST_LABEL: "on"}}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tenant", "namespace": namespace}},
        ]
        for role in ("edit", TENANT_ROLE, EDIT_SECRETS_ROLE):
            objects.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": f"tenant-{role}", "namespace": namespace},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}],
                }
            )
    return objects


def webhooks_for_tenants(name: str, port: int, ca_pem: bytes) -> dict[str, Any]:
    """kflare's webhooks, as the chart registers them, calling this module's controller: for the namespaced kinds in
    the two tenants' namespaces, for CloudflareAccount on this module's accounts (a webhook that outlived its
    controller must not stand in another module's way)."""
    body = webhook_configuration(
        name, url_client_config(f"https://127.0.0.1:{port}", ca_pem), labels={TEST_LABEL: "on"}, timeout_seconds=5
    )
    for hook, model in zip(body["webhooks"], sorted(KINDS, key=lambda m: m.info.namespaced), strict=True):
        if model.info.namespaced:
            hook["namespaceSelector"] = {
                "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(TENANTS)}]
            }
        else:
            hook["objectSelector"] = {"matchLabels": {ACCOUNT_LABEL: "on"}}
    return body


def zone_manifest(
    name: str,
    domain: str,
    account: str,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Zone",
        "metadata": {"name": name, "annotations": annotations or {}, "labels": labels or {}},
        "spec": {"name": domain, "accountRef": {"name": account}},
    }


def record_manifest(name: str, zone: str, host: str, content: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DNSRecord",
        "metadata": {"name": name},
        "spec": {"zoneRef": {"name": zone}, "name": host, "type": "A", "content": content, "ttl": 300},
    }


def tunnel_manifest(name: str, tunnel: str, account: str, annotations: dict[str, str], secret: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Tunnel",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"name": tunnel, "accountRef": {"name": account}, "credentialsSecretRef": {"name": secret}},
    }


@dataclass
class Plane:
    control_plane: ControlPlane
    controller: ControllerProcess
    cache: Path
    """kubectl's discovery cache, made after the CRDs were installed."""


@pytest.fixture(scope="module")
def tenancy_plane(
    control_plane: ControlPlane, emulator: EmulatorProcess, kflare_crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Plane]:
    """The tenants and their RBAC, one controller serving its webhooks, registered for the tenants' namespaces."""
    workdir = tmp_path_factory.mktemp("tenancy")
    cache = workdir / "kubectl-cache"
    applied = kubectl_sync(
        control_plane,
        cache,
        "apply",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": tenant_objects()}),
    )
    assert applied.returncode == 0, applied.stderr
    certs = workdir / "certs"
    certs.mkdir()
    key, cert = control_plane.ca.issue("webhook", hosts=["127.0.0.1"], server=True)
    (certs / "tls.key").write_bytes(key)
    (certs / "tls.crt").write_bytes(cert)
    port = free_port()
    args = (f"--webhook-port={port}", f"--webhook-cert-dir={certs}")
    name = f"kflare-tenancy-{uuid.uuid4().hex[:8]}"
    with controller_process(control_plane, emulator, workdir, *args) as controller:
        body = webhooks_for_tenants(name, port, control_plane.ca.pem)
        created = kubectl_sync(control_plane, cache, "create", "-f", "-", stdin=json.dumps(body))
        assert created.returncode == 0, created.stderr
        try:
            _wait_for_rbac_and_webhooks(control_plane, cache)
            yield Plane(control_plane, controller, cache)
        finally:
            kubectl_sync(control_plane, cache, "delete", "validatingwebhookconfiguration", name, "--ignore-not-found")


def _wait_for_rbac_and_webhooks(plane: ControlPlane, cache: Path, timeout: float = 30.0) -> None:
    """Until each tenant may create Zones in its namespace and the API server calls the webhook (it refuses a claim
    label on a dry run)."""
    deadline = time.monotonic() + timeout
    pending = set(TENANTS)
    last = ""
    while pending:
        for namespace in sorted(pending):
            can = kubectl_sync(
                plane, cache, "auth", "can-i", "create", "zones.kflare.dev", "-n", namespace, *impersonation(namespace)
            )
            probe = zone_manifest("probe", "probe.example", "none", labels={ZONE_ID_LABEL: "0" * 32})
            dry = kubectl_sync(
                plane,
                cache,
                "create",
                "--dry-run=server",
                "-n",
                namespace,
                "-f",
                "-",
                *impersonation(namespace),
                stdin=json.dumps(probe),
            )
            last = f"can-i: {can.stdout.strip()} {can.stderr.strip()}; dry run: {dry.stdout} {dry.stderr}"
            if can.stdout.strip() == "yes" and "denied the request" in dry.stderr:
                pending.discard(namespace)
        if pending and time.monotonic() > deadline:
            raise AssertionError(f"tenants' RBAC or the webhooks not in effect after {timeout}s: {last}")
        if pending:
            time.sleep(0.2)  # a poll with a deadline, as `tests.helpers.eventually` (this fixture is synchronous)


class Tenant:
    """One team, acting through kubectl as its ServiceAccount (impersonated)."""

    def __init__(self, plane: Plane, namespace: str) -> None:
        self.plane, self.namespace = plane, namespace

    async def kubectl(self, *args: str, stdin: str | None = None) -> tuple[int, str]:
        """(exit code, stdout and stderr) of kubectl run as this tenant, in its namespace."""
        argv = kubectl_argv(
            self.plane.control_plane, self.plane.cache, "-n", self.namespace, *impersonation(self.namespace), *args
        )
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 60)
        assert proc.returncode is not None
        return proc.returncode, out.decode(errors="replace")

    async def must(self, *args: str, stdin: str | None = None) -> str:
        code, out = await self.kubectl(*args, stdin=stdin)
        assert code == 0, f"{self.namespace}: kubectl {' '.join(args)}: {out}"
        return out

    async def make(self, manifest: dict[str, Any]) -> None:
        await self.must("create", "-f", "-", stdin=json.dumps(manifest))

    async def refused(self, needle: str, *args: str, stdin: str | None = None) -> str:
        code, out = await self.kubectl(*args, stdin=stdin)
        assert code != 0, f"{self.namespace} was allowed: kubectl {' '.join(args)}: {out}"
        assert needle in out, out
        return out


class Tenancy:
    """One case: the two teams, what the administrator sees of them, the case's own Cloudflare account."""

    def __init__(self, plane: Plane, kube: ApiClient, emulator: EmulatorProcess, account_id: str) -> None:
        self.plane, self.kube, self.emulator, self.account_id = plane, kube, emulator, account_id
        self.token = emulator.add_token(["*"], name="kflare")
        """The token the case's accounts give kflare: the calls it makes are kflare's (the test reads Cloudflare, and
        seeds it, with the emulator's starting token)."""
        self.objects = client.CustomObjectsApi(kube)
        self.core = client.CoreV1Api(kube)
        self.a, self.b = Tenant(plane, "team-a"), Tenant(plane, "team-b")
        self.admin = {namespace: Kflare(kube, namespace, emulator) for namespace in TENANTS}
        self.label = uuid.uuid4().hex[:6]
        self.accounts: list[str] = []
        self.secrets: list[str] = []
        self.claims: list[str] = []

    def of(self, tenant: Tenant) -> Kflare:
        return self.admin[tenant.namespace]

    async def past_admission(self, tenant: Tenant, manifest: dict[str, Any]) -> None:
        """Make `manifest` in the tenant's namespace as it reaches the controller when admission did not decide (made
        before an account or a Zone was narrowed, or while the webhook was not answering): as the administrator,
        whose requests the webhook does not judge for tenancy (the controller runs as it). The controller must
        refuse it all the same."""
        await self.of(tenant).apply(copy.deepcopy(manifest))

    async def account(self, *, allowed: dict[str, Any] | None = None, adoption: dict[str, Any] | None = None) -> str:
        """A token Secret (in the controller's namespace) and a CloudflareAccount for this case's Cloudflare account,
        with the policies given, made by the administrator; Ready."""
        name = f"acct-{self.label}-{len(self.accounts)}"
        secret = f"cf-token-{name}"
        await self.core.create_namespaced_secret(
            SYSTEM_NAMESPACE,
            client.V1Secret(
                metadata=client.V1ObjectMeta(name=secret, namespace=SYSTEM_NAMESPACE),
                data=token_data(self.token["value"]),
            ),
        )
        self.secrets.append(secret)
        spec: dict[str, Any] = {
            "accountID": self.account_id,
            "tokenSecretRef": {"name": secret, "namespace": SYSTEM_NAMESPACE},
        }
        if allowed is not None:
            spec["allowedNamespaces"] = allowed
        if adoption is not None:
            spec["adoptionNamespaces"] = adoption
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "CloudflareAccount",
            "metadata": {"name": name, "labels": {ACCOUNT_LABEL: "on"}},
            "spec": spec,
        }
        await self.objects.create_cluster_custom_object(GROUP, VERSION, "cloudflareaccounts", body)
        self.accounts.append(name)
        await self.admin["team-a"].ready("CloudflareAccount", name, reason="Validated")
        return name

    def calls(self, since: float) -> list[dict[str, Any]]:
        """Every call kflare made to Cloudflare since `since`."""
        return self.emulator.calls(since=since, token_id=self.token["id"])

    def writes(self, since: float) -> list[dict[str, Any]]:
        """Every write kflare asked Cloudflare for since `since`."""
        return [c for c in self.calls(since) if c["method"] in WRITE_METHODS]

    def zones(self, domain: str) -> list[dict[str, Any]]:
        return [
            z
            for z in cf(self.emulator, "GET", "/zones", params={"name": domain})
            if z["account"]["id"] == self.account_id
        ]

    def tunnels(self, name: str) -> list[dict[str, Any]]:
        path = f"/accounts/{self.account_id}/cfd_tunnel"
        return list(cf(self.emulator, "GET", path, params={"name": name, "is_deleted": "false"}))

    def records(self, zone_id: str) -> list[dict[str, Any]]:
        return list(cf(self.emulator, "GET", f"/zones/{zone_id}/dns_records", params={"per_page": 5000}))

    async def claim(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(await self.objects.get_cluster_custom_object(GROUP, VERSION, CLAIMS, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def secret(self, namespace: str, name: str) -> client.V1Secret | None:
        try:
            return await self.core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def ready_zone(self, tenant: Tenant, name: str, domain: str, account: str) -> str:
        """The tenant's own Zone, made by the tenant, Ready; its Cloudflare ID."""
        await tenant.make(zone_manifest(name, domain, account))
        zone = await self.of(tenant).ready("Zone", name, reason="Synced")
        return str(zone["status"]["cloudflareMetadata"]["zoneID"])

    async def cleanup(self) -> None:
        for kflare in self.admin.values():
            kflare.account = "-"  # its own account is not this module's: the administrator's are deleted below
            await kflare.cleanup()
        for namespace in TENANTS:  # Tunnels' token Secrets: no garbage collector runs here
            for secret in (await self.core.list_namespaced_secret(namespace)).items:
                if secret.metadata.name.endswith(self.label):
                    with contextlib.suppress(ApiException):
                        await self.core.delete_namespaced_secret(secret.metadata.name, namespace)
        for name in self.claims:
            with contextlib.suppress(ApiException):
                await self.objects.delete_cluster_custom_object(GROUP, VERSION, CLAIMS, name)
        for name in self.accounts:
            with contextlib.suppress(ApiException):
                await self.objects.delete_cluster_custom_object(GROUP, VERSION, "cloudflareaccounts", name)

        async def accounts_gone() -> bool:
            listing = await self.objects.list_cluster_custom_object(GROUP, VERSION, "cloudflareaccounts")
            return not {item["metadata"]["name"] for item in listing["items"]} & set(self.accounts)

        try:
            await eventually(accounts_gone, timeout=20, what="the case's accounts to be deleted")
        finally:
            for name in self.accounts:
                with contextlib.suppress(ApiException):
                    await self.objects.patch_cluster_custom_object(
                        GROUP,
                        VERSION,
                        "cloudflareaccounts",
                        name,
                        {"metadata": {"finalizers": None}},
                        _content_type="application/merge-patch+json",
                    )
            for secret in self.secrets:
                with contextlib.suppress(ApiException):
                    await self.core.patch_namespaced_secret(
                        secret, SYSTEM_NAMESPACE, {"metadata": {"finalizers": None}}
                    )
                with contextlib.suppress(ApiException):
                    await self.core.delete_namespaced_secret(secret, SYSTEM_NAMESPACE)


@pytest.fixture
async def tenancy(tenancy_plane: Plane, kube: ApiClient, fresh_emulator: EmulatorProcess) -> AsyncIterator[Tenancy]:
    seeded = fresh_emulator.seed({"accounts": [{"id": uuid.uuid4().hex, "name": "tenancy"}]})
    case = Tenancy(tenancy_plane, kube, fresh_emulator, seeded["accounts"][0]["id"])
    try:
        yield case
    finally:
        await case.cleanup()


def condition(obj: dict[str, Any]) -> dict[str, Any]:
    (ready,) = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"]
    return dict(ready)


def domain(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:6]}.example"


# ---- the positive control -----------------------------------------------------------------------------------------


async def test_each_tenant_manages_its_own_zone_and_records(tenancy: Tenancy) -> None:
    account = await tenancy.account()
    for tenant in (tenancy.a, tenancy.b):
        name = domain(tenant.namespace)
        zone_id = await tenancy.ready_zone(tenant, "zone", name, account)
        await tenant.make(record_manifest("www", "zone", f"www.{name}", "192.0.2.10"))
        record = await tenancy.of(tenant).ready("DNSRecord", "www", reason="Synced")
        held = tenancy.records(zone_id)
        assert [(r["name"], r["content"]) for r in held] == [(f"www.{name}", "192.0.2.10")]
        assert held[0]["id"] == record["status"]["cloudflareMetadata"]["recordID"]
        assert [z["id"] for z in tenancy.zones(name)] == [zone_id]
        # What a team may do in its own namespace, it may do: read, change and see its objects.
        listed = await tenant.must("get", "zones,dnsrecords", "-o", "name")
        assert "zone.kflare.dev/zone" in listed
        assert "dnsrecord.kflare.dev/www" in listed


# ---- the attacks ------------------------------------------------------------------------------------------------


async def test_adopting_another_namespaces_zone_is_refused_and_deleting_the_attempt_deletes_nothing(
    tenancy: Tenancy,
) -> None:
    account = await tenancy.account()  # no policies: everyone may use it and adopt through it
    victim = domain("victim")
    zone_id = await tenancy.ready_zone(tenancy.a, "zone", victim, account)
    before = tenancy.zones(victim)
    since = time.time()

    attack = {**ADOPT, "kflare.dev/deletion-policy": "delete"}
    await tenancy.b.make(zone_manifest("stolen", victim, account, annotations=attack))
    stolen = await tenancy.of(tenancy.b).ready("Zone", "stolen", reason="ClaimedElsewhere", status="False")
    message = condition(stolen)["message"]
    assert "a Zone in another namespace" in message, message
    assert "team-a" not in message, "the refusal names the namespace that holds the zone"
    assert not (stolen["status"].get("cloudflareMetadata") or {}).get("zoneID"), stolen["status"]
    labels = stolen["metadata"].get("labels") or {}
    assert ZONE_ID_LABEL not in labels, labels
    assert ADOPTED not in (stolen["metadata"].get("annotations") or {})
    assert tenancy.writes(since) == []
    assert await tenancy.claim(claim_name("Zone", tenancy.account_id, zone_id)) is None, "team-b took a claim"

    await tenancy.b.must("delete", "zone", "stolen", "--wait=false")
    await tenancy.of(tenancy.b).gone("Zone", "stolen")
    assert tenancy.writes(since) == [], "deleting the refused Zone wrote to Cloudflare"
    assert tenancy.zones(victim) == before, "team-a's zone was touched"
    await tenancy.of(tenancy.a).ready("Zone", "zone", reason="Synced")

    await tenancy.a.make(record_manifest("after", "zone", f"after.{victim}", "192.0.2.20"))
    await tenancy.of(tenancy.a).ready("DNSRecord", "after", reason="Synced")
    assert [r["name"] for r in tenancy.records(zone_id)] == [f"after.{victim}"]
    assert [c["path"] for c in tenancy.writes(since) if "/dns_records" in c["path"]], "the log shows kflare's writes"


async def test_forging_a_claim_label_or_kflares_annotations_is_refused_at_admission(tenancy: Tenancy) -> None:
    account = await tenancy.account()
    victim = domain("victim")
    zone_id = await tenancy.ready_zone(tenancy.a, "zone", victim, account)
    since = time.time()
    b = tenancy.b
    label_path = f"metadata.labels[{ZONE_ID_LABEL}]"

    # On create: the label naming team-a's zone, by kubectl and claiming to be kflare (its field manager), by a
    # client-side and a server-side apply.
    forged = zone_manifest("forged", victim, account, labels={ZONE_ID_LABEL: zone_id})
    await b.refused(label_path, "create", "-f", "-", stdin=json.dumps(forged))
    await b.refused(label_path, "create", "--field-manager=kflare", "-f", "-", stdin=json.dumps(forged))
    await b.refused(label_path, "apply", "--field-manager=kflare", "-f", "-", stdin=json.dumps(forged))
    await b.refused(label_path, "apply", "--server-side", "--field-manager=kflare", "-f", "-", stdin=json.dumps(forged))
    for annotation, value in (
        (CREATE_INTENT, json.dumps({"at": "2026-01-01T00:00:00Z", "match": victim})),
        (ADOPTED, "true"),
    ):
        intent = zone_manifest("forged", victim, account, annotations={annotation: value})
        path = f"metadata.annotations[{annotation}]"
        await b.refused(path, "create", "-f", "-", stdin=json.dumps(intent))
        await b.refused(path, "create", "--field-manager=kflare", "-f", "-", stdin=json.dumps(intent))
    _, listed = await b.kubectl("get", "zones", "-o", "name")
    assert "forged" not in listed

    # On update: a Zone of team-b's own (paused: it calls no one) gets the label or the annotation added.
    await b.make(zone_manifest("own", domain("own"), account, annotations={"kflare.dev/paused": "true"}))
    await b.refused(label_path, "label", "zone", "own", f"{ZONE_ID_LABEL}={zone_id}")
    await b.refused(label_path, "label", "zone", "own", f"{ZONE_ID_LABEL}={zone_id}", "--field-manager=kflare")
    patch = json.dumps({"metadata": {"labels": {ZONE_ID_LABEL: zone_id}}})
    await b.refused(label_path, "patch", "zone", "own", "--type=merge", "-p", patch, "--field-manager=kflare")
    intent = json.dumps({"at": "2026-01-01T00:00:00Z"})
    intent_path = f"metadata.annotations[{CREATE_INTENT}]"
    await b.refused(intent_path, "annotate", "zone", "own", f"{CREATE_INTENT}={intent}")
    await b.refused(intent_path, "annotate", "zone", "own", f"{CREATE_INTENT}={intent}", "--field-manager=kflare")
    own = await tenancy.of(b).get("Zone", "own")
    assert ZONE_ID_LABEL not in (own["metadata"].get("labels") or {})
    assert CREATE_INTENT not in (own["metadata"].get("annotations") or {})

    assert tenancy.writes(since) == []
    await tenancy.of(tenancy.a).ready("Zone", "zone", reason="Synced")
    assert [z["id"] for z in tenancy.zones(victim)] == [zone_id]


async def test_a_tenant_may_not_touch_accounts_claims_or_status(tenancy: Tenancy) -> None:
    account = await tenancy.account(
        allowed={"from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}}
    )
    b = tenancy.b
    since = time.time()
    forbidden = "Forbidden"

    # The accounts: make one (pointing at the administrator's token), open one up, delete one.
    own_account = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CloudflareAccount",
        "metadata": {"name": f"mine-{tenancy.label}", "labels": {ACCOUNT_LABEL: "on"}},
        "spec": {
            "accountID": tenancy.account_id,
            "tokenSecretRef": {"name": tenancy.secrets[0], "namespace": SYSTEM_NAMESPACE},
        },
    }
    await b.refused(forbidden, "create", "-f", "-", stdin=json.dumps(own_account))
    opened = json.dumps({"spec": {"allowedNamespaces": {"from": "All"}}})
    await b.refused(forbidden, "patch", "cloudflareaccount", account, "--type=merge", "-p", opened)
    await b.refused(forbidden, "delete", "cloudflareaccount", account, "--wait=false")
    held = await tenancy.admin["team-a"].get("CloudflareAccount", account)
    assert held["spec"]["allowedNamespaces"]["from"] == "Selector"
    assert not held["metadata"].get("deletionTimestamp")

    # The claims: list them, make one for an object, delete one.
    object_id = uuid.uuid4().hex
    name = claim_name("Zone", tenancy.account_id, object_id)
    claim = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CloudflareClaim",
        "metadata": {"name": name},
        "spec": {
            "kind": "Zone",
            "accountID": tenancy.account_id,
            "objectID": object_id,
            "owner": {"kind": "Zone", "namespace": "team-b", "name": "zone", "uid": str(uuid.uuid4())},
        },
    }
    await b.refused(forbidden, "get", CLAIMS)
    await b.refused(forbidden, "create", "-f", "-", stdin=json.dumps(claim))
    claim["spec"]["owner"]["namespace"] = "team-a"
    await tenancy.objects.create_cluster_custom_object(GROUP, VERSION, CLAIMS, claim)  # the administrator's
    tenancy.claims.append(name)
    await b.refused(forbidden, "delete", CLAIMS, name, "--wait=false")
    await b.refused(forbidden, "get", CLAIMS, name)
    assert await tenancy.claim(name) is not None

    # Another team's resources, the token Secret, and the status kflare writes (where a zone's ID is recorded).
    await b.refused(forbidden, "get", "zones", "-n", "team-a")
    await b.refused(forbidden, "get", "secret", tenancy.secrets[0], "-n", SYSTEM_NAMESPACE)
    paused = {"kflare.dev/paused": "true"}
    await tenancy.past_admission(b, zone_manifest("own", domain("own"), account, annotations=paused))
    status = json.dumps({"status": {"cloudflareMetadata": {"zoneID": object_id}}})
    await b.refused(forbidden, "patch", "zone", "own", "--subresource=status", "--type=merge", "-p", status)
    assert tenancy.writes(since) == []


async def test_an_account_that_does_not_allow_the_namespace_is_not_used_for_it(tenancy: Tenancy) -> None:
    only_a = {
        "from": "Selector",
        "selector": {
            "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a"]}]
        },
    }
    account = await tenancy.account(allowed=only_a)
    name_b, name_a = domain("team-b"), domain("team-a")
    since = time.time()

    manifest = zone_manifest("zone", name_b, account)
    out = await tenancy.b.refused("spec.accountRef", "create", "-f", "-", stdin=json.dumps(manifest))
    assert f"CloudflareAccount {account} does not let namespace team-b use it" in out, out
    assert "team-a" not in out, "the refusal at admission says who else may use the account"
    await tenancy.past_admission(tenancy.b, manifest)
    zone_b = await tenancy.of(tenancy.b).ready("Zone", "zone", reason="AccountNotPermitted", status="False")
    assert "team-b" in condition(zone_b)["message"]
    assert "team-a" not in condition(zone_b)["message"], "the refusal says who else may use the account"
    zone_calls = [c for c in tenancy.calls(since) if "/zones" in c["path"] or name_b in json.dumps(c)]
    assert zone_calls == [], "team-b's Zone made Cloudflare calls through an account it may not use"
    assert tenancy.writes(since) == []

    zone_id = await tenancy.ready_zone(tenancy.a, "zone", name_a, account)
    assert [z["id"] for z in tenancy.zones(name_a)] == [zone_id]
    created = [c for c in tenancy.writes(since) if c["method"] == "POST" and c["path"].endswith("/zones")]
    assert len(created) == 1, "the call log does not show kflare's calls: the checks above prove nothing"
    assert tenancy.zones(name_b) == []
    assert [c for c in tenancy.calls(since) if name_b in json.dumps(c)] == []
    await tenancy.of(tenancy.b).ready("Zone", "zone", reason="AccountNotPermitted", status="False")


async def test_adopting_through_an_account_that_does_not_let_the_namespace_adopt_is_refused(
    tenancy: Tenancy,
) -> None:
    only_a = {"from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}}
    account = await tenancy.account(allowed={"from": "All"}, adoption=only_a)
    outside = domain("outside")
    seeded = cf(tenancy.emulator, "POST", "/zones", json={"name": outside, "account": {"id": tenancy.account_id}})
    zone_id = str(seeded["id"])
    name = claim_name("Zone", tenancy.account_id, zone_id)
    since = time.time()

    manifest = zone_manifest("taken", outside, account, annotations=ADOPT)
    out = await tenancy.b.refused(ADOPTION_FIELD, "create", "-f", "-", stdin=json.dumps(manifest))
    assert "team-a" not in out, out
    await tenancy.past_admission(tenancy.b, manifest)
    taken = await tenancy.of(tenancy.b).ready("Zone", "taken", reason="AdoptionNotPermitted", status="False")
    assert "team-a" not in condition(taken)["message"]
    assert tenancy.writes(since) == []
    assert await tenancy.claim(name) is None, "a refused adoption took a claim"

    await tenancy.a.make(zone_manifest("adopted", outside, account, annotations=ADOPT))
    adopted = await tenancy.of(tenancy.a).ready("Zone", "adopted", reason="Synced")
    assert adopted["status"]["cloudflareMetadata"]["zoneID"] == zone_id
    assert adopted["metadata"]["annotations"].get(ADOPTED) == "true"
    claim = await tenancy.claim(name)
    assert claim is not None, f"no CloudflareClaim {name} for the adopted zone"
    assert claim["spec"]["kind"] == "Zone"
    assert claim["spec"]["objectID"] == zone_id
    assert claim["spec"]["accountID"] == tenancy.account_id
    owner = claim["spec"]["owner"]
    assert (owner["kind"], owner["namespace"], owner["name"], owner["uid"]) == (
        "Zone",
        "team-a",
        "adopted",
        adopted["metadata"]["uid"],
    )
    # team-b is still refused, and is not told who took the zone.
    taken = await tenancy.of(tenancy.b).get("Zone", "taken")
    assert "team-a" not in condition(taken)["message"]
    assert condition(taken)["status"] == "False"

    since = time.time()
    await tenancy.a.must("delete", "zone", "adopted", "--wait=false")
    await tenancy.of(tenancy.a).gone("Zone", "adopted")

    async def released() -> bool:
        return await tenancy.claim(name) is None

    await eventually(released, timeout=20, what="the claim to go with its owner")
    assert [z["id"] for z in tenancy.zones(outside)] == [zone_id], "the adopted zone was not retained"
    assert [c for c in tenancy.writes(since) if c["method"] == "DELETE"] == []


async def test_adopting_an_unclaimed_tunnel_without_the_accounts_leave_gets_no_token(tenancy: Tenancy) -> None:
    only_a = {"from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}}
    account = await tenancy.account(allowed={"from": "All"}, adoption=only_a)
    tunnel_name = f"left-{tenancy.label}"

    token_secret = f"tunnel-token-{tenancy.label}"
    retain = {"kflare.dev/deletion-policy": "retain"}
    await tenancy.a.make(tunnel_manifest("tunnel", tunnel_name, account, retain, token_secret))
    made = await tenancy.of(tenancy.a).ready("Tunnel", "tunnel", reason="Synced")
    tunnel_id = made["status"]["cloudflareMetadata"]["tunnelID"]
    secret = await tenancy.core.read_namespaced_secret(token_secret, "team-a")
    assert (secret.data or {}).get(TOKEN_KEY), "team-a's tunnel got no token"
    await tenancy.a.must("delete", "tunnel", "tunnel", "--wait=false")
    await tenancy.of(tenancy.a).gone("Tunnel", "tunnel")
    assert [t["id"] for t in tenancy.tunnels(tunnel_name)] == [tunnel_id], "the retained tunnel is gone"
    since = time.time()

    manifest = tunnel_manifest("tunnel", tunnel_name, account, ADOPT, token_secret)
    await tenancy.b.refused(ADOPTION_FIELD, "create", "-f", "-", stdin=json.dumps(manifest))
    await tenancy.past_admission(tenancy.b, manifest)
    refused = await tenancy.of(tenancy.b).ready("Tunnel", "tunnel", reason="AdoptionNotPermitted", status="False")
    assert "team-a" not in condition(refused)["message"]
    assert not (refused["status"].get("cloudflareMetadata") or {}).get("tunnelID")
    assert "kflare.dev/tunnel-id" not in (refused["metadata"].get("labels") or {})
    stolen = await tenancy.secret("team-b", token_secret)
    held = None if stolen is None else (stolen.data or {}).get(TOKEN_KEY)
    assert not held, f"team-b's Secret holds a tunnel token: {base64.b64decode(held or '')[:12]!r}..."
    assert tenancy.writes(since) == []
    assert await tenancy.claim(claim_name("Tunnel", tenancy.account_id, tunnel_id)) is None
    assert [t["id"] for t in tenancy.tunnels(tunnel_name)] == [tunnel_id]


FORGERIES = ("create-intent", "claim-label")


async def forge_while_deleting(tenancy: Tenancy, kind: str, name: str, forged: dict[str, Any]) -> str:
    """Delete team-b's resource (paused, with kflare's finalizer: held in deletion), then write `forged` metadata
    into it and unpause it in one patch, which no webhook sees; wait until the controller acted on it. Returns what
    kubectl said of the patch."""
    tenant, admin = tenancy.b, tenancy.of(tenancy.b)
    await admin.ready(kind, name, reason="Paused", status="Unknown")
    await tenant.must("delete", kind.lower(), name, "--wait=false")

    async def held() -> bool:
        return bool((await admin.get(kind, name))["metadata"].get("deletionTimestamp"))

    await eventually(held, timeout=20, what=f"team-b's {kind} to be held in deletion")
    annotations = {**forged.get("annotations", {}), "kflare.dev/paused": None}
    patch = {"metadata": {**forged, "annotations": annotations}}
    code, out = await tenant.kubectl("patch", kind.lower(), name, "--type=merge", "-p", json.dumps(patch))
    if code != 0:
        return out  # refused: nothing reached the controller

    async def acted_on() -> bool:
        try:
            obj = await admin.get(kind, name)
        except ApiException as exc:
            return exc.status == 404
        return bool((obj.get("status") or {}).get("conditions")) and condition(obj)["reason"] != "Paused"

    await eventually(acted_on, timeout=30, what=f"the controller to act on team-b's unpaused {kind}")
    return out


def forgery(how: str, label: str, object_id: str) -> dict[str, Any]:
    if how == "create-intent":
        return {"annotations": {CREATE_INTENT: json.dumps({"at": "2026-01-01T00:00:00Z"})}}
    return {"labels": {label: object_id}}


def bait(manifest: dict[str, Any]) -> dict[str, Any]:
    """Deleted by its explicit policy, paused, and holding kflare's finalizer from the start (any tenant may write a
    finalizer)."""
    manifest["metadata"]["annotations"].update({"kflare.dev/deletion-policy": "delete", "kflare.dev/paused": "true"})
    manifest["metadata"]["finalizers"] = ["kflare.dev/finalizer"]
    return manifest


@pytest.mark.parametrize("how", FORGERIES)
async def test_a_resource_being_deleted_that_forges_kflares_metadata_deletes_no_other_namespaces_zone(
    tenancy: Tenancy, how: str
) -> None:
    """The webhook is not called for an object being deleted (so that removing a finalizer by hand works while no
    webhook answers): what a tenant writes then into its resource's metadata (a create intent, which makes kflare
    look the object up by its key, or a claim label naming team-a's zone) must not make kflare delete what another
    namespace owns."""
    account = await tenancy.account()
    victim = domain("victim")
    zone_id = await tenancy.ready_zone(tenancy.a, "zone", victim, account)
    since = time.time()

    await tenancy.b.make(bait(zone_manifest("bait", victim, account)))
    out = await forge_while_deleting(tenancy, "Zone", "bait", forgery(how, ZONE_ID_LABEL, zone_id))

    deleted = [c["path"] for c in tenancy.writes(since) if c["method"] == "DELETE"]
    assert deleted == [], f"for team-b's Zone with a forged {how} ({out.strip()}), kflare deleted {deleted}"
    assert [z["id"] for z in tenancy.zones(victim)] == [zone_id], "team-a's zone is gone from Cloudflare"
    await tenancy.of(tenancy.a).ready("Zone", "zone", reason="Synced")
    with contextlib.suppress(ApiException):
        await tenancy.of(tenancy.b).patch("Zone", "bait", {"metadata": {"finalizers": None}})


@pytest.mark.parametrize("how", FORGERIES)
async def test_a_resource_being_deleted_that_forges_kflares_metadata_deletes_no_tunnel_it_may_not_adopt(
    tenancy: Tenancy, how: str
) -> None:
    """The same way past the webhook, at an object nobody holds: a tunnel left in Cloudflare (created by team-a,
    retained), an account that lets only team-a adopt, and team-b's Tunnel of that name, held in deletion, given a
    create intent or the tunnel's ID in its claim label. team-b may not adopt the tunnel; it may not delete it
    either."""
    only_a = {"from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}}
    account = await tenancy.account(allowed={"from": "All"}, adoption=only_a)
    tunnel_name = f"left-{tenancy.label}"
    retain = {"kflare.dev/deletion-policy": "retain"}
    await tenancy.a.make(tunnel_manifest("tunnel", tunnel_name, account, retain, f"tunnel-token-{tenancy.label}"))
    made = await tenancy.of(tenancy.a).ready("Tunnel", "tunnel", reason="Synced")
    tunnel_id = made["status"]["cloudflareMetadata"]["tunnelID"]
    await tenancy.a.must("delete", "tunnel", "tunnel", "--wait=false")
    await tenancy.of(tenancy.a).gone("Tunnel", "tunnel")
    since = time.time()

    manifest = tunnel_manifest("bait", tunnel_name, account, {}, f"bait-token-{tenancy.label}")
    await tenancy.b.make(bait(manifest))
    out = await forge_while_deleting(tenancy, "Tunnel", "bait", forgery(how, "kflare.dev/tunnel-id", tunnel_id))

    deleted = [c["path"] for c in tenancy.writes(since) if c["method"] == "DELETE"]
    assert deleted == [], f"for team-b's Tunnel with a forged {how} ({out.strip()}), kflare deleted {deleted}"
    assert [t["id"] for t in tenancy.tunnels(tunnel_name)] == [tunnel_id], "the tunnel is gone from Cloudflare"
    with contextlib.suppress(ApiException):
        await tenancy.of(tenancy.b).patch("Tunnel", "bait", {"metadata": {"finalizers": None}})


# ---- a team's own account, grants across namespaces ---------------------------------------------------------------


def kv_manifest(name: str, title: str, account: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "KVNamespace",
        "metadata": {"name": name},
        "spec": {"accountRef": {"name": account}, "title": title},
    }


def worker_manifest(name: str, script: str, account: str, bindings: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "WorkerScript",
        "metadata": {"name": name},
        "spec": {
            "accountRef": {"name": account},
            "name": script,
            "script": "export default { async fetch(req, env) { return new Response('shared'); } };",
            "compatibilityDate": "2024-09-23",
            "bindings": bindings,
        },
    }


def grant_manifest(name: str, from_namespace: str, kv: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Grant",
        "metadata": {"name": name},
        "spec": {
            "from": [{"kind": "WorkerScript", "namespace": from_namespace}],
            "to": [{"kind": "KVNamespace", "name": kv}],
        },
    }


async def test_a_teams_own_account_serves_its_namespace_only(tenancy: Tenancy) -> None:
    """team-a brings its own token (a Secret and an `Account` of its namespace, made as the tenant): its Zone uses
    it, with that token. team-b's Zone naming an Account of that name looks in team-b, finds none and calls no one."""
    a, b = tenancy.a, tenancy.b
    own_token = tenancy.emulator.add_token(["*"], name="team-a")  # team-a's: the calls made with it are its Account's
    secret = f"team-token-{tenancy.label}"  # the case's label: the case's cleanup deletes it

    async def may_write_secrets() -> bool:
        return (await a.kubectl("auth", "can-i", "create", "secrets"))[1].strip() == "yes"

    await eventually(may_write_secrets, timeout=20, what="team-a's Secret rules (edit's stand-in) to be in effect")
    await a.make(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret}, "data": token_data(own_token["value"])}
    )
    own = "own"
    since = time.time()
    await a.make(
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Account",
            "metadata": {"name": own},
            "spec": {"accountID": tenancy.account_id, "tokenSecretRef": {"name": secret}},
        }
    )
    await tenancy.of(a).ready("Account", own, reason="Validated")

    name_a = domain("team-a")
    zone = zone_manifest("zone", name_a, own)
    zone["spec"]["accountRef"]["kind"] = "Account"
    await a.make(zone)
    made = await tenancy.of(a).ready("Zone", "zone", reason="Synced")
    zone_id = str(made["status"]["cloudflareMetadata"]["zoneID"])
    assert [z["id"] for z in tenancy.zones(name_a)] == [zone_id]
    by_own = tenancy.emulator.calls(method="POST", path="/zones$", since=since, token_id=own_token["id"])
    assert len(by_own) == 1, f"team-a's zone was not created with team-a's own token: {by_own}"
    assert [c for c in tenancy.calls(since) if "/zones" in c["path"]] == [], "the zone used the administrator's token"

    # team-b names an Account of the same name: it resolves in team-b, where there is none.
    name_b = domain("team-b")
    since = time.time()
    stolen = zone_manifest("zone", name_b, own)
    stolen["spec"]["accountRef"]["kind"] = "Account"
    await b.make(stolen)
    refused = await tenancy.of(b).ready("Zone", "zone", reason="AccountNotFound", status="False")
    assert "team-a" not in condition(refused)["message"], condition(refused)["message"]
    assert not (refused["status"].get("cloudflareMetadata") or {}).get("zoneID"), refused["status"]
    for token in (own_token["id"], tenancy.token["id"]):
        made_calls = tenancy.emulator.calls(since=since, token_id=token)
        zone_calls = [c for c in made_calls if c["path"].endswith("/zones") or name_b in json.dumps(c)]
        assert zone_calls == [], f"team-b's Zone made Cloudflare calls: {zone_calls}"
        assert [c for c in made_calls if c["method"] in WRITE_METHODS] == []
    assert tenancy.zones(name_b) == []

    # Nor may team-b read team-a's token or its Account.
    await b.refused("Forbidden", "get", "secret", secret, "-n", "team-a")
    await b.refused("Forbidden", "get", "accounts.kflare.dev", own, "-n", "team-a")
    await tenancy.of(a).ready("Zone", "zone", reason="Synced")


async def test_binding_another_namespaces_kv_namespace_needs_its_grant(tenancy: Tenancy) -> None:
    """team-b's Worker binds team-a's KVNamespace by reference: refused (and not uploaded) until team-a's Grant lets
    team-b's WorkerScripts bind it; deleting the Grant takes the binding back out of the uploaded Worker."""
    account = await tenancy.account()
    a, b = tenancy.a, tenancy.b
    await a.make(kv_manifest("cache", f"cache-{tenancy.label}", account))
    kv = await tenancy.of(a).ready("KVNamespace", "cache", reason="Synced")
    kv_id = kv["status"]["cloudflareMetadata"]["namespaceID"]
    script = f"shared-{tenancy.label}"
    script_path = f"/accounts/{tenancy.account_id}/workers/scripts/{script}"
    uploaded = f"{script_path}$"  # searched in the logged path (which starts with the API's prefix)

    def bound() -> dict[str, Any]:
        settings = cf(tenancy.emulator, "GET", f"{script_path}/settings")
        return {binding["name"]: binding for binding in settings["bindings"]}

    since = time.time()
    binding = {"name": "CACHE", "kvNamespaceRef": {"name": "cache", "namespace": "team-a"}}
    out = await b.must("create", "-f", "-", stdin=json.dumps(worker_manifest("worker", script, account, [binding])))
    assert "Warning: spec.bindings[0].kvNamespaceRef: no Grant in namespace team-a" in out, out  # it may come later
    waiting = await tenancy.of(b).ready("WorkerScript", "worker", reason="ReferenceNotPermitted", status="False")
    assert "team-b" in condition(waiting)["message"], condition(waiting)["message"]
    assert tenancy.emulator.calls(method="PUT", path=uploaded, since=since) == [], "the Worker was uploaded"
    assert tenancy.writes(since) == []
    assert script not in workers(tenancy.emulator, tenancy.account_id)

    # team-b may not grant itself team-a's namespace.
    grant = grant_manifest("workers-of-team-b", "team-b", "cache")
    await b.refused("Forbidden", "create", "-n", "team-a", "-f", "-", stdin=json.dumps(grant))
    await b.refused("Forbidden", "get", "grants.kflare.dev", "-n", "team-a")

    # team-a grants it: the Worker is uploaded with the binding.
    await a.make(grant)
    await tenancy.of(b).ready("WorkerScript", "worker", reason="Synced")
    assert len(tenancy.emulator.calls(method="PUT", path=uploaded, since=since, token_id=tenancy.token["id"])) == 1
    assert bound()["CACHE"]["namespace_id"] == kv_id

    # team-a takes it back: the Worker is uploaded again without it, and says why.
    revoked_since = time.time()
    await a.must("delete", "grant", "workers-of-team-b", "--wait=false")
    revoked = await tenancy.of(b).ready("WorkerScript", "worker", reason="ReferenceNotPermitted", status="False")
    assert "team-b" in condition(revoked)["message"], condition(revoked)["message"]
    assert tenancy.emulator.calls(method="PUT", path=uploaded, since=revoked_since), "no upload without the binding"
    assert "CACHE" not in bound(), f"the revoked binding is still uploaded: {bound()}"
    await tenancy.of(a).ready("KVNamespace", "cache", reason="Synced")

    # team-b's Worker goes; team-a's KV namespace stays.
    since = time.time()
    await b.must("delete", "workerscript", "worker", "--wait=false")
    await tenancy.of(b).gone("WorkerScript", "worker")
    assert script not in workers(tenancy.emulator, tenancy.account_id)
    assert [c["path"] for c in tenancy.writes(since) if kv_id in c["path"]] == [], "team-a's KV namespace was touched"
    await tenancy.of(a).ready("KVNamespace", "cache", reason="Synced")


async def test_a_record_in_another_namespaces_zone_needs_its_hostname_grant(tenancy: Tenancy) -> None:
    """team-b's DNSRecords name team-a's Zone (`zoneRef.namespace`): refused, at admission and (made past it) by the
    controller, until the Zone grants team-b names below `b.<zone>`; then a record there lands, and one outside the
    grant stays refused."""
    account = await tenancy.account()
    a, b = tenancy.a, tenancy.b
    zone_name = domain("shared")
    zone_id = await tenancy.ready_zone(a, "zone", zone_name, account)
    since = time.time()

    def record(name: str, host: str, content: str) -> dict[str, Any]:
        manifest = record_manifest(name, "zone", host, content)
        manifest["spec"]["zoneRef"]["namespace"] = "team-a"
        return manifest

    granted = f"www.b.{zone_name}"
    out = await b.refused("spec.name", "create", "-f", "-", stdin=json.dumps(record("www", granted, "192.0.2.30")))
    assert f"Zone team-a/zone grants namespace team-b no name {granted}" in out, out
    await tenancy.past_admission(b, record("www", granted, "192.0.2.30"))
    waiting = await tenancy.of(b).ready("DNSRecord", "www", reason="HostnameNotGranted", status="False")
    assert granted in condition(waiting)["message"], condition(waiting)["message"]
    assert not (waiting["status"].get("cloudflareMetadata") or {}).get("recordID"), waiting["status"]
    assert tenancy.writes(since) == []
    assert tenancy.records(zone_id) == []

    grants = [
        {
            "namespaces": {"from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": "team-b"}}},
            "hostnames": [f"*.b.{zone_name}"],
        }
    ]
    await a.must("patch", "zone", "zone", "--type=merge", "-p", json.dumps({"spec": {"hostnameGrants": grants}}))
    landed = await tenancy.of(b).ready("DNSRecord", "www", reason="Synced")
    held = tenancy.records(zone_id)
    assert [(r["name"], r["content"]) for r in held] == [(granted, "192.0.2.30")]
    assert held[0]["id"] == landed["status"]["cloudflareMetadata"]["recordID"]

    # Outside the grant: another name of the zone, and `b.<zone>` itself (the wildcard grants only names below it).
    for name, host in (("apex", f"b.{zone_name}"), ("other", f"api.{zone_name}")):
        since = time.time()
        await b.refused("spec.name", "create", "-f", "-", stdin=json.dumps(record(name, host, "192.0.2.31")))
        await tenancy.past_admission(b, record(name, host, "192.0.2.31"))
        refused = await tenancy.of(b).ready("DNSRecord", name, reason="HostnameNotGranted", status="False")
        assert host in condition(refused)["message"], condition(refused)["message"]
        assert tenancy.writes(since) == [], f"the record for {host} wrote to Cloudflare"
    assert [r["name"] for r in tenancy.records(zone_id)] == [granted]
    await tenancy.of(a).ready("Zone", "zone", reason="Synced")

    # team-b deletes its records: the one that landed goes from Cloudflare, the refused ones delete nothing.
    since = time.time()
    for name in ("www", "apex", "other"):
        await b.must("delete", "dnsrecord", name, "--wait=false")
    for name in ("www", "apex", "other"):
        await tenancy.of(b).gone("DNSRecord", name)
    written = [(c["method"], c["path"].removeprefix("/client/v4")) for c in tenancy.writes(since)]
    one_delete = [("DELETE", f"/zones/{zone_id}/dns_records/{held[0]['id']}")]
    assert written in (one_delete, [("POST", f"/zones/{zone_id}/dns_records/batch")]), written
    assert tenancy.records(zone_id) == []
    await tenancy.of(a).ready("Zone", "zone", reason="Synced")


async def test_a_tunnel_route_for_a_name_in_another_namespaces_zone_is_refused_at_admission(tenancy: Tenancy) -> None:
    """team-b's TunnelConfiguration routes a name of team-a's zone to its own Service: `kubectl apply` refuses it
    (without naming team-a) until team-a's Zone grants team-b the name."""
    account = await tenancy.account()
    zone_name = domain("routes")
    await tenancy.ready_zone(tenancy.a, "zone", zone_name, account)
    config = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TunnelConfiguration",
        "metadata": {"name": "routes"},
        "spec": {
            "tunnelRef": {"name": "tunnel"},
            "ingress": [{"hostname": f"app.{zone_name}", "service": "http://web.team-b.svc.cluster.local:80"}],
            "defaultService": "http_status:404",
        },
    }
    dry_run = ("create", "--dry-run=server", "-f", "-")
    out = await tenancy.b.refused("spec.ingress[0].hostname", *dry_run, stdin=json.dumps(config))
    assert f"app.{zone_name} is in zone {zone_name}, which a Zone in another namespace manages" in out, out
    assert "team-a" not in out, out

    grants = [{"namespaces": {"from": "Selector", "selector": {"matchLabels": {NAME_LABEL: "team-b"}}}}]
    granting = json.dumps({"spec": {"hostnameGrants": grants}})
    await tenancy.a.must("patch", "zone", "zone", "--type=merge", "-p", granting)

    async def allowed() -> bool:
        code, _ = await tenancy.b.kubectl(*dry_run, stdin=json.dumps(config))
        return code == 0

    await eventually(allowed, timeout=20, what="team-b's route to be allowed once team-a's Zone grants the name")
