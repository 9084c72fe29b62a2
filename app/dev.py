"""`kflare dev`: the whole system on one machine, with no cluster and no Cloudflare account.

It starts a local Kubernetes API server (etcd + kube-apiserver from `hack/test-bins.sh`), the Cloudflare emulator
seeded with an account and a token, installs the CRDs, runs in this process what `kflare run` runs (the manager and
the three listeners, through `app.server.Process`, on loopback), registers the admission webhooks with the API
server (so `kubectl apply` of a bad manifest is refused as in a cluster), applies the manifests of a directory
(`examples/` by default) with kubectl, and prints every kflare resource with its READY and reason as they converge.
It also prints how to scrape the metrics listener with a ServiceAccount token (TokenRequest), which the listener
checks with TokenReview and SubjectAccessReview like in a cluster.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypedDict

import yaml
from pydantic import JsonValue

from app.api.crds import render_crds
from app.api.registry import KINDS
from app.controlplane import ControlPlane, ControlPlaneError, bin_dir_from_env, free_port
from app.dev_gateway import EXAMPLE_DIR, EXAMPLE_RECORD, EXAMPLE_TUNNEL, DevGateway
from app.emulator.process import EmulatorError, EmulatorProcess
from app.kube.client import JSON, NAMESPACES, KubeClient, KubeError, ResourceType
from app.server import Process
from app.settings import Settings
from reconcilers.gateway.kinds import CLASS_NAME
from webhooks.configuration import configuration as webhook_configuration
from webhooks.configuration import url_client_config

DEV_ACCOUNT_ID = "0123456789abcdef0123456789abcdef"
DEV_TOKEN = "kflare-dev-token"  # the emulator's token for the examples; it opens nothing outside this machine
REPO = Path(__file__).resolve().parent.parent
CRD_GROUP = "apiextensions.k8s.io"
CRDS = ResourceType(CRD_GROUP, "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False)
WEBHOOKS = ResourceType(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
SERVICE_ACCOUNTS = ResourceType("", "v1", "serviceaccounts", "ServiceAccount")
CLUSTER_ROLES = ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = ResourceType(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
SYSTEM_NAMESPACE = "kflare-system"
WEBHOOK_CONFIGURATION = "kflare"
METRICS_READER = "kflare-metrics-reader"
"""The ClusterRole (as the chart's) and the ServiceAccount `kflare dev` makes to scrape the metrics with."""


def default_bin_dir() -> Path | None:
    """The binaries from the environment, else from `hack/test-bins.sh` (which builds them the first time)."""
    found = bin_dir_from_env()
    if found is not None:
        return found
    script = REPO / "hack" / "test-bins.sh"
    if script.exists():
        done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False, timeout=3600)
        if done.returncode == 0 and done.stdout.strip():
            return Path(done.stdout.strip().splitlines()[-1])
        sys.stderr.write(done.stderr)
    return None


def dev_emulator(workdir: Path) -> EmulatorProcess:
    """The emulator, seeded with the account and token the examples use."""
    return EmulatorProcess(dev_state(), workdir=workdir / "emulator")


def dev_state() -> dict[str, JsonValue]:
    """The emulator's starting state: the account and token the examples use."""
    return {
        "accounts": [{"id": DEV_ACCOUNT_ID, "name": "kflare dev account"}],
        "tokens": [{"name": "kflare-dev", "value": DEV_TOKEN, "permissions": ["*"]}],
    }


async def install_crds(kube: KubeClient) -> None:
    for text in render_crds(helm=False).values():
        crd: JSON = yaml.safe_load(text)
        try:
            await kube.create(CRDS, crd)
        except KubeError as exc:
            if not exc.conflict:
                raise
            current = await kube.get(CRDS, crd["metadata"]["name"])
            crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await kube.replace(CRDS, crd)
    for text in render_crds(helm=False).values():
        name = yaml.safe_load(text)["metadata"]["name"]
        await _until(functools.partial(_established, kube, name), 60, f"CRD {name} to be established")


async def _established(kube: KubeClient, name: str) -> bool:
    crd = await kube.get(CRDS, name)
    return any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in crd.get("status", {}).get("conditions", [])
    )


async def _until(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(KubeError):
            if await check():
                return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"timed out waiting for {what}")


async def ensure_namespace(kube: KubeClient, name: str) -> None:
    try:
        await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    except KubeError as exc:
        if not exc.conflict:
            raise


def dev_secret_manifest() -> str:
    """The token Secrets the examples' accounts reference, holding the emulator's token: the CloudflareAccount's, and
    the team Account's in its namespace (made first, as the examples make it)."""
    data = {"CF_API_TOKEN": base64.b64encode(DEV_TOKEN.encode()).decode()}
    documents = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "cloudflare-api-token", "namespace": "kflare-system"},
            "type": "Opaque",
            "data": data,
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "team-cloudflare-token", "namespace": "demo"},
            "type": "Opaque",
            "data": data,
        },
    ]
    return yaml.safe_dump_all(documents)


async def table(kube: KubeClient) -> list[tuple[str, str, str, str, str, str]]:
    rows = []
    for model in KINDS:
        info = model.info
        rt = ResourceType("kflare.dev", "v1alpha1", info.plural, info.kind, namespaced=info.namespaced)
        try:
            listing = await kube.list(rt)
        except KubeError:
            continue
        for obj in listing.get("items") or []:
            meta = obj["metadata"]
            ready: JSON = next(
                (c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {}
            )
            rows.append(
                (
                    info.kind,
                    meta.get("namespace") or "",
                    meta["name"],
                    ready.get("status", "Unknown"),
                    ready.get("reason", ""),
                    ready.get("message", ""),
                )
            )
    return rows


def format_table(rows: list[tuple[str, str, str, str, str, str]]) -> str:
    header = ("KIND", "NAMESPACE", "NAME", "READY", "REASON", "MESSAGE")
    shown = [header, *((*r[:5], r[5][:70]) for r in rows)]
    widths = [max(len(row[i]) for row in shown) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in shown)


async def _create_or_replace(kube: KubeClient, rt: ResourceType, body: JSON, namespace: str | None = None) -> None:
    try:
        await kube.create(rt, body, namespace)
    except KubeError as exc:
        if not exc.conflict:
            raise
        current = await kube.get(rt, body["metadata"]["name"], namespace)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await kube.replace(rt, body, namespace)


async def register_webhooks(kube: KubeClient, url: str, ca_pem: bytes) -> None:
    """Register the webhooks served at `url`, and return once the API server calls them (it picks a new
    configuration up within a moment, not at once)."""
    body = webhook_configuration(WEBHOOK_CONFIGURATION, url_client_config(url, ca_pem))
    await _create_or_replace(kube, WEBHOOKS, body)
    probe: JSON = {
        "apiVersion": "kflare.dev/v1alpha1",
        "kind": "DNSRecord",
        "metadata": {"name": "webhook-probe", "namespace": SYSTEM_NAMESPACE},
        "spec": {
            "zoneRef": {"name": "none"},
            "name": "probe.example.com",
            "type": "TXT",
            "content": "x",
            "proxied": True,
        },
    }
    record = ResourceType("kflare.dev", "v1alpha1", "dnsrecords", "DNSRecord")

    async def refused() -> bool:
        try:
            await kube.request("POST", record.path(SYSTEM_NAMESPACE), query={"dryRun": "All"}, body=probe)
        except KubeError as exc:
            if "denied the request" in exc.message:
                return True
            raise
        return False

    await _until(refused, 60, "the API server to call the admission webhooks")


async def metrics_reader(kube: KubeClient) -> None:
    """A ServiceAccount bound to a ClusterRole that may get /metrics, as the chart's kflare-metrics-reader."""
    await _create_or_replace(
        kube,
        SERVICE_ACCOUNTS,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": METRICS_READER}},
        SYSTEM_NAMESPACE,
    )
    await _create_or_replace(
        kube,
        CLUSTER_ROLES,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": METRICS_READER},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        },
    )
    await _create_or_replace(
        kube,
        CLUSTER_ROLE_BINDINGS,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": METRICS_READER},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": METRICS_READER},
            "subjects": [{"kind": "ServiceAccount", "name": METRICS_READER, "namespace": SYSTEM_NAMESPACE}],
        },
    )


class _GatewaySettings(TypedDict, total=False):
    """The settings `dev_settings` adds when the gateway runs too."""

    gateway_enabled: bool
    gateway_xds_bind_address: str
    gateway_xds_token_file: Path
    gateway_data_plane_address: str
    gateway_data_plane_tls_port: int
    gateway_data_plane_https_port: int
    gateway_origin_tls_dir: str


def dev_settings(
    plane: ControlPlane, emulator: EmulatorProcess, drift: str, gateway: DevGateway | None = None
) -> Settings:
    """`kflare run`'s settings against the local API server and emulator, every listener on a free loopback port."""
    extra: _GatewaySettings = {}
    if gateway is not None:
        extra = {
            "gateway_enabled": True,
            "gateway_xds_bind_address": f"127.0.0.1:{gateway.xds_port}",
            "gateway_xds_token_file": gateway.token_file,
            "gateway_data_plane_address": f"127.0.0.1:{gateway.data_plane_port}",
            "gateway_data_plane_tls_port": gateway.tls_port,
            "gateway_data_plane_https_port": gateway.https_port,
            "gateway_origin_tls_dir": str(gateway.origin_tls),
        }
    return Settings(
        **extra,
        kubeconfig=plane.kubeconfig_path,
        namespace=SYSTEM_NAMESPACE,
        cloudflare_api_url=emulator.base_url,
        health_probe_bind_address=f"127.0.0.1:{free_port()}",
        metrics_bind_address=f"127.0.0.1:{free_port()}",
        webhook_bind_address=f"127.0.0.1:{free_port()}",
        drift_check_interval=drift,
        log_format="text",
        log_level="warning",
    )


@contextlib.asynccontextmanager
async def environment(
    bin_dir: Path, workdir: Path, drift: str, apply: Path | None = None
) -> AsyncIterator[tuple[ControlPlane, EmulatorProcess, Process, DevGateway | None]]:
    plane = ControlPlane(bin_dir=bin_dir, workdir=workdir / "plane")
    await asyncio.to_thread(plane.start)
    emulator: EmulatorProcess | None = None
    process: Process | None = None
    gateway = await asyncio.to_thread(DevGateway.prepare, workdir)
    try:
        emulator = await asyncio.to_thread(dev_emulator(workdir).start)
        kube = await KubeClient.connect(plane.kubeconfig_path)
        try:
            await install_crds(kube)
            await ensure_namespace(kube, SYSTEM_NAMESPACE)
            if gateway is not None:
                await asyncio.to_thread(gateway.install_crds, plane)
            process = Process(dev_settings(plane, emulator, drift, gateway))
            await process.start()
            if gateway is not None:
                example = apply is not None and (apply / EXAMPLE_DIR).is_dir()
                await gateway.create_class(kube, EXAMPLE_TUNNEL if example else None)
                gateway.start_envoy()
                await gateway.wait_ready()
            webhook = process.listener("webhook")
            if webhook is None or webhook.tls is None:
                raise RuntimeError("the webhook listener is off")  # dev_settings turns it on: a bug
            await register_webhooks(kube, webhook.url, webhook.tls.cert_pem)
            await metrics_reader(kube)
        finally:
            await kube.close()
        yield plane, emulator, process, gateway
    finally:
        if gateway is not None:
            gateway.stop()
        if process is not None:
            await process.stop()
        if emulator is not None:
            emulator.stop()
        await asyncio.to_thread(plane.stop)


def metrics_command(plane: ControlPlane, process: Process, workdir: Path) -> str | None:
    """A shell command that scrapes the metrics listener with a ServiceAccount token (TokenRequest), checking the
    listener's certificate; None when metrics are off."""
    metrics = process.listener("metrics")
    if metrics is None:
        return None
    url = f"{metrics.url}/metrics"
    token = (
        f"$({shlex.quote(str(plane.binary('kubectl')))} --kubeconfig {shlex.quote(str(plane.kubeconfig_path))}"
        f" create token {METRICS_READER} -n {SYSTEM_NAMESPACE})"
    )
    if metrics.tls is None:
        return f'curl -sS -H "Authorization: Bearer {token}" {url}'
    cert = workdir / "metrics.crt"
    cert.write_bytes(metrics.tls.cert_pem)
    return f'curl -sS --cacert {shlex.quote(str(cert))} -H "Authorization: Bearer {token}" {url}'


def kubectl_apply(plane: ControlPlane, directory: Path, extra: str = "", *, gateway: bool = True) -> None:
    """Apply the directory's manifests; without the Gateway class its gateway example is left out (its kinds'
    CRDs are not installed)."""
    kubectl = plane.binary("kubectl")
    argv = [str(kubectl), "--kubeconfig", str(plane.kubeconfig_path), "apply", "-R"]
    if extra:
        subprocess.run([*argv, "-f", "-"], input=extra, text=True, check=True, capture_output=True, timeout=60)
    paths = [directory]
    if not gateway and (directory / EXAMPLE_DIR).is_dir():
        paths = sorted(
            p
            for p in directory.iterdir()
            if p.name != EXAMPLE_DIR and (p.is_dir() or p.suffix in (".yaml", ".yml", ".json"))
        )
    files = [arg for p in paths for arg in ("-f", str(p))]
    done = subprocess.run([*argv, *files], text=True, capture_output=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"kubectl apply -f {directory} failed:\n{done.stderr}")
    print(done.stdout.rstrip())


async def run(bin_dir: Path, apply: Path, *, once: bool, timeout: float, drift: str, keep: bool) -> int:
    """Run until every resource is Ready (`once`), or until SIGINT or SIGTERM; either way stop every process."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        return await _run(bin_dir, apply, once=once, timeout=timeout, drift=drift, keep=keep)
    except asyncio.CancelledError:
        print("\nstopped: API server, emulator and controller are gone", flush=True)
        return 0


async def _run(bin_dir: Path, apply: Path, *, once: bool, timeout: float, drift: str, keep: bool) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="kflare-dev-"))
    try:
        async with environment(bin_dir, workdir, drift, apply) as (plane, emulator, process, gateway):
            print(f"kube-apiserver: {plane.host}  (kubectl --kubeconfig {plane.kubeconfig_path} get kflare -A)")
            print(f"Cloudflare emulator: {emulator.base_url}  (calls: {emulator.url}/__emulator/calls)")
            webhook = process.listener("webhook")
            if webhook is not None:
                print(f"admission webhooks: {webhook.url}/validate/<plural>  (ValidatingWebhookConfiguration kflare)")
            metrics = process.listener("metrics")
            command = metrics_command(plane, process, workdir)
            if metrics is not None and command is not None:
                print(
                    f"metrics: {metrics.url}/metrics  (a token of ServiceAccount {SYSTEM_NAMESPACE}/{METRICS_READER})"
                )
                print(f"  {command}", flush=True)
            example = gateway is not None and (apply / EXAMPLE_DIR).is_dir()
            if gateway is not None and not example:
                print(f"Gateway class {CLASS_NAME}: Envoy at {gateway.url}; add a Gateway and HTTPRoutes")
            await asyncio.to_thread(
                functools.partial(kubectl_apply, plane, apply, dev_secret_manifest(), gateway=gateway is not None)
            )
            kube = await KubeClient.connect(plane.kubeconfig_path)
            try:
                if gateway is not None and example:
                    await gateway.serve_example(kube)
                    print(
                        f"Gateway class {CLASS_NAME}: Envoy at {gateway.url}; the example's route "
                        f"({EXAMPLE_DIR}/) answers:\n  {gateway.example_command}",
                        flush=True,
                    )
                    await gateway.wait_published(kube, EXAMPLE_RECORD, timeout)
                return await watch(kube, once=once, timeout=timeout)
            finally:
                await kube.close()
    except (ControlPlaneError, EmulatorError, RuntimeError, TimeoutError) as exc:
        print(f"kflare dev: {exc}", file=sys.stderr)
        return 1
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


async def watch(kube: KubeClient, *, once: bool, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    shown = ""
    rows: list[tuple[str, str, str, str, str, str]] = []
    while True:
        rows = await table(kube)
        text = format_table(rows)
        if text != shown:
            print(f"\n{time.strftime('%H:%M:%S')}\n{text}", flush=True)
            shown = text
        all_ready = bool(rows) and all(r[3] == "True" for r in rows)
        if once and all_ready:
            print("\nall resources are Ready")
            return 0
        if once and time.monotonic() > deadline:
            print(f"\nnot all resources were Ready within {timeout:.0f}s", file=sys.stderr)
            return 1
        await asyncio.sleep(1.0)
