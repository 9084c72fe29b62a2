"""values.schema.json refuses unknown and invalid values, and the chart refuses clusters older than 1.34."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from app.settings import parse_duration
from tests.chart.helm import CHART, Helm


@pytest.mark.parametrize(
    ("values", "mentions"),
    [
        ({"foo": 1}, ["additional properties 'foo' not allowed"]),
        ({"metrics": {"serviceMonitor": {"enable": True}}}, ["/metrics/serviceMonitor", "'enable'"]),
        ({"image": {"tags": "1.0"}}, ["/image", "'tags'"]),
        ({"networkPolicy": {"apiServer": {"port": [443]}}}, ["/networkPolicy/apiServer", "'port'"]),
        ({"webhook": {"certManager": {"issuer": "x"}}}, ["/webhook/certManager", "'issuer'"]),
        ({"resources": {"request": {"cpu": "1"}}}, ["/resources", "'request'"]),
        ({"logging": {"level": "verbose"}}, ["/logging/level", "debug"]),
        ({"logging": {"format": "xml"}}, ["/logging/format", "json"]),
        ({"defaultDeletionPolicy": "keep"}, ["/defaultDeletionPolicy", "retain"]),
        ({"image": {"pullPolicy": "Sometimes"}}, ["/image/pullPolicy", "IfNotPresent"]),
        ({"webhook": {"failurePolicy": "Maybe"}}, ["/webhook/failurePolicy", "Ignore"]),
        ({"driftCheckInterval": "30 minutes"}, ["/driftCheckInterval", "does not match pattern"]),
        ({"driftCheckInterval": "1d"}, ["/driftCheckInterval"]),
        ({"driftCheckInterval": 30}, ["/driftCheckInterval"]),
        ({"reconcileTimeout": ""}, ["/reconcileTimeout"]),
        ({"reconcileTimeout": "5 m"}, ["/reconcileTimeout"]),
        ({"metrics": {"serviceMonitor": {"interval": "often"}}}, ["/metrics/serviceMonitor/interval"]),
        ({"healthPort": 70000}, ["/healthPort", "65"]),
        ({"metrics": {"port": 0}}, ["/metrics/port"]),
        ({"webhook": {"timeoutSeconds": 60}}, ["/webhook/timeoutSeconds", "30"]),
        ({"autoscaling": {"minReplicas": 0}}, ["/autoscaling/minReplicas"]),
        ({"autoscaling": {"enabled": "yes"}}, ["/autoscaling/enabled", "boolean"]),
        ({"image": {"digest": "latest"}}, ["/image/digest"]),
        ({"resources": {"limits": {"memory": "lots"}}}, ["/resources/limits/memory"]),
        ({"extraEnv": [{"value": "x"}]}, ["/extraEnv/0", "name"]),
        ({"webhook": {"certManager": {"issuerRef": {"name": "ca", "kind": "Vault"}}}}, ["issuerRef/kind"]),
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else "",
)
def test_schema_refuses(helm: Helm, values: dict[str, Any], mentions: list[str]) -> None:
    done = helm.template(values, check=False)
    assert done.returncode != 0, f"{values} was accepted"
    assert "don't meet the specifications of the schema" in done.stderr
    for text in mentions:
        assert text in done.stderr, done.stderr


@pytest.mark.parametrize("value", ["", "0", "0s", "90s", "30m", "1h30m", "1.5h", "500ms", "2h45m30.5s", "100us"])
def test_schema_takes_durations_the_controller_takes(helm: Helm, value: str) -> None:
    parse_duration(value)  # the controller's parser takes it too
    out = helm.template(
        {"driftCheckInterval": value, "reconcileTimeout": value or "0s"}, args=["-s", "templates/deployment.yaml"]
    )
    assert f"--drift-check-interval={value or '0s'}" in out.stdout


def test_schema_closes_every_object() -> None:
    """`additionalProperties: false` on every object the chart defines (Kubernetes types pass through)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    open_objects = []

    def walk(node: dict[str, Any], path: str) -> None:
        if node.get("type") == "object" and "properties" in node:
            if node.get("additionalProperties") is not False:
                open_objects.append(path)
            for key, child in node["properties"].items():
                walk(child, f"{path}/{key}")

    walk(schema, "")
    assert not open_objects
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize(("version", "ok"), [("1.33.0", False), ("1.33.9", False), ("1.34.0", True), ("1.36.1", True)])
def test_kube_version(helm: Helm, version: str, ok: bool) -> None:
    done = helm.template(args=["--kube-version", version, "-s", "templates/deployment.yaml"], check=False)
    assert (done.returncode == 0) == ok, done.stderr
    if not ok:
        assert "chart requires kubeVersion: >=1.34.0-0" in done.stderr


def test_values_yaml_documents_every_value() -> None:
    """Each value the schema knows has a default in values.yaml, where its documentation lives."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    missing = []

    def walk(node: dict[str, Any], value: Any, path: str) -> None:
        if not (isinstance(value, dict) and value and "properties" in node):
            return
        for key, child in node["properties"].items():
            if key not in value:
                missing.append(f"{path}.{key}")
            else:
                walk(child, value[key], f"{path}.{key}")

    walk(schema, values, "")
    assert missing == [".resources.claims"]
