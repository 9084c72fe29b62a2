"""Who owns the Cloudflare object a resource reaches for: the lifecycle's questions of ownership for one kind, and
the claim it makes. An object is another resource's when that one records it (the kind's claim index), has just
created it in a reconcile still in flight, or holds its `CloudflareClaim`; the doc of `reconcilers.lifecycle` says
why each write comes in the order it does."""

from __future__ import annotations

from typing import Generic

from app.api.claim import CloudflareClaim
from app.api.constants import ADOPTED_ANNOTATION, CREATE_INTENT_ANNOTATION
from app.kube.client import JSON
from app.kube.informer import Key
from reconcilers import managed_kind as declared
from reconcilers.claims import Claims, Holder
from reconcilers.context import Context
from reconcilers.managed_kind import L, ManagedKind, ObservedT, R, account_of, id_of
from reconcilers.tenancy import may_adopt
from reconcilers.writer import ObjectWriter


class Ownership(Generic[R, L, ObservedT]):
    def __init__(self, kind: ManagedKind[R, L, ObservedT], writer: ObjectWriter, ctx: Context) -> None:
        self.of, self.ctx, self.writer, self.kind = kind, ctx, writer, kind.kind
        self.creating: dict[Key, tuple[str, str]] = {}
        """The objects reconciles in flight have created and not yet recorded, with their resources' UIDs."""

    def claims(self) -> Claims:
        return Claims(
            self.ctx.kube, self.kind, self.ctx.informer_of(CloudflareClaim.info.kind), self.ctx.informer_of(self.kind)
        )

    def account_id(self, link: L) -> str:
        account = account_of(link)
        return "" if account is None else account.account_id

    def may_adopt(self, link: L, obj: R) -> bool:
        account = account_of(link)
        return account is None or may_adopt(self.ctx.caches, account, obj.metadata.namespace)

    async def contest(self, link: L, obj: R, object_id: str) -> Holder | None:
        """Who owns an object this resource records, when another resource records or claims it too (two Zones of
        one domain from before claims existed): the claim decides, taken now if nobody holds it. None: this one."""
        claims = self.claims()
        account = self.account_id(link)
        claimed = claims.holder(account, object_id)
        if claimed is not None and claimed.uid == obj.metadata.uid:
            return None
        if (
            claimed is None
            and self.of.owners.holder_of(object_id, obj) is None
            and self.creator(obj, object_id) is None
        ):
            return None  # the usual case: nobody else names it, and no claim is needed
        return await claims.take(account, object_id, obj)

    def adopted_without_leave(self, link: L, obj: R, object_id: str) -> bool:
        """Whether the object is recorded only by the claim label (an adoption, for a kind whose status records what
        it creates), without this resource's claim, in a namespace the account does not let adopt. Only kflare
        writes the label (the webhook), so this is a second lock: a forged one would otherwise delete what it
        names."""
        kind = self.of
        if not kind.claim_in_status or object_id == declared.object_id(kind, obj):
            return False
        if obj.metadata.labels.get(kind.claim_label) != object_id:
            return False
        claimed = self.claims().holder(self.account_id(link), object_id)
        return (claimed is None or claimed.uid != obj.metadata.uid) and not self.may_adopt(link, obj)

    def creator(self, obj: R, object_id: str) -> Holder | None:
        """Another resource whose reconcile in flight has just created the object and not yet recorded it."""
        for (namespace, name), (created, uid) in self.creating.items():
            if created == object_id and uid != obj.metadata.uid:
                return Holder(self.kind, namespace, name, uid)
        return None

    def owned_elsewhere(self, link: L, obj: R, object_id: str) -> bool:
        """Whether another resource owns the object: it holds its claim, or records it while this one holds none."""
        claimed = self.claims().holder(self.account_id(link), object_id)
        if claimed is not None:
            return claimed.uid != obj.metadata.uid
        return self.holder(link, obj, object_id) is not None

    def holder(self, link: L, obj: R, object_id: str) -> Holder | None:
        """Who else owns the object: a resource recording it, one that has just created it, or a claim's owner."""
        holder = self.of.owners.holder_of(object_id, obj) or self.creator(obj, object_id)
        if holder is not None:
            return holder
        holder = self.claims().holder(self.account_id(link), object_id)
        return None if holder is None or holder.uid == obj.metadata.uid else holder

    async def claim(self, raw: JSON, observed: ObservedT, *, adopted: bool) -> JSON:
        """Make the object this resource's: the claim and how it was made, in one metadata write. The status
        (the ID, Ready) follows at the end of the reconcile; until then the label is the record of the claim. An
        object this resource created needs no write when the status is its claim: the live intent covers it."""
        if not adopted and self.of.claim_in_status:
            return raw
        return await self.writer.patch_meta(
            raw,
            finalizers=self.writer.with_finalizer(raw),
            labels={self.of.claim_label: id_of(self.of, observed)},
            annotations={CREATE_INTENT_ANNOTATION: None, ADOPTED_ANNOTATION: "true" if adopted else None},
        )
