"""The chart as a user installs it, on a cluster whose pods run: `helm install` of the packaged chart with the deploy
guide's production values, two replicas behind leader election, a PodDisruptionBudget and a NetworkPolicy, the
webhooks called by the API server through their Service, metrics over HTTPS for authorised tokens only, the
examples converging against the emulator, a killed leader replaced within the lease, and upgrade and uninstall
leaving what the deploy guide says they leave.

The tests of this module share one release and run in order, as a user's day with it would.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from app.dev import DEV_TOKEN, dev_secret_manifest
from tests.chart.helm import CHART, Helm, helm_binary
from tests.chart.test_install import CRDS, LEASE, Release
from tests.chart.test_package import package
from tests.e2e.cluster import Cluster
from tests.fixtures.emulator import EmulatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

NAMESPACE = "kflare-system"
PRODUCTION = Path(__file__).resolve().parents[1] / "chart" / "values-production.yaml"
EXAMPLES = CHART.parents[1] / "examples"


def overrides(image: str, emulator: EmulatorProcess) -> dict[str, Any]:
    """What the production values cannot be here: the image is the one built from this tree and imported (never
    pulled: nothing could pull it), no registry credentials or proxy, Cloudflare is the emulator, and no
    Prometheus Operator is installed to take a ServiceMonitor or PrometheusRule."""
    repository, _, tag = image.rpartition(":")
    return {
        "image": {"repository": repository, "tag": tag, "digest": "", "pullPolicy": "Never"},
        "imagePullSecrets": [],
        "extraEnv": [],
        "extraArgs": [f"--cloudflare-api-url={emulator.base_url}"],
        "metrics": {"serviceMonitor": {"enabled": False}, "prometheusRule": {"enabled": False}},
    }


def deadline(seconds: float, interval: float = 0.5) -> Iterator[float]:
    """Yields until `seconds` have passed (then raises), pausing `interval` between polls: tests poll, never
    sleep."""
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            raise AssertionError(f"not within {seconds:.0f}s")
        yield left
        time.sleep(min(interval, max(left, 0)))


@dataclass
class Installed:
    cluster: Cluster
    release: Release
    emulator: EmulatorProcess
    image: str
    installed_in: float

    def kubectl(self, *args: str, check: bool = True, input_text: str | None = None) -> str:
        done = subprocess.run(
            [str(self.cluster.binary("kubectl")), f"--kubeconfig={self.cluster.kubeconfig_path}", *args],
            input=input_text,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout + done.stderr

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args))

    @property
    def fullname(self) -> str:
        return self.release.fullname

    def pods(self) -> list[dict[str, Any]]:
        selector = f"app.kubernetes.io/instance={self.release.name},app.kubernetes.io/component=controller"
        items: list[dict[str, Any]] = self.get("pods", "-n", NAMESPACE, "-l", selector)["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def ready_pods(self) -> list[dict[str, Any]]:
        return [p for p in self.pods() if _ready(p)]

    def wait_ready_pods(self, count: int, seconds: float = 240) -> list[dict[str, Any]]:
        for _ in deadline(seconds):
            pods = self.ready_pods()
            if len(pods) == count and len(self.pods()) == count:
                return pods
        raise AssertionError  # unreachable: deadline raises

    def holder(self) -> str:
        lease = self.get("lease", LEASE, "-n", NAMESPACE)
        return str(lease["spec"].get("holderIdentity") or "")

    def wait_converged(self, seconds: float = 180) -> list[dict[str, Any]]:
        """Every kflare resource Ready, as `kubectl get kflare -A` shows it."""
        not_ready: list[str] = []
        try:
            for _ in deadline(seconds):
                items: list[dict[str, Any]] = self.get("kflare", "-A")["items"]
                not_ready = [f"{o['kind']}/{o['metadata']['name']}: {_condition(o)}" for o in items if not _is_ready(o)]
                if items and not not_ready:
                    return items
        except AssertionError as exc:
            raise AssertionError(f"{exc}: not Ready: {not_ready}") from None
        raise AssertionError(not_ready)


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _condition(obj: dict[str, Any]) -> dict[str, Any]:
    conditions = obj.get("status", {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), {})


def _is_ready(obj: dict[str, Any]) -> bool:
    return _condition(obj).get("status") == "True"


@contextmanager
def release_installed(
    cluster: Cluster,
    image: str,
    emulator: EmulatorProcess,
    work: Path,
    *,
    name: str = "e2e",
    values: Mapping[str, Any] | None = None,
) -> Iterator[Installed]:
    """The packaged chart installed with the production values and `overrides`, then `values` over both;
    uninstalled afterwards. The namespace and the token Secret may be there already, from a release before."""
    helm = Helm(helm_binary(), work / "helm")
    archive = package(helm, work)
    release = Release(helm, cluster, name, NAMESPACE)
    began = time.monotonic()
    state = Installed(cluster, release, emulator, image, 0.0)
    # The release's namespace, and the teams' its values grant kflare (`rbac.namespaces`: their Roles go there).
    granted = yaml.safe_load(PRODUCTION.read_text())["rbac"]["namespaces"]
    for name in (NAMESPACE, *granted):
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        state.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(namespace))
    state.kubectl("apply", "-f", "-", input_text=dev_secret_manifest())
    layers = [*helm.values_args(overrides(image, emulator)), *helm.values_args(values)]
    # The production values first, as a user's file; what cannot apply here after them.
    release.install(chart=archive, args=["-f", str(PRODUCTION), *layers, "--wait", "--timeout=5m"])
    state.installed_in = time.monotonic() - began
    try:
        yield state
    finally:
        release.uninstall()


@pytest.fixture(scope="module")
def installed(
    cluster: Cluster, image: str, node_emulator: EmulatorProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    with release_installed(cluster, image, node_emulator, tmp_path_factory.mktemp("release")) as state:
        yield state


def test_every_pod_runs_ready_with_two_replicas(installed: Installed, capsys: pytest.CaptureFixture[str]) -> None:
    """The HorizontalPodAutoscaler keeps minReplicas without a metrics API (as the guide says), so two pods run
    Ready: one leads, one stands by; the PodDisruptionBudget lets one go at a time."""
    pods = installed.wait_ready_pods(2)
    with capsys.disabled():
        print(f"\nhelm install --wait: {installed.installed_in:.1f}s; two pods Ready")
    for pod in pods:
        (container,) = pod["spec"]["containers"]
        assert container["image"] == installed.image
        assert pod["spec"]["nodeName"]
    pdb = installed.get("pdb", installed.fullname, "-n", NAMESPACE)
    for _ in deadline(60):
        pdb = installed.get("pdb", installed.fullname, "-n", NAMESPACE)
        if pdb["status"].get("currentHealthy") == 2:
            break
    assert pdb["status"]["disruptionsAllowed"] == 1
    policies = installed.get("networkpolicy", "-n", NAMESPACE)["items"]
    assert any(p["metadata"]["name"] == installed.fullname for p in policies)
    names = {p["metadata"]["name"] for p in pods}
    for _ in deadline(60):
        if any(installed.holder().startswith(n) for n in names):
            break


def test_a_bad_manifest_is_refused_by_the_webhook_through_its_service(installed: Installed) -> None:
    config = installed.get("validatingwebhookconfiguration", installed.fullname)
    for hook in config["webhooks"]:
        assert hook["clientConfig"]["service"]["name"] == f"{installed.fullname}-webhook"
        assert "url" not in hook["clientConfig"]
    bad = {
        "apiVersion": "kflare.dev/v1alpha1",
        "kind": "DNSRecord",
        "metadata": {"name": "bad", "namespace": NAMESPACE},
        "spec": {"zoneRef": {"name": "nowhere"}, "name": "bad.example.com", "type": "A", "content": "not-an-ip"},
    }
    out = ""
    for _ in deadline(60):  # the webhook's endpoints reach kube-proxy's rules a moment after the pods are Ready
        out = installed.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(bad), check=False)
        if "denied the request" in out:
            break
    assert 'admission webhook "dnsrecords.validate.kflare.dev" denied the request' in out, out
    assert "spec.content: an A record's content must be an IPv4 address" in out
    assert "NotFound" in installed.kubectl("get", "dnsrecord", "bad", "-n", NAMESPACE, check=False)


def test_metrics_are_served_over_https_to_authorised_tokens_only(installed: Installed) -> None:
    """Through the metrics Service, as Prometheus scrapes it: TLS with the certificate the controller keeps for the
    Service's name; a token bound to kflare-metrics-reader gets the metrics, another token is forbidden, none
    unauthorised."""
    service = installed.get("service", f"{installed.fullname}-metrics", "-n", NAMESPACE)
    address, port = service["spec"]["clusterIP"], service["spec"]["ports"][0]["port"]
    secret = installed.get("secret", f"{installed.fullname}-webhook-tls", "-n", NAMESPACE)
    tls = ssl.create_default_context(cadata=base64.b64decode(secret["data"]["ca.crt"]).decode())
    host = f"{installed.fullname}-metrics.{NAMESPACE}.svc"
    installed.kubectl("create", "serviceaccount", "scraper", "-n", NAMESPACE)
    installed.kubectl("create", "serviceaccount", "stranger", "-n", NAMESPACE)
    installed.kubectl(
        "create",
        "clusterrolebinding",
        "e2e-scraper",
        "--clusterrole=kflare-metrics-reader",
        f"--serviceaccount={NAMESPACE}:scraper",
    )
    scraper = installed.kubectl("create", "token", "scraper", "-n", NAMESPACE).strip()
    stranger = installed.kubectl("create", "token", "stranger", "-n", NAMESPACE).strip()

    def get(token: str | None) -> httpx.Response:
        headers = {"Host": host} if token is None else {"Host": host, "Authorization": f"Bearer {token}"}
        with httpx.Client(verify=tls, timeout=10, trust_env=False) as http:
            # The certificate names the Service, the connection goes to its address: SNI and the check use the name.
            return http.get(f"https://{address}:{port}/metrics", headers=headers, extensions={"sni_hostname": host})

    reply = get(scraper)
    for _ in deadline(60):  # RBAC reaches the authorizer's cache within moments
        reply = get(scraper)
        if reply.status_code == 200:
            break
    assert reply.status_code == 200, reply.text
    assert "kflare_resources" in reply.text
    assert get(stranger).status_code == 403
    assert get(None).status_code == 401


def _examples() -> str:
    """examples/ and examples/expose-a-service as a user applies them, without the cloudflared Deployment: its
    image is on a registry this machine cannot reach, and the kflare objects do not wait for it."""
    docs: list[str] = []
    for path in [*sorted(EXAMPLES.glob("*.yaml")), *sorted((EXAMPLES / "expose-a-service").glob("*.yaml"))]:
        if path.name != "40-cloudflared.yaml":
            docs.append(path.read_text())
    return "\n---\n".join(docs)


def test_the_examples_converge(installed: Installed, capsys: pytest.CaptureFixture[str]) -> None:
    began = time.monotonic()
    installed.kubectl("apply", "-f", "-", input_text=_examples())
    items = installed.wait_converged()
    took = time.monotonic() - began
    with capsys.disabled():
        print(f"\nexamples: {len(items)} kflare resources Ready in {took:.1f}s")
    cf = installed.emulator.client(token=DEV_TOKEN)
    zones = {z.name: z.id for z in cf.zones.list()}
    assert {"example.com", "example.net"} <= set(zones)
    names = {r.name for r in cf.dns.records.list(zone_id=zones["example.com"])}
    assert "www.example.com" in names


def test_the_controller_may_read_no_secret_nobody_named(installed: Installed) -> None:
    """With `rbac.namespaces` (the production values': demo), every example converged above under the narrowed
    roles, and the controller's ServiceAccount may read Secrets there and in its own namespace, and nowhere else."""
    account = f"system:serviceaccount:{NAMESPACE}:{installed.fullname}"

    def can(verb: str, resource: str, *where: str) -> str:
        out = installed.kubectl("auth", "can-i", verb, resource, *where, f"--as={account}", check=False)
        return out.strip().splitlines()[0]  # kubectl's answer; what follows on stderr is only its explanation

    for namespace in ("demo", NAMESPACE):
        assert can("get", "secrets", "-n", namespace) == "yes", namespace
        assert can("watch", "secrets", "-n", namespace) == "yes", namespace
    for namespace in ("default", "kube-system"):
        for verb in ("get", "list", "watch"):
            assert can(verb, "secrets", "-n", namespace) == "no", f"{verb} secrets in {namespace}"
        assert can("get", "configmaps", "-n", namespace) == "no", namespace
        assert can("create", "deployments", "-n", namespace) == "no", namespace
    assert can("list", "secrets", "--all-namespaces") == "no"


def test_a_killed_leader_is_replaced_within_the_lease(installed: Installed, capsys: pytest.CaptureFixture[str]) -> None:
    """The leader's container is killed (SIGKILL, no Lease release): the standby takes the Lease within the lease
    duration and reconciles; the kubelet restarts the killed container as a standby."""
    pods = {p["metadata"]["name"]: p for p in installed.wait_ready_pods(2)}
    leader = next(name for name in pods if installed.holder().startswith(name))
    (status,) = pods[leader]["status"]["containerStatuses"]
    container = status["containerID"].removeprefix("containerd://")
    restarts = status["restartCount"]
    killed_identity = installed.holder()
    killed = time.monotonic()
    installed.cluster.ctr("tasks", "kill", "--signal=SIGKILL", container)
    try:
        # A new process leads: the standby, unless the killed container, restarted by the kubelet, won the Lease
        # first (a new identity too: a process names itself with a random suffix).
        for _ in deadline(30):
            holder = installed.holder()
            if holder and holder != killed_identity:
                break
    except AssertionError:
        logs = {name: installed.kubectl("logs", name, "-n", NAMESPACE, "--tail=30", check=False) for name in pods}
        raise AssertionError(
            f"the Lease still names {installed.holder()!r} 30 s after it was killed; the pods' last lines:\n"
            + "\n".join(f"--- {name}\n{text}" for name, text in logs.items())
        ) from None
    took = time.monotonic() - killed
    with capsys.disabled():
        print(f"\nleader {leader} killed: {installed.holder()} leads {took:.1f}s later")
    assert took < 16, f"handover took {took:.1f}s; the Lease promises about 12"
    # The new leader reconciles: a change made now converges.
    record = {
        "apiVersion": "kflare.dev/v1alpha1",
        "kind": "DNSRecord",
        "metadata": {"name": "after-failover", "namespace": "demo"},
        "spec": {
            "zoneRef": {"name": "example-com"},
            "name": "after.example.com",
            "type": "TXT",
            "content": '"handed over"',
        },
    }
    installed.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(record))
    installed.wait_converged(60)
    for _ in deadline(120):
        pod = installed.get("pod", leader, "-n", NAMESPACE)
        if pod["status"]["containerStatuses"][0]["restartCount"] > restarts and _ready(pod):
            break


@contextmanager
def webhook_probe(installed: Installed) -> Iterator[list[str]]:
    """A write the webhook refuses, tried (server-side dry run) one after another until the block ends; yields what
    each attempt printed."""
    bad = {
        "apiVersion": "kflare.dev/v1alpha1",
        "kind": "DNSRecord",
        "metadata": {"name": "probe", "namespace": NAMESPACE},
        "spec": {"zoneRef": {"name": "nowhere"}, "name": "probe.example.com", "type": "A", "content": "not-an-ip"},
    }
    text = yaml.safe_dump(bad)
    answers: list[str] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            out = installed.kubectl("create", "--dry-run=server", "-f", "-", input_text=text, check=False)
            answers.append(out.strip())

    worker = threading.Thread(target=probe, daemon=True)
    worker.start()
    try:
        yield answers
    finally:
        done.set()
        worker.join(timeout=120)


def test_upgrade_then_uninstall_keep_the_crds_and_the_cloudflare_objects(
    installed: Installed, capsys: pytest.CaptureFixture[str]
) -> None:
    """An upgrade rolls the pods with the guide's values and keeps everything converged; deleting a resource under
    `defaultDeletionPolicy: retain` keeps its record; uninstalling keeps the CRDs, the resources and every
    Cloudflare object."""
    cf = installed.emulator.client(token=DEV_TOKEN)
    zone_id = next(z.id for z in cf.zones.list() if z.name == "example.com")
    cert = installed.get("secret", f"{installed.fullname}-webhook-tls", "-n", NAMESPACE)["data"]
    before = {p["metadata"]["name"] for p in installed.pods()}
    values = installed.release.helm.values_args(
        {**overrides(installed.image, installed.emulator), "driftCheckInterval": "10m"}
    )
    with webhook_probe(installed) as answers:
        installed.release.upgrade(args=["-f", str(PRODUCTION), *values, "--wait", "--timeout=5m"])
        for _ in deadline(240):
            pods = installed.ready_pods()
            names = {p["metadata"]["name"] for p in pods}
            if len(pods) == 2 and not names & before and len(installed.pods()) == 2:
                break
    # Every write tried while the pods rolled was judged by the webhook (failurePolicy: Fail): none was refused
    # because no replica answered.
    unanswered = [a for a in answers if "denied the request" not in a]
    assert len(answers) >= 20, f"only {len(answers)} probes during the upgrade"
    assert not unanswered, f"{len(unanswered)} of {len(answers)} writes not answered by the webhook: {unanswered[:3]}"
    with capsys.disabled():
        print(f"\nupgrade: {len(answers)} writes tried while the pods rolled, all judged by the webhook")
    (container,) = installed.pods()[0]["spec"]["containers"]
    assert "--drift-check-interval=10m" in container["args"]
    assert installed.get("secret", f"{installed.fullname}-webhook-tls", "-n", NAMESPACE)["data"] == cert
    installed.wait_converged(120)

    installed.kubectl("delete", "dnsrecord", "after-failover", "-n", "demo", "--timeout=60s")
    assert "after.example.com" in {r.name for r in cf.dns.records.list(zone_id=zone_id)}

    records = {r.name for r in cf.dns.records.list(zone_id=zone_id)}
    installed.release.uninstall()
    for _ in deadline(120):
        if not installed.pods():
            break
    for crd in CRDS:
        installed.get("crd", crd)
    kept = installed.get("kflare", "-A")["items"]
    assert {o["metadata"]["name"] for o in kept} >= {"example-com", "www", "demo-account"}
    assert {z.name for z in cf.zones.list()} >= {"example.com", "example.net"}
    assert {r.name for r in cf.dns.records.list(zone_id=zone_id)} == records
