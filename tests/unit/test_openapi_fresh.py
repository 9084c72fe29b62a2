"""The OpenAPI documents checked into openapi/ are exactly what the apps generate."""

from __future__ import annotations

import json
from pathlib import Path

from app.cli import main
from app.openapi import DEFAULT_DIRECTORY, NAMES, documents, render


def test_checked_in_openapi_documents_are_fresh() -> None:
    expected = documents()
    on_disk = {path.name: path.read_text(encoding="utf-8") for path in sorted(DEFAULT_DIRECTORY.glob("*.json"))}
    stale = sorted(name for name in expected.keys() | on_disk.keys() if expected.get(name) != on_disk.get(name))
    assert not stale, (
        f"the OpenAPI documents in {DEFAULT_DIRECTORY} differ from the apps ({', '.join(stale)}): run `kflare openapi` "
        "and commit the result"
    )


def test_every_listener_has_a_document() -> None:
    assert set(documents()) == {f"{name}.json" for name in NAMES}


def test_rendering_is_deterministic() -> None:
    assert render({"b": 1, "a": {"d": [2, 1], "c": "é"}}) == (
        '{\n  "a": {\n    "c": "é",\n    "d": [\n      2,\n      1\n    ]\n  },\n  "b": 1\n}\n'
    )


def test_the_command_writes_into_a_directory(tmp_path: Path) -> None:
    (tmp_path / "metrics.json").write_text("{}\n")
    (tmp_path / "unrelated.json").write_text("{}\n")
    assert main(["openapi", "--out", str(tmp_path)]) == 0
    for name in NAMES:
        document = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))
        assert document["openapi"].startswith("3.")
        assert document["paths"]
    assert (tmp_path / "unrelated.json").read_text() == "{}\n"


def test_the_documents_describe_the_routes() -> None:
    docs = {name: json.loads(text) for name, text in documents().items()}
    assert set(docs["probes.json"]["paths"]) == {"/healthz", "/readyz"}
    assert "/metrics" in docs["metrics.json"]["paths"]
    metrics = docs["metrics.json"]["paths"]["/metrics"]["get"]
    assert {"401", "403", "503"} <= set(metrics["responses"])
    assert docs["metrics.json"]["components"]["securitySchemes"]["kubernetesBearer"]["scheme"] == "bearer"
    assert "/validate/{plural}" in docs["webhooks.json"]["paths"]
    assert "/client/v4/zones" in docs["emulator.json"]["paths"]
