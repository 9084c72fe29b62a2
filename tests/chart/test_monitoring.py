"""The chart's monitoring: a PrometheusRule with the two alerts the deploy guide recommends, which promtool checks
and unit-tests (each alert fires on the behaviour it is for, and only then), and a Grafana dashboard ConfigMap for
the sidecar. Every metric the rules and the dashboard read is served by a running controller."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import re
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from app.controlplane import ControlPlane, free_port
from tests.chart.gotools import go_tool
from tests.chart.helm import Helm, Rendered, helm_binary
from tests.e2e.prometheus import ScrapeFiles, Untranslated, scrape_configs
from tests.fixtures.controller import Kflare, controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.helpers import eventually

NAMESPACE = "kflare-system"
MONITORING = {"metrics": {"prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True}}}
SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")


@pytest.fixture(scope="session")
def promtool() -> Path:
    return go_tool("promtool")


def rendered(helm: Helm, values: dict[str, Any] | None = None) -> Rendered:
    return Rendered.parse(helm.template(values or MONITORING, namespace=NAMESPACE).stdout)


def rule_file(helm: Helm, tmp_path: Path, values: dict[str, Any] | None = None) -> Path:
    """The PrometheusRule's spec as a Prometheus rule file (the operator hands Prometheus exactly that)."""
    rule = rendered(helm, values).one("PrometheusRule")
    path = tmp_path / "kflare.rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    return path


def alerts(helm: Helm) -> dict[str, dict[str, Any]]:
    rule = rendered(helm).one("PrometheusRule")
    return {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}


def dashboard(helm: Helm) -> dict[str, Any]:
    config_map = rendered(helm).one("ConfigMap", "kflare-dashboard")
    return dict(json.loads(config_map["data"]["kflare.json"]))


DATA_PLANE_PREFIXES = ("envoy_", "cloudflared_")
"""What the dashboard's data-plane row reads: Envoy's and cloudflared's own metrics, not the controller's."""


def dashboard_exprs(helm: Helm) -> list[str]:
    return [t["expr"] for p in dashboard(helm)["panels"] for t in p.get("targets", [])]


def test_off_by_default(helm: Helm) -> None:
    kinds = Rendered.parse(helm.template().stdout).kinds
    assert "PrometheusRule" not in kinds
    assert not [d for d in Rendered.parse(helm.template().stdout).all("ConfigMap") if "dashboard" in str(d)]


@pytest.mark.timeout(1800)  # the first run builds promtool
def test_the_rules_pass_promtool(helm: Helm, promtool: Path, tmp_path: Path) -> None:
    path = rule_file(helm, tmp_path)
    done = subprocess.run([str(promtool), "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 2 rules found" in done.stdout
    assert set(alerts(helm)) == {"KflareReconcileErrors", "KflareResourcesNotReady"}


@pytest.mark.timeout(1800)  # the first run builds promtool
def test_the_alerts_fire_on_what_they_are_for(helm: Helm, promtool: Path, tmp_path: Path) -> None:
    """promtool's rule unit tests: retried errors that go on for 30 minutes fire KflareReconcileErrors, a burst
    that stops does not; resources Ready=False for 15 minutes fire KflareResourcesNotReady with their kind and
    reason, Ready ones and another namespace's do not."""
    path = rule_file(helm, tmp_path, {"metrics": {"prometheusRule": {"enabled": True, "alertLabels": {"team": "x"}}}})
    ns = f'namespace="{NAMESPACE}"'
    tests = {
        "rule_files": [str(path)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    # zone: one error a minute for an hour; dnsrecord: a burst of errors, then none.
                    {
                        "series": f'controller_runtime_reconcile_errors_total{{{ns},controller="zone"}}',
                        "values": "0+1x60",
                    },
                    {
                        "series": f'controller_runtime_reconcile_errors_total{{{ns},controller="dnsrecord"}}',
                        "values": "0+5x5 25x55",
                    },
                    {
                        "series": 'controller_runtime_reconcile_errors_total{namespace="other",controller="zone"}',
                        "values": "0+1x60",
                    },
                ],
                "alert_rule_test": [
                    {"eval_time": "20m", "alertname": "KflareReconcileErrors", "exp_alerts": []},
                    {
                        "eval_time": "50m",
                        "alertname": "KflareReconcileErrors",
                        "exp_alerts": [
                            {
                                "exp_labels": {"controller": "zone", "severity": "warning", "team": "x"},
                                "exp_annotations": {
                                    "summary": "kflare keeps failing to reconcile zone resources",
                                    "description": (
                                        f"The zone controller in {NAMESPACE} has retried errors from Cloudflare "
                                        "(5xx, rate limiting, network failures or timeouts) for 30m. Check the "
                                        "controller's log and its network access to the Cloudflare API."
                                    ),
                                },
                            }
                        ],
                    },
                ],
            },
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": f'kflare_resources{{{ns},kind="DNSRecord",ready="False",reason="TerminalError"}}',
                        "values": "2x30",
                    },
                    {
                        "series": f'kflare_resources{{{ns},kind="DNSRecord",ready="True",reason="Synced"}}',
                        "values": "40x30",
                    },
                    # Not Ready for ten minutes only, then Ready.
                    {
                        "series": f'kflare_resources{{{ns},kind="Zone",ready="False",reason="AccountNotReady"}}',
                        "values": "1x10 _x20",
                    },
                    {
                        "series": 'kflare_resources{namespace="other",kind="Zone",ready="False",reason="APIError"}',
                        "values": "1x30",
                    },
                ],
                "alert_rule_test": [
                    {"eval_time": "10m", "alertname": "KflareResourcesNotReady", "exp_alerts": []},
                    {
                        "eval_time": "20m",
                        "alertname": "KflareResourcesNotReady",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "kind": "DNSRecord",
                                    "reason": "TerminalError",
                                    "severity": "warning",
                                    "team": "x",
                                },
                                "exp_annotations": {
                                    "summary": "2 kflare DNSRecord resources are not Ready (TerminalError)",
                                    "description": (
                                        f"2 DNSRecord resources managed by kflare in {NAMESPACE} have had "
                                        "Ready=False with reason TerminalError for 15m. List them with "
                                        "`kubectl get dnsrecords.kflare.dev -A`; the deploy guide's "
                                        "troubleshooting section says what each reason needs."
                                    ),
                                },
                            }
                        ],
                    },
                ],
            },
        ],
    }
    spec = tmp_path / "tests.yaml"
    spec.write_text(yaml.safe_dump(tests, sort_keys=False))
    done = subprocess.run([str(promtool), "test", "rules", str(spec)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@pytest.mark.timeout(1800)  # the first run builds promtool
@pytest.mark.parametrize(
    "monitor",
    [
        {},
        {"insecureSkipVerify": True},
        {"relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}]},
        {"metricRelabelings": [{"action": "drop", "sourceLabels": ["__name__"], "regex": "python_gc_.*"}]},
    ],
    ids=["default", "insecure", "relabelings", "metric-relabelings"],
)
def test_the_service_monitor_becomes_a_scrape_config_prometheus_accepts(
    helm: Helm, promtool: Path, tmp_path: Path, monitor: dict[str, Any]
) -> None:
    """The e2e tests hand Prometheus the ServiceMonitor as the operator would translate it; every field the chart
    can render is one that translation knows (it refuses the others), and the result is a valid configuration."""
    values = {"metrics": {"serviceMonitor": {"enabled": True, **monitor}}}
    service_monitor = rendered(helm, values).one("ServiceMonitor")
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("token")
    ca.write_text("")
    secrets = {("kflare-webhook-tls", "ca.crt"): ca}
    jobs = scrape_configs(service_monitor, ScrapeFiles(token, secrets), "https://127.0.0.1:6443", ca)
    (job,) = jobs
    assert job["scheme"] == "https"
    assert job["authorization"] == {"credentials_file": str(token)}
    config = tmp_path / "prometheus.yaml"
    config.write_text(yaml.safe_dump({"scrape_configs": jobs}))
    done = subprocess.run(
        [str(promtool), "check", "config", "--syntax-only", str(config)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_service_monitor_field_the_translation_does_not_know_is_refused(helm: Helm, tmp_path: Path) -> None:
    """Rather than scrape in some other way than the operator would, without saying so."""
    values = {"metrics": {"serviceMonitor": {"enabled": True, "tlsConfig": {"caFile": "/etc/prometheus/ca.crt"}}}}
    service_monitor = rendered(helm, values).one("ServiceMonitor")
    with pytest.raises(Untranslated, match="caFile"):
        scrape_configs(service_monitor, ScrapeFiles(tmp_path / "token"), "https://127.0.0.1:6443", tmp_path / "ca")


def test_the_for_durations_and_labels_are_values(helm: Helm) -> None:
    values = {
        "metrics": {
            "prometheusRule": {
                "enabled": True,
                "labels": {"release": "prometheus"},
                "reconcileErrorsFor": "1h",
                "notReadyFor": "5m",
            }
        }
    }
    rule = Rendered.parse(helm.template(values).stdout).one("PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    found = {r["alert"]: r["for"] for r in rule["spec"]["groups"][0]["rules"]}
    assert found == {"KflareReconcileErrors": "1h", "KflareResourcesNotReady": "5m"}
    refused = helm.template({"metrics": {"prometheusRule": {"notReadyFor": "15 minutes"}}}, check=False)
    assert refused.returncode != 0
    assert "notReadyFor" in refused.stderr


def test_rules_need_metrics(helm: Helm) -> None:
    done = helm.template({"metrics": {"enabled": False, "prometheusRule": {"enabled": True}}}, check=False)
    assert done.returncode != 0
    assert "metrics.prometheusRule.enabled needs metrics.enabled" in done.stderr


def test_dashboard_config_map_for_the_sidecar(helm: Helm) -> None:
    values = {
        "metrics": {
            "grafanaDashboard": {
                "enabled": True,
                "namespace": "monitoring",
                "annotations": {"grafana_folder": "kflare"},
            }
        }
    }
    config_map = Rendered.parse(helm.template(values, namespace=NAMESPACE).stdout).one("ConfigMap", "kflare-dashboard")
    assert config_map["metadata"]["namespace"] == "monitoring"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "kflare"}
    board = json.loads(config_map["data"]["kflare.json"])
    assert board["uid"] == "kflare"
    (namespace,) = [v for v in board["templating"]["list"] if v["name"] == "namespace"]
    assert namespace["current"]["value"] == NAMESPACE  # the release's, not the ConfigMap's
    titles = {p["title"] for p in board["panels"]}
    assert {"Resources not Ready", "Reconcile errors by controller", "Cloudflare budget remaining per token"} <= titles
    assert {
        "Requests through the data plane / s",
        "5xx / s",
        "Upstream latency p99 by backend",
        "Tunnel connections",
    } <= titles
    assert all("$namespace" in expr for expr in dashboard_exprs(helm))


@pytest.mark.integration
async def test_the_metrics_the_rules_and_dashboard_read_are_served(
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare_crds: None,
    kflare: Kflare,
    tmp_path: Path,
) -> None:
    """Names in the alerts and the dashboard that the controller does not serve would never fire or draw. (One
    Helm renders them: what they read does not depend on which.)"""
    helm = Helm(helm_binary(), tmp_path / "helm")
    used = set()
    for rule in alerts(helm).values():
        used |= set(SELECTOR.findall(rule["expr"]))
    for expr in dashboard_exprs(helm):
        used |= set(SELECTOR.findall(expr))
    # The data plane's row reads Envoy and cloudflared (tests/dataplane/test_envoy_metrics.py checks Envoy's names).
    used = {name for name in used if not name.startswith(DATA_PLANE_PREFIXES)}
    assert {"controller_runtime_reconcile_errors_total", "kflare_resources"} <= used
    port = free_port()
    args = (f"--metrics-bind-address=127.0.0.1:{port}", "--metrics-secure=false")
    with controller_process(control_plane, fresh_emulator, tmp_path, *args):
        await kflare.ready_zone("example.com")
        async with httpx.AsyncClient(timeout=30) as http:
            text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
        await kflare.cleanup()  # while the controller runs, which lets the resources go
    samples = {s.name: s for family in text_string_to_metric_families(text) for s in family.samples}
    missing = sorted(name for name in used if name not in samples)
    assert not missing, f"used by the rules or the dashboard, not served: {missing}"
    # The counter the first alert reads is there before any error, so that a rate sees the first one.
    errors = [s for s in samples_named(text, "controller_runtime_reconcile_errors_total")]
    assert errors
    assert all(s.value == 0 for s in errors)
    # The gauge the second alert reads counts the slice just reconciled.
    resources = {
        (s.labels["kind"], s.labels["ready"], s.labels["reason"]): s.value
        for s in samples_named(text, "kflare_resources")
    }
    assert resources[("Zone", "True", "Synced")] == 1
    assert resources[("CloudflareAccount", "True", "Validated")] >= 1


def samples_named(text: str, name: str) -> list[Any]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples if s.name == name]


@pytest.mark.integration
@pytest.mark.timeout(1800)  # the first run builds promtool
async def test_rate_limiting_fires_the_reconcile_errors_alert(
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare_crds: None,
    kflare: Kflare,
    promtool: Path,
    tmp_path: Path,
) -> None:
    """Cloudflare answering 429 for a while moves controller_runtime_reconcile_errors_total, as the deploy guide
    says rate limiting does; those samples, played back as a rate limit that lasts, fire the chart's own
    KflareReconcileErrors alert for the controller that was limited."""
    helm = Helm(helm_binary(), tmp_path / "helm")
    port = free_port()
    args = (f"--metrics-bind-address=127.0.0.1:{port}", "--metrics-secure=false")
    with controller_process(control_plane, fresh_emulator, tmp_path, *args):
        await kflare.ready_zone("example.com")
        async with httpx.AsyncClient(timeout=30) as http:

            async def errors() -> float:
                text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
                found = samples_named(text, "controller_runtime_reconcile_errors_total")
                return float(sum(s.value for s in found if s.labels["controller"] == "dnsrecord"))

            before = await errors()
            fresh_emulator.fault("dns_records", "status", status=429, retry_after=1)
            await kflare.make_record("www", "zone", type="A", name="www.example.com", content="192.0.2.1")
            samples = [before]
            for _ in range(4):
                more = functools.partial(_above, errors, samples[-1])
                samples.append(await eventually(more, timeout=30, what="another reconcile error"))
            record = await kflare.get("DNSRecord", "www")
            ready = next(c for c in record["status"]["conditions"] if c["type"] == "Ready")
            assert (ready["status"], ready["reason"]) == ("False", "APIError")
            fresh_emulator.clear_faults()
            await kflare.ready("DNSRecord", "www")
        await kflare.cleanup()
    # Each scrape as one minute, the observed increments repeated for an hour: a rate limit that does not end.
    steps = [b - a for a, b in itertools.pairwise(samples)]
    values = [before]
    while len(values) <= 60:
        values.append(values[-1] + steps[(len(values) - 1) % len(steps)])
    series = f'controller_runtime_reconcile_errors_total{{namespace="{NAMESPACE}",controller="dnsrecord"}}'
    tests = {
        "rule_files": [str(rule_file(helm, tmp_path))],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": series, "values": " ".join(f"{v:g}" for v in values)}],
                "alert_rule_test": [
                    {
                        "eval_time": "50m",
                        "alertname": "KflareReconcileErrors",
                        "exp_alerts": [
                            {
                                "exp_labels": {"controller": "dnsrecord", "severity": "warning"},
                                "exp_annotations": {
                                    "summary": "kflare keeps failing to reconcile dnsrecord resources",
                                    "description": (
                                        f"The dnsrecord controller in {NAMESPACE} has retried errors from Cloudflare "
                                        "(5xx, rate limiting, network failures or timeouts) for 30m. Check the "
                                        "controller's log and its network access to the Cloudflare API."
                                    ),
                                },
                            }
                        ],
                    }
                ],
            }
        ],
    }
    spec = tmp_path / "rate-limited.yaml"
    spec.write_text(yaml.safe_dump(tests, sort_keys=False))
    command = [str(promtool), "test", "rules", str(spec)]
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


async def _above(read: Callable[[], Awaitable[float]], floor: float) -> float | None:
    value = await read()
    return value if value > floor else None
