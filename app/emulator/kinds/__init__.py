"""Every object type the emulator serves, one module each (see :mod:`app.emulator.collection`).

Nothing lists them by hand: every module of this package is imported, and each :class:`Kind` instance it defines at
module level (of a class of its own) is served. :data:`KINDS` is ordered parents first, and what an object refers to
(:attr:`Kind.refers_to`: a Worker's bindings, the lists a rule names) before it, so that a state file seeds in this
order; kinds of the same depth keep the order of their modules' names, then of their definitions. The store makes a
table per kind and the app serves each kind's router.
"""

from __future__ import annotations

import importlib
import pkgutil

from app.emulator.collection import Kind


def _found() -> list[Kind]:
    found: list[Kind] = []
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        found += [
            value
            for value in vars(loaded).values()
            if isinstance(value, Kind) and type(value).__module__ == loaded.__name__ and value not in found
        ]
    return found


def ordered(kinds: list[Kind]) -> tuple[Kind, ...]:
    """Parents, and what a kind refers to, before it; then as found."""
    by_name = {kind.name: kind for kind in kinds}
    depths: dict[str, int] = {}

    def depth(name: str, seen: tuple[str, ...] = ()) -> int:
        if name in seen:
            raise RuntimeError(f"emulator kinds that need each other first: {' -> '.join((*seen, name))}")
        if name not in depths:
            kind = by_name[name]
            needs = [n for n in (kind.parent, *kind.refers_to) if n is not None and n in by_name]
            depths[name] = 1 + max((depth(n, (*seen, name)) for n in needs), default=-1)
        return depths[name]

    return tuple(sorted(kinds, key=lambda kind: depth(kind.name)))


KINDS: tuple[Kind, ...] = ordered(_found())
