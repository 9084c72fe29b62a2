"""The deploy guide says what this project does: every reason the reconcilers can report is in its troubleshooting
table, every kind in its token table, and its manifests and values are accepted by the models and the chart."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from app.api.constants import Reason
from app.api.registry import KINDS
from app.api.validation import validate_object
from tests.chart.helm import REPO_ROOT, Helm, Rendered

GUIDE = REPO_ROOT / "docs" / "deploy.md"
CHART_REF = "oci://ghcr.io/kflare-dev/charts/kflare"


def guide() -> str:
    return GUIDE.read_text()


def section(title: str) -> str:
    return guide().split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def yaml_blocks() -> list[list[dict[str, Any]]]:
    blocks = re.findall(r"```yaml\n(.*?)```", guide(), flags=re.DOTALL)
    return [[d for d in yaml.safe_load_all(b) if d] for b in blocks]


def table_first_column(text: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^\| `?([A-Za-z][A-Za-z0-9 ]*?)`? \|", text, flags=re.MULTILINE)}


def reasons_the_reconcilers_set() -> set[str]:
    found = set()
    for path in (REPO_ROOT / "reconcilers").glob("*.py"):
        source = path.read_text()
        found |= {Reason[name].value for name in re.findall(r"\bReason\.([A-Z0-9_]+)", source)}
        found |= set(re.findall(r'_?set_ready\(\s*raw,\s*"(?:True|False)",\s*"([A-Za-z]+)"', source))
    return found


def test_troubleshooting_explains_every_reason() -> None:
    reasons = reasons_the_reconcilers_set()
    assert {"Synced", "Validated", "TerminalError", "APIError", "AdoptionTargetNotFound"} <= reasons
    documented = table_first_column(section("Troubleshooting"))
    missing = sorted(reasons - documented)
    assert not missing, f"reasons the reconcilers set that the troubleshooting table does not explain: {missing}"


def test_token_permissions_cover_every_kind() -> None:
    rows = table_first_column(section("1. Create a Cloudflare API token"))
    missing = sorted(m.info.kind for m in KINDS if m.info.kind not in rows)
    assert not missing, f"kinds without their token permissions: {missing}"


def test_kflare_manifests_in_the_guide_are_valid() -> None:
    checked = 0
    for docs in yaml_blocks():
        for doc in docs:
            if str(doc.get("apiVersion", "")).startswith("kflare.dev/"):
                assert validate_object(doc["kind"], doc) == [], doc
                checked += 1
    assert checked >= 3


@pytest.mark.parametrize("title", ["Production values", "Network access"])
def test_values_in_the_guide_install(helm: Helm, title: str) -> None:
    """Each values block renders with the chart's schema, and what it turns on is there."""
    blocks = re.findall(r"```yaml\n(.*?)```", section(title), flags=re.DOTALL)
    values = [yaml.safe_load(b) for b in blocks if "apiVersion" not in b]
    assert values
    for block in values:
        rendered = Rendered.parse(helm.template(block).stdout)
        if block.get("networkPolicy", {}).get("enabled"):
            assert "NetworkPolicy" in rendered.kinds
        if block.get("metrics", {}).get("prometheusRule", {}).get("enabled"):
            assert {"PrometheusRule", "ServiceMonitor"} <= rendered.kinds


def test_install_commands_name_the_released_chart() -> None:
    text = guide()
    assert f"helm install kflare {CHART_REF}" in text
    assert f"helm upgrade kflare {CHART_REF}" in text
    gitops = [d for docs in yaml_blocks() for d in docs if d.get("kind") in ("Application", "OCIRepository")]
    sources = {d["kind"]: d["spec"] for d in gitops}
    assert sources["Application"]["source"]["repoURL"] + "/kflare" == CHART_REF.removeprefix("oci://")
    assert sources["OCIRepository"]["url"] == CHART_REF


def test_links_to_the_api_reference_resolve() -> None:
    for target in re.findall(r"\]\((api/[^)#]+)", guide()):
        assert (GUIDE.parent / target).is_file(), target


def test_troubleshooting_explains_the_gateway_class_reasons() -> None:
    from reconcilers.gateway import publish

    reasons = {
        publish.PUBLISHED,
        publish.PENDING,
        publish.ZONE_NOT_MANAGED,
        publish.ALREADY_EXISTS,
        publish.TUNNEL_ALREADY_CONFIGURED,
        publish.CONFIGURATION_REFUSED,
    }
    gateway_table = section("Troubleshooting").split("### The Gateway class", 1)[1]
    missing = sorted(reasons - table_first_column(gateway_table))
    assert not missing, f"reasons of the Gateway class the troubleshooting table does not explain: {missing}"
