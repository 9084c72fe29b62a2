"""Scenario 7, RBAC and metrics: `kflare run` with exactly the chart's roles (rendered by helm, bound to a
ServiceAccount whose token is the controller's kubeconfig) does everything it is for, and with any one rule taken
out the feature that rule is for fails visibly (the API server refuses the controller, and what a user would see is
missing). `/metrics` answers 401 / 403 / 200 exactly as RBAC says; the webhook and metrics listeners refuse plain
HTTP.

Every rule is checked at every size (each is one controller start, a few seconds). The API server of this
scenario is its own, with the OwnerReferencesPermissionEnforcement admission plugin on, as stricter clusters run it:
without it nothing would need the `finalizers` rule (an owner reference that blocks the owner's deletion). The
leader-election Role holds the Lease only: kflare records `events.k8s.io` Events, granted everywhere by the
ClusterRole, and never core ones."""

from __future__ import annotations

import base64
import contextlib
import subprocess
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api.crds import render_crds
from app.controlplane import ControlPlane, bin_dir_from_env, free_port
from app.kube.client import KubeClient, KubeError
from tests.chaos.figures import Figures
from tests.chart.helm import Helm, helm_binary
from tests.fixtures.controller import GROUP, VERSION, ControllerProcess
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.kube import token_kubeconfig
from tests.helpers import eventually

pytestmark = pytest.mark.integration

SCENARIO = "7 rbac and metrics"
RBAC = "rbac.authorization.k8s.io/v1"
KFLARE = f"/apis/{GROUP}/{VERSION}"


@dataclass(frozen=True)
class Rule:
    """One rule of one of the chart's roles, named by what it grants."""

    role: str  # "manager" (the ClusterRole) or "leader-election" (the Role in the release namespace)
    index: int
    body: dict[str, Any]

    @property
    def name(self) -> str:
        groups = ",".join(g or "core" for g in self.body.get("apiGroups", []))
        resources = list(self.body.get("resources") or [])
        subs = sorted({r.split("/", 1)[1] for r in resources if "/" in r})
        what = f"*/{subs[0]}" if subs else resources[0] if len(resources) == 1 else f"{len(resources)} kinds"
        if len(resources) == 2 and not subs:
            what = ",".join(resources)
        return f"{self.role}[{self.index}] {groups} {what}"

    @property
    def verbs(self) -> str:
        return ",".join(self.body.get("verbs", []))

    @property
    def resources(self) -> list[str]:
        return list(self.body.get("resources") or [])


def chart_roles(namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The chart's manager ClusterRole and leader-election Role, as helm renders them with default values."""
    helm = Helm(helm_binary(), Path(f"/tmp/kflare-chaos-helm-{uuid.uuid4().hex[:6]}"))
    rendered = helm.render(namespace=namespace)
    manager = next(r for r in rendered.all("ClusterRole") if r["metadata"]["name"].endswith("-manager"))
    leader = next(r for r in rendered.all("Role") if r["metadata"]["name"].endswith("-leader-election"))
    return manager, leader


def all_rules(namespace: str = "kflare-system") -> list[Rule]:
    manager, leader = chart_roles(namespace)
    return [Rule("manager", i, r) for i, r in enumerate(manager["rules"])] + [
        Rule("leader-election", i, r) for i, r in enumerate(leader["rules"])
    ]


# ---- what each rule is for --------------------------------------------------------------------------------------


@dataclass
class Run:
    """One controller run: its namespaces (the release's, for the Lease, and the resources'), its process, and the
    kubeconfigs of the administrator and of the controller."""

    admin: KubeClient
    release: str
    resources: str
    account: str
    domain: str
    proc: ControllerProcess
    metrics_url: str
    webhook_port: int
    scraper_token: str
    log_marks: list[str] = field(default_factory=list)

    def forbidden(self, resource: str) -> bool:
        """The API server refused the controller `resource` (`zones`, `zones/status`, `leases`); for an owner's
        `finalizers`, the owner-references admission plugin refused an owner reference that blocks deletion."""
        log = self.proc.log().replace('\\"', '"')
        if resource.endswith("/finalizers"):
            return "can't set finalizers on" in log
        base, _, sub = resource.partition("/")
        needle = f'resource "{base}/{sub}"' if sub else f'resource "{base}"'
        return "forbidden" in log and needle in log

    async def get(self, plural: str, name: str) -> dict[str, Any] | None:
        path = (
            f"{KFLARE}/{plural}/{name}"
            if plural == "cloudflareaccounts"
            else (f"{KFLARE}/namespaces/{self.resources}/{plural}/{name}")
        )
        try:
            return await self.admin.request("GET", path)
        except KubeError:
            return None

    async def ready_reason(self, plural: str, name: str) -> str | None:
        obj = await self.get(plural, name)
        for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
            if cond["type"] == "Ready":
                return f"{cond['status']}/{cond['reason']}"
        return None

    async def events_in(self, namespace: str) -> int:
        listing = await self.admin.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
        return sum(1 for e in listing["items"] if e.get("reportingController") == "kflare.dev/kflare")

    async def scrape(self, token: str | None) -> int:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(verify=False, timeout=15) as http:  # noqa: S501 (self-signed, as the chart's default)
            return (await http.get(f"{self.metrics_url}/metrics", headers=headers)).status_code


Check = Callable[[Run], Awaitable[bool]]


async def zone_ready(run: Run) -> bool:
    return await run.ready_reason("zones", "zone") == "True/Synced"


async def account_validated(run: Run) -> bool:
    return await run.ready_reason("cloudflareaccounts", run.account) == "True/Validated"


async def tunnel_token_written(run: Run) -> bool:
    """The token Secret is there, and the Tunnel Synced (without it, the Tunnel's Ready says Kubernetes refused)."""
    try:
        secret = await run.admin.request("GET", f"/api/v1/namespaces/{run.resources}/secrets/tok")
    except KubeError:
        return False
    return bool((secret.get("data") or {}).get("TUNNEL_TOKEN")) and (
        await run.ready_reason("tunnels", "tunnel") == "True/Synced"
    )


async def worker_synced(run: Run) -> bool:
    return await run.ready_reason("workerscripts", "worker") == "True/Synced"


async def events_recorded(run: Run) -> bool:
    return await run.events_in(run.resources) > 0


async def metrics_scraped(run: Run) -> bool:
    return await run.scrape(run.scraper_token) == 200


WEBHOOKS = "kflare"
"""The chart's ValidatingWebhookConfiguration (release `kflare`), whose caBundle the manager role lets kflare keep."""


async def ca_published(run: Run) -> bool:
    """The release's webhooks trust the CA of the serving certificate kflare made (its Secret)."""
    try:
        secret = await run.admin.request("GET", f"/api/v1/namespaces/{run.release}/secrets/kflare-webhook-tls")
        config = await run.admin.request(
            "GET", f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{WEBHOOKS}"
        )
    except KubeError:
        return False
    ca = base64.b64decode(secret["data"]["ca.crt"])
    bundles = [base64.b64decode((w.get("clientConfig") or {}).get("caBundle") or "") for w in config["webhooks"]]
    return bool(bundles) and all(ca.strip() in bundle for bundle in bundles)


async def leader_elected(run: Run) -> bool:
    try:
        lease = await run.admin.request(
            "GET", f"/apis/coordination.k8s.io/v1/namespaces/{run.release}/leases/a634e97e.kflare.dev"
        )
    except KubeError:
        return False
    return bool((lease.get("spec") or {}).get("holderIdentity"))


FEATURES: dict[str, tuple[str, Check]] = {
    # resource the rule grants -> (the feature a user sees, how to see it work)
    "zones": ("resources reconciled (a Zone Synced)", zone_ready),
    "zones/status": ("status reported (a Zone's Ready condition)", zone_ready),
    "tunnels/finalizers": ("a Tunnel's token Secret, owned by the Tunnel", tunnel_token_written),
    "secrets": ("token Secrets read (an account Validated)", account_validated),
    "configmaps": ("a WorkerScript's code from a ConfigMap", worker_synced),
    "events": ("Events on resources", events_recorded),
    "tokenreviews": ("/metrics: a scraper's token checked", metrics_scraped),
    "subjectaccessreviews": ("/metrics: a scraper's access checked", metrics_scraped),
    "leases": ("leader election (the Lease held)", leader_elected),
    # Caches the lifecycle reads before it reconciles anything: without one, nothing is reconciled.
    "cloudflareclaims": ("one owner per object (the claims of adopted objects)", zone_ready),
    "namespaces": ("accounts' namespace policies (the namespaces' labels)", zone_ready),
    "grants": ("references across namespaces (the namespaces' grants)", zone_ready),
    "validatingwebhookconfigurations": ("the webhooks trust the certificate kflare makes (caBundle)", ca_published),
}


def feature_of(rule: Rule) -> tuple[str, str, Check]:
    """(resource the API server will refuse, feature, its check) for a rule."""
    resources = rule.resources
    for resource in resources:
        if resource in FEATURES:
            return resource, *FEATURES[resource]
    raise AssertionError(f"no feature known for {rule.body}")


# ---- one run ------------------------------------------------------------------------------------------------


async def _apply(admin: KubeClient, path: str, body: dict[str, Any]) -> None:
    try:
        await admin.request("POST", path, body=body)
    except KubeError as exc:
        if exc.status != 409:
            raise


@contextlib.asynccontextmanager
async def run_with(
    plane: ControlPlane,
    emulator: EmulatorProcess,
    admin: KubeClient,
    workdir: Path,
    rules: list[Rule],
    label: str,
) -> AsyncIterator[Run]:
    """`kflare run` as the chart runs it, with `rules` as its roles, and a workload that uses every feature."""
    release, resources = f"rel-{label}", f"res-{label}"
    for ns in (release, resources):
        await _apply(admin, "/api/v1/namespaces", {"metadata": {"name": ns, "labels": {"kflare-test": "on"}}})
    manager_rules = [r.body for r in rules if r.role == "manager"]
    leader_rules = [r.body for r in rules if r.role == "leader-election"]
    sa = {"kind": "ServiceAccount", "name": "kflare", "namespace": release}
    role_name = f"kflare-chaos-{label}"
    ref = {"apiGroup": "rbac.authorization.k8s.io"}
    await _apply(admin, f"/api/v1/namespaces/{release}/serviceaccounts", {"metadata": {"name": "kflare"}})
    await _apply(
        admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {"metadata": {"name": role_name}, "rules": manager_rules},
    )
    await _apply(
        admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": role_name},
            "roleRef": {**ref, "kind": "ClusterRole", "name": role_name},
            "subjects": [sa],
        },
    )
    await _apply(
        admin,
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{release}/roles",
        {"metadata": {"name": "leader"}, "rules": leader_rules},
    )
    await _apply(
        admin,
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{release}/rolebindings",
        {"metadata": {"name": "leader"}, "roleRef": {**ref, "kind": "Role", "name": "leader"}, "subjects": [sa]},
    )
    # A scraper allowed to get /metrics, bound to the chart's metrics reader role (a copy of it).
    await _apply(admin, f"/api/v1/namespaces/{release}/serviceaccounts", {"metadata": {"name": "scraper"}})
    await _apply(
        admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {"metadata": {"name": f"{role_name}-metrics"}, "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
    )
    await _apply(
        admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": f"{role_name}-metrics"},
            "roleRef": {**ref, "kind": "ClusterRole", "name": f"{role_name}-metrics"},
            "subjects": [{**sa, "name": "scraper"}],
        },
    )

    async def token(name: str) -> str:
        issued = await admin.request(
            "POST",
            f"/api/v1/namespaces/{release}/serviceaccounts/{name}/token",
            body={"spec": {"audiences": [], "expirationSeconds": 3600}},
        )
        return str(issued["status"]["token"])

    kubeconfig = token_kubeconfig(plane, f"chaos-{label}", await token("kflare"))
    scraper = await token("scraper")

    # The workload, made by an administrator, in the resources' namespace: one of every feature.
    account = f"acct-{label}"
    domain = f"{label}.example"
    core = f"/api/v1/namespaces/{resources}"
    own = f"{KFLARE}/namespaces/{resources}"
    token_data = base64.b64encode(emulator.token.encode()).decode()
    await _apply(admin, f"{core}/secrets", {"metadata": {"name": "cf-token"}, "data": {"CF_API_TOKEN": token_data}})
    await _apply(
        admin,
        f"{KFLARE}/cloudflareaccounts",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "CloudflareAccount",
            "metadata": {"name": account},
            "spec": {"accountID": emulator.account_id, "tokenSecretRef": {"name": "cf-token", "namespace": resources}},
        },
    )
    await _apply(
        admin,
        f"{own}/zones",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Zone",
            "metadata": {"name": "zone"},
            "spec": {"name": domain, "accountRef": {"name": account}},
        },
    )
    # Paused from the start: its Paused Event is one a user wants (a new resource's first Ready records none).
    await _apply(
        admin,
        f"{own}/zones",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Zone",
            "metadata": {"name": "held", "annotations": {"kflare.dev/paused": "true"}},
            "spec": {"name": f"held-{domain}", "accountRef": {"name": account}},
        },
    )
    await _apply(
        admin,
        f"{own}/tunnels",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Tunnel",
            "metadata": {"name": "tunnel"},
            "spec": {"name": f"{label}-t", "accountRef": {"name": account}, "credentialsSecretRef": {"name": "tok"}},
        },
    )
    await _apply(
        admin, f"{core}/configmaps", {"metadata": {"name": "code"}, "data": {"index.js": "export default {};"}}
    )
    await _apply(
        admin,
        f"{own}/workerscripts",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "WorkerScript",
            "metadata": {"name": "worker"},
            "spec": {
                "accountRef": {"name": account},
                "name": f"{label}-worker",
                "scriptConfigMapRef": {"name": "code", "key": "index.js"},
            },
        },
    )

    metrics_port, webhook_port = free_port(), free_port()
    proc = ControllerProcess(plane, emulator, workdir)
    chart_args = [a for a in CHART_ARGS if not a.startswith(LISTENER_FLAGS)]
    replaced = ("--kubeconfig", "--namespace", "--metrics-bind-address", "--webhook-port", "--log-level")
    await _webhook_configuration(admin)
    proc.argv = [a for a in proc.argv if not a.startswith(replaced)] + [
        *chart_args,
        # The serving certificate kflare keeps (its own directory per run) and the webhooks whose caBundle it keeps.
        f"--webhook-cert-dir={workdir / label / 'certs'}",
        "--webhook-cert-secret=kflare-webhook-tls",
        f"--webhook-cert-names=kflare-webhook.{release}.svc",
        f"--webhook-configuration={WEBHOOKS}",
        f"--namespace={release}",
        f"--kubeconfig={kubeconfig}",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
        f"--webhook-bind-address=127.0.0.1:{webhook_port}",
        "--log-level=info",
    ]
    proc.start()
    try:
        wait_serving(proc)
        yield Run(
            admin, release, resources, account, domain, proc, f"https://127.0.0.1:{metrics_port}", webhook_port, scraper
        )
    finally:
        proc.stop()
        await _clean(admin, account, resources, role_name)


async def _webhook_configuration(admin: KubeClient) -> None:
    """The chart's webhook configuration as far as kflare's caBundle goes: one webhook that never matches a request."""
    rule = {"apiGroups": ["never.kflare.test"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["x"]}
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": WEBHOOKS},
        "webhooks": [
            {
                "name": "never.validate.kflare.dev",
                "clientConfig": {"service": {"name": "kflare-webhook", "namespace": "kflare-system", "path": "/x"}},
                "rules": [rule],
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
            }
        ],
    }
    try:
        await admin.request("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", body=body)
    except KubeError as exc:
        if not exc.conflict:
            raise


LISTENER_FLAGS = (
    "--health-probe-bind-address",
    "--metrics-bind-address",
    "--metrics-cert-path",
    "--webhook-",
    "--namespace",
    "--log-level",
)
CHART_ARGS: list[str] = []


def wait_serving(proc: ControllerProcess, timeout: float = 30.0) -> None:
    """The process answers its liveness probe (ready it may never be, with a rule missing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.process is not None
        if proc.process.poll() is not None:
            raise AssertionError(f"controller exited with {proc.process.returncode}:\n{proc.log()[-3000:]}")
        url = f"http://127.0.0.1:{proc.probe_port}/healthz"
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1) as reply:
            if reply.status == 200:
                return
        time.sleep(0.1)
    raise AssertionError(f"controller not serving after {timeout}s:\n{proc.log()[-3000:]}")


async def _clean(admin: KubeClient, account: str, namespace: str, role: str) -> None:
    """What the run made that outlives its namespaces: the account, and the cluster roles."""
    for path in (f"{KFLARE}/cloudflareaccounts/{account}",):
        with contextlib.suppress(KubeError):
            await admin.request(
                "PATCH", path, body={"metadata": {"finalizers": None}}, content_type="application/merge-patch+json"
            )
        with contextlib.suppress(KubeError):
            await admin.request("DELETE", path)
    for plural in ("workerscripts", "tunnels", "zones"):
        for name in ("worker", "tunnel", "zone", "held"):
            path = f"{KFLARE}/namespaces/{namespace}/{plural}/{name}"
            with contextlib.suppress(KubeError):
                await admin.request(
                    "PATCH", path, body={"metadata": {"finalizers": None}}, content_type="application/merge-patch+json"
                )
    for name in (role, f"{role}-metrics"):
        for kind in ("clusterrolebindings", "clusterroles"):
            with contextlib.suppress(KubeError):
                await admin.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/{kind}/{name}")


# ---- the scenario ---------------------------------------------------------------------------------------------


STRICT = "--enable-admission-plugins=OwnerReferencesPermissionEnforcement"
"""What stricter clusters (OpenShift's, for one) run and the test API server of the other tests does not: setting
`blockOwnerDeletion` in an owner reference needs `update` on the owner's `finalizers`, changing owner references
needs `delete` on the object."""


@pytest.fixture(scope="module")
def strict_plane() -> Iterator[ControlPlane]:
    """An API server of its own, with kflare's CRDs, enforcing the permissions owner references need."""
    bins = bin_dir_from_env()
    if bins is None:
        pytest.fail("no kube-apiserver: set K8S_TEST_BIN (`make chaos` does)")
    plane = ControlPlane.in_tempdir(bins, extra_args=[STRICT])
    plane.start()
    try:
        kubectl = [str(plane.binary("kubectl")), "--kubeconfig", str(plane.kubeconfig_path)]
        crds = render_crds(helm=False).values()
        subprocess.run(
            [*kubectl, "apply", "--server-side", "-f", "-"],
            input="\n---\n".join(crds),
            text=True,
            check=True,
            capture_output=True,
            timeout=60,
        )
        plane.wait_established()
        yield plane
    finally:
        plane.stop()


@pytest.fixture
async def admin(strict_plane: ControlPlane) -> AsyncIterator[KubeClient]:
    kube = await KubeClient.connect(strict_plane.kubeconfig_path)
    try:
        yield kube
    finally:
        await kube.close()


async def test_the_charts_rbac_is_exactly_what_kflare_needs(
    strict_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    admin: KubeClient,
    tmp_path: Path,
    figures: Figures,
) -> None:
    rules = all_rules()
    helm = Helm(helm_binary(), tmp_path / "helm")
    CHART_ARGS[:] = helm.render(namespace="kflare-system").args[1:]
    label = uuid.uuid4().hex[:6]
    features = {feature_of(rule)[1]: feature_of(rule)[2] for rule in rules}

    # With every rule: every feature works.
    async with run_with(strict_plane, fresh_emulator, admin, tmp_path, rules, f"{label}-all") as run:
        for what, check in features.items():
            await eventually(lambda check=check: check(run), timeout=60, what=what)
        metrics = await metrics_answers(run, admin)
        plain = await plain_http_refused(run)
        denied = [line for line in run.proc.log().splitlines() if "forbidden" in line]

    checked = rules  # each is one controller start, seconds each: every rule at every size
    table: list[tuple[str, str, str]] = []
    useless: list[str] = []
    for n, rule in enumerate(checked):
        resource, what, check = feature_of(rule)
        without = [r for r in rules if r is not rule]
        async with run_with(strict_plane, fresh_emulator, admin, tmp_path, without, f"{label}-{n}") as run:

            async def broke(resource: str = resource, check: Check = check) -> bool:
                return not await check(run) and run.forbidden(resource)

            try:
                await eventually(broke, timeout=45, what=f"{what} to fail without {rule.name}")
                table.append((f"{rule.name} ({rule.verbs})", what, "fails"))
            except AssertionError:
                table.append((f"{rule.name} ({rule.verbs})", what, "still works"))
                useless.append(rule.name)

    print("\nrule removed -> feature checked -> with the rule removed")
    for row in table:
        print("  " + " | ".join(row))
    figures.record(SCENARIO, "rules in the chart's roles", len(rules), target="")
    figures.record(SCENARIO, "rules checked by removal", len(checked), target=f"{len(rules)}")
    for rule, (_, what, outcome) in zip(checked, table, strict=True):
        figures.record(SCENARIO, f"  without {rule.name}", f"{what}: {outcome}", target="fails", ok=outcome == "fails")
    figures.record(SCENARIO, "rules whose removal broke nothing", len(useless), target="0", ok=not useless)
    figures.record(SCENARIO, "refusals with every rule", len(denied), target="0", ok=not denied)
    ok_metrics = metrics == {"no token": 401, "not allowed": 403, "allowed": 200}
    figures.record(
        SCENARIO,
        "metrics without/not allowed/allowed",
        f"{metrics['no token']}/{metrics['not allowed']}/{metrics['allowed']}",
        target="401/403/200",
        ok=ok_metrics,
    )
    figures.record(
        SCENARIO,
        "plain HTTP refused (webhook, metrics)",
        "/".join("yes" if p else "no" for p in plain),
        target="yes/yes",
        ok=all(plain),
    )
    assert not denied, "\n".join(denied[:5])
    assert not useless, table
    assert ok_metrics, metrics
    assert all(plain)


async def metrics_answers(run: Run, admin: KubeClient) -> dict[str, int]:
    """/metrics without a token, with a token of a ServiceAccount not allowed to get it, and with the scraper's."""
    await _apply(admin, f"/api/v1/namespaces/{run.release}/serviceaccounts", {"metadata": {"name": "nobody"}})
    issued = await admin.request(
        "POST",
        f"/api/v1/namespaces/{run.release}/serviceaccounts/nobody/token",
        body={"spec": {"audiences": [], "expirationSeconds": 600}},
    )
    return {
        "no token": await run.scrape(None),
        "not allowed": await run.scrape(str(issued["status"]["token"])),
        "allowed": await run.scrape(run.scraper_token),
    }


async def plain_http_refused(run: Run) -> tuple[bool, bool]:
    """A plain-HTTP request to each TLS listener gets no HTTP answer it could act on."""

    async def refused(url: str) -> bool:
        async with httpx.AsyncClient(timeout=10) as http:
            try:
                reply = await http.get(url)
            except httpx.TransportError:
                return True
            return reply.status_code == 400 and "metrics" not in reply.text

    webhook = await refused(f"http://127.0.0.1:{run.webhook_port}/validate/zones")
    metrics = await refused(run.metrics_url.replace("https://", "http://") + "/metrics")
    return webhook, metrics
