"""From a pydantic model's JSON schema to a structural OpenAPI v3 schema a CRD accepts.

A structural schema gives every node one `type` (or says it is int-or-string or free-form), has no `$ref`, and
keeps value validations (`anyOf`, `oneOf`, `not`) out of the way of the types. The conversion:

- `$ref` / single `allOf`: inlined; the referring field's description and default win over the model's.
- `anyOf`/`oneOf` with `null`: the other branch. An optional field (one with a default) simply leaves the null
  out, since the API server prunes nulls of non-nullable fields, which reads as "unset"; a required one becomes
  `nullable: true`.
- `anyOf`/`oneOf` of several branches: integer and string become `x-kubernetes-int-or-string`; objects merge
  into one object (the union of their properties; required only what all require; a discriminator's values
  merged into one enum); strings merge their enums. Anything else is refused.
- `const` becomes a one-value `enum`; a numeric `exclusiveMinimum`/`exclusiveMaximum` becomes OpenAPI v3.0's
  boolean form; `uniqueItems` becomes `x-kubernetes-list-type: set`.
- `dict[str, Any]` (`additionalProperties: true`) and `Any` become `x-kubernetes-preserve-unknown-fields: true`,
  the only free-form places.
- `title`, `examples`, `discriminator`, `readOnly` and any other keyword a CRD does not take are dropped;
  `x-kubernetes-*` keywords given through `json_schema_extra` pass through.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import textwrap
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from app.api.base import KflareModel

Schema = dict[str, Any]

KEPT: Final = frozenset(
    {
        "type",
        "format",
        "description",
        "enum",
        "default",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "nullable",
        "items",
        "properties",
        "additionalProperties",
        "required",
    }
)
_NULL: Final = {"type": "null"}


class SchemaError(ValueError):
    """The model cannot be expressed as a structural schema."""


def attribute_docstrings(cls: type) -> dict[str, str]:
    """The docstrings of a class's annotated attributes (the string right below `name: type`), by attribute name,
    its bases' first. Read from the source when a schema is rendered, not when the model is defined (pydantic's
    `use_attribute_docstrings` would read every model's source at every start of the process)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if issubclass(klass, KflareModel):
            out.update(_own_docstrings(klass))
    return out


@functools.cache
def _own_docstrings(cls: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    (node,) = ast.parse(source).body
    out: dict[str, str] = {}
    body = node.body if isinstance(node, ast.ClassDef) else []
    for before, after in itertools.pairwise(body):
        if (
            isinstance(before, ast.AnnAssign)
            and isinstance(before.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            out[before.target.id] = inspect.cleandoc(after.value.value)
    return out


class DocumentedSchema(GenerateJsonSchema):
    """JSON schema with each field of a kflare model (`KflareModel`) described by its attribute docstring, unless
    the field gives a description of its own."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        out = super().model_schema(schema)
        cls = schema["cls"]
        fields = getattr(cls, "__pydantic_fields__", {})
        properties = out.get("properties")
        if not isinstance(properties, dict) or not fields or not issubclass(cls, KflareModel):
            return out
        docs = attribute_docstrings(cls)
        for name, info in fields.items():
            wire = (info.alias or name) if self.by_alias else name
            if name in docs and wire in properties and info.description is None:
                properties[wire] = {**properties[wire], "description": docs[name]}
        return out


def structural_schema(model: type[BaseModel]) -> Schema:
    """The structural OpenAPI v3 schema of a model, as its wire (alias) names spell it."""
    raw = model.model_json_schema(by_alias=True, mode="validation", schema_generator=DocumentedSchema)
    defs: Mapping[str, Schema] = raw.pop("$defs", {})
    return _Converter(defs).convert(raw, model.__name__)


class _Converter:
    def __init__(self, defs: Mapping[str, Schema]) -> None:
        self.defs = defs

    def convert(self, node: Schema, path: str, *, optional: bool = True, stack: tuple[str, ...] = ()) -> Schema:
        node = dict(node)
        if "$ref" in node:
            name = str(node.pop("$ref")).rsplit("/", 1)[-1]
            if name in stack:
                raise SchemaError(f"{path}: {name} refers to itself; a CRD schema cannot be recursive")
            if name not in self.defs:
                raise SchemaError(f"{path}: unknown reference {name}")
            return self.convert({**self.defs[name], **node}, path, optional=optional, stack=(*stack, name))
        if "allOf" in node:
            parts = node.pop("allOf")
            if len(parts) != 1:
                raise SchemaError(f"{path}: allOf with {len(parts)} parts is not supported")
            return self.convert({**parts[0], **node}, path, optional=optional, stack=stack)
        for union in ("anyOf", "oneOf"):
            if union in node:
                return self._union(node, union, path, optional=optional, stack=stack)
        if "const" in node:
            node["enum"] = [node.pop("const")]
        return self._plain(node, path, stack)

    def _union(self, node: Schema, key: str, path: str, *, optional: bool, stack: tuple[str, ...]) -> Schema:
        options = node.pop(key)
        node.pop("discriminator", None)
        branches = [o for o in options if o != _NULL]
        nullable = len(branches) < len(options)
        if not branches:
            raise SchemaError(f"{path}: a field that can only be null has no schema")
        converted = [self.convert(b, path, stack=stack) for b in branches]
        merged = converted[0] if len(converted) == 1 else self._merge(converted, path)
        rest = self._plain(node, path, stack, typed=False)
        merged.update(rest)
        if nullable and not optional:
            merged["nullable"] = True
        return merged

    def _merge(self, branches: list[Schema], path: str) -> Schema:
        types = {b.get("type") for b in branches}
        if types == {"integer", "string"} and len(branches) == 2:
            return {"x-kubernetes-int-or-string": True}
        if len(types) != 1 or None in types:
            raise SchemaError(f"{path}: a union of {sorted(map(str, types))} has no single type")
        (kind,) = types
        if kind == "object":
            properties: dict[str, Schema] = {}
            for branch in branches:
                for name, prop in branch.get("properties", {}).items():
                    properties[name] = (
                        self._merge([properties[name], prop], f"{path}.{name}")
                        if (name in properties and properties[name] != prop)
                        else prop
                    )
            required = set.intersection(*(set(b.get("required", [])) for b in branches))
            merged: Schema = {"type": "object", "properties": properties}
            if required:
                merged["required"] = [name for name in properties if name in required]
            return merged
        if all("enum" in b for b in branches):
            values: list[object] = []
            for branch in branches:
                values.extend(v for v in branch["enum"] if v not in values)
            return {"type": kind, "enum": values}
        if all(b == branches[0] for b in branches):
            return branches[0]
        raise SchemaError(f"{path}: cannot merge the {kind} branches of a union into one schema")

    def _plain(self, node: Schema, path: str, stack: tuple[str, ...], *, typed: bool = True) -> Schema:
        out: Schema = {}
        for key, value in node.items():
            if key.startswith("x-kubernetes-"):
                out[key] = value
            elif key not in KEPT:
                continue
            elif key == "properties":
                required = set(node.get("required", []))
                out[key] = {
                    name: self.convert(prop, f"{path}.{name}", optional=name not in required, stack=stack)
                    for name, prop in value.items()
                }
            elif key == "items":
                if not isinstance(value, dict):
                    raise SchemaError(f"{path}: tuple-style items are not supported")
                out[key] = self.convert(value, f"{path}[]", optional=False, stack=stack)
            elif key == "additionalProperties":
                if value is True or value == {}:
                    out["x-kubernetes-preserve-unknown-fields"] = True
                elif isinstance(value, dict):
                    out[key] = self.convert(value, f"{path}{{}}", optional=False, stack=stack)
            elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
                out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
                out[key] = True
            elif key == "default" and value is None:
                continue
            else:
                out[key] = value
        if node.get("uniqueItems") is True:
            out.setdefault("x-kubernetes-list-type", "set")
        if not typed:
            return out
        if (
            "type" not in out
            and not node.get("properties")
            and not any(
                k in out for k in ("x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields", "enum")
            )
        ):
            # `Any`: any JSON value.
            out["x-kubernetes-preserve-unknown-fields"] = True
        if "type" not in out and "properties" in out:
            out["type"] = "object"
        if out.get("type") == "object" and "properties" not in node and "additionalProperties" not in out:
            # A bare `dict` / `object`: free-form.
            out["x-kubernetes-preserve-unknown-fields"] = True
        if isinstance(out.get("type"), list):
            raise SchemaError(f"{path}: a list of types {out['type']} is not structural")
        if "type" not in out and not (
            out.get("x-kubernetes-int-or-string") or out.get("x-kubernetes-preserve-unknown-fields")
        ):
            raise SchemaError(f"{path}: no type")
        return out
