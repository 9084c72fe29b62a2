"""The one lifecycle every kind goes through; a kind supplies only what is specific to its Cloudflare object.

Three parts: `reconcilers.managed_kind.ManagedKind` is what a kind supplies (its model, where its ID lives, and the
Cloudflare calls: connect, observe, find, create, diff, update, delete, record; what only some kinds need is a
capability of `reconcilers.capabilities`), `Lifecycle` here is the engine that runs every kind through the same
steps, `reconcilers.ownership.Ownership` answers who owns an object and makes the claim, and
`reconcilers.writer.ObjectWriter` makes its Kubernetes writes.

deletion (policy, dependants first) -> finalizer -> paused -> parents and credentials -> observe by the ID in status
-> if none: adopt per `kflare.dev/adoption-policy`, else create, else `AlreadyExists` -> diff -> write only what
differs -> status (IDs, observedGeneration, one Ready condition) -> an Event whenever Ready's status or reason changes.

Crash safety of creation. Between "created in Cloudflare" and "ID written to status" the process can die; on restart
the object has no ID, and a naive controller would either create a second object or report its own object as
`AlreadyExists` (an orphan nobody deletes). So before creating, the lifecycle writes an intent annotation
(`kflare.dev/create-intent`) and only then calls Cloudflare. A later reconcile that finds the intent but no ID looks
the object up by the kind's key (the same lookup adoption uses): if it is there, it is the one this resource created,
and it is claimed as created (not adopted), so its deletion policy is a created object's.

An intent is spent once an ID is recorded (in status, or in the claim label) other than the one it replaces: a
create that follows the deletion of the object outside kflare names the ID it replaces, so recovery still finds the
new object by its key. The intent is not removed once spent, which would cost a write per object.

Crash safety of the claim. Claiming an adopted object is one metadata write that sets the claim label (the
Cloudflare ID), sets `kflare.dev/adopted` and removes the intent, all at once; the status is written after it. A
crash between the two leaves the label, which names the object and, with the annotation beside it, how it was
claimed: the next reconcile (or a deletion) reads the ID from the label. So at no point can an adopted object lose its
mark, and with it the policy that keeps it. An object kflare created needs no such write (`claim_in_status`): until
the status holds its ID the intent is live and recovery finds it by its key, so a new resource costs one metadata
write (finalizer and intent) and one status write (ID and Ready). Kinds whose ID is not a status field (a Worker's
or a bucket's name) or whose claim orders resources (a ManagedTransform's zone) claim with the label as adoption
does. Deletion is safe by order: Cloudflare first (a 404 counts as done), the finalizer last.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Sequence
from typing import Generic, cast

from pydantic import ValidationError

from app.api.constants import (
    ADOPTED_ANNOTATION,
    ADOPTION_POLICY_ANNOTATION,
    CREATE_INTENT_ANNOTATION,
    DELETION_POLICY_ANNOTATION,
    FINALIZER,
    PAUSED_ANNOTATION,
    DeletionPolicy,
    Reason,
)
from app.api.validation import errors_from
from app.cloudflare.errors import (
    CloudflareError,
    Conflict,
    InvalidToken,
    NotFound,
    RateLimited,
    Terminal,
    Transient,
)
from app.kube.client import JSON, KubeError, ResourceType
from app.kube.controller import Outcome
from app.kube.index import Ref
from app.kube.informer import Indexer, Key
from app.kube.registrations import IndexLink
from reconcilers import managed_kind as declared
from reconcilers.capabilities import (
    ChoosesDependants,
    DriftGrouped,
    HoldsReconciles,
    Indexed,
    KeepsBeside,
    MatchesIntent,
    NotesAdoption,
    QualifiesReady,
)
from reconcilers.claims import Holder
from reconcilers.context import Context
from reconcilers.managed_kind import L, ManagedKind, ObservedT, R, described, id_of
from reconcilers.ownership import Ownership
from reconcilers.waiting import RETRY_PARENT, NotReady, Stored, new_and_waiting_for_a_parent
from reconcilers.writer import ObjectWriter

# NotReady is named here too because the Gateway class's reconcilers import it from the lifecycle.
__all__ = ["MAX_LISTED_DEPENDANTS", "Lifecycle", "NotReady", "paused"]

MAX_LISTED_DEPENDANTS = 5


def paused(obj: Stored) -> bool:
    return obj.metadata.annotations.get(PAUSED_ANNOTATION, "").lower() == "true"


class Lifecycle(Generic[R, L, ObservedT]):
    """The engine: runs one kind's resources through the lifecycle (the module's doc), with the kind's hooks and
    an `ObjectWriter`. This is what the manager registers for the kind."""

    def __init__(self, kind: ManagedKind[R, L, ObservedT], ctx: Context) -> None:
        self.of = kind
        self.ctx = ctx
        self.writer = ObjectWriter(ctx, kind.model)
        self.kind = kind.kind
        grouped = kind if isinstance(kind, DriftGrouped) else None
        self.drift_group = None if grouped is None else grouped.drift_group
        self.open_drift_round = None if grouped is None else grouped.open_drift_round
        self.concurrency = kind.concurrency
        self.ownership = Ownership(kind, self.writer, ctx)

    # What the manager reads of the kind: its resource, the links and indexes its cache keeps.

    def resource_type(self) -> ResourceType:
        return declared.resource_type(type(self.of))

    def parents_of(self, raw: JSON) -> list[Ref]:
        return declared.parents_of(type(self.of), raw)

    def indexes(self) -> dict[str, Indexer]:
        return declared.indexes(type(self.of))

    def links(self) -> Sequence[IndexLink]:
        return self.of.links() if isinstance(self.of, Indexed) else ()

    def serving_state(self, raw: JSON) -> object:
        return declared.serving_state(type(self.of), raw)

    def parse(self, raw: JSON) -> R:
        """The resource as its model reads it (ValidationError when the stored object is invalid)."""
        return cast(R, self.of.model.model_validate(raw))

    async def reconcile(self, key: Key) -> Outcome:
        held = self.of.reconciling(key) if isinstance(self.of, HoldsReconciles) else contextlib.nullcontext()
        try:
            with held:
                return await self._reconcile(key)
        finally:
            self.ownership.creating.pop(key, None)

    async def timed_out(self, key: Key, seconds: float) -> None:
        raw = self.ctx.cached(self.kind, key[1], key[0] or None)
        if raw is not None:
            message = f"reconcile did not finish within {seconds:.0f}s; retrying with back-off"
            self.writer.logger(key).warning(message)
            with contextlib.suppress(KubeError, OSError, TimeoutError):
                await self.writer.set_ready(raw, "False", Reason.API_ERROR, message)

    async def _reconcile(self, key: Key) -> Outcome:
        raw = self.ctx.cached(self.kind, key[1], key[0] or None)
        if raw is None:
            return Outcome.done()
        kind, writer, logger = self.of, self.writer, self.writer.logger(key)
        try:
            obj = self.parse(raw)
        except ValidationError as exc:
            problems = "; ".join(str(e) for e in errors_from(exc))
            logger.warning("spec refused: %s", problems)
            if raw.get("metadata", {}).get("deletionTimestamp"):
                return await self._finish_deletion(raw, key, None)
            await writer.set_ready(raw, "False", Reason.TERMINAL_ERROR, f"invalid spec: {problems}")
            return Outcome.done()
        meta = obj.metadata
        if meta.deleting:
            return await self._delete(raw, obj, key)
        if FINALIZER not in meta.finalizers and (not kind.creates or self.current_id(obj)):
            # A resource that holds nothing in Cloudflare yet gets its finalizer with its first write (the create
            # intent or the claim), which saves a Kubernetes write per new resource in a bulk apply.
            raw = await writer.patch_meta(raw, finalizers=[*meta.finalizers, FINALIZER])
            obj = self.parse(raw)
        if paused(obj):
            await writer.set_paused(raw, deleting=False)
            return Outcome.done()
        try:
            link = await kind.connect(obj)
        except NotReady as wait:
            logger.info("waiting: %s", wait.message, extra={"reason": wait.reason})
            held = new_and_waiting_for_a_parent(obj, wait.reason)
            if held is not None:
                # The parent's becoming Ready wakes it (the dependency index); the wait is written only if it lasts.
                return Outcome(requeue_after=held)
            await writer.set_ready(raw, "False", wait.reason, wait.message)
            return Outcome(requeue_after=wait.requeue_after)
        except CloudflareError as exc:  # some kinds read Cloudflare to connect (a rule, its zone's entry point)
            return await self._cloudflare_failed(raw, key, exc)
        try:
            found = await self._observe_or_create(raw, obj, key, link)
            if isinstance(found, Outcome):
                return found
            if found[0] is not raw:  # a claim or an intent was written: the object changed
                obj = self.parse(found[0])
            raw, observed = found
            changes = kind.diff(link, obj, observed)
            if changes:
                logger.info("correcting drift", extra={"fields": sorted(changes)})
                observed = await kind.update(link, obj, observed, changes)
            kind.record(link, obj, observed)
            if isinstance(kind, KeepsBeside):
                await kind.after_sync(link, obj, observed)
        except CloudflareError as exc:
            return await self._cloudflare_failed(raw, key, exc)
        except NotReady as wait:
            logger.info("waiting: %s", wait.message, extra={"reason": wait.reason})
            await writer.set_ready(raw, "False", wait.reason, wait.message, status_model=obj.status)
            return Outcome(requeue_after=wait.requeue_after)
        except KubeError as exc:
            if exc.status != 403:
                raise
            # The cluster refuses kflare a write it needs (its RBAC, an admission plugin or policy): said where users
            # look, not only in the log; what was done in Cloudflare is kept in status meanwhile.
            logger.warning("Kubernetes refused: %s", exc.message)
            message = f"Kubernetes refused kflare: {exc.message}"
            await writer.set_ready(raw, "False", Reason.API_ERROR, message, status_model=obj.status)
            return Outcome(retry=True)
        reason, message = (
            kind.ready_state(obj, observed)
            if isinstance(kind, QualifiesReady)
            else (kind.ready_reason, kind.ready_message)
        )
        await writer.set_ready(raw, "True", reason, message, status_model=obj.status)
        return Outcome.done(synced=True)

    async def _observe_or_create(self, raw: JSON, obj: R, key: Key, link: L) -> tuple[JSON, ObservedT] | Outcome:
        kind, writer, logger = self.of, self.writer, self.writer.logger(key)
        annotations = obj.metadata.annotations
        object_id = self.current_id(obj)
        if object_id and kind.creates:
            holder = await self.ownership.contest(link, obj, object_id)
            if holder is not None:
                return await self._claimed_elsewhere(raw, obj, f"{self.kind} {object_id}", holder)
        if object_id:
            observed = await kind.observe(link, obj, object_id)
            if observed is not None:
                if not kind.claim_in_status:
                    # Objects claimed before the label came first have it written now; the intent is spent.
                    labels = {kind.claim_label: id_of(kind, observed)} if kind.creates else None
                    raw = await writer.patch_meta(raw, labels=labels, annotations={CREATE_INTENT_ANNOTATION: None})
                return raw, observed
            logger.info("Cloudflare object %s is gone; looking for it by key", object_id)
        if not kind.creates:
            raise NotFound(message=f"{self.kind} {object_id} not found in Cloudflare")
        existing = await kind.find(link, obj)
        policy = annotations.get(ADOPTION_POLICY_ANNOTATION)
        if existing is not None:
            if kind.key_marks_ownership:
                # The key is this resource's own (a rule's ref): nobody else can hold what it names.
                return await self.ownership.claim(raw, existing, adopted=False), existing
            recovering = declared.pending_intent(kind, obj) is not None
            adopting = not recovering and policy in ("adopt", "adopt-or-create")
            if adopting and not self.ownership.may_adopt(link, obj):
                message = (
                    f"{described(kind, existing)} exists in Cloudflare, and the account does not let namespace"
                    f" {obj.metadata.namespace} adopt objects (its spec.adoptionNamespaces)"
                )
                await writer.set_ready(raw, "False", Reason.ADOPTION_NOT_PERMITTED, message)
                return Outcome(requeue_after=RETRY_PARENT)
            holder = self.ownership.holder(link, obj, id_of(kind, existing))
            if holder is None and (recovering or adopting):
                # Two resources reaching for one object at once: the claim object's name decides.
                holder = await self.ownership.claims().take(self.ownership.account_id(link), id_of(kind, existing), obj)
            if holder is not None:
                return await self._claimed_elsewhere(raw, obj, described(kind, existing), holder)
            if recovering:
                # Created by this resource just before a crash (or before a move to this cluster): ours, not an
                # adoption.
                logger.info("recovered object created before a restart", extra={"id": id_of(kind, existing)})
                return await self.ownership.claim(raw, existing, adopted=False), existing
            if adopting:
                note = (
                    kind.adoption_note(existing)
                    if isinstance(kind, NotesAdoption)
                    else f"adopted {described(kind, existing)}"
                )
                logger.info("adopting existing object: %s", note, extra={"id": id_of(kind, existing)})
                raw = await self.ownership.claim(raw, existing, adopted=True)
                await self.ctx.recorder.record(raw, type_="Normal", reason="Adopted", note=note)
                return raw, existing
            message = (
                f"{described(kind, existing)} already exists in Cloudflare; set the annotation "
                f"{ADOPTION_POLICY_ANNOTATION}: adopt to manage it"
            )
            await writer.set_ready(raw, "False", Reason.ALREADY_EXISTS, message)
            # Looked at again: the object may be claimed by its owner meanwhile, or deleted, or the policy set.
            return Outcome(requeue_after=RETRY_PARENT)
        if policy == "adopt" and not kind.key_marks_ownership:
            message = f"nothing to adopt: no such object in Cloudflare, and {ADOPTION_POLICY_ANNOTATION} is adopt"
            await writer.set_ready(raw, "False", "AdoptionTargetNotFound", message)
            return Outcome(requeue_after=RETRY_PARENT)
        intent: dict[str, str] = {"at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        match = kind.intent_match(obj) if isinstance(kind, MatchesIntent) else None
        if match is not None:
            intent["match"] = match
        if object_id:
            intent["replaces"] = object_id  # deleted outside kflare: recorded, yet not this create's object
        # The object about to be created is the resource's own: an earlier adoption's mark and policy no longer
        # apply to it, and a label naming the old object would outlive it.
        stale: dict[str, str | None] | None = {kind.claim_label: None} if kind.claim_in_status else None
        raw = await writer.patch_meta(
            raw,
            finalizers=writer.with_finalizer(raw),
            labels=stale,
            annotations={CREATE_INTENT_ANNOTATION: json.dumps(intent, sort_keys=True), ADOPTED_ANNOTATION: None},
        )
        # An adopted object this resource held before is gone: its claim goes with it.
        await self.ownership.claims().release(obj.metadata.uid)
        created = await kind.create(link, obj)
        logger.info("created", extra={"id": id_of(kind, created)})
        # Until the status records it, the new object is held here, in memory: no adoption elsewhere takes it.
        self.ownership.creating[key] = (id_of(kind, created), obj.metadata.uid or "")
        return await self.ownership.claim(raw, created, adopted=False), created

    async def _claimed_elsewhere(self, raw: JSON, obj: R, what: str, holder: Holder) -> Outcome:
        """Say that another resource owns the object (as this namespace may be told), and look again later."""
        message = (
            f"{what} is owned by {holder.described_to(obj.metadata.namespace)}: kflare never adopts, changes or"
            " deletes it for this resource"
        )
        await self.writer.set_ready(raw, "False", Reason.CLAIMED_ELSEWHERE, message)
        return Outcome(requeue_after=RETRY_PARENT)

    async def _cloudflare_failed(self, raw: JSON, key: Key, exc: CloudflareError) -> Outcome:
        logger, set_ready = self.writer.logger(key), self.writer.set_ready
        if isinstance(exc, RateLimited):
            logger.warning("rate limited by Cloudflare: %s", exc)
            await set_ready(raw, "False", Reason.API_ERROR, str(exc))
            return Outcome(requeue_after=max(1.0, exc.retry_after or 1.0), failed=True)
        if isinstance(exc, Transient):
            logger.warning("Cloudflare call failed, will retry: %s", exc)
            await set_ready(raw, "False", Reason.API_ERROR, str(exc))
            return Outcome(retry=True)
        if isinstance(exc, InvalidToken):
            logger.warning("Cloudflare rejected the token: %s", exc)
            await set_ready(raw, "False", Reason.INVALID_TOKEN, str(exc))
            return Outcome.done()
        if isinstance(exc, Conflict | NotFound | Terminal):
            logger.warning("Cloudflare refused: %s", exc)
            await set_ready(raw, "False", Reason.TERMINAL_ERROR, str(exc))
            return Outcome.done()
        logger.warning("Cloudflare call failed: %s", exc)
        await set_ready(raw, "False", Reason.API_ERROR, str(exc))
        return Outcome(retry=True)

    # ---- deletion ----------------------------------------------------------------------------------------------

    def current_id(self, obj: R) -> str | None:
        """The Cloudflare ID this resource holds: the claim label is written first, so it is the newest word."""
        kind = self.of
        if kind.creates:
            claimed = obj.metadata.labels.get(kind.claim_label)
            if claimed and not kind.owners.claimed_by_other(claimed, obj):
                return claimed
        return declared.object_id(kind, obj)

    def dependants(self, key: Key) -> list[Ref]:
        """Objects that still reference this one and exist: its deletion waits for them (or for what the kind
        chooses instead)."""
        referencing = [
            child
            for child in self.ctx.index.children(Ref(self.kind, *key))
            if child.kind != "Secret" and self.ctx.cached(child.kind, child.name, child.namespace or None) is not None
        ]
        return self.of.dependants(key, referencing) if isinstance(self.of, ChoosesDependants) else referencing

    def deletion_policy(self, obj: R) -> DeletionPolicy:
        annotations = obj.metadata.annotations
        explicit = annotations.get(DELETION_POLICY_ANNOTATION)
        if explicit in tuple(DeletionPolicy):
            return DeletionPolicy(explicit)
        if annotations.get(ADOPTED_ANNOTATION) == "true":
            return DeletionPolicy.RETAIN  # an adopted object outlives its resource unless the resource says delete
        return self.ctx.default_deletion_policy

    async def _delete(self, raw: JSON, obj: R, key: Key) -> Outcome:
        kind, writer = self.of, self.writer
        if FINALIZER not in obj.metadata.finalizers:
            return Outcome.done()
        if paused(obj):
            await writer.set_paused(raw, deleting=True)
            return Outcome.done()
        users = self.dependants(key)
        if users:
            listed = ", ".join(str(u) for u in users[:MAX_LISTED_DEPENDANTS])
            more = ", ..." if len(users) > MAX_LISTED_DEPENDANTS else ""
            await writer.set_ready(
                raw, "False", kind.in_use_reason, f"waiting for dependants to be deleted: {listed}{more}"
            )
            return Outcome.done()  # each dependant's deletion enqueues this object again
        logger = writer.logger(key)
        object_id = self.current_id(obj)
        intent = declared.pending_intent(kind, obj) is not None
        if kind.creates and self.deletion_policy(obj) == DeletionPolicy.DELETE and (object_id or intent):
            try:
                link = await kind.connect(obj)
            except NotReady as wait:
                if not wait.parent_gone:
                    await writer.set_ready(raw, "False", wait.reason, wait.message)
                    return Outcome(requeue_after=wait.requeue_after)
                logger.info("parent is gone; leaving the Cloudflare object in place (%s)", wait.message)
            except CloudflareError as exc:
                return await self._cloudflare_failed(raw, key, exc)
            else:
                try:
                    if not object_id:
                        existing = await kind.find(link, obj)
                        object_id = None if existing is None else id_of(kind, existing)
                    if object_id and self.ownership.adopted_without_leave(link, obj, object_id):
                        logger.info("keeping an object the namespace may not adopt", extra={"id": object_id})
                        object_id = None
                    if object_id and self.ownership.owned_elsewhere(link, obj, object_id):
                        # Found by its key, or recorded by another resource too: never this resource's to delete.
                        logger.info("keeping the Cloudflare object another resource owns", extra={"id": object_id})
                        object_id = None
                    if object_id:
                        with contextlib.suppress(NotFound):
                            await kind.delete(link, obj, object_id)
                        logger.info("deleted in Cloudflare", extra={"id": object_id})
                except CloudflareError as exc:
                    return await self._cloudflare_failed(raw, key, exc)
                except NotReady as wait:  # Cloudflare's object cannot go yet (a bucket holding objects, a list in use)
                    logger.info("deletion waits: %s", wait.message, extra={"reason": wait.reason})
                    await writer.set_ready(raw, "False", wait.reason, wait.message)
                    return Outcome(requeue_after=wait.requeue_after)
        elif object_id:
            logger.info("keeping the Cloudflare object (deletion policy retain)", extra={"id": object_id})
        return await self._finish_deletion(raw, key, obj)

    async def _finish_deletion(self, raw: JSON, key: Key, obj: R | None) -> Outcome:
        if obj is not None and isinstance(self.of, KeepsBeside):
            await self.of.releasing(obj)
        # The claims go before the finalizer: a claim whose owner is gone would only be replaced by the next taker.
        await self.ownership.claims().release(raw["metadata"].get("uid"))
        await self.writer.remove_finalizer(raw)
        if obj is not None and isinstance(self.of, KeepsBeside):
            await self.of.released(obj)
        for parent in self.ctx.index.remove(Ref(self.kind, *key)):
            self.ctx.enqueue(parent)
        return Outcome.done()
