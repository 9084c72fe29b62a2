"""Control characters and invisible formatting are refused in every string of every kind's spec: by the models
(what the admission webhook says, with the field's path) and by the CRDs (a rule the API server runs itself)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from app.api import KINDS, ResourceClass
from app.api.crds import openapi_schema
from app.api.text import CODE_RULE, NAME_RULE, TEXT_RULE, hidden_character
from tests.unit.webhooks.reviews import review, sample
from webhooks import decide, parse_review

HOSTILE = {
    "NUL": "\x00",
    "ESC": "\x1b",
    "RLO": "\u202e",
    "LRI": "\u2066",
    "RLM": "\u200f",
    "DEL": "\x7f",
    "C1": "\x85",
}
FULL: dict[str, dict[str, Any]] = {"DNSRecord": {"comment": "web front", "tags": ["team:web"]}}
"""Optional string fields the samples leave out, so that every string of every kind is tried."""


def _strings(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def _set(obj: dict[str, Any], path: str, value: str) -> None:
    parts = [int(p) if p.isdigit() else p for p in re.split(r"\.|\[|\]", path) if p]
    node: Any = obj
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value


def _get(obj: dict[str, Any], path: str) -> str:
    parts = [int(p) if p.isdigit() else p for p in re.split(r"\.|\[|\]", path) if p]
    node: Any = obj
    for part in parts:
        node = node[part]
    return str(node)


def cases() -> Iterator[tuple[str, str, str]]:
    for model in KINDS:
        kind = model.info.kind
        obj = sample(kind, **FULL.get(kind, {}))
        for path in _strings(obj["spec"], "spec"):
            for name in HOSTILE:
                yield kind, path, name


@pytest.mark.parametrize(("kind", "path", "char"), list(cases()))
def test_the_webhook_refuses_hidden_characters_naming_the_field(kind: str, path: str, char: str) -> None:
    obj = sample(kind, **FULL.get(kind, {}))
    value = _get(obj, path)
    _set(obj, path, value[:1] + HOSTILE[char] + value[1:])
    model = next(m for m in KINDS if m.info.kind == kind)
    decision = decide(model, parse_review(_json(review("CREATE", copy.deepcopy(obj), kind=kind))).request)
    assert not decision.allowed
    assert any(error.path == path for error in decision.errors), decision.message


def test_the_message_names_the_character_and_its_position() -> None:
    obj = sample("DNSRecord", name="www\u202egro.example.com")
    decision = decide(
        next(m for m in KINDS if m.info.kind == "DNSRecord"), parse_review(_json(review("CREATE", obj))).request
    )
    assert decision.message == (
        "spec.name: must not contain control or invisible formatting characters:"
        " U+202E (RIGHT-TO-LEFT OVERRIDE) at position 3"
    )


def test_ordinary_text_passes() -> None:
    assert hidden_character("v=spf1 include:_spf.example.com ~all", name=False) is None
    assert hidden_character("déjà vu 👩\u200d💻", name=False) is None  # a zero-width joiner inside an emoji is text
    assert hidden_character("👩\u200d💻", name=True) == (1, "\u200d")  # but hides in a name
    assert hidden_character("xn--bcher-kva.example", name=True) is None


def _string_nodes(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if schema.get("type") == "string":
        yield path, schema
    for name, prop in (schema.get("properties") or {}).items():
        yield from _string_nodes(prop, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _string_nodes(schema["items"], f"{path}[]")


@pytest.mark.parametrize("model", KINDS, ids=lambda m: m.info.kind)
def test_every_string_of_every_crd_refuses_hidden_characters(model: ResourceClass) -> None:
    spec = openapi_schema(model)["properties"]["spec"]
    for path, node in _string_nodes(spec, "spec"):
        rules = {v["rule"] for v in node.get("x-kubernetes-validations", [])}
        pattern = node.get("pattern")
        # An enum or an ASCII-only pattern refuses them already; any other string needs one of the rules.
        ascii_only = pattern is not None and all(
            not re.search(pattern, f"a{c}b") and not re.search(pattern, c) for c in HOSTILE.values()
        )
        assert "enum" in node or ascii_only or rules & {NAME_RULE, TEXT_RULE, CODE_RULE}, (
            f"{model.info.kind} {path}: {node}"
        )


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()
