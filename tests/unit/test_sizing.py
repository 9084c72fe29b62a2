"""`kflare sizing`: what it recommends grows with the counts, covers what the converge benchmark measured, is what
the chart ships for the count the chart says, and its `--set` flags are values the chart accepts."""

from __future__ import annotations

import json
import re
import shlex
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import yaml

from app.cli import main
from app.sizing import CHART_DEFAULT_RESOURCES, IDLE_MIB, MEASURED, Counts, recommend

CHART = Path(__file__).resolve().parents[2] / "chart" / "kflare"


def sizing(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["sizing", *argv]) == 0
    return capsys.readouterr().out


def set_flags(out: str) -> dict[str, Any]:
    """The values the printed `--set` flags give, as helm nests them."""
    (line,) = [line for line in out.splitlines() if line.strip().startswith("--set ")]
    words = shlex.split(line)
    assert words[::2] == ["--set"] * (len(words) // 2)
    values: dict[str, Any] = {}
    for assignment in words[1::2]:
        path, value = assignment.split("=", 1)
        *parents, leaf = path.split(".")
        node = values
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return values


def mib(quantity: str) -> int:
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()  # type: ignore[union-attr]
    return int(number) * (1024 if unit == "Gi" else 1)


def test_more_resources_never_recommend_less() -> None:
    previous = recommend(Counts())
    for n in (1, 10, 100, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000):
        current = recommend(Counts(other=n))
        assert current.memory_request_mib >= previous.memory_request_mib
        assert current.memory_limit_mib >= previous.memory_limit_mib
        assert current.cpu_request_millicores >= previous.cpu_request_millicores
        previous = current
    assert recommend(Counts(other=100_000)).memory_request_mib > recommend(Counts(other=1_000)).memory_request_mib


@pytest.mark.parametrize("field", ["records", "zones", "workers", "gateways", "routes", "other"])
def test_every_count_adds(field: str) -> None:
    few, many = recommend(Counts(**{field: 1_000})), recommend(Counts(**{field: 50_000}))
    assert many.memory_request_mib > few.memory_request_mib
    assert many.memory_limit_mib > few.memory_limit_mib


def test_the_gateway_class_costs_its_modules() -> None:
    assert recommend(Counts(records=1_000, gateways=1)).ready_mib > recommend(Counts(records=1_001)).ready_mib


def test_drift_checks_add_cpu_the_shorter_their_interval() -> None:
    counts = Counts(records=50_000)
    off = recommend(counts).cpu_request_millicores
    hourly = recommend(counts, timedelta(hours=1)).cpu_request_millicores
    every_minute = recommend(counts, timedelta(minutes=1)).cpu_request_millicores
    assert off <= hourly < every_minute


def test_the_recommendation_covers_what_was_measured() -> None:
    """At each measured scale the request is at least the settled RSS, the limit above the peak; with nothing to
    manage, the request still holds the idle process."""
    for m in MEASURED:
        got = recommend(Counts(other=m.resources))
        assert got.memory_request_mib >= m.ready_mib
        assert got.memory_limit_mib >= m.peak_mib
    assert recommend(Counts()).memory_request_mib >= IDLE_MIB


def test_the_chart_default_is_the_recommendation_for_its_stated_count() -> None:
    text = (CHART / "values.yaml").read_text()
    shipped = yaml.safe_load(text)["resources"]
    assert shipped == recommend(Counts(other=CHART_DEFAULT_RESOURCES)).values()
    # The comment above the value names the command that prints it.
    comment = text.split("\nresources:\n", 1)[0].rsplit("\n\n", 1)[-1]
    assert f"kflare sizing --resources {CHART_DEFAULT_RESOURCES}" in comment


def test_the_printed_set_flags_are_values_the_chart_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    out = sizing(capsys, "--records", "5000", "--zones", "20", "--workers", "50", "--gateways", "10", "--routes", "500")
    assert "5,580" in out
    given = set_flags(out)
    expected = recommend(Counts(records=5000, zones=20, workers=50, gateways=10, routes=500)).values()
    assert given == {"resources": expected}
    values = yaml.safe_load((CHART / "values.yaml").read_text()) | given
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema_rs.Draft7Validator(schema).validate(values)
    assert mib(expected["requests"]["memory"]) <= mib(expected["limits"]["memory"])


def test_resources_and_the_counts_of_kinds_add_up(capsys: pytest.CaptureFixture[str]) -> None:
    by_kind = set_flags(sizing(capsys, "--records", "4000", "--zones", "1000"))
    assert set_flags(sizing(capsys, "--resources", "5,000")) == by_kind


@pytest.mark.parametrize("argv", [["--records", "-1"], ["--resources", "many"], ["--drift-check-interval", "soon"]])
def test_bad_input_is_refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    try:
        code = main(["sizing", *argv])
    except SystemExit as exc:  # argparse refuses a bad count
        code = int(exc.code or 0)
    assert code == 2
    assert "kflare" in capsys.readouterr().err


def test_the_deploy_guide_shows_what_kflare_sizing_prints() -> None:
    guide = (CHART.parents[1] / "docs" / "deploy.md").read_text()
    table = guide.split("\n### Sizing\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([\d,]+) \|.*\| (\d+Mi) / (\d+Mi) \|$", table, flags=re.MULTILINE)
    assert len(rows) >= 4
    for count, request, limit in rows:
        values = recommend(Counts(other=int(count.replace(",", "")))).values()
        assert (request, limit) == (values["requests"]["memory"], values["limits"]["memory"]), count
