"""The chart installed for real into the test API server: install, upgrade and uninstall, then the controller running
with nothing but the chart's RBAC (a token of the chart's ServiceAccount) and reconciling the first slice.

No Pod ever runs there (no kubelet), so nothing serves the webhooks: the tests keep the webhook's reach in mind.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from app.certificates import ServingCertificate
from app.controlplane import ControlPlane
from app.kube.client import KubeClient
from tests.chart.helm import CHART, ONE_HELM, Helm, crd_plurals
from tests.fixtures.controller import GROUP, VERSION, Kflare, controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.kube import api_client_for, token_kubeconfig
from tests.helpers import eventually

pytestmark = pytest.mark.integration

LEASE = "a634e97e.kflare.dev"
CRDS = [f"{plural}.kflare.dev" for plural in crd_plurals()]


def kubectl(
    plane: ControlPlane, *args: str, kubeconfig: Path | None = None, check: bool = True, input_text: str | None = None
) -> str:
    done = subprocess.run(
        [str(plane.binary("kubectl")), "--kubeconfig", str(kubeconfig or plane.kubeconfig_path), *args],
        input=input_text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check:
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


@dataclass
class Release:
    """One release of the chart in the test API server."""

    helm: Helm
    plane: ControlPlane
    name: str
    namespace: str

    @property
    def fullname(self) -> str:
        return f"{self.name}-kflare"

    def _helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.helm.run(
            *args, "--namespace", self.namespace, "--kubeconfig", str(self.plane.kubeconfig_path), check=check
        )

    def adopt_crds(self) -> None:
        """Let this release take over kflare CRDs that exist already: ones another release kept on uninstall, or
        that other tests applied. Helm adopts an object that carries its release's ownership metadata."""
        existing = kubectl(self.plane, "get", "crd", "-o", "name").split()
        for crd in (c for c in existing if c.endswith(".kflare.dev")):
            kubectl(
                self.plane,
                "annotate",
                "--overwrite",
                crd,
                f"meta.helm.sh/release-name={self.name}",
                f"meta.helm.sh/release-namespace={self.namespace}",
            )
            kubectl(self.plane, "label", "--overwrite", crd, "app.kubernetes.io/managed-by=Helm")

    def install(
        self, values: Mapping[str, Any] | None = None, *, chart: str | Path = CHART, args: Sequence[str] = ()
    ) -> str:
        """Install `chart`: the chart's directory, a packaged chart's file or an `oci://` reference."""
        self.adopt_crds()
        return self._helm("install", self.name, str(chart), *self.helm.values_args(values), *args).stdout

    def upgrade(
        self, values: Mapping[str, Any] | None = None, *, chart: str | Path = CHART, args: Sequence[str] = ()
    ) -> str:
        return self._helm("upgrade", self.name, str(chart), *self.helm.values_args(values), *args).stdout

    def uninstall(self, *args: str) -> None:
        done = self._helm("uninstall", self.name, *args, check=False)
        assert done.returncode == 0 or "not found" in done.stderr, done.stderr

    def wait_crds(self) -> None:
        self.plane.wait_established(CRDS)


@pytest.fixture
def release(helm: Helm, control_plane: ControlPlane, namespace: str) -> Iterator[Release]:
    """A release named for the test in the test's namespace, uninstalled afterwards (the CRDs stay: keep)."""
    rel = Release(helm, control_plane, f"r{uuid.uuid4().hex[:6]}", namespace)
    try:
        yield rel
    finally:
        rel.uninstall()


async def read(kube: ApiClient, kind: str, name: str, namespace: str = "") -> Any:
    """One object by kind, or None when it does not exist."""
    apis = {
        "Deployment": lambda: client.AppsV1Api(kube).read_namespaced_deployment(name, namespace),
        "ServiceAccount": lambda: client.CoreV1Api(kube).read_namespaced_service_account(name, namespace),
        "Secret": lambda: client.CoreV1Api(kube).read_namespaced_secret(name, namespace),
        "Service": lambda: client.CoreV1Api(kube).read_namespaced_service(name, namespace),
        "HorizontalPodAutoscaler": lambda: client.AutoscalingV2Api(kube).read_namespaced_horizontal_pod_autoscaler(
            name, namespace
        ),
        "PodDisruptionBudget": lambda: client.PolicyV1Api(kube).read_namespaced_pod_disruption_budget(name, namespace),
        "ClusterRole": lambda: client.RbacAuthorizationV1Api(kube).read_cluster_role(name),
        "ClusterRoleBinding": lambda: client.RbacAuthorizationV1Api(kube).read_cluster_role_binding(name),
        "Role": lambda: client.RbacAuthorizationV1Api(kube).read_namespaced_role(name, namespace),
        "RoleBinding": lambda: client.RbacAuthorizationV1Api(kube).read_namespaced_role_binding(name, namespace),
        "ValidatingWebhookConfiguration": lambda: client.AdmissionregistrationV1Api(
            kube
        ).read_validating_webhook_configuration(name),
        "CustomResourceDefinition": lambda: client.ApiextensionsV1Api(kube).read_custom_resource_definition(name),
    }
    try:
        return await apis[kind]()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def zone(name: str, namespace: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Zone",
        "metadata": {"name": name, "namespace": namespace, "finalizers": finalizers or []},
        "spec": {"name": f"{name}.example.com", "accountRef": {"name": "nobody"}},
    }


async def sa_kubeconfig(kube: ApiClient, plane: ControlPlane, rel: Release) -> Path:
    """A kubeconfig holding a TokenRequest token of the chart's ServiceAccount: the chart's RBAC and nothing else."""
    issued = await client.CoreV1Api(kube).create_namespaced_service_account_token(
        rel.fullname,
        rel.namespace,
        client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)),
    )
    return token_kubeconfig(plane, rel.name, issued.status.token)


async def test_install_upgrade_uninstall(
    release: Release, kube: ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    ns, full = release.namespace, release.fullname
    # What a cluster's API server publishes of itself (this one listens on loopback, which it never publishes).
    discovery = client.DiscoveryV1Api(kube)
    slice_name = f"kubernetes-{uuid.uuid4().hex[:6]}"
    await discovery.create_namespaced_endpoint_slice(
        "default",
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": slice_name, "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["192.0.2.10"]}],
            "ports": [{"name": "https", "port": 16443, "protocol": "TCP"}],
        },
    )
    try:
        notes = await asyncio.to_thread(release.install)
    finally:
        await discovery.delete_namespaced_endpoint_slice(slice_name, "default")
    assert f"kubectl -n {ns} rollout status deployment/{full}" in notes

    deployment = await read(kube, "Deployment", full, ns)
    container = deployment.spec.template.spec.containers[0]
    assert container.name == "manager"
    assert f"--namespace={ns}" in container.args
    assert deployment.spec.template.spec.service_account_name == full
    for kind, name in [
        ("ServiceAccount", full),
        ("Service", f"{full}-metrics"),
        ("Service", f"{full}-webhook"),
        ("HorizontalPodAutoscaler", full),
        ("PodDisruptionBudget", full),
        ("ClusterRole", f"{full}-manager"),
        ("ClusterRoleBinding", f"{full}-manager"),
        ("Role", f"{full}-leader-election"),
        ("RoleBinding", f"{full}-leader-election"),
        ("ClusterRole", "kflare-metrics-reader"),
        ("ClusterRole", f"{full}-view"),
        ("ClusterRole", f"{full}-edit"),
    ]:
        assert await read(kube, kind, name, ns) is not None, f"{kind} {name}"
    for name in CRDS:
        crd = await read(kube, "CustomResourceDefinition", name)
        assert crd.metadata.annotations["helm.sh/resource-policy"] == "keep"
        assert crd.metadata.annotations["meta.helm.sh/release-name"] == release.name

    # The API server's Pod Security admission takes the controller's pod under the restricted standard.
    await admitted_as_restricted(kube, ns, deployment)

    # The NetworkPolicy (on by default) lets the controller reach the API server where it listens: the address and
    # port of the `kubernetes` Service's EndpointSlice, read at install.
    policy = await client.NetworkingV1Api(kube).read_namespaced_network_policy(full, ns)
    api = policy.spec.egress[1]
    assert [p.port for p in api.ports] == [443, 6443, 16443]
    assert [peer.ip_block.cidr for peer in api.to] == ["192.0.2.10/32"]

    # No generated material: until the controller publishes the CA of the certificate it makes, no caBundle.
    assert await read(kube, "Secret", f"{full}-webhook-tls", ns) is None
    config = await read(kube, "ValidatingWebhookConfiguration", full)
    assert {h.client_config.ca_bundle for h in config.webhooks} == {None}
    # What the controller does at start (no pod runs here), with the chart's RBAC and nothing else.
    names = [f"{full}-{s}.{ns}.svc" for s in ("webhook", "metrics")]
    controller = await KubeClient.connect(await sa_kubeconfig(kube, control_plane, release))
    try:
        await ServingCertificate(controller, ns, f"{full}-webhook-tls", names, tmp_path, full).ensure()
    finally:
        await controller.close()
    secret = await read(kube, "Secret", f"{full}-webhook-tls", ns)
    assert (tmp_path / "tls.crt").read_bytes() == base64.b64decode(secret.data["tls.crt"])
    config = await read(kube, "ValidatingWebhookConfiguration", full)
    assert {h.client_config.ca_bundle for h in config.webhooks} == {secret.data["ca.crt"]}

    # The webhooks are registered: with no controller to answer, failurePolicy Fail refuses an administrator's
    # object. The controller's own writes and writes to objects being deleted do not go to the webhook at all.
    release.wait_crds()
    objects = client.CustomObjectsApi(kube)
    with pytest.raises(ApiException) as refused:
        await objects.create_namespaced_custom_object(GROUP, VERSION, ns, "zones", zone("z1", ns), dry_run="All")
    assert 'failed calling webhook "zones.validate.kflare.dev"' in json.loads(refused.value.body)["message"]
    as_controller = await api_client_for(await sa_kubeconfig(kube, control_plane, release))
    try:
        await client.CustomObjectsApi(as_controller).create_namespaced_custom_object(
            GROUP, VERSION, ns, "zones", zone("held", ns, ["kflare.dev/finalizer"])
        )
    finally:
        await as_controller.close()
    await objects.delete_namespaced_custom_object(GROUP, VERSION, ns, "zones", "held")
    await objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        "zones",
        "held",
        {"metadata": {"finalizers": None}},
        _content_type="application/merge-patch+json",
    )
    with pytest.raises(ApiException) as gone:
        await objects.get_namespaced_custom_object(GROUP, VERSION, ns, "zones", "held")
    assert gone.value.status == 404

    # The scrapers' role lets a bound ServiceAccount get /metrics, which is what the controller asks the API server.
    assert await may_get_metrics(kube, ns, "kflare-metrics-reader")

    # An upgrade keeps the certificate and the caBundle the controller published (nothing changes under running pods).
    await asyncio.to_thread(
        release.upgrade, {"driftCheckInterval": "30m", "autoscaling": {"enabled": False}, "replicaCount": 2}
    )
    deployment = await read(kube, "Deployment", full, ns)
    assert "--drift-check-interval=30m" in deployment.spec.template.spec.containers[0].args
    assert deployment.spec.replicas == 2
    assert await read(kube, "HorizontalPodAutoscaler", full, ns) is None
    assert await read(kube, "PodDisruptionBudget", full, ns) is not None
    assert (await read(kube, "Secret", f"{full}-webhook-tls", ns)).data == secret.data
    config = await read(kube, "ValidatingWebhookConfiguration", full)
    assert {h.client_config.ca_bundle for h in config.webhooks} == {secret.data["ca.crt"]}

    # Without the webhook, administrators' objects go through again; one replica needs no PDB.
    await asyncio.to_thread(release.upgrade, {"webhook": {"enabled": False}, "autoscaling": {"enabled": False}})
    assert await read(kube, "ValidatingWebhookConfiguration", full) is None
    assert await read(kube, "Service", f"{full}-webhook", ns) is None
    assert await read(kube, "PodDisruptionBudget", full, ns) is None
    await objects.create_namespaced_custom_object(GROUP, VERSION, ns, "zones", zone("z1", ns), dry_run="All")
    assert (await read(kube, "Secret", f"{full}-webhook-tls", ns)).data == secret.data  # metrics still use it

    await asyncio.to_thread(release.uninstall)
    for kind, name in [
        ("Deployment", full),
        ("ServiceAccount", full),
        ("ClusterRole", f"{full}-manager"),
        ("ClusterRole", "kflare-metrics-reader"),
    ]:
        assert await read(kube, kind, name, ns) is None, f"{kind} {name} survived the uninstall"
    # The certificate the controller made is its own, not the release's: it stays, as the uninstall steps say.
    assert await read(kube, "Secret", f"{full}-webhook-tls", ns) is not None
    for name in CRDS:  # helm.sh/resource-policy: keep
        assert await read(kube, "CustomResourceDefinition", name) is not None


async def admitted_as_restricted(kube: ApiClient, namespace: str, deployment: client.V1Deployment) -> None:
    core = client.CoreV1Api(kube)
    await core.patch_namespace(
        namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    template = deployment.spec.template
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="pss", labels=template.metadata.labels), spec=template.spec)

    async def enforced() -> bool:
        # Pod Security admission is on: a pod without the restricted settings is refused.
        bare = client.V1Pod(
            metadata=client.V1ObjectMeta(name="bare"),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
        )
        try:
            await core.create_namespaced_pod(namespace, bare, dry_run="All")
        except ApiException as exc:
            return exc.status == 403 and "restricted" in str(exc.body)
        return False

    await eventually(enforced, what="Pod Security admission to enforce the restricted standard")
    await core.create_namespaced_pod(namespace, pod, dry_run="All")


async def may_get_metrics(kube: ApiClient, namespace: str, role: str) -> bool:
    """Bind a new ServiceAccount to `role` and ask the API server whether it may get /metrics."""
    core, rbac = client.CoreV1Api(kube), client.RbacAuthorizationV1Api(kube)
    await core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="scraper"))
    )
    binding = f"scraper-{namespace}"
    await rbac.create_cluster_role_binding(
        client.V1ClusterRoleBinding(
            metadata=client.V1ObjectMeta(name=binding),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name="scraper", namespace=namespace)],
        )
    )

    async def allowed() -> bool:
        review = await client.AuthorizationV1Api(kube).create_subject_access_review(
            client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(
                    user=f"system:serviceaccount:{namespace}:scraper",
                    groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
                    non_resource_attributes=client.V1NonResourceAttributes(path="/metrics", verb="get"),
                )
            )
        )
        return bool(review.status.allowed)

    try:
        return await eventually(allowed, what="the metrics reader role to allow get /metrics")
    finally:
        await rbac.delete_cluster_role_binding(binding)


def can_i(plane: ControlPlane, kubeconfig: Path, *args: str) -> bool:
    done = subprocess.run(
        [str(plane.binary("kubectl")), "--kubeconfig", str(kubeconfig), "auth", "can-i", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout.strip() == "yes"


@ONE_HELM
async def test_controller_runs_with_the_charts_rbac(
    release: Release,
    kube: ApiClient,
    kflare: Kflare,
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ns, full = release.namespace, release.fullname
    # No webhook: nothing would answer it here, and the test's own objects are made by an administrator.
    await asyncio.to_thread(release.install, {"webhook": {"enabled": False}, "driftCheckInterval": "1m"})
    release.wait_crds()
    kubeconfig = await sa_kubeconfig(kube, control_plane, release)

    # The chart's RBAC, as the API server sees it for the ServiceAccount.
    def ask(*args: str) -> bool:
        return can_i(control_plane, kubeconfig, *args)

    assert ask("watch", "zones.kflare.dev", "--all-namespaces")
    assert ask("update", "cloudflareaccounts.kflare.dev", "--subresource=status")
    assert ask("update", "dnsrecords.kflare.dev", "--subresource=finalizers", "-n", "default")
    assert ask("list", "secrets", "--all-namespaces")
    assert ask("watch", "configmaps", "--all-namespaces")
    assert not ask("update", "configmaps", "-n", "default")
    assert ask("update", "workerscripts.kflare.dev", "--subresource=status", "-n", "default")
    assert ask("patch", "secrets", "-n", "default")
    assert not ask("delete", "secrets", "-n", "default")
    assert ask("create", "secrets", "-n", "default")  # Tunnel token Secrets (owned by their Tunnel)
    assert not ask("create", "pods", "-n", ns)
    assert ask("create", "events.events.k8s.io", "-n", "default")
    assert ask("update", "leases.coordination.k8s.io", "-n", ns)
    assert not ask("update", "leases.coordination.k8s.io", "-n", "default")
    assert ask("create", "tokenreviews.authentication.k8s.io")
    assert ask("create", "subjectaccessreviews.authorization.k8s.io")
    assert not ask("get", "/metrics")

    # The Deployment's own arguments, less the listeners' addresses and certificates (the test picks its own).
    deployment = await read(kube, "Deployment", full, ns)
    args = [
        a
        for a in deployment.spec.template.spec.containers[0].args[1:]
        if not a.startswith(("--health-probe-bind-address", "--metrics-", "--webhook-"))
    ]
    assert f"--namespace={ns}" in args
    assert "--leader-elect=true" in args
    pod = f"{full}-7d9f8b6c4-x2x9z"
    monkeypatch.setenv("POD_NAME", pod)
    with controller_process(control_plane, fresh_emulator, tmp_path, *args, f"--kubeconfig={kubeconfig}") as proc:
        await kflare.ready_zone("example.com")
        await kflare.ready("CloudflareAccount", kflare.account, reason="Validated")
        await kflare.make_record("www", "zone", name="www.example.com", type="A", content="192.0.2.1", proxied=True)
        record = await kflare.ready("DNSRecord", "www", reason="Synced")
        assert record["status"]["cloudflareMetadata"]["recordID"]
        # A Tunnel's token Secret: created (and owned by the Tunnel) with the chart's permissions.
        tunnel_spec = {"name": "t", "accountRef": {"name": kflare.account}, "credentialsSecretRef": {"name": "tok"}}
        await kflare.apply({"kind": "Tunnel", "metadata": {"name": "tunnel"}, "spec": tunnel_spec})
        await kflare.ready("Tunnel", "tunnel", reason="Synced")
        token = await client.CoreV1Api(kube).read_namespaced_secret("tok", kflare.namespace)
        assert token.data["TUNNEL_TOKEN"]
        assert token.metadata.owner_references[0].kind == "Tunnel"

        # The Workers kinds: code from a ConfigMap (read only), a Secret binding, storage of every kind, a route.
        core = client.CoreV1Api(kube)
        await core.create_namespaced_config_map(
            kflare.namespace,
            client.V1ConfigMap(metadata=client.V1ObjectMeta(name="code"), data={"index.js": "export default {};"}),
        )
        await core.create_namespaced_secret(
            kflare.namespace, client.V1Secret(metadata=client.V1ObjectMeta(name="app"), string_data={"key": "value"})
        )
        account = {"name": kflare.account}
        storage = [
            ("KVNamespace", "kv", {"accountRef": account, "title": "chart-kv"}),
            ("R2Bucket", "r2", {"accountRef": account, "name": "chart-bucket"}),
            ("D1Database", "d1", {"accountRef": account, "name": "chart-db"}),
        ]
        for kind, name, spec in storage:
            await kflare.apply({"kind": kind, "metadata": {"name": name}, "spec": spec})
        bindings = [
            {"name": "KEY", "secretKeyRef": {"name": "app", "key": "key"}},
            {"name": "KV", "kvNamespaceRef": {"name": "kv"}},
            {"name": "R2", "r2BucketRef": {"name": "r2"}},
            {"name": "DB", "d1DatabaseRef": {"name": "d1"}},
        ]
        worker = {"accountRef": account, "name": "chart-worker", "bindings": bindings}
        worker["scriptConfigMapRef"] = {"name": "code", "key": "index.js"}
        await kflare.apply({"kind": "WorkerScript", "metadata": {"name": "worker"}, "spec": worker})
        route = {"zoneRef": {"name": "zone"}, "pattern": "api.example.com/*", "workerScriptRef": {"name": "worker"}}
        await kflare.apply({"kind": "WorkerRoute", "metadata": {"name": "route"}, "spec": route})
        for kind, name in [*((k, n) for k, n, _ in storage), ("WorkerScript", "worker"), ("WorkerRoute", "route")]:
            await kflare.ready(kind, name, reason="Synced")

        lease = await client.CoordinationV1Api(kube).read_namespaced_lease(LEASE, ns)
        assert lease.spec.holder_identity.startswith(pod)
        secret = await client.CoreV1Api(kube).read_namespaced_secret("cf-token", ns)
        assert "kflare.dev/token-protection" in secret.metadata.finalizers

        async def recorded() -> set[str]:
            events = await client.EventsV1Api(kube).list_namespaced_event(ns)
            return {e.regarding.kind for e in events.items if e.reporting_controller == "kflare.dev/kflare"}

        # A new resource's first Ready records no Event (its status says so); a pause does, as a user wants to see.
        await kflare.patch("DNSRecord", "www", {"metadata": {"annotations": {"kflare.dev/paused": "true"}}})
        await eventually(lambda: _superset(recorded, {"DNSRecord"}), what="an Event about the paused DNSRecord")
        await kflare.patch("DNSRecord", "www", {"metadata": {"annotations": {"kflare.dev/paused": None}}})
        await kflare.ready("DNSRecord", "www", reason="Synced")

        # Deleting goes through the controller's finalizers, with the same permissions.
        for kind, name in [
            ("WorkerRoute", "route"),
            ("WorkerScript", "worker"),
            ("KVNamespace", "kv"),
            ("R2Bucket", "r2"),
            ("D1Database", "d1"),
            ("DNSRecord", "www"),
            ("Tunnel", "tunnel"),
            ("Zone", "zone"),
            ("CloudflareAccount", kflare.account),
        ]:
            await kflare.delete(kind, name)
            await kflare.gone(kind, name)

        async def released() -> bool:
            s = await client.CoreV1Api(kube).read_namespaced_secret("cf-token", ns)
            return not s.metadata.finalizers

        await eventually(released, what="the token Secret's finalizer to go")
        log = proc.log()
    # A 403 stands alone: a Cloudflare ID (hexadecimal) may hold the digits "403" too, and a line's timestamp
    # (its milliseconds) is no refusal.
    refusal = re.compile(r"(?<![0-9a-fA-F])403(?![0-9a-fA-F])")
    texts = [_without_time(line) for line in log.splitlines()]
    denied = [line for line in texts if "forbidden" in line.lower() or refusal.search(line)]
    assert not denied, "\n".join(denied[:10])


def _without_time(line: str) -> str:
    """A JSON log line without its `ts`; any other line as it is."""
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict):
        return line
    record.pop("ts", None)
    return json.dumps(record)


async def _superset(check: Any, expected: set[str]) -> bool:
    found = await check()
    if not expected <= found:
        raise AssertionError(f"found {sorted(found)}")
    return True


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"networkPolicy": {"enabled": True}, "autoscaling": {"targetMemoryUtilizationPercentage": 90}},
        {"autoscaling": {"enabled": False}, "replicaCount": 3, "webhook": {"failurePolicy": "Ignore"}},
    ],
    ids=["defaults", "network-policy", "fixed-replicas"],
)
def test_rendered_objects_pass_strict_server_validation(
    helm: Helm, control_plane: ControlPlane, namespace: str, values: dict[str, Any]
) -> None:
    """Every object the chart renders (but the CRDs, tested on their own, and other projects' kinds) is accepted by
    the API server with strict field validation: no unknown or misplaced field, no invalid value."""
    production = ["-f", str(Path(__file__).with_name("values-production.yaml"))] if values.get("networkPolicy") else []
    rendered = helm.template(values, namespace=namespace, args=[*production, "--set", "crds.enabled=false"]).stdout
    foreign = ("monitoring.coreos.com/", "cert-manager.io/")
    docs = [d for d in yaml.safe_load_all(rendered) if d and not d["apiVersion"].startswith(foreign)]
    for doc in docs:  # rbac.namespaces' Roles are in those namespaces: checked here in the test's
        if doc["metadata"].get("namespace") not in (None, namespace):
            doc["metadata"]["namespace"] = namespace
    assert len(docs) > 10
    kubectl(
        control_plane,
        "create",
        "--dry-run=server",
        "--validate=strict",
        "-n",
        namespace,
        "-f",
        "-",
        input_text=yaml.safe_dump_all(docs),
    )
