"""The chart's monitoring with a real Prometheus: the release installed with its ServiceMonitor, PrometheusRule and
Grafana dashboard (the Prometheus Operator's CRDs installed for them), and a Prometheus server, built from the same
release as the promtool that unit-tests the rules, scraping kflare exactly as the ServiceMonitor says (discovered
Endpoints, the `metrics` port, HTTPS checked against the chart's CA for the Service's name, the bearer token of a
ServiceAccount bound to kflare-metrics-reader) and evaluating the PrometheusRule as the operator hands it over.

Intervals and the alerts' `for:` are short, through the chart's values, so that an alert fires in a test's time.
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.gotools import go_tool
from tests.e2e.cluster import Cluster
from tests.e2e.prometheus import Prometheus, ScrapeFiles, rule_file, scrape_configs
from tests.e2e.test_chart import NAMESPACE, Installed, _examples, deadline, release_installed
from tests.fixtures.emulator import EmulatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]  # the first run builds Prometheus

NOT_READY_SECONDS = 5
NOT_READY_FOR = f"{NOT_READY_SECONDS}s"
MONITORING = {
    "metrics": {
        "serviceMonitor": {"enabled": True, "interval": "2s", "scrapeTimeout": "2s"},
        "prometheusRule": {"enabled": True, "notReadyFor": NOT_READY_FOR, "reconcileErrorsFor": "5s"},
        "grafanaDashboard": {"enabled": True},
    }
}
OPERATOR_CRDS = {
    "servicemonitors.monitoring.coreos.com": "monitoring.coreos.com_servicemonitors.yaml",
    "prometheusrules.monitoring.coreos.com": "monitoring.coreos.com_prometheusrules.yaml",
}
PROMETHEUS_NAMESPACE = "monitoring"  # where the production values' NetworkPolicy lets scrapes come from
VARIABLE = re.compile(r"\$\{?(\w+)\}?")


@dataclass
class Monitored:
    installed: Installed
    prometheus: Prometheus
    dashboard: dict[str, Any]


def _prometheus_identity(installed: Installed, work: Path) -> Path:
    """Prometheus' ServiceAccount, as a Prometheus in the `monitoring` namespace has one: it may discover the
    release namespace's Services, Endpoints and Pods, and is bound to kflare-metrics-reader. Its token, in a file."""
    ns = PROMETHEUS_NAMESPACE
    installed.kubectl("create", "namespace", ns)
    installed.kubectl("create", "serviceaccount", "prometheus", "-n", ns)
    installed.kubectl(
        "create",
        "role",
        "prometheus-discovery",
        "-n",
        NAMESPACE,
        "--verb=get,list,watch",
        "--resource=services,endpoints,pods",
    )
    installed.kubectl(
        "create",
        "rolebinding",
        "prometheus-discovery",
        "-n",
        NAMESPACE,
        "--role=prometheus-discovery",
        f"--serviceaccount={ns}:prometheus",
    )
    installed.kubectl(
        "create",
        "clusterrolebinding",
        "prometheus-kflare-metrics",
        "--clusterrole=kflare-metrics-reader",
        f"--serviceaccount={ns}:prometheus",
    )
    token = work / "token"
    token.write_text(installed.kubectl("create", "token", "prometheus", "-n", ns, "--duration=2h").strip())
    token.chmod(0o600)
    return token


def _forget_prometheus_identity(installed: Installed) -> None:
    installed.kubectl("delete", "clusterrolebinding", "prometheus-kflare-metrics", "--ignore-not-found", check=False)
    installed.kubectl("delete", "namespace", PROMETHEUS_NAMESPACE, "--ignore-not-found", "--wait=false", check=False)
    for kind in ("rolebinding", "role"):
        installed.kubectl("delete", kind, "prometheus-discovery", "-n", NAMESPACE, "--ignore-not-found", check=False)


def _secret_files(installed: Installed, monitor: dict[str, Any], work: Path) -> dict[tuple[str, str], Path]:
    """Each Secret key the ServiceMonitor's TLS settings name, copied to a file as the operator mounts it."""
    files = {}
    for endpoint in monitor["spec"]["endpoints"]:
        ref = (endpoint.get("tlsConfig") or {}).get("ca", {}).get("secret")
        if ref:
            secret = installed.get("secret", ref["name"], "-n", monitor["metadata"]["namespace"])
            path = work / f"{ref['name']}-{ref['key']}"
            path.write_bytes(base64.b64decode(secret["data"][ref["key"]]))
            files[(ref["name"], ref["key"])] = path
    return files


@pytest.fixture(scope="module")
def monitored(
    cluster: Cluster, image: str, node_emulator: EmulatorProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Monitored]:
    crds = go_tool("prometheus-operator-crds")
    binary = go_tool("prometheus")
    work = tmp_path_factory.mktemp("prometheus")
    # Only the two kinds the chart renders: the chart must install without the rest of the operator.
    cluster.kubectl("apply", "--server-side", *(f"--filename={crds / file}" for file in OPERATOR_CRDS.values()))
    names = [f"crd/{name}" for name in OPERATOR_CRDS]
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    with ExitStack() as undo:  # in reverse: Prometheus, its identity, the release, the CRDs
        undo.callback(cluster.kubectl, "delete", "--ignore-not-found", "--wait=false", *names, check=False)
        installed = undo.enter_context(
            release_installed(
                cluster, image, node_emulator, tmp_path_factory.mktemp("release"), name="monitored", values=MONITORING
            )
        )
        fullname = installed.fullname
        installed.kubectl("apply", "-f", "-", input_text=_examples())
        installed.wait_converged()
        monitor = installed.get("servicemonitor", fullname, "-n", NAMESPACE)
        rule = installed.get("prometheusrule", fullname, "-n", NAMESPACE)
        board = installed.get("configmap", f"{fullname}-dashboard", "-n", NAMESPACE)
        undo.callback(_forget_prometheus_identity, installed)
        files = ScrapeFiles(_prometheus_identity(installed, work), _secret_files(installed, monitor, work))
        prometheus = Prometheus(
            binary, work / "server", scrape_configs(monitor, files, cluster.host, cluster.ca_path), rule_file(rule)
        )
        undo.callback(prometheus.stop)
        prometheus.start()
        yield Monitored(installed, prometheus, json.loads(board["data"]["kflare.json"]))


def _targets_up(monitored: Monitored, count: int = 2) -> list[dict[str, Any]]:
    """The active targets, once there are `count` and each has been scraped and is up."""
    for _ in deadline(120):
        targets = monitored.prometheus.targets()
        if len(targets) == count and all(t["health"] == "up" for t in targets):
            return targets
    raise AssertionError  # unreachable: deadline raises


def test_prometheus_scrapes_every_kflare_pod_as_the_service_monitor_says(
    monitored: Monitored, capsys: pytest.CaptureFixture[str]
) -> None:
    """One target per pod behind the metrics Service, up: over HTTPS to the pod's `metrics` port, the chart's
    certificate checked for the Service's name, the token accepted; labelled as the operator labels them."""
    installed, prometheus = monitored.installed, monitored.prometheus
    pods = {p["metadata"]["name"]: p["status"]["podIP"] for p in installed.wait_ready_pods(2)}
    targets = _targets_up(monitored, len(pods))
    with capsys.disabled():
        up_in = time.monotonic() - prometheus.started
        print(f"\nhelm install {installed.installed_in:.1f}s; {len(targets)} targets up {up_in:.1f}s after start")
    service = f"{installed.fullname}-metrics"
    ports = installed.get("pod", next(iter(pods)), "-n", NAMESPACE)["spec"]["containers"][0]["ports"]
    metrics_port = next(p["containerPort"] for p in ports if p["name"] == "metrics")
    for target in targets:
        labels = target["labels"]
        assert labels["job"] == service
        assert labels["namespace"] == NAMESPACE
        assert labels["service"] == service
        assert labels["endpoint"] == "metrics"
        assert labels["container"] == "manager"
        assert target["scrapeUrl"] == f"https://{pods[labels['pod']]}:{metrics_port}/metrics"
        assert target["lastError"] == ""
    up = prometheus.query(f'up{{job="{service}", namespace="{NAMESPACE}"}}')
    assert sorted(s["metric"]["pod"] for s in up) == sorted(pods)
    assert {s["value"][1] for s in up} == {"1"}


def test_prometheus_evaluates_the_chart_rules(monitored: Monitored) -> None:
    """Both alerts loaded from the PrometheusRule with the `for:` the values gave, and evaluated without error."""
    groups = monitored.prometheus.api("rules")["groups"]
    rules = {r["name"]: r for g in groups for r in g["rules"]}
    assert set(rules) == {"KflareReconcileErrors", "KflareResourcesNotReady"}
    assert {name: r["duration"] for name, r in rules.items()} == {
        "KflareReconcileErrors": 5,
        "KflareResourcesNotReady": NOT_READY_SECONDS,
    }
    for _ in deadline(30):  # "unknown" until the first evaluation
        rules = {r["name"]: r for g in monitored.prometheus.api("rules")["groups"] for r in g["rules"]}
        if all(r["health"] == "ok" for r in rules.values()):
            break


def _substituted(expr: str, board: dict[str, Any]) -> str:
    """A panel's query as Grafana sends it: each dashboard variable replaced by its current value."""
    values = {v["name"]: v.get("current", {}).get("value") for v in board["templating"]["list"]}

    def value(match: re.Match[str]) -> str:
        found = values.get(match.group(1))
        assert isinstance(found, str), f"no value for ${match.group(1)} in {expr}"
        return found

    return VARIABLE.sub(value, expr)


def _has_data(result: list[Any]) -> bool:
    return any(not math.isnan(float(sample["value"][1])) for sample in result)


def _record(name: str, address: str, ttl: int = 300) -> str:
    """A DNSRecord of the examples' zone, as a manifest."""
    record = {
        "apiVersion": "kflare.dev/v1alpha1",
        "kind": "DNSRecord",
        "metadata": {"name": name, "namespace": "demo"},
        "spec": {
            "zoneRef": {"name": "example-com"},
            "name": f"{name}.example.com",
            "type": "A",
            "content": address,
            "ttl": ttl,
        },
    }
    return yaml.safe_dump(record)


def test_every_dashboard_query_returns_data(monitored: Monitored) -> None:
    """Every panel's every query, as the installed ConfigMap has it, answers at least one number: a panel that
    reads a metric or label kflare's scrape does not have would draw nothing. A record is created while Prometheus
    watches: the rate panels (reconcile time's quantile most of all) have nothing to show for a window in which
    nothing was reconciled, as with resources that converged before the first scrape."""
    installed = monitored.installed
    _targets_up(monitored)  # a sample from before the change, for the rates to start from
    installed.kubectl("apply", "-f", "-", input_text=_record("watched", "192.0.2.31"))
    installed.wait_converged(60)
    # The data plane's row reads Envoy and cloudflared, which this release (no Gateway class) does not run; that
    # Envoy serves what it reads is checked by tests/dataplane/test_envoy_metrics.py.
    queries = {
        f"{panel['title']}: {target['expr']}": _substituted(target["expr"], monitored.dashboard)
        for panel in monitored.dashboard["panels"]
        for target in panel.get("targets", [])
        if not re.search(r"\b(envoy|cloudflared)_", target["expr"])
    }
    assert len(queries) >= 10
    assert all(NAMESPACE in q for q in queries.values())
    empty = dict(queries)
    try:
        for _ in deadline(120):  # rates need two scrapes in their window
            empty = {k: q for k, q in empty.items() if not _has_data(monitored.prometheus.query(q))}
            if not empty:
                break
    except AssertionError:
        raise AssertionError(f"no data: {sorted(empty)}") from None
    finally:
        installed.kubectl("delete", "dnsrecord", "watched", "-n", "demo", "--ignore-not-found", check=False)


def _ready_condition(installed: Installed, record: str) -> dict[str, Any]:
    conditions = installed.get("dnsrecord", record, "-n", "demo").get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def _not_ready_alerts(prometheus: Prometheus) -> list[dict[str, Any]]:
    return [
        a
        for a in prometheus.alerts()
        if a["labels"]["alertname"] == "KflareResourcesNotReady"
        and a["labels"].get("kind") == "DNSRecord"
        and a["labels"].get("reason") == "TerminalError"
    ]


def test_resources_not_ready_fires_for_a_refused_record_and_resolves_when_it_is_fixed(
    monitored: Monitored, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record Cloudflare refuses (a 30 s TTL on a Free zone: TerminalError, not retried) fires the alert after
    `notReadyFor`; the same record with a TTL Cloudflare accepts turns Ready, and the alert goes away."""
    installed, prometheus = monitored.installed, monitored.prometheus
    assert _not_ready_alerts(prometheus) == []
    installed.kubectl("apply", "-f", "-", input_text=_record("short-ttl", "192.0.2.30", ttl=30))
    try:
        began = time.monotonic()
        condition: dict[str, Any] = {}
        for _ in deadline(60):
            condition = _ready_condition(installed, "short-ttl")
            if condition.get("reason") == "TerminalError":
                break
        assert condition["status"] == "False"
        refused = time.monotonic()
        firing: list[dict[str, Any]] = []
        for _ in deadline(120):
            firing = [a for a in _not_ready_alerts(prometheus) if a["state"] == "firing"]
            if firing:
                break
        fired = time.monotonic()
        (alert,) = firing
        assert alert["labels"]["severity"] == "warning"
        assert alert["annotations"]["summary"] == "1 kflare DNSRecord resources are not Ready (TerminalError)"
        # Pending from a scrape after the refusal (the condition's time has whole seconds), firing only once it
        # had been pending for `for:`: the first evaluation that fired is the first firing sample of ALERTS.
        turned = datetime.fromisoformat(condition["lastTransitionTime"]).timestamp()
        active = datetime.fromisoformat(alert["activeAt"]).timestamp()
        assert active >= turned - 1
        selector = ",".join(f'{k}="{v}"' for k, v in alert["labels"].items())
        (series,) = prometheus.query_range(f'ALERTS{{{selector},alertstate="firing"}}', active, time.time(), 0.5)
        first_firing = float(series["values"][0][0])
        # Sample times are whole milliseconds, activeAt is not.
        assert first_firing - active >= NOT_READY_SECONDS - 0.001, (active, first_firing)

        patch = '{"spec": {"ttl": 300}}'
        installed.kubectl("patch", "dnsrecord", "short-ttl", "-n", "demo", "--type=merge", f"--patch={patch}")
        fixing = time.monotonic()
        for _ in deadline(120):
            if not _not_ready_alerts(prometheus):
                break
        resolved = time.monotonic()
        assert _ready_condition(installed, "short-ttl")["reason"] == "Synced"
        with capsys.disabled():
            print(
                f"\nKflareResourcesNotReady: refused {refused - began:.1f}s after apply, firing "
                f"{fired - refused:.1f}s later (for: {NOT_READY_FOR}), gone {resolved - fixing:.1f}s after the fix"
            )
    finally:
        installed.kubectl("delete", "dnsrecord", "short-ttl", "-n", "demo", "--ignore-not-found", check=False)
