"""Every kind kflare serves, found in `app.api`, and what is derived from their declarations (`KindInfo`).

Nothing lists the kinds by hand: every module of `app.api` (and its packages) that declares a `KindInfo` is
imported, and each `Resource` subclass it defines with an `info` of kflare's group is a kind. A new kind is one
module there; its reconciler is found by its model (`reconcilers.registry`). Kinds are ordered by their
`KindInfo.rank` (the kinds of this release keep the order they have always had; a new kind comes after them), then
parents first: a kind's parents are the kinds its spec's references name (`refers_to` of the reference type, such as
`AccountReference`'s, or the field's `Refers`: `app.api.links`) and those its `KindInfo.parents` adds; then by their
modules' names and their definitions.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Final

from app.api.base import GROUP
from app.api.links import kinds_named
from app.api.resource import Resource, ResourceClass

PACKAGE: Final = "app.api"
_MARK: Final = "info = KindInfo("


def _modules(package: str = PACKAGE) -> Iterator[ModuleType]:
    """The modules of `package` that declare a kind, by name; found by their text, so that nothing else is
    imported (the modules that read the registry import it back)."""
    root = importlib.import_module(package)
    for module in sorted(pkgutil.walk_packages(root.__path__, f"{package}."), key=lambda m: m.name):
        if module.name == __name__ or module.ispkg:
            continue
        spec = importlib.util.find_spec(module.name)
        origin = Path(spec.origin) if spec is not None and spec.origin else None
        if origin is not None and origin.suffix == ".py" and _MARK in origin.read_text(encoding="utf-8"):
            yield importlib.import_module(module.name)


def _declared(module: ModuleType) -> list[ResourceClass]:
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Resource)
        and value.__module__ == module.__name__
        and "info" in value.__dict__
        and value.info.group == GROUP
    ]
    return sorted(found, key=lambda model: inspect.getsourcelines(model)[1])


def parents_of(model: ResourceClass, kinds: tuple[str, ...]) -> tuple[str, ...]:
    """The kinds (of `kinds`) a kind's objects depend on: those its spec's references name, and its
    `KindInfo.parents`."""
    named = kinds_named(model)
    return tuple(dict.fromkeys(k for k in (*named, *model.info.parents) if k != model.info.kind and k in kinds))


def ordered(models: list[ResourceClass]) -> tuple[ResourceClass, ...]:
    """By rank (`KindInfo.rank`), then parents before children (by depth in the parent relation), then as
    found."""
    by_kind = {model.info.kind: model for model in models}
    depths: dict[str, int] = {}

    def depth(kind: str, seen: tuple[str, ...] = ()) -> int:
        if kind in seen:
            raise RuntimeError(f"kinds that are each other's parents: {' -> '.join((*seen, kind))}")
        if kind not in depths:
            parents = parents_of(by_kind[kind], tuple(by_kind))
            depths[kind] = 1 + max((depth(p, (*seen, kind)) for p in parents), default=-1)
        return depths[kind]

    return tuple(sorted(models, key=lambda model: (model.info.rank, depth(model.info.kind))))


def _discover() -> tuple[ResourceClass, ...]:
    return ordered([model for module in _modules() for model in _declared(module)])


_ALL: Final = _discover()
KINDS: Final[tuple[ResourceClass, ...]] = tuple(model for model in _ALL if model.info.reconciled)
"""The kinds kflare reconciles, parents first."""
CONFIGURATION_KINDS: Final[tuple[ResourceClass, ...]] = tuple(
    model for model in _ALL if not model.info.reconciled and not model.info.internal
)
"""Kinds that configure kflare and hold no Cloudflare object (`reconciled=False`): they get a CRD (generated from
their model like every kind's) and are read by the reconcile that uses them, not reconciled, admitted or listed among
the kinds above."""
INTERNAL_KINDS: Final[tuple[ResourceClass, ...]] = tuple(model for model in _ALL if model.info.internal)
"""Kinds only kflare writes (the claims of adopted objects): a CRD, no webhook, no access for the namespaced roles."""
CRD_KINDS: Final[tuple[ResourceClass, ...]] = (*KINDS, *CONFIGURATION_KINDS, *INTERNAL_KINDS)


CLAIM_LABELS: Final = frozenset(model.info.claim_label for model in KINDS if model.info.claim_label)
"""The labels by which a resource claims its Cloudflare object. kflare trusts them as its own record, so only kflare
writes them: a manifest carrying one is refused at admission (it would take over whatever object the ID names)."""


class UnknownKind(LookupError):
    """No kflare kind has that kind name, plural, singular or short name."""


def _index() -> dict[str, ResourceClass]:
    index: dict[str, ResourceClass] = {}
    for model in CRD_KINDS:
        for name in model.info.names():
            if index.setdefault(name, model) is not model:
                raise RuntimeError(f"{name!r} names both {index[name].info.kind} and {model.info.kind}")
    return index


_BY_NAME: Final = _index()


def kind_for(name: str) -> ResourceClass:
    """The model of a kind, by kind (`DNSRecord`), plural (`dnsrecords`), singular or short name (`cfrecord`)."""
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        known = ", ".join(model.info.kind for model in CRD_KINDS)
        raise UnknownKind(f"{name!r} is not a kflare kind (known: {known})") from None
