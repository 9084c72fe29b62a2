"""An independent check that a CRD schema is structural, as apiextensions.k8s.io/v1 requires.

Rules from the Kubernetes documentation ("Specifying a structural schema"): every node has a type (unless it is
int-or-string or free-form), `properties` only on objects, `items` (one schema) only on arrays, no `$ref`, no
type-bearing union branches, no `additionalProperties` next to `properties`, no `uniqueItems: true`, list-map
keys declared and required, defaults not null, and only keywords the API server knows.
"""

from __future__ import annotations

from typing import Any

ALLOWED = {
    "type",
    "format",
    "title",
    "description",
    "default",
    "enum",
    "example",
    "externalDocs",
    "maximum",
    "minimum",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "multipleOf",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "items",
    "properties",
    "additionalProperties",
    "nullable",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
}
TYPES = {"object", "array", "string", "integer", "number", "boolean"}


def structural_problems(node: Any, path: str = "") -> list[str]:
    problems: list[str] = []
    if not isinstance(node, dict):
        return [f"{path or '.'}: not a schema object"]
    where = path or "."
    for key in node:
        if key not in ALLOWED:
            problems.append(f"{where}: unknown keyword {key!r}")
    for union in ("allOf", "anyOf", "oneOf", "not"):
        if union in node:
            problems.append(f"{where}: {union} (the generator should never need value-validation unions)")
    if "$ref" in node or "definitions" in node or "$defs" in node:
        problems.append(f"{where}: reference")
    typ = node.get("type")
    free = node.get("x-kubernetes-preserve-unknown-fields") is True
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    if int_or_string and typ is not None:
        problems.append(f"{where}: int-or-string with a type")
    if typ is None and not (free or int_or_string):
        problems.append(f"{where}: no type")
    if typ is not None and typ not in TYPES:
        problems.append(f"{where}: type {typ!r}")
    if "properties" in node and typ != "object":
        problems.append(f"{where}: properties on a {typ}")
    if "items" in node and typ != "array":
        problems.append(f"{where}: items on a {typ}")
    if typ == "array" and not isinstance(node.get("items"), dict):
        problems.append(f"{where}: an array needs one items schema")
    if "additionalProperties" in node:
        if "properties" in node:
            problems.append(f"{where}: additionalProperties and properties together")
        if not isinstance(node["additionalProperties"], dict):
            problems.append(f"{where}: additionalProperties must be a schema")
    if node.get("uniqueItems") is True:
        problems.append(f"{where}: uniqueItems: true")
    if "default" in node and node["default"] is None:
        problems.append(f"{where}: null default")
    if "nullable" in node and not isinstance(node["nullable"], bool):
        problems.append(f"{where}: nullable must be a boolean")
    for name in node.get("required", []):
        if name not in node.get("properties", {}):
            problems.append(f"{where}: required {name!r} is not a property")
    if node.get("x-kubernetes-list-type") == "map":
        keys = node.get("x-kubernetes-list-map-keys") or []
        item = node.get("items", {})
        if not keys:
            problems.append(f"{where}: list-map without keys")
        for key in keys:
            prop = item.get("properties", {}).get(key)
            if prop is None or (key not in item.get("required", []) and "default" not in prop):
                problems.append(f"{where}: list-map key {key!r} must be a required or defaulted property")
    for rule in node.get("x-kubernetes-validations", []):
        if not isinstance(rule, dict) or not rule.get("rule"):
            problems.append(f"{where}: validation without a rule")
    for name, prop in node.get("properties", {}).items():
        problems.extend(structural_problems(prop, f"{path}.{name}"))
    if isinstance(node.get("items"), dict):
        problems.extend(structural_problems(node["items"], f"{path}[]"))
    if isinstance(node.get("additionalProperties"), dict):
        problems.extend(structural_problems(node["additionalProperties"], f"{path}{{}}"))
    return problems


def unbounded(node: dict[str, Any], path: str = "") -> list[str]:
    """Strings without maxLength (or enum), arrays without maxItems, maps without maxProperties, free-form
    nodes: what makes the API server's CEL cost estimate hit its worst case."""
    out: list[str] = []
    typ = node.get("type")
    if node.get("x-kubernetes-preserve-unknown-fields") and typ is None:
        out.append(f"{path}: free-form")
    if typ == "string" and "maxLength" not in node and "enum" not in node and "format" not in node:
        out.append(f"{path}: string without maxLength")
    if typ == "array":
        if "maxItems" not in node:
            out.append(f"{path}: array without maxItems")
        out.extend(unbounded(node["items"], f"{path}[]"))
    if typ == "object":
        if node.get("x-kubernetes-preserve-unknown-fields"):
            out.append(f"{path}: free-form object")
        if isinstance(node.get("additionalProperties"), dict):
            if "maxProperties" not in node:
                out.append(f"{path}: map without maxProperties")
            out.extend(unbounded(node["additionalProperties"], f"{path}{{}}"))
        for name, prop in node.get("properties", {}).items():
            out.extend(unbounded(prop, f"{path}.{name}"))
    return out
