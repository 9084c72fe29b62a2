"""Reading objects as the caches hold them, untyped JSON: each step down narrows what it finds, so a field that is
missing, null or of another type than the schema gives reads as absent instead of failing the reader."""

from __future__ import annotations

from collections.abc import Mapping


def mapping(value: object) -> Mapping[str, object]:
    """`value` when it is a JSON object, else an empty one."""
    if type(value) is dict:  # what the caches hold: the ABC's check is slower, on the translation's hottest path
        return value
    return value if isinstance(value, Mapping) else {}


def at(value: object, *path: str) -> object:
    """What `path` leads to down the JSON objects from `value`; None when a step is not there."""
    for step in path:
        value = mapping(value).get(step)
    return value


def text(value: object, *path: str, default: str = "") -> str:
    """The value at `path` as a string, `default` when it is absent or empty."""
    return str(at(value, *path) or default)


def items(value: object) -> list[object]:
    """`value` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []
