"""The references a kind's model declares, walked once per model: on types for the kinds a kind depends on (the
registry's order), on stored objects for the objects one depends on (its parents in the dependency index).

A field is a reference when its type is a `Reference` that says which kinds it names (`refers_to`), or when it is
declared one with `Refers` (a `LocalObjectReference`, a `KeyReference`, or a bare name as a status keeps one).
References held deeper (a Worker's bindings) are found through the models and lists that hold them.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel

from app.api.refs import Reference, Refers, Target

_WALKED = ("spec", "status")
"""The parts of a resource whose references are its parents."""


@dataclass(frozen=True)
class _Link:
    """A field (`name`, `wire` as stored) holding references: a `reference` (None: the value is a bare name), or
    models holding some (`held`)."""

    name: str
    wire: str
    kinds: tuple[str, ...]
    reference: type[Reference] | None = None
    held: tuple[_Link, ...] = ()


def _types(annotation: object) -> Iterator[type]:
    if isinstance(annotation, type):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _types(arg)


def _declared(annotation: object, metadata: list[object]) -> Refers | None:
    """The `Refers` of a field: in its own metadata, or on a member of a union (`Annotated[...] | None`)."""
    found = [m for m in metadata if isinstance(m, Refers)]
    if typing.get_origin(annotation) is Annotated:
        found.extend(m for m in typing.get_args(annotation)[1:] if isinstance(m, Refers))
    for arg in typing.get_args(annotation):
        if (inner := _declared(arg, [])) is not None:
            found.append(inner)
    return found[0] if found else None


_WALKING: set[type[BaseModel]] = set()
"""The models whose links are being found: a model that holds itself (an expression's parts) is walked once, so
references below its own copies would not be followed (no model holds any there)."""


@functools.cache
def _links(model: type[BaseModel]) -> tuple[_Link, ...]:
    if model in _WALKING:
        return ()
    _WALKING.add(model)
    try:
        return _found(model)
    finally:
        _WALKING.discard(model)


def _found(model: type[BaseModel]) -> tuple[_Link, ...]:
    links: list[_Link] = []
    for name, field in model.model_fields.items():
        wire = field.alias or name
        declared = _declared(field.annotation, field.metadata)
        held = [t for t in _types(field.annotation) if issubclass(t, BaseModel)]
        reference = next((t for t in held if issubclass(t, Reference)), None)
        if declared is not None:
            links.append(_Link(name, wire, (declared.kind,), reference))
        elif reference is not None and reference.refers_to:
            links.append(_Link(name, wire, reference.refers_to, reference))
        else:
            inner = tuple(link for t in held for link in _links(t))
            if inner:
                links.append(_Link(name, wire, tuple(k for link in inner for k in link.kinds), held=inner))
    return tuple(links)


def _resource_links(model: type[BaseModel]) -> Iterator[tuple[str, _Link]]:
    for part in _WALKED:
        field = model.model_fields.get(part)
        if field is None:
            continue
        for held in _types(field.annotation):
            if issubclass(held, BaseModel):
                for link in _links(held):
                    yield field.alias or part, link


def kinds_named(model: type[BaseModel]) -> tuple[str, ...]:
    """The kinds the references of a model's spec may name, in the order of its fields."""
    field = model.model_fields.get("spec")
    spec = [] if field is None else [t for t in _types(field.annotation) if issubclass(t, BaseModel)]
    return tuple(dict.fromkeys(kind for held in spec for link in _links(held) for kind in link.kinds))


def reference_fields(model: type[BaseModel], reference: type[Reference]) -> dict[str, str]:
    """The fields of `model` that hold a `reference` (say a Worker binding's `BoundObjectReference`s), by their
    Python names, with the kind each names."""
    return {
        link.name: link.kinds[0]
        for link in _links(model)
        if link.reference is not None and issubclass(link.reference, reference)
    }


def reference_paths(model: type[BaseModel], reference: type[Reference]) -> dict[str, str]:
    """Where a resource's spec holds a `reference` (an `AccountReference`, a Worker binding's
    `BoundObjectReference`), as wire paths under the spec (`accountRef`, `bindings[].kvNamespaceRef`), with the kind
    each names: what admission checks of such references walk, found once per model."""
    field = model.model_fields.get("spec")
    spec = [] if field is None else [t for t in _types(field.annotation) if issubclass(t, BaseModel)]
    return {path: kind for held in spec for link in _links(held) for path, kind in _paths(link, reference, "")}


def _paths(link: _Link, reference: type[Reference], prefix: str) -> Iterator[tuple[str, str]]:
    path = f"{prefix}{link.wire}"
    if link.reference is not None and issubclass(link.reference, reference):
        yield path, link.kinds[0]
    for inner in link.held:
        yield from _paths(inner, reference, f"{path}[].")


def reference_target(model: type[BaseModel], field: str, value: Mapping[str, object], namespace: str) -> Target:
    """The object the reference `value` (as stored) of `model`'s `field` (its Python name) names, for a referrer in
    `namespace`: the kind its type or `Refers` declares, the namespace the reference gives or the referrer's."""
    for link in _links(model):
        if link.name == field and link.reference is not None:
            found = link.reference.targets(value, link.kinds[0], namespace)
            if found:
                return found[0]
    raise LookupError(f"{model.__name__}.{field} names no object")


def _named(link: _Link, value: object, namespace: str) -> Iterator[Target]:
    for item in value if isinstance(value, list) else [value]:
        if link.held:
            if isinstance(item, Mapping):
                for inner in link.held:
                    yield from _named(inner, item.get(inner.wire), namespace)
        elif link.reference is None:
            if isinstance(item, str) and item:
                yield (link.kinds[0], namespace, item)
        elif isinstance(item, Mapping):
            yield from link.reference.targets(item, link.kinds[0], namespace)


def targets_of(model: type[BaseModel], raw: Mapping[str, object]) -> list[Target]:
    """The objects a stored resource references (its spec's references, and those its status keeps), each once, in
    the order of the model's fields: read from the stored object, as the dependency index reads every watch
    event, so nothing is parsed."""
    metadata = raw.get("metadata")
    namespace = str((metadata.get("namespace") if isinstance(metadata, Mapping) else None) or "")
    found: dict[Target, None] = {}
    for part, link in _resource_links(model):
        held = raw.get(part) or {}
        if isinstance(held, Mapping):
            found.update(dict.fromkeys(_named(link, held.get(link.wire), namespace)))
    return list(found)
