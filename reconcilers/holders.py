"""Who else holds a Cloudflare object, as a kind's cache says: the resource of the kind (in any namespace) whose
claim label or status records its ID, found by the cache's claim index. What a kind's adoption lookup asks before
taking what its key found."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from app.api.constants import FINALIZER
from app.api.resource import AnyResource
from app.kube.client import JSON
from app.kube.informer import Informer
from reconcilers.claims import Holder, holder_of
from reconcilers.waiting import RETRY_PARENT, NotReady

CLAIM_INDEX = "claim"
"""The index of a kind's cache by the Cloudflare ID each resource claims (`ManagedKind.recorded_id`)."""

ObservedT = TypeVar("ObservedT")


class Owners(Generic[ObservedT]):
    """The holders of one kind's objects: `informer_of` gives the kind's cache (new each time the process leads),
    `id_of` the Cloudflare ID of an observed object."""

    def __init__(
        self, kind: str, informer_of: Callable[[str], Informer | None], id_of: Callable[[ObservedT], str]
    ) -> None:
        self.kind = kind
        self.informer_of = informer_of
        self.id_of = id_of

    def holder_of(self, cloudflare_id: str, obj: AnyResource) -> Holder | None:
        """The other resource of this kind (in any namespace) whose status or claim label records the object."""
        informer = self.informer_of(self.kind)
        for other in [] if informer is None else informer.by_index(CLAIM_INDEX, cloudflare_id):
            if other["metadata"].get("uid") != obj.metadata.uid:
                return holder_of(other)
        return None

    def owner_of(self, cloudflare_id: str, obj: AnyResource) -> str | None:
        """Who else holds the Cloudflare object, as `obj`'s namespace may be told (`Holder.described_to`)."""
        holder = self.holder_of(cloudflare_id, obj)
        return None if holder is None else holder.described_to(obj.metadata.namespace)

    def claimed_by_other(self, cloudflare_id: str, obj: AnyResource) -> bool:
        """Whether another resource of this kind (in any namespace) claims the Cloudflare object."""
        return self.holder_of(cloudflare_id, obj) is not None

    def first_unclaimed(
        self, found: Sequence[ObservedT], obj: AnyResource, reason: str, what: Callable[[ObservedT], str]
    ) -> ObservedT | None:
        """The object an adoption lookup found by its key, unless another resource of this kind holds it: then this
        one waits (re-checked every RETRY_PARENT) and says who holds it, rather than sharing one object."""
        for candidate in found:
            owner = self.owner_of(self.id_of(candidate), obj)
            if owner is not None:
                raise NotReady(reason, f"{what(candidate)} is managed by {owner}", requeue_after=RETRY_PARENT)
            return candidate
        return None


def done_with(raw: JSON) -> bool:
    """Whether kflare is done with a resource: being deleted, and its finalizer gone (it stays in the cache until the
    watch reports its deletion)."""
    meta = raw["metadata"]
    return bool(meta.get("deletionTimestamp")) and FINALIZER not in (meta.get("finalizers") or [])
