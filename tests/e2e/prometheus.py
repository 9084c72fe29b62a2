"""A Prometheus server for the end-to-end tests, and what the Prometheus Operator would hand it.

The operator is not run: what it does for a ServiceMonitor and a PrometheusRule is small and well defined, and is
done here from the objects the chart installed. A ServiceMonitor becomes a scrape job that discovers the Endpoints
of the release namespace, keeps the Services its selector matches and the port it names, labels every series with
the namespace, service, pod, container and endpoint it came from (the labels the chart's rules and dashboard select
on), and scrapes with the scheme, TLS settings and bearer token the endpoint says. A PrometheusRule's spec is a
rule file as it is.

The server runs on the node's host: it reaches the pods' addresses over the bridge and the API server where the
node does, and listens on loopback only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from app.controlplane import ControlPlaneError, Process, free_port

# What the translation understands; a ServiceMonitor using anything else fails loudly instead of being scraped in
# some other way than the operator would.
ENDPOINT_FIELDS = {
    "port",
    "path",
    "scheme",
    "interval",
    "scrapeTimeout",
    "bearerTokenFile",
    "tlsConfig",
    "honorLabels",
    "relabelings",
    "metricRelabelings",
}
TLS_FIELDS = {"ca", "serverName", "insecureSkipVerify"}
SPEC_FIELDS = {"selector", "namespaceSelector", "endpoints", "jobLabel"}


class Untranslated(ValueError):
    """A ServiceMonitor field this translation does not implement."""


def _label(name: str) -> str:
    """A Kubernetes label name as Prometheus' discovery spells it in meta labels."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _snake(relabel: Mapping[str, Any]) -> dict[str, Any]:
    """A ServiceMonitor relabeling (sourceLabels, targetLabel...) in Prometheus' own spelling."""
    return {re.sub(r"([A-Z])", r"_\1", key).lower(): value for key, value in relabel.items()}


def _only(what: str, given: Mapping[str, Any], known: set[str]) -> None:
    unknown = sorted(set(given) - known)
    if unknown:
        raise Untranslated(f"{what}: {', '.join(unknown)}")


@dataclass
class ScrapeFiles:
    """Where the files a scrape job names are on the host: each was a Secret's key or a path in Prometheus' pod."""

    token: Path
    """The bearer token of Prometheus' ServiceAccount (`bearerTokenFile` names its in-pod path)."""
    secrets: Mapping[tuple[str, str], Path] = field(default_factory=dict)
    """(Secret name, key) of the release namespace to the file holding that key."""


def scrape_configs(monitor: Mapping[str, Any], files: ScrapeFiles, api_server: str, ca_file: Path) -> list[Any]:
    """The scrape jobs the Prometheus Operator generates for `monitor`, one per endpoint. `api_server` and
    `ca_file` stand in for the in-cluster configuration Prometheus' discovery uses inside a pod."""
    meta, spec = monitor["metadata"], monitor["spec"]
    _only("ServiceMonitor spec", spec, SPEC_FIELDS)
    selector = spec.get("selector") or {}
    _only("ServiceMonitor selector", selector, {"matchLabels"})
    namespaces = (spec.get("namespaceSelector") or {}).get("matchNames") or [meta["namespace"]]
    keep_service = [
        {
            "action": "keep",
            "source_labels": [
                f"__meta_kubernetes_service_label_{_label(name)}",
                f"__meta_kubernetes_service_labelpresent_{_label(name)}",
            ],
            "regex": f"({re.escape(str(value))});true",
        }
        for name, value in (selector.get("matchLabels") or {}).items()
    ]
    # The job is the Service's name, or the value of its `jobLabel` label where it has one.
    job_label = [{"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "$1"}]
    if spec.get("jobLabel"):
        source = f"__meta_kubernetes_service_label_{_label(spec['jobLabel'])}"
        job_label.append({"source_labels": [source], "target_label": "job", "regex": "(.+)", "replacement": "$1"})
    jobs = []
    for index, endpoint in enumerate(spec["endpoints"]):
        _only("ServiceMonitor endpoint", endpoint, ENDPOINT_FIELDS)
        if "port" not in endpoint:
            raise Untranslated("ServiceMonitor endpoint without a port name")
        port = endpoint["port"]
        relabel = [
            *keep_service,
            {"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": re.escape(port)},
            # Where each address leads: a pod (its name), or a node.
            *(
                {
                    "source_labels": [
                        "__meta_kubernetes_endpoint_address_target_kind",
                        "__meta_kubernetes_endpoint_address_target_name",
                    ],
                    "separator": ";",
                    "regex": f"{kind};(.*)",
                    "target_label": target,
                    "replacement": "$1",
                }
                for kind, target in (("Node", "node"), ("Pod", "pod"))
            ),
            *(
                {"source_labels": [source], "target_label": target}
                for source, target in (
                    ("__meta_kubernetes_namespace", "namespace"),
                    ("__meta_kubernetes_service_name", "service"),
                    ("__meta_kubernetes_pod_name", "pod"),
                    ("__meta_kubernetes_pod_container_name", "container"),
                )
            ),
            # Pods that have finished keep their Endpoints entry for a moment; they have nothing to scrape.
            {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"},
            *job_label,
            {"target_label": "endpoint", "replacement": port},
            *(_snake(r) for r in endpoint.get("relabelings") or []),
        ]
        job: dict[str, Any] = {
            "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/{index}",
            "honor_labels": bool(endpoint.get("honorLabels", False)),
            "metrics_path": endpoint.get("path", "/metrics"),
            "scheme": endpoint.get("scheme", "http"),
            "kubernetes_sd_configs": [
                {
                    "role": "endpoints",
                    "api_server": api_server,
                    "tls_config": {"ca_file": str(ca_file)},
                    "authorization": {"credentials_file": str(files.token)},
                    "namespaces": {"names": list(namespaces)},
                }
            ],
            "relabel_configs": relabel,
        }
        for source, target in (("interval", "scrape_interval"), ("scrapeTimeout", "scrape_timeout")):
            if endpoint.get(source):
                job[target] = endpoint[source]
        if endpoint.get("bearerTokenFile"):
            job["authorization"] = {"credentials_file": str(files.token)}
        tls = endpoint.get("tlsConfig") or {}
        _only("ServiceMonitor tlsConfig", tls, TLS_FIELDS)
        if tls:
            job["tls_config"] = _tls(tls, files)
        if endpoint.get("metricRelabelings"):
            job["metric_relabel_configs"] = [_snake(r) for r in endpoint["metricRelabelings"]]
        jobs.append(job)
    return jobs


def _tls(tls: Mapping[str, Any], files: ScrapeFiles) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if tls.get("serverName"):
        config["server_name"] = tls["serverName"]
    if tls.get("insecureSkipVerify"):
        config["insecure_skip_verify"] = True
    if "ca" in tls:
        _only("ServiceMonitor tlsConfig.ca", tls["ca"], {"secret"})
        ref = tls["ca"]["secret"]
        config["ca_file"] = str(files.secrets[(ref["name"], ref["key"])])
    return config


def rule_file(rule: Mapping[str, Any]) -> str:
    """A PrometheusRule as the rule file the operator writes for it: its spec."""
    return yaml.safe_dump(dict(rule["spec"]), sort_keys=False)


@dataclass
class Prometheus:
    """A Prometheus server on loopback, with short intervals so that rules fire in a test's time."""

    binary: Path
    workdir: Path
    scrape: list[Any]
    rules: str
    evaluation_interval: str = "1s"
    process: Process | None = None
    url: str = ""
    started: float = 0.0
    """time.monotonic() when the server was ready."""

    def start(self, timeout: float = 120.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "rules.yaml").write_text(self.rules)
        # The jobs' intervals are the ServiceMonitor's; the global ones only the defaults it leaves.
        defaults = {"scrape_interval": "5s", "scrape_timeout": "5s", "evaluation_interval": self.evaluation_interval}
        config = {
            "global": defaults,
            "rule_files": [str(self.workdir / "rules.yaml")],
            "scrape_configs": self.scrape,
        }
        (self.workdir / "prometheus.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        address = f"127.0.0.1:{free_port()}"
        self.url = f"http://{address}"
        self.process = Process(
            [
                str(self.binary),
                f"--config.file={self.workdir / 'prometheus.yaml'}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address={address}",
                "--log.level=info",
            ],
            self.workdir / "prometheus.log",
        )
        end = time.monotonic() + timeout
        with self.client() as http:
            while time.monotonic() < end:
                if not self.process.running:
                    raise ControlPlaneError(f"prometheus exited:\n{self.process.tail()}")
                try:
                    if http.get("/-/ready").status_code == 200:
                        self.started = time.monotonic()
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.5)
        raise ControlPlaneError(f"prometheus not ready after {timeout:.0f}s:\n{self.process.tail()}")

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=10, trust_env=False)

    def api(self, path: str, **params: str) -> Any:
        """The `data` of a successful answer of Prometheus' HTTP API."""
        with self.client() as http:
            reply = http.get(f"/api/v1/{path}", params=params)
        body = reply.json()
        assert reply.status_code == 200, f"{path} {params}: {body}"
        assert body["status"] == "success", f"{path} {params}: {body}"
        return body["data"]

    def query(self, expr: str) -> list[Any]:
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Any]:
        data = self.api("query_range", query=expr, start=str(start), end=str(end), step=str(step))
        assert data["resultType"] == "matrix", data
        return list(data["result"])

    def targets(self) -> list[dict[str, Any]]:
        return list(self.api("targets", state="active")["activeTargets"])

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])

    def tail(self, lines: int = 40) -> str:
        return self.process.tail(lines) if self.process else ""

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(grace=20)
