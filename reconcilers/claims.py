"""Ownership of Cloudflare objects across the cluster: who holds an object, and taking or letting go of a claim.

An object is held by the resource whose status or claim label records its ID (the kind's claim index), or by the
owner of its `CloudflareClaim` (`app.api.claim`): the claim object is taken when a resource adopts an object or
recovers one after a crash, where two resources could reach for the same object, and the API server's name
uniqueness decides between them. A claim whose owner no longer exists (deleted while kflare was down) holds nothing
and is replaced by the next taker, with a precondition on its UID so two takers cannot both replace it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from app.api.base import GROUP, VERSION
from app.api.claim import CloudflareClaim, claim_name
from app.api.resource import AnyResource
from app.kube.client import JSON, KubeClient, KubeError, ResourceType
from app.kube.informer import Informer

CLAIMS = ResourceType(GROUP, VERSION, CloudflareClaim.info.plural, CloudflareClaim.info.kind, namespaced=False)
OWNER_INDEX = "owner-uid"
"""The cache of claims' index of each claim by its owner's UID: what a resource lets go of when it goes."""
OBJECT_INDEX = "object-id"
"""The cache of claims' index by the claimed object's ID: whether an object has a claim at all is one look-up, which
every reconcile of a resource that records an ID makes."""


def claim_owner_uids(raw: JSON) -> list[str]:
    uid = ((raw.get("spec") or {}).get("owner") or {}).get("uid")
    return [str(uid)] if uid else []


def claimed_object_ids(raw: JSON) -> list[str]:
    object_id = (raw.get("spec") or {}).get("objectID")
    return [str(object_id)] if object_id else []


CLAIM_INDEXES: Final = {OWNER_INDEX: claim_owner_uids, OBJECT_INDEX: claimed_object_ids}


@dataclass(frozen=True)
class Holder:
    """The resource that holds an object: what a refusal may say of it depends on who asks (`described_to`)."""

    kind: str
    namespace: str
    name: str
    uid: str

    def described_to(self, namespace: str | None) -> str:
        """Who holds the object, as a resource in `namespace` may be told: the name only within its own namespace,
        since a tenant must not learn what other namespaces hold."""
        if (namespace or "") == self.namespace:
            return f"{self.kind} {self.name}"
        return f"a {self.kind} in another namespace"


def holder_of(raw: JSON) -> Holder:
    meta = raw["metadata"]
    return Holder(str(raw.get("kind", "")), str(meta.get("namespace") or ""), str(meta["name"]), str(meta.get("uid")))


def _claim_holder(claim: JSON) -> Holder:
    owner = (claim.get("spec") or {}).get("owner") or {}
    return Holder(
        str(owner.get("kind", "")), str(owner.get("namespace") or ""), str(owner.get("name", "")), str(owner.get("uid"))
    )


class Claims:
    """The claim objects of one kind, read from the cache of all claims (`informer`) and written through `kube`.

    `owners` is the kind's cache: a claim whose owner it does not hold (by namespace, name and UID) is stale."""

    def __init__(self, kube: KubeClient, kind: str, informer: Informer | None, owners: Informer | None) -> None:
        self.kube = kube
        self.kind = kind
        self.informer = informer
        self.owners = owners

    def _live(self, claim: JSON) -> Holder | None:
        holder = _claim_holder(claim)
        owner = None if self.owners is None else self.owners.get(holder.name, holder.namespace or None)
        if owner is None or owner["metadata"].get("uid") != holder.uid:
            return None
        return holder

    def holder(self, account_id: str, object_id: str) -> Holder | None:
        """The live owner of the object's claim, as the cache has it."""
        if self.informer is None or not self.informer.by_index(OBJECT_INDEX, object_id):
            return None  # nearly always: no claim names the ID, and none is looked for by name
        claim = self.informer.get(claim_name(self.kind, account_id, object_id))
        return None if claim is None else self._live(claim)

    async def take(self, account_id: str, object_id: str, owner: AnyResource) -> Holder | None:
        """Claim the object for `owner`: None once it is `owner`'s, else the live holder that has it. Idempotent."""
        name = claim_name(self.kind, account_id, object_id)
        body = CloudflareClaim.model_validate(
            {
                "metadata": {"name": name, "labels": {"kflare.dev/claim-kind": self.kind}},
                "spec": {
                    "kind": self.kind,
                    "accountID": account_id,
                    "objectID": object_id,
                    "owner": {
                        "kind": self.kind,
                        "namespace": owner.metadata.namespace,
                        "name": owner.metadata.name,
                        "uid": owner.metadata.uid,
                    },
                },
            }
        ).to_wire()
        body.pop("status", None)
        for _ in range(3):
            try:
                created = await self.kube.create(CLAIMS, body)
            except KubeError as exc:
                if not exc.conflict:
                    raise
            else:
                if self.informer is not None:
                    self.informer.put(created)
                return None
            try:
                existing = await self.kube.request("GET", CLAIMS.path(None, name), flow=None)
            except KubeError as exc:
                if exc.not_found:
                    continue  # let go of between our create and our read: take it again
                raise
            if self.informer is not None:
                self.informer.put(existing)
            holder = _claim_holder(existing)
            if holder.uid == owner.metadata.uid:
                return None
            if self._live(existing) is not None:
                return holder
            # Its owner is gone: replace it, unless someone else did first (the UID precondition).
            await self._delete(name, str(existing["metadata"].get("uid")))
        raise KubeError(409, "Conflict", f"the claim {name} kept changing while it was taken")

    async def release(self, owner_uid: str | None, *, keep: str | None = None) -> None:
        """Let go of every claim `owner_uid` holds but the one on the object `keep` (a claim another resource holds is
        left alone)."""
        if self.informer is None or not owner_uid:
            return
        for claim in self.informer.by_index(OWNER_INDEX, owner_uid):
            spec = claim.get("spec") or {}
            if spec.get("kind") == self.kind and spec.get("objectID") != keep:
                await self._delete(claim["metadata"]["name"], str(claim["metadata"].get("uid")))

    async def _delete(self, name: str, uid: str) -> None:
        try:
            await self.kube.request("DELETE", CLAIMS.path(None, name), body={"preconditions": {"uid": uid}}, flow=None)
        except KubeError as exc:
            if not (exc.not_found or exc.conflict):  # gone already, or replaced (the precondition): not ours
                raise
        if self.informer is not None:
            self.informer.pop(("", name))
