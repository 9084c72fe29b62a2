"""Cloudflare's OpenAPI 3.0 document (`openapi/cloudflare/openapi-subset.json`) as JSON Schema validators.

OpenAPI 3.0's Schema Object is a dialect of JSON Schema draft 4 (draft-wright-00), with differences this module
converts away before handing a schema to a draft 4 validator:

- `nullable: true` allows `null`: added to `type` (and to `enum`, which would refuse it otherwise), or, for a schema
  without a `type` (an `allOf` or a `$ref`), as an `anyOf` with `{"type": "null"}`;
- `$ref` points into `#/components/...` of the document: schemas move to `definitions` and references follow; the
  keywords beside a `$ref` are ignored, as OpenAPI 3.0 says (draft 4 does the same);
- `allOf` is read the way Cloudflare writes it and its SDK generator reads it: as a merge of the members' properties
  where a later member's property replaces an earlier one's, not as JSON Schema's intersection. The document builds
  each answer as `allOf: [common envelope, {result: <this operation's result>}]`, and the common envelopes declare
  a `result` of their own (`array` for the lists family's "collection", `object` for D1's, the success envelope in
  the failure answers of DNS): intersected, no body could ever fit (a single list would have to be an array);
- `readOnly` properties are never required of a request, `writeOnly` ones never of a response;
- `discriminator`, `example`, `deprecated`, `xml`, `externalDocs` and the `x-` extensions are annotations and go;
- `format` is an annotation too: Cloudflare's formats are partly its own (`hostname`, `ipv4` on a CIDR...), and the
  validator is built without format assertion.

The converter walks schemas by keyword, so a property named like a keyword (`example`, `nullable`) stays a property.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import jsonschema_rs

DOCUMENT_PATH = Path(__file__).resolve().parents[2] / "openapi" / "cloudflare" / "openapi-subset.json"
METHODS = ("get", "put", "post", "delete", "patch")
Direction = Literal["request", "response", "partial"]
"""`partial`: a request body that carries only the fields it changes (a PATCH Cloudflare applies field by field):
checked like a request, with no property required (and `oneOf` read as `anyOf`, since a part fits many wholes)."""

_DROPPED = frozenset({"discriminator", "example", "examples", "deprecated", "xml", "externalDocs", "readOnly"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf"})
_SCHEMA_ONE = frozenset({"items", "not", "additionalProperties"})
_COMPONENT_SCHEMA = "#/components/schemas/"


@functools.cache
def document() -> dict[str, Any]:
    """The document, with `SCHEMA_FIXES` applied."""
    with DOCUMENT_PATH.open(encoding="utf-8") as handle:
        loaded: dict[str, Any] = json.load(handle)
    schemas = loaded["components"]["schemas"]
    for name, (_why, fix) in SCHEMA_FIXES.items():
        schemas[name] = fix(schemas[name])
    return loaded


def _item_kinds(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "oneOf": [{"required": [kind]} for kind in ("ip", "redirect", "hostname", "asn")]}


SCHEMA_FIXES: dict[str, tuple[str, Any]] = {
    # name -> (why, the schema -> the schema as meant). Defects of the document that no answer could satisfy.
    "lists_item": (
        "the `oneOf` of a list item names the types of its value (an IP string, a redirect object, a hostname "
        "object, an ASN integer) on the item object itself, which no item object fits; meant: exactly one of the "
        "properties `ip`, `redirect`, `hostname`, `asn` (as the SDK models an item)",
        _item_kinds,
    ),
}


def template_key(path: str) -> str:
    """A path template with its parameters' names erased: the document and the emulator name them differently
    (`{account_identifier}` against `{account_id}`)."""
    return re.sub(r"\{[^}]+\}", "{}", path)


def convert(schema: Any, direction: Direction) -> Any:
    """One OpenAPI 3.0 schema as a JSON Schema draft 4 schema, for a request's or a response's body."""
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith(_COMPONENT_SCHEMA), f"a schema reference outside the schemas: {ref}"
        return {"$ref": "#/definitions/" + ref.removeprefix(_COMPONENT_SCHEMA)}
    if "allOf" in schema:
        return convert(_merged(schema), direction)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED or key.startswith("x-") or key in ("nullable", "writeOnly"):
            continue
        if key in _SCHEMA_MAPS:
            out[key] = {name: convert(sub, direction) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS:
            out["anyOf" if key == "oneOf" and direction == "partial" else key] = [convert(s, direction) for s in value]
        elif key in _SCHEMA_ONE:
            out[key] = convert(value, direction)
        else:
            out[key] = value  # a value (enum, default, pattern, ...), copied as is
    if "required" in out:
        # A required property may be declared here or in the alternatives (DNS records: `required` beside a `oneOf`
        # of record types that declare the properties).
        owned_elsewhere = "writeOnly" if direction == "response" else "readOnly"
        declared = [schema.get("properties", {})]
        declared += [_resolved(alt).get("properties", {}) for alt in schema.get("oneOf", []) + schema.get("anyOf", [])]
        hidden = {name for props in declared for name, sub in props.items() if _flagged(sub, owned_elsewhere)}
        if direction == "partial":
            hidden = set(out["required"])
        required = [name for name in out["required"] if name not in hidden]
        if required:
            out["required"] = required
        else:
            del out["required"]
    if schema.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else [*out["type"], "null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def _resolved(schema: Any, seen: tuple[str, ...] = ()) -> Any:
    """A schema with its `$ref` and its `allOf` merged away (see `_merged`), one level deep."""
    if isinstance(schema, dict) and "$ref" in schema:
        name = schema["$ref"].removeprefix(_COMPONENT_SCHEMA)
        assert name not in seen, f"a schema that contains itself through allOf: {name}"
        schema = document()["components"]["schemas"][name]
        seen = (*seen, name)
    if isinstance(schema, dict) and "allOf" in schema:
        return _merged(schema, seen)
    return schema


def _merged(schema: Mapping[str, Any], seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """An `allOf` as one schema: the members in order, then the schema's own keywords; `properties` merge, a later
    member's property replacing an earlier one's; `required` is the union; other keywords: the later one wins, but
    two `oneOf`/`anyOf`/`not` both apply (kept in an `allOf` of their own)."""
    own = {key: value for key, value in schema.items() if key != "allOf"}
    out: dict[str, Any] = {}
    both: list[dict[str, Any]] = []
    for member in [*(_resolved(m, seen) for m in schema["allOf"]), own]:
        if not isinstance(member, dict):
            continue
        for key, value in member.items():
            if key == "properties":
                out["properties"] = {**out.get("properties", {}), **value}
            elif key == "required":
                out["required"] = [*out.get("required", []), *(n for n in value if n not in out.get("required", []))]
            elif key in ("oneOf", "anyOf", "not", "allOf") and key in out:
                both.append({key: value})
            else:
                out[key] = value
    if both:
        out["allOf"] = both
    return out


def _flagged(schema: Any, flag: str) -> bool:
    """Whether a property's schema (through `$ref` and `allOf`) says `readOnly` or `writeOnly`."""
    while isinstance(schema, dict) and ("$ref" in schema or "allOf" in schema):
        schema = _resolved(schema)
    return isinstance(schema, dict) and bool(schema.get(flag))


@functools.cache
def _definitions(direction: Direction) -> dict[str, Any]:
    return {name: convert(schema, direction) for name, schema in document()["components"]["schemas"].items()}


@functools.cache
def _validator(schema_json: str, direction: Direction) -> jsonschema_rs.Draft4Validator:
    schema = json.loads(schema_json)
    root = {**convert(schema, direction), "definitions": _definitions(direction)}
    return jsonschema_rs.Draft4Validator(root, validate_formats=False)


def problems(schema: Mapping[str, Any], instance: Any, direction: Direction) -> list[str]:
    """Where `instance` breaks `schema` (an OpenAPI 3.0 schema of the document), as short lines; empty if it fits."""
    validator = _validator(json.dumps(schema, sort_keys=True), direction)
    found: list[str] = []
    for error in validator.iter_errors(instance):
        found.append(_explain(error))
    return sorted(set(found))[:8]


def _explain(error: Any) -> str:
    """One error as a line; for a `oneOf`/`anyOf` no branch fits, what the closest branch lacks: the one with the
    fewest errors, a branch of another type (the instance is not even of its type) counting as farther."""
    where = "/" + "/".join(str(part) for part in error.instance_path)
    branches = getattr(error.kind, "context", None)
    if branches:
        closest = min(branches, key=lambda errors: (len(errors), sum(e.kind.name == "type" for e in errors)))
        if closest:
            return f"{where}: no alternative fits; the closest: " + "; ".join(_explain(e) for e in closest[:3])
    return f"{where}: {_short(error.message)}"


def _short(message: str, limit: int = 300) -> str:
    return message if len(message) <= limit else message[:limit] + "..."


def _component(ref_or_object: Mapping[str, Any], section: str) -> Mapping[str, Any]:
    ref = ref_or_object.get("$ref")
    if ref is None:
        return ref_or_object
    prefix = f"#/components/{section}/"
    assert isinstance(ref, str), ref
    assert ref.startswith(prefix), ref
    resolved: Mapping[str, Any] = document()["components"][section][ref.removeprefix(prefix)]
    return resolved


@dataclass(frozen=True)
class Operation:
    method: str  # upper case
    path: str  # the document's template
    spec: Mapping[str, Any]

    @property
    def key(self) -> tuple[str, str]:
        return (self.method, template_key(self.path))

    def response_schema(self, status: int) -> tuple[str, Mapping[str, Any] | None] | None:
        """The response the document gives for `status` (exact, then `4XX`, then `default`): its key and its JSON
        schema (`None` when it documents no JSON body); `None` when the document has no response for the status."""
        responses: Mapping[str, Any] = self.spec.get("responses", {})
        by_upper = {key.upper(): key for key in responses}
        for candidate in (str(status), f"{str(status)[0]}XX", "DEFAULT"):
            if candidate in by_upper:
                key = by_upper[candidate]
                response = _component(responses[key], "responses")
                media = response.get("content", {}).get("application/json")
                return key, (media or {}).get("schema")
        return None

    def request_schema(self, content_type: str) -> Mapping[str, Any] | None:
        """The requestBody schema for a media type (parameters of the type ignored), or `None`."""
        body = self.spec.get("requestBody")
        if body is None:
            return None
        content: Mapping[str, Any] = _component(body, "requestBodies").get("content", {})
        media = content.get(content_type.split(";")[0].strip().lower())
        return None if media is None else media.get("schema")

    def query_parameters(self) -> dict[str, Mapping[str, Any]]:
        """The schema of each query parameter the operation documents, by name."""
        found: dict[str, Mapping[str, Any]] = {}
        for declared in self.spec.get("parameters", []):
            parameter = _component(declared, "parameters")
            if parameter.get("in") == "query":
                found[str(parameter["name"])] = parameter.get("schema", {})
        return found

    def request_media_types(self) -> list[str]:
        body = self.spec.get("requestBody")
        return [] if body is None else list(_component(body, "requestBodies").get("content", {}))


def operations() -> Iterator[Operation]:
    for path, item in document()["paths"].items():
        for method in METHODS:
            if method in item:
                yield Operation(method.upper(), path, item[method])


@functools.cache
def operation_index() -> dict[tuple[str, str], Operation]:
    return {op.key: op for op in operations()}
