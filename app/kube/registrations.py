"""What a kind's controller or an aggregate reconciler registers with the manager: its reconciler and what its
caches keep (indexes, links between kinds), a kind watched without a controller, and an aggregate's inputs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.kube.client import JSON, ResourceType
from app.kube.controller import Reconciler
from app.kube.index import Ref
from app.kube.informer import Indexer


@dataclass(frozen=True)
class IndexLink:
    """Objects of one kind name objects of `kind` by a value, found as controller-runtime's field indexers find them:
    the naming kind's index `index` and `kind`'s index `by` hold the same values (a rule's `$list`s, an IPList's
    name). The dependency index links objects; this links values, so an object may name one that does not exist yet.

    Like a parent in the dependency index, a named object is enqueued when an object stops naming it (deleted, or
    edited: a list whose deletion waits for its rules goes on), and the objects naming one are enqueued when it
    changes what it serves (a list appears: the rules waiting for it go on)."""

    kind: str
    index: str
    by: str


class KindReconciler(Reconciler, Protocol):
    def resource_type(self) -> ResourceType: ...

    def parents_of(self, raw: JSON) -> list[Ref]: ...

    def indexes(self) -> dict[str, Indexer]: ...

    def links(self) -> Sequence[IndexLink]: ...

    def serving_state(self, raw: JSON) -> object: ...


@dataclass
class Registration:
    reconciler: KindReconciler
    drift_group: Callable[[JSON], str | None] | None = None
    open_drift_round: Callable[[str], None] | None = None
    workers: int | None = None
    """Reconciles of the kind in flight at once (None: the manager's default)."""


@dataclass(frozen=True)
class Watch:
    """A kind watched without a controller of its own (a Gateway API kind, a Service): cached, indexed, and its
    references kept in the dependency index, so that what reads it is enqueued when it changes."""

    rt: ResourceType
    parents_of: Callable[[JSON], list[Ref]] = lambda raw: []
    indexes: Mapping[str, Indexer] = field(default_factory=dict)
    wakes: Callable[[JSON], list[Ref]] = lambda raw: []
    """Refs whose children are enqueued too when an object changes, besides its own: for objects found by a lookup
    rather than named (a namespace's grants), which their readers name as a parent instead."""


DocumentsOf = Callable[[JSON], Iterable[str]]


@dataclass(frozen=True)
class Input:
    """An aggregate's input whose documents read more than its spec: `state` is what of an object they read (by
    default all of it but its status), so a change of anything else reconciles nothing."""

    documents_of: DocumentsOf
    state: Callable[[JSON], object] | None = None
    indexes: Mapping[str, Indexer] = field(default_factory=dict)
    """Indexes the aggregate reads the input's cache by, kept on that cache whoever owns it (a kind's controller)."""


class AggregateReconciler(Reconciler, Protocol):
    """A reconciler keyed by a Cloudflare document (a tunnel's ingress configuration) that many resources feed.

    Its queue holds document keys, as ("", key); `inputs` says, for each kind that feeds it, which documents an
    object feeds. A change of an input enqueues the documents it fed before and feeds now, once each, and the
    reconcile computes the document from all its inputs and writes it once."""

    @property
    def name(self) -> str: ...

    def inputs(self) -> Mapping[ResourceType, DocumentsOf | Input]: ...
