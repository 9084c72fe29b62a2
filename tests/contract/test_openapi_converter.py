"""The OpenAPI 3.0 to JSON Schema converter of the contract tests, on small schemas of its own."""

from __future__ import annotations

from typing import Any

import pytest

from tests.contract.exchanges import Templates, multipart_parts
from tests.contract.openapi import convert, document, operation_index, operations, problems, template_key


def test_the_document_is_the_recorded_subset() -> None:
    doc = document()
    assert doc["openapi"] == "3.0.3"
    assert doc["x-subset"]["commit"] == "cca3064f1aba08cc6cef52fc7b3d3064a9eafcc9"
    assert len(doc["paths"]) == 80
    assert len(list(operations())) == 145
    assert len(operation_index()) == 145  # no two operations share a template once parameter names are erased


def test_nullable_adds_null_to_type_and_enum() -> None:
    converted = convert({"type": "string", "enum": ["a"], "nullable": True}, "response")
    assert converted == {"type": ["string", "null"], "enum": ["a", None]}
    assert convert({"$ref": "#/components/schemas/x", "nullable": True}, "response") == {"$ref": "#/definitions/x"}
    untyped = convert({"anyOf": [{"type": "string"}], "nullable": True}, "response")
    assert untyped == {"anyOf": [{"anyOf": [{"type": "string"}]}, {"type": "null"}]}


def test_annotations_go_but_properties_named_like_them_stay() -> None:
    schema = {
        "type": "object",
        "example": {},
        "x-stainless": 1,
        "discriminator": {"propertyName": "type"},
        "properties": {"example": {"type": "string", "format": "hostname", "deprecated": True}},
    }
    assert convert(schema, "response") == {
        "type": "object",
        "properties": {"example": {"type": "string", "format": "hostname"}},
    }


def test_read_only_properties_are_not_required_of_requests() -> None:
    schema = {
        "type": "object",
        "required": ["id", "name"],
        "properties": {"id": {"type": "string", "readOnly": True}, "name": {"type": "string"}},
    }
    assert convert(schema, "request")["required"] == ["name"]
    assert convert(schema, "response")["required"] == ["id", "name"]
    assert "required" not in convert(schema, "partial")


def test_all_of_merges_with_later_properties_replacing_earlier_ones() -> None:
    schema = {
        "allOf": [
            {"type": "object", "required": ["result"], "properties": {"result": {"type": "array"}}},
            {"properties": {"result": {"type": "object"}}, "required": ["success"]},
        ]
    }
    converted = convert(schema, "response")
    assert converted["properties"] == {"result": {"type": "object"}}
    assert converted["required"] == ["result", "success"]


@pytest.mark.parametrize(
    ("instance", "fits"),
    [({"result": {}, "success": True}, True), ({"result": [], "success": True}, False), ({"result": {}}, False)],
)
def test_problems_name_what_does_not_fit(instance: Any, fits: bool) -> None:
    schema = {
        "allOf": [
            {"type": "object", "required": ["result"], "properties": {"result": {"type": "array"}}},
            {"properties": {"result": {"type": "object"}}, "required": ["success"]},
        ]
    }
    assert (problems(schema, instance, "response") == []) is fits


def test_a_failed_one_of_names_the_closest_alternative() -> None:
    schema = {"oneOf": [{"type": "string"}, {"type": "object", "required": ["a", "b"]}]}
    (line,) = problems(schema, {"a": 1}, "response")
    assert "the closest" in line
    assert '"b" is a required property' in line


def test_templates_prefer_the_most_literal_match() -> None:
    templates = Templates(["/zones/{zone_id}/rulesets/{ruleset_id}/versions", "/zones/{id}/rulesets/phases/{p}"])
    assert templates.match("/zones/z/rulesets/phases/versions") == "/zones/{}/rulesets/phases/{}"
    assert templates.match("/zones/z/rulesets/r/versions") == "/zones/{}/rulesets/{}/versions"
    assert templates.match("/zones") is None
    assert template_key("/accounts/{account_identifier}/x/{id}") == "/accounts/{}/x/{}"


def test_multipart_parts_are_read_by_name() -> None:
    body = (
        b'--b\r\nContent-Disposition: form-data; name="metadata"\r\nContent-Type: application/json\r\n\r\n{"a": 1}'
        b'\r\n--b\r\nContent-Disposition: form-data; name="w.js"; filename="w.js"\r\n'
        b"Content-Type: application/javascript+module\r\n\r\nexport default {}\r\n--b--\r\n"
    )
    parts = multipart_parts("multipart/form-data; boundary=b", body)
    assert parts["metadata"] == ("application/json", b'{"a": 1}')
    assert parts["w.js"] == ("application/javascript+module", b"export default {}")
