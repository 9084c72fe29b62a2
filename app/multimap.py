"""A table of values to the keys holding them, where most values have one key: a value's keys are a tuple while they
are few and a set once they are many. An empty set costs 216 bytes and a one-key tuple 48; a cache of 20,000 objects
keeps one entry each in several such tables (the claim index, the listing's names)."""

from __future__ import annotations

from collections.abc import Collection, Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Hashable)

Members = tuple[K, ...] | set[K]
MultiMap = dict[V, Members[K]]

SMALL = 8
"""Up to this many keys a value keeps a tuple (a scan of eight is as fast as a hash); past it, a set."""


def add(table: MultiMap[V, K], value: V, key: K) -> None:
    held = table.get(value)
    if held is None:
        table[value] = (key,)
    elif isinstance(held, set):
        held.add(key)
    elif key not in held:
        table[value] = (*held, key) if len(held) < SMALL else {*held, key}


def discard(table: MultiMap[V, K], value: V, key: K) -> None:
    held = table.get(value)
    if held is None:
        return
    if isinstance(held, set):
        held.discard(key)
    elif key in held:
        held = tuple(k for k in held if k != key)
        table[value] = held
    if not held:
        del table[value]


def members(table: MultiMap[V, K], value: V) -> Collection[K]:
    return table.get(value, ())
