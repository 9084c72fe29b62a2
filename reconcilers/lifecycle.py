"""The one lifecycle every kind goes through; a kind supplies only what is specific to its Cloudflare object.

deletion (policy, dependants first) -> finalizer -> paused -> parents and credentials -> observe by the ID in status
-> if none: adopt per `kflare.dev/adoption-policy`, else create, else `AlreadyExists` -> diff -> write only what
differs -> status (IDs, observedGeneration, one Ready condition) -> an Event whenever Ready's status or reason changes.

Crash safety of creation. Between "created in Cloudflare" and "ID written to status" the process can die; on restart
the object has no ID, and a naive controller would either create a second object or report its own object as
`AlreadyExists` (an orphan nobody deletes). So before creating, the lifecycle writes an intent annotation
(`kflare.dev/create-intent`) and only then calls Cloudflare. A later reconcile that finds the intent but no ID looks
the object up by the kind's key (the same lookup adoption uses): if it is there, it is the one this resource created,
and it is claimed as created (not adopted), so its deletion policy is a created object's.

Crash safety of the claim. Claiming an object (created or adopted) is one metadata write that sets the claim label
(the Cloudflare ID), sets or clears `kflare.dev/adopted` and removes the intent, all at once; the status is written
after it. A crash between the two leaves the label, which names the object and, with the annotation beside it, how it
was claimed: the next reconcile (or a deletion) reads the ID from the label. So at no point can an adopted object
lose its mark, and with it the policy that keeps it. Deletion is safe by order: Cloudflare first (a 404 counts as
done), the finalizer last.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import ValidationError

from app.api.base import GROUP, VERSION
from app.api.constants import (
    ADOPTED_ANNOTATION,
    ADOPTION_POLICY_ANNOTATION,
    DELETION_POLICY_ANNOTATION,
    FINALIZER,
    PAUSED_ANNOTATION,
    DeletionPolicy,
    Reason,
)
from app.api.resource import Resource
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
from app.kube.client import JSON, JSON_PATCH, MERGE_PATCH, KubeError, ResourceType
from app.kube.controller import Outcome
from app.kube.index import Ref
from app.kube.informer import Indexer, Key
from app.logs import ContextLogger
from reconcilers.context import Context

CREATE_INTENT_ANNOTATION = "kflare.dev/create-intent"
CLAIM_INDEX = "claim"
MAX_LISTED_DEPENDANTS = 5
RETRY_PARENT = 60.0  # how soon to look again when a parent or credential is missing (the Go controller's minute)

R = TypeVar("R", bound=Resource[Any, Any])
L = TypeVar("L")  # what connect() resolves: parents' IDs and a Cloudflare client
ObservedT = TypeVar("ObservedT")  # the Cloudflare object as observed

log = logging.getLogger("kflare.reconcile")


class NotReady(Exception):
    """A parent or credential is missing or not ready; the resource waits with this reason."""

    def __init__(
        self, reason: str, message: str, *, requeue_after: float | None = None, parent_gone: bool = False
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.requeue_after = requeue_after
        self.parent_gone = parent_gone


def can_serve(raw: JSON) -> bool:
    """Whether a parent can serve its children: Ready, or not Ready only because its last look at Cloudflare failed
    for a passing reason (a 5xx, a timeout, a 429). Children then keep going, and keep their state: a parent's
    transient error never cascades into status writes and Events on everything below it."""
    for condition in (raw.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True" or condition.get("reason") == Reason.API_ERROR)
    return False


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The RFC 7386 merge patch that turns `old` into `new`."""
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            inner = merge_patch(before, value)
            if inner:
                patch[key] = inner
        elif before != value or key not in old:
            patch[key] = value
    return patch


class ManagedKind(ABC, Generic[R, L, ObservedT]):
    """A kind's part of the lifecycle. Subclasses set `model` and implement the Cloudflare calls."""

    model: ClassVar[type[Resource[Any, Any]]]
    ready_reason: ClassVar[str] = Reason.SYNCED
    ready_message: ClassVar[str] = "in sync with Cloudflare"
    creates: ClassVar[bool] = True
    """False for kinds whose Cloudflare object kflare never creates or deletes (CloudflareAccount)."""
    in_use_reason: ClassVar[str] = Reason.IN_USE
    """The reason a resource reports while its dependants hold its deletion back (an IP list: `ListInUse`)."""
    concurrency: ClassVar[int | None] = None
    """Reconciles in flight at once, when the kind needs more than the manager's default (batched writes)."""
    key_marks_ownership: ClassVar[bool] = False
    """True when the key itself says kflare made the object (a rule's ref): what `find` returns is then always this
    resource's own object, claimed as created, and adoption policies do not apply."""
    claim_label: ClassVar[str] = "kflare.dev/cloudflare-id"
    """A label recording the Cloudflare ID on the resource, so adoption skips objects other resources own and a
    crash between the claim and the status write loses nothing."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    # ---- what each kind supplies -------------------------------------------------------------------------------

    @classmethod
    def resource_type(cls) -> ResourceType:
        info = cls.model.info
        return ResourceType(GROUP, VERSION, info.plural, info.kind, namespaced=info.namespaced)

    @classmethod
    def parents_of(cls, raw: JSON) -> list[Ref]:
        """The objects this one references (from the raw object: called on every watch event)."""
        return []

    @classmethod
    def serving_state(cls, raw: JSON) -> Any:
        """What children read of this object: its spec, its status but the conditions, whether it can serve them
        and whether it is being deleted. Children are enqueued when this changes, not on every status echo."""
        status = {k: v for k, v in (raw.get("status") or {}).items() if k != "conditions"}
        read = (raw.get("spec"), status, can_serve(raw), bool(raw["metadata"].get("deletionTimestamp")))
        return hash(json.dumps(read, sort_keys=True))  # kept per object: a number, not the texts

    @classmethod
    def drift_group(cls, raw: JSON) -> str | None:
        """The collection whose one listing serves this object's drift check (None: checked alone)."""
        return None

    def open_drift_round(self, group: str) -> None:
        """A drift round of `group` begins: its members' checks read one fresh listing."""

    @classmethod
    def indexes(cls) -> dict[str, Indexer]:
        """Indexes the kind's cache keeps: by default the claim label, so "who owns this ID" is one lookup."""
        label = cls.claim_label

        def claimed(raw: JSON) -> list[str]:
            value = (raw["metadata"].get("labels") or {}).get(label)
            return [value] if value else []

        return {CLAIM_INDEX: claimed}

    @abstractmethod
    async def connect(self, obj: R) -> L:
        """Resolve parents and credentials, or raise NotReady."""

    @abstractmethod
    def object_id(self, obj: R) -> str | None:
        """The Cloudflare ID recorded in status."""

    @abstractmethod
    def id_of(self, observed: ObservedT) -> str: ...

    @abstractmethod
    async def observe(self, link: L, obj: R, object_id: str) -> ObservedT | None:
        """The Cloudflare object by ID, None if Cloudflare no longer has it."""

    async def find(self, link: L, obj: R) -> ObservedT | None:
        """The Cloudflare object this resource's key names (for adoption and crash recovery)."""
        return None

    async def create(self, link: L, obj: R) -> ObservedT:
        raise NotImplementedError

    def intent_match(self, obj: R) -> str | None:
        """What tells the object about to be created apart from others of the same key (a record set's content),
        kept in the intent so that crash recovery finds what was sent even if the spec changed meanwhile."""
        return None

    def diff(self, obj: R, observed: ObservedT) -> dict[str, Any]:
        """What must change in Cloudflare for it to match the spec; empty when in sync."""
        return {}

    async def update(self, link: L, obj: R, observed: ObservedT, changes: dict[str, Any]) -> ObservedT:
        raise NotImplementedError

    async def delete(self, link: L, obj: R, object_id: str) -> None:
        raise NotImplementedError

    @abstractmethod
    def record(self, obj: R, observed: ObservedT | None, link: L | None) -> None:
        """Write IDs and read-only Cloudflare data into obj.status (None: forget them)."""

    def describe(self, observed: ObservedT) -> str:
        return self.id_of(observed)

    def adoption_note(self, observed: ObservedT) -> str:
        """Which object was adopted and why that one, for the Event (a key that is not unique says more)."""
        return f"adopted {self.describe(observed)}"

    async def after_sync(self, link: L, obj: R, observed: ObservedT) -> None:
        """What the kind keeps in step beside its Cloudflare object once that is in sync (a Tunnel's token Secret).
        May raise NotReady: the resource then waits with that reason."""

    def ready_state(self, obj: R, observed: ObservedT) -> tuple[str, str]:
        """Ready's reason and message once in sync (a kind may qualify them)."""
        return self.ready_reason, self.ready_message

    async def released(self, obj: R) -> None:
        """Called once the resource is about to lose its finalizer (after any Cloudflare deletion)."""

    # ---- the lifecycle -----------------------------------------------------------------------------------------

    @property
    def kind(self) -> str:
        return self.model.info.kind

    @staticmethod
    def pending_intent(obj: Resource[Any, Any]) -> dict[str, str] | None:
        """The create intent left by an earlier reconcile, if any (older ones hold only a timestamp)."""
        value = obj.metadata.annotations.get(CREATE_INTENT_ANNOTATION)
        if value is None:
            return None
        with contextlib.suppress(ValueError):
            parsed = json.loads(value)
            if isinstance(parsed, dict):
                return {str(k): str(v) for k, v in parsed.items()}
        return {"at": value}

    def ref(self, key: Key) -> Ref:
        return Ref(self.kind, key[0], key[1])

    def owner_of(self, cloudflare_id: str, obj: R) -> str | None:
        """The other resource of this kind (in any namespace) that claims the Cloudflare object, as
        `namespace/name`."""
        informer = self.ctx.informer_of(self.kind)
        for other in [] if informer is None else informer.by_index(CLAIM_INDEX, cloudflare_id):
            if other["metadata"].get("uid") != obj.metadata.uid:
                return f"{other['metadata'].get('namespace') or ''}/{other['metadata']['name']}".lstrip("/")
        return None

    def claimed_by_other(self, cloudflare_id: str, obj: R) -> bool:
        """Whether another resource of this kind (in any namespace) claims the Cloudflare object."""
        return self.owner_of(cloudflare_id, obj) is not None

    def first_unclaimed(
        self, found: Sequence[ObservedT], obj: R, reason: str, what: Callable[[ObservedT], str]
    ) -> ObservedT | None:
        """The object an adoption lookup found by its key, unless another resource of this kind holds it: then this
        one waits (re-checked every RETRY_PARENT) and says who holds it, rather than sharing one object."""
        for candidate in found:
            owner = self.owner_of(self.id_of(candidate), obj)
            if owner is not None:
                raise NotReady(
                    reason, f"{what(candidate)} is managed by {self.kind} {owner}", requeue_after=RETRY_PARENT
                )
            return candidate
        return None

    def current_id(self, obj: R) -> str | None:
        """The Cloudflare ID this resource holds: the claim label is written first, so it is the newest word."""
        if self.creates:
            claimed = obj.metadata.labels.get(self.claim_label)
            if claimed and not self.claimed_by_other(claimed, obj):
                return claimed
        return self.object_id(obj)

    def _log(self, key: Key) -> ContextLogger:
        return ContextLogger(log, {"kind": self.kind, "namespace": key[0] or None, "object_name": key[1]})

    async def reconcile(self, key: Key) -> Outcome:
        raw = self.ctx.cached(self.kind, key[1], key[0] or None)
        if raw is None:
            return Outcome.done()
        logger = self._log(key)
        try:
            obj: R = self.model.model_validate(raw)  # type: ignore[assignment]
        except ValidationError as exc:
            problems = "; ".join(str(e) for e in errors_from(exc))
            logger.warning("spec refused: %s", problems)
            if raw.get("metadata", {}).get("deletionTimestamp"):
                return await self._finish_deletion(raw, key, None)
            await self._set_ready(raw, "False", Reason.TERMINAL_ERROR, f"invalid spec: {problems}")
            return Outcome.done()
        meta = obj.metadata
        if meta.deleting:
            return await self._delete(raw, obj, key)
        if FINALIZER not in meta.finalizers and (not self.creates or self.current_id(obj)):
            # A resource that holds nothing in Cloudflare yet gets its finalizer with its first write (the create
            # intent or the claim), which saves a Kubernetes write per new resource in a bulk apply.
            raw = await self._patch_meta(raw, finalizers=[*meta.finalizers, FINALIZER])
            obj = self.model.model_validate(raw)  # type: ignore[assignment]
        if self._paused(obj):
            await self._set_paused(raw, obj)
            return Outcome.done()
        try:
            link = await self.connect(obj)
        except NotReady as wait:
            logger.info("waiting: %s", wait.message, extra={"reason": wait.reason})
            await self._set_ready(raw, "False", wait.reason, wait.message)
            return Outcome(requeue_after=wait.requeue_after)
        except CloudflareError as exc:  # some kinds read Cloudflare to connect (a rule, its zone's entry point)
            return await self._cloudflare_failed(raw, key, exc)
        try:
            found = await self._observe_or_create(raw, obj, key, link)
            if isinstance(found, Outcome):
                return found
            if found[0] is not raw:  # a claim or an intent was written: the object changed
                obj = self.model.model_validate(found[0])  # type: ignore[assignment]
            raw, observed = found
            changes = self.diff(obj, observed)
            if changes:
                logger.info("correcting drift", extra={"fields": sorted(changes)})
                observed = await self.update(link, obj, observed, changes)
            self.record(obj, observed, link)
            await self.after_sync(link, obj, observed)
        except CloudflareError as exc:
            return await self._cloudflare_failed(raw, key, exc)
        except NotReady as wait:
            logger.info("waiting: %s", wait.message, extra={"reason": wait.reason})
            await self._set_ready(raw, "False", wait.reason, wait.message, status_model=obj.status)
            return Outcome(requeue_after=wait.requeue_after)
        except KubeError as exc:
            if exc.status != 403:
                raise
            # The cluster refuses kflare a write it needs (its RBAC, an admission plugin or policy): said where users
            # look, not only in the log; what was done in Cloudflare is kept in status meanwhile.
            logger.warning("Kubernetes refused: %s", exc.message)
            message = f"Kubernetes refused kflare: {exc.message}"
            await self._set_ready(raw, "False", Reason.API_ERROR, message, status_model=obj.status)
            return Outcome(retry=True)
        reason, message = self.ready_state(obj, observed)
        await self._set_ready(raw, "True", reason, message, status_model=obj.status)
        return Outcome.done(synced=True)

    async def timed_out(self, key: Key, seconds: float) -> None:
        raw = self.ctx.cached(self.kind, key[1], key[0] or None)
        if raw is not None:
            message = f"reconcile did not finish within {seconds:.0f}s; retrying with back-off"
            self._log(key).warning(message)
            with contextlib.suppress(KubeError, OSError, TimeoutError):
                await self._set_ready(raw, "False", Reason.API_ERROR, message)

    async def _observe_or_create(self, raw: JSON, obj: R, key: Key, link: L) -> tuple[JSON, ObservedT] | Outcome:
        logger = self._log(key)
        annotations = obj.metadata.annotations
        object_id = self.current_id(obj)
        if object_id:
            observed = await self.observe(link, obj, object_id)
            if observed is not None:
                # Objects claimed before the label came first have it written now; the intent is spent.
                labels = {self.claim_label: self.id_of(observed)} if self.creates else None
                raw = await self._patch_meta(raw, labels=labels, annotations={CREATE_INTENT_ANNOTATION: None})
                return raw, observed
            logger.info("Cloudflare object %s is gone; looking for it by key", object_id)
        if not self.creates:
            raise NotFound(message=f"{self.kind} {object_id} not found in Cloudflare")
        existing = await self.find(link, obj)
        policy = annotations.get(ADOPTION_POLICY_ANNOTATION)
        if existing is not None:
            if CREATE_INTENT_ANNOTATION in annotations or self.key_marks_ownership:
                # Created by this resource just before a crash (or before a move to this cluster): ours, not an
                # adoption.
                logger.info("recovered object created before a restart", extra={"id": self.id_of(existing)})
                return await self._claim(raw, obj, existing, link, adopted=False), existing
            if policy in ("adopt", "adopt-or-create"):
                note = self.adoption_note(existing)
                logger.info("adopting existing object: %s", note, extra={"id": self.id_of(existing)})
                raw = await self._claim(raw, obj, existing, link, adopted=True)
                await self.ctx.recorder.record(raw, type_="Normal", reason="Adopted", note=note)
                return raw, existing
            message = (
                f"{self.describe(existing)} already exists in Cloudflare; set the annotation "
                f"{ADOPTION_POLICY_ANNOTATION}: adopt to manage it"
            )
            await self._set_ready(raw, "False", Reason.ALREADY_EXISTS, message)
            # Looked at again: the object may be claimed by its owner meanwhile, or deleted, or the policy set.
            return Outcome(requeue_after=RETRY_PARENT)
        if policy == "adopt" and not self.key_marks_ownership:
            message = f"nothing to adopt: no such object in Cloudflare, and {ADOPTION_POLICY_ANNOTATION} is adopt"
            await self._set_ready(raw, "False", "AdoptionTargetNotFound", message)
            return Outcome(requeue_after=RETRY_PARENT)
        intent: dict[str, str] = {"at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        match = self.intent_match(obj)
        if match is not None:
            intent["match"] = match
        raw = await self._patch_meta(
            raw,
            finalizers=self._with_finalizer(raw),
            annotations={CREATE_INTENT_ANNOTATION: json.dumps(intent, sort_keys=True)},
        )
        created = await self.create(link, obj)
        logger.info("created", extra={"id": self.id_of(created)})
        return await self._claim(raw, obj, created, link, adopted=False), created

    async def _claim(self, raw: JSON, obj: R, observed: ObservedT, link: L, *, adopted: bool) -> JSON:
        """Make the object this resource's: the claim and how it was made, in one metadata write. The status
        (the ID, Ready) follows at the end of the reconcile; until then the label is the record of the claim."""
        return await self._patch_meta(
            raw,
            finalizers=self._with_finalizer(raw),
            labels={self.claim_label: self.id_of(observed)},
            annotations={CREATE_INTENT_ANNOTATION: None, ADOPTED_ANNOTATION: "true" if adopted else None},
        )

    @staticmethod
    def _with_finalizer(raw: JSON) -> list[str] | None:
        finalizers = list(raw["metadata"].get("finalizers") or [])
        return None if FINALIZER in finalizers else [*finalizers, FINALIZER]

    async def _cloudflare_failed(self, raw: JSON, key: Key, exc: CloudflareError) -> Outcome:
        logger = self._log(key)
        if isinstance(exc, RateLimited):
            logger.warning("rate limited by Cloudflare: %s", exc)
            await self._set_ready(raw, "False", Reason.API_ERROR, str(exc))
            return Outcome(requeue_after=max(1.0, exc.retry_after or 1.0), failed=True)
        if isinstance(exc, Transient):
            logger.warning("Cloudflare call failed, will retry: %s", exc)
            await self._set_ready(raw, "False", Reason.API_ERROR, str(exc))
            return Outcome(retry=True)
        if isinstance(exc, InvalidToken):
            logger.warning("Cloudflare rejected the token: %s", exc)
            await self._set_ready(raw, "False", Reason.INVALID_TOKEN, str(exc))
            return Outcome.done()
        if isinstance(exc, Conflict | NotFound | Terminal):
            logger.warning("Cloudflare refused: %s", exc)
            await self._set_ready(raw, "False", Reason.TERMINAL_ERROR, str(exc))
            return Outcome.done()
        logger.warning("Cloudflare call failed: %s", exc)
        await self._set_ready(raw, "False", Reason.API_ERROR, str(exc))
        return Outcome(retry=True)

    # ---- deletion ----------------------------------------------------------------------------------------------

    def deletion_policy(self, obj: R) -> DeletionPolicy:
        annotations = obj.metadata.annotations
        explicit = annotations.get(DELETION_POLICY_ANNOTATION)
        if explicit in tuple(DeletionPolicy):
            return DeletionPolicy(explicit)
        if annotations.get(ADOPTED_ANNOTATION) == "true":
            return DeletionPolicy.RETAIN  # an adopted object outlives its resource unless the resource says delete
        return self.ctx.default_deletion_policy

    def dependants(self, key: Key) -> list[Ref]:
        """Objects that still reference this one and exist."""
        return [
            child
            for child in self.ctx.index.children(self.ref(key))
            if child.kind != "Secret" and self.ctx.cached(child.kind, child.name, child.namespace or None) is not None
        ]

    async def _delete(self, raw: JSON, obj: R, key: Key) -> Outcome:
        if FINALIZER not in obj.metadata.finalizers:
            return Outcome.done()
        if self._paused(obj):
            await self._set_paused(raw, obj)
            return Outcome.done()
        users = self.dependants(key)
        if users:
            listed = ", ".join(str(u) for u in users[:MAX_LISTED_DEPENDANTS])
            more = ", ..." if len(users) > MAX_LISTED_DEPENDANTS else ""
            await self._set_ready(
                raw, "False", self.in_use_reason, f"waiting for dependants to be deleted: {listed}{more}"
            )
            return Outcome.done()  # each dependant's deletion enqueues this object again
        logger = self._log(key)
        object_id = self.current_id(obj)
        intent = CREATE_INTENT_ANNOTATION in obj.metadata.annotations
        if self.creates and self.deletion_policy(obj) == DeletionPolicy.DELETE and (object_id or intent):
            try:
                link = await self.connect(obj)
            except NotReady as wait:
                if not wait.parent_gone:
                    await self._set_ready(raw, "False", wait.reason, wait.message)
                    return Outcome(requeue_after=wait.requeue_after)
                logger.info("parent is gone; leaving the Cloudflare object in place (%s)", wait.message)
            except CloudflareError as exc:
                return await self._cloudflare_failed(raw, key, exc)
            else:
                try:
                    if not object_id:
                        existing = await self.find(link, obj)
                        object_id = None if existing is None else self.id_of(existing)
                    if object_id:
                        with contextlib.suppress(NotFound):
                            await self.delete(link, obj, object_id)
                        logger.info("deleted in Cloudflare", extra={"id": object_id})
                except CloudflareError as exc:
                    return await self._cloudflare_failed(raw, key, exc)
                except NotReady as wait:  # Cloudflare's object cannot go yet (a bucket holding objects, a list in use)
                    logger.info("deletion waits: %s", wait.message, extra={"reason": wait.reason})
                    await self._set_ready(raw, "False", wait.reason, wait.message)
                    return Outcome(requeue_after=wait.requeue_after)
        elif object_id:
            logger.info("keeping the Cloudflare object (deletion policy retain)", extra={"id": object_id})
        return await self._finish_deletion(raw, key, obj)

    async def _finish_deletion(self, raw: JSON, key: Key, obj: R | None) -> Outcome:
        if obj is not None:
            await self.released(obj)
        finalizers = list(raw["metadata"].get("finalizers") or [])
        if FINALIZER in finalizers:
            index = finalizers.index(FINALIZER)
            patch = [
                {"op": "test", "path": f"/metadata/finalizers/{index}", "value": FINALIZER},
                {"op": "remove", "path": f"/metadata/finalizers/{index}"},
            ]
            try:
                await self.ctx.kube.patch(self.resource_type(), key[1], patch, key[0] or None, content_type=JSON_PATCH)
            except KubeError as exc:
                if not exc.not_found:
                    raise
        for parent in self.ctx.index.remove(self.ref(key)):
            self.ctx.enqueue(parent)
        return Outcome.done()

    # ---- pause -------------------------------------------------------------------------------------------------

    @staticmethod
    def _paused(obj: Resource[Any, Any]) -> bool:
        return obj.metadata.annotations.get(PAUSED_ANNOTATION, "").lower() == "true"

    async def _set_paused(self, raw: JSON, obj: R) -> None:
        current = obj.status.condition()
        status: Literal["True", "False", "Unknown"] = current.status if current is not None else "Unknown"
        message = f"paused by the {PAUSED_ANNOTATION} annotation: no Cloudflare call is made"
        if obj.metadata.deleting:
            message += "; deletion waits until the annotation is removed"
        await self._set_ready(raw, status, Reason.PAUSED, message)

    # ---- writes to Kubernetes ----------------------------------------------------------------------------------

    def _remember(self, obj: JSON) -> JSON:
        """Put our own write's result in the cache at once, so the next reconcile never reads an older copy."""
        informer = self.ctx.informer_of(self.kind)
        if informer is not None:
            meta = obj["metadata"]
            cached = informer.get(meta["name"], meta.get("namespace"))
            try:
                newer = cached is None or int(meta["resourceVersion"]) >= int(cached["metadata"]["resourceVersion"])
            except (KeyError, ValueError):
                newer = True
            if newer:
                obj.setdefault("kind", self.kind)
                obj.setdefault("apiVersion", self.resource_type().api_version)
                informer.put(obj)
        self.ctx.own_write(self.kind, obj)
        return obj

    async def _patch_meta(
        self,
        raw: JSON,
        *,
        finalizers: list[str] | None = None,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
    ) -> JSON:
        meta = raw["metadata"]
        patch: dict[str, Any] = {"resourceVersion": meta["resourceVersion"]} if finalizers is not None else {}
        if finalizers is not None:
            patch["finalizers"] = finalizers
        if labels:
            current = meta.get("labels") or {}
            wanted = {k: v for k, v in labels.items() if current.get(k) != v and (v is not None or k in current)}
            if wanted:
                patch["labels"] = wanted
        if annotations:
            current = meta.get("annotations") or {}
            wanted = {k: v for k, v in annotations.items() if current.get(k) != v and (v is not None or k in current)}
            if wanted:
                patch["annotations"] = wanted
        if not patch or list(patch) == ["resourceVersion"]:
            return raw
        updated = await self.ctx.kube.patch(
            self.resource_type(), meta["name"], {"metadata": patch}, meta.get("namespace"), content_type=MERGE_PATCH
        )
        return self._remember(updated)

    async def _write_status(self, raw: JSON, status: JSON) -> JSON:
        patch = merge_patch(raw.get("status") or {}, status)
        if not patch:
            return raw
        meta = raw["metadata"]
        updated = await self.ctx.kube.patch(
            self.resource_type(), meta["name"], {"status": patch}, meta.get("namespace"), subresource="status"
        )
        return self._remember(updated)

    async def _set_ready(
        self,
        raw: JSON,
        status: Literal["True", "False", "Unknown"],
        reason: str,
        message: str,
        *,
        status_model: Any = None,
    ) -> JSON:
        """Set Ready (on `status_model`, the status the reconcile built, or on the stored one) and write what
        changed; record an Event when Ready's status or reason changed."""
        current = self.model.status_model().model_validate(raw.get("status") or {})
        model = status_model if status_model is not None else current.model_copy(deep=True)
        before = current.condition()
        generation = raw["metadata"].get("generation")
        model.set_condition(status, reason, message, observed_generation=generation)
        raw = await self._write_status(raw, model.to_wire())
        after = model.condition()
        assert after is not None
        if before is None or (before.status, before.reason) != (after.status, after.reason):
            normal = status == "True" or reason == Reason.PAUSED
            await self.ctx.recorder.record(raw, type_="Normal" if normal else "Warning", reason=reason, note=message)
            self._log((raw["metadata"].get("namespace") or "", raw["metadata"]["name"])).info(
                "Ready=%s %s: %s", status, reason, message
            )
        return raw
