"""Every kind kflare reconciles, wired into the manager.

Nothing here lists the kinds: `app.api.registry.KINDS` finds them in `app.api`, and each kind's reconciler is the
`ManagedKind` subclass in this package whose `model` is the kind's model. Every module of the package is imported to
find them, so a new kind's reconciler module is found by being there; a kind without exactly one reconciler fails at
import.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Final

import reconcilers
from app.api.registry import KINDS as MODELS
from app.api.resource import ResourceClass
from app.kube.client import NAMESPACES
from app.kube.manager import Manager
from app.kube.registrations import Registration, Watch
from reconcilers.claims import CLAIM_INDEXES, CLAIMS
from reconcilers.context import Context
from reconcilers.lifecycle import Lifecycle
from reconcilers.managed_kind import ManagedKind, build
from reconcilers.tenancy import GRANTS, grants_of

Reconciler = type[ManagedKind[Any, Any, Any]]


def _import_package() -> None:
    for module in pkgutil.iter_modules(reconcilers.__path__):
        if not module.ispkg and module.name != "registry":
            importlib.import_module(f"{reconcilers.__name__}.{module.name}")


def _subclasses(base: type) -> list[Reconciler]:
    found: list[Reconciler] = []
    sub: Reconciler
    for sub in base.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def _reconcilers() -> tuple[Reconciler, ...]:
    _import_package()
    by_model: dict[ResourceClass, list[Reconciler]] = {}
    for sub in _subclasses(ManagedKind):
        model = sub.__dict__.get("model")
        if model is not None:
            by_model.setdefault(model, []).append(sub)
    unknown = sorted(model.info.kind for model in by_model.keys() - set(MODELS))
    if unknown:
        raise RuntimeError(f"reconcilers of kinds missing from app.api.registry.KINDS: {', '.join(unknown)}")
    out: list[Reconciler] = []
    for model in MODELS:
        found = by_model.get(model, [])
        if len(found) != 1:
            names = ", ".join(sorted(f.__qualname__ for f in found)) or "none"
            raise RuntimeError(f"{model.info.kind} needs exactly one reconciler in reconcilers/ (found: {names})")
        out += found
    return tuple(out)


KINDS: Final[tuple[Reconciler, ...]] = _reconcilers()
"""The reconciler of every kind, in `app.api.registry.KINDS`'s order (parents before children)."""


def reconciler_of(kind: str | ResourceClass) -> Reconciler:
    """A kind's reconciler, by kind name or model."""
    name = kind if isinstance(kind, str) else kind.info.kind
    for reconciler in KINDS:
        if reconciler.model.info.kind == name:
            return reconciler
    raise LookupError(f"{name!r} is not a kflare kind")


def register_all(manager: Manager, ctx: Context) -> None:
    # Namespaces' labels decide what accounts' policies let in; claims, who owns an adopted object.
    manager.watch(Watch(NAMESPACES))
    manager.watch(Watch(CLAIMS, indexes=CLAIM_INDEXES))
    # Grants are looked up by namespace; what reads a namespace's grants names it as a parent (`grants_of`).
    manager.watch(Watch(GRANTS, wakes=lambda raw: [grants_of(raw["metadata"].get("namespace") or "")]))
    for kind in KINDS:
        reconciler = Lifecycle(build(kind, ctx), ctx)
        manager.register(
            Registration(
                reconciler,
                drift_group=reconciler.drift_group,
                open_drift_round=reconciler.open_drift_round,
                workers=reconciler.concurrency,
            )
        )
