"""Validation for the admission webhook: every reason to refuse an object, each with the path of its field.

Unknown fields: the CRDs have structural schemas, so the API server prunes fields they do not declare (and with
`kubectl`'s default strict field validation refuses them first). The models mirror that: they ignore unknown
fields, so the controller reads objects the way the API server stores them. `validate_object` on the other hand
reports every unknown field under `spec` as an error ("unknown field"), so a caller that did not go through a
pruning API server (a test, a dry run, a webhook fed by hand) learns about the typo instead of losing the field.
Free-form fields (`x-kubernetes-preserve-unknown-fields`, such as a DNSRecord's `data`) are not checked.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Annotated, Final, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from app.api.base import API_VERSION, FieldError, Loc, format_path
from app.api.registry import kind_for
from app.api.resource import ResourceClass

MISSING: Final = object()
"""What `spec_value` returns for a field the spec does not set."""

_MESSAGES: Final = {
    "missing": "required value",
    "extra_forbidden": "unknown field",
}


def errors_from(exc: ValidationError, prefix: Loc = ()) -> list[FieldError]:
    """Turn a pydantic error into field errors, their paths below `prefix`."""
    out: list[FieldError] = []
    for error in exc.errors(include_url=False):
        message = _MESSAGES.get(error["type"], error["msg"])
        out.append(FieldError(format_path((*prefix, *error["loc"])), message))
    return out


Walker = Callable[[object, Loc], Iterator[FieldError]]
"""Checks one value of a field for unknown fields below it, given the value and its location."""


def _walker(annotation: object) -> Walker | None:
    """What checks a value of `annotation` for unknown fields; None where nothing below it can be unknown (scalars,
    free-form values). Built once per model field (`_fields`): typing introspection per review would cost more than
    the check itself."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _walker(get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        model = annotation
        return lambda value, loc: _unknown(model, value, loc)
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        return _walker(options[0]) if len(options) == 1 else None
    if origin in (list, tuple, set, frozenset, Sequence):
        (item,) = get_args(annotation)[:1] or (object,)
        each = _walker(item)
        if each is None:
            return None
        return lambda value, loc: _each(each, enumerate(value) if isinstance(value, list) else (), loc)
    if origin in (dict, Mapping):
        _, item = get_args(annotation) or (object, object)
        each_value = _walker(item)
        if each_value is None:
            return None
        return lambda value, loc: _each(each_value, value.items() if isinstance(value, dict) else (), loc)
    return None


def _each(walker: Walker, entries: Iterable[tuple[int | str, object]], loc: Loc) -> Iterator[FieldError]:
    for key, element in entries:
        yield from walker(element, (*loc, key if isinstance(key, int) else str(key)))


@functools.cache
def _fields(model: type[BaseModel]) -> tuple[dict[str, Walker | None], dict[str, str]]:
    """A model's fields by their name on the wire, each with its walker, and the wire name of each Python name."""
    by_wire = {(info.alias or name): _walker(info.annotation) for name, info in model.model_fields.items()}
    by_python = {name: info.alias or name for name, info in model.model_fields.items()}
    return by_wire, by_python


def _unknown(model: type[BaseModel], data: object, loc: Loc) -> Iterator[FieldError]:
    if not isinstance(data, (dict, Mapping)):  # dict first: what JSON parses to, and an exact match is cheap
        return
    by_wire, by_python = _fields(model)
    for key, value in data.items():
        if key not in by_wire:
            hint = f' (did you mean "{by_python[key]}"?)' if key in by_python else ""
            yield FieldError(format_path((*loc, str(key))), f'unknown field "{key}"{hint}')
            continue
        walker = by_wire[key]
        if walker is not None:
            yield from walker(value, (*loc, key))


def unknown_fields(model: type[BaseModel], data: object, loc: Loc = ()) -> list[FieldError]:
    """Fields of `data` the model (and so the CRD's schema) does not declare, at any depth."""
    return list(_unknown(model, data, loc))


KindRef = str | ResourceClass
"""A kind by name (kind, plural, singular or short name) or by its model class."""


def _model(kind: KindRef) -> ResourceClass:
    return kind_for(kind) if isinstance(kind, str) else kind


def _spec_errors(model: ResourceClass, spec: object) -> Iterator[FieldError]:
    prefix: Loc = ("spec",)
    if not isinstance(spec, (dict, Mapping)):
        yield FieldError("spec", "must be an object")
        return
    spec_model = model.spec_model()
    try:
        spec_model.model_validate(spec)
    except ValidationError as exc:
        yield from errors_from(exc, prefix)
    yield from _unknown(spec_model, spec, prefix)


def object_errors(kind_or_plural: KindRef, obj: Mapping[str, object]) -> Iterator[FieldError]:
    """`validate_object`, one error at a time: a caller that shows only the first few need not hold them all (an
    object can have as many unknown fields as its size allows)."""
    model = _model(kind_or_plural)
    if not isinstance(obj, (dict, Mapping)):
        yield FieldError("", "the object must be a JSON object")
        return
    api_version = obj.get("apiVersion")
    if api_version is not None and api_version != API_VERSION:
        yield FieldError("apiVersion", f"must be {API_VERSION}, not {api_version!r}")
    kind = obj.get("kind")
    if kind is not None and kind != model.info.kind:
        yield FieldError("kind", f"must be {model.info.kind}, not {kind!r}")
    if obj.get("spec") is None:
        yield FieldError("spec", "required value")
        return
    yield from _spec_errors(model, obj["spec"])


def validate_object(kind_or_plural: KindRef, obj: Mapping[str, object]) -> list[FieldError]:
    """Every reason to refuse `obj` (a whole object as JSON) as a kflare `kind_or_plural`; empty when valid.

    Checks apiVersion and kind when present, and the spec: types, formats, bounds, the rules Cloudflare would
    refuse, and unknown fields. The status is not checked: the API server ignores it on the main resource.
    Raises `app.api.registry.UnknownKind` for a name that is no kflare kind.
    """
    return list(object_errors(kind_or_plural, obj))


def spec_value(spec: object, path: str) -> object:
    """The value at a dotted path of a spec (as JSON), or MISSING."""
    value = spec
    for part in path.split("."):
        if not isinstance(value, (dict, Mapping)) or value.get(part) is None:
            return MISSING
        value = value[part]
    return value


def immutable_violations(kind: KindRef, old: Mapping[str, object], new: Mapping[str, object]) -> list[FieldError]:
    """The immutable spec fields `new` changes, adds or removes compared with `old` (whole objects as JSON).

    The same rules the CRD enforces with CEL, so the webhook can explain them too.
    """
    model = _model(kind)
    old_spec = old.get("spec") if isinstance(old, Mapping) else None
    new_spec = new.get("spec") if isinstance(new, Mapping) else None
    errors: list[FieldError] = []
    for path in model.info.immutable:
        if spec_value(old_spec, path) != spec_value(new_spec, path):
            errors.append(FieldError(f"spec.{path}", f"{path} is immutable"))
    return errors


def validate_update(kind: KindRef, old: Mapping[str, object], new: Mapping[str, object]) -> list[FieldError]:
    """`validate_object` of the new object plus its `immutable_violations`."""
    return [*validate_object(kind, new), *immutable_violations(kind, old, new)]
