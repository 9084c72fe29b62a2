"""What a few kinds need beyond the eight calls of `ManagedKind`, each opted into by inheriting it. The lifecycle asks
whether a kind has one (isinstance) instead of every kind carrying hooks that do nothing: a kind's class line says
what is unusual about it.

| capability | kinds |
|---|---|
| `Indexed` | those whose objects others find by a value (a Zone's domain, a list's name) |
| `ServesChildren` | a parent whose children read less of it than its spec and status (IPList) |
| `DriftGrouped` | those whose drift checks share one listing (an account's members, a zone's records) |
| `RecordsIdElsewhere` | those whose ID is more than a status field (a Worker's or a bucket's name) |
| `KeepsBeside` | those keeping something beside the Cloudflare object (a Tunnel's token Secret) |
| `QualifiesReady` | those whose Ready says more than "in sync" (an account, a tunnel's configuration) |
| `ChoosesDependants` | those whose deletion waits for other than what references them (an IP list) |
| `MatchesIntent` / `HoldsReconciles` | DNS records, whose writes are batched per zone |
| `NotesAdoption` | Tunnels, whose key is not unique |
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Generic, TypeVar

from app.api.resource import AnyResource
from app.kube.client import JSON
from app.kube.index import Ref
from app.kube.informer import Indexer, Key
from app.kube.registrations import IndexLink

R = TypeVar("R", bound=AnyResource)
L = TypeVar("L")
ObservedT = TypeVar("ObservedT")


class Indexed(ABC):
    """Indexes the kind's cache keeps beside the claim index, and the objects of other kinds its objects name by a
    value of one of them (a rule's lists)."""

    @classmethod
    @abstractmethod
    def more_indexes(cls) -> dict[str, Indexer]: ...

    @classmethod
    def links(cls) -> Sequence[IndexLink]:
        return ()


class ServesChildren(ABC):
    @classmethod
    @abstractmethod
    def serving_state(cls, raw: JSON) -> object:
        """What children read of this object; they are enqueued when it changes (the default: `serving_state` of
        `reconcilers.managed_kind`)."""


class DriftGrouped(ABC):
    """Drift checks of many objects served by one listing of their collection."""

    @classmethod
    @abstractmethod
    def drift_group(cls, raw: JSON) -> str | None:
        """The collection whose one listing serves this object's drift check (None: checked alone)."""

    @abstractmethod
    def open_drift_round(self, group: str) -> None:
        """A drift round of `group` begins: its members' checks read one fresh listing."""


class RecordsIdElsewhere(ABC, Generic[R]):
    """A kind whose Cloudflare ID is more than the status field `status_id` names (a Worker's or a bucket's name,
    recorded once Cloudflare has it; an account's, given or detected). Its claim is the label, as an adoption's."""

    @abstractmethod
    def object_id(self, obj: R) -> str | None:
        """The Cloudflare ID the resource records."""


class KeepsBeside(ABC, Generic[R, L, ObservedT]):
    """What the kind keeps in step beside its Cloudflare object, and lets go of with the resource."""

    async def after_sync(self, link: L, obj: R, observed: ObservedT) -> None:
        """Once the Cloudflare object is in sync. May raise NotReady: the resource then waits with that reason."""

    async def releasing(self, obj: R) -> None:
        """Before the resource loses its finalizer (after any Cloudflare deletion): what must be undone while the
        resource still exists, so that a failure keeps the finalizer and is tried again."""

    async def released(self, obj: R) -> None:
        """Once the resource has lost its finalizer; the cache shows it."""


class QualifiesReady(ABC, Generic[R, ObservedT]):
    @abstractmethod
    def ready_state(self, obj: R, observed: ObservedT) -> tuple[str, str]:
        """Ready's reason and message once in sync."""


class ChoosesDependants(ABC):
    @abstractmethod
    def dependants(self, key: Key, referencing: list[Ref]) -> list[Ref]:
        """What the resource's deletion waits for, given the existing objects that reference it."""


class MatchesIntent(ABC, Generic[R]):
    @abstractmethod
    def intent_match(self, obj: R) -> str | None:
        """What tells the object about to be created apart from others of the same key (a record set's content),
        kept in the intent so that crash recovery finds what was sent even if the spec changed meanwhile."""


class HoldsReconciles(ABC):
    @abstractmethod
    def reconciling(self, key: Key) -> contextlib.AbstractContextManager[object]:
        """Held while the reconcile of `key` runs (a zone's DNS batch knows who may still join it)."""


class NotesAdoption(ABC, Generic[ObservedT]):
    @abstractmethod
    def adoption_note(self, observed: ObservedT) -> str:
        """Which object was adopted and why that one, for the Event (a key that is not unique says more)."""
