"""What a kind supplies to the lifecycle: its model, where its Cloudflare ID lives, and the Cloudflare calls."""

from __future__ import annotations

import contextlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, TypeVar, cast

from app.api.base import GROUP, VERSION, wire_name
from app.api.constants import CREATE_INTENT_ANNOTATION, FINALIZER, Reason
from app.api.links import targets_of
from app.api.resource import Resource
from app.kube.client import JSON, ResourceType
from app.kube.index import Ref
from app.kube.informer import Indexer, Key
from app.kube.manager import IndexLink
from app.logs import ContextLogger
from reconcilers.claims import Holder, holder_of
from reconcilers.context import AccountLink, Context
from reconcilers.waiting import RETRY_PARENT, NotReady, can_serve
from reconcilers.writer import logger_of

CLAIM_INDEX = "claim"


R = TypeVar("R", bound=Resource[Any, Any])
L = TypeVar("L")  # what connect() resolves: parents' IDs and a Cloudflare client
ObservedT = TypeVar("ObservedT")  # the Cloudflare object as observed


def create_intent(obj: Resource[Any, Any]) -> dict[str, str] | None:
    """The create intent left by an earlier reconcile, spent or not (older ones hold only a timestamp)."""
    value = obj.metadata.annotations.get(CREATE_INTENT_ANNOTATION)
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        parsed = json.loads(value)
        if isinstance(parsed, dict):
            return {str(k): str(v) for k, v in parsed.items()}
    return {"at": value}


class ManagedKind(ABC, Generic[R, L, ObservedT]):
    """What a kind supplies to the lifecycle: its model, where its Cloudflare ID lives, and the Cloudflare calls.

    Every hook gets what it needs: `link` is what `connect` resolved (parents' IDs, a client), `observed` what
    `observe`, `find`, `create` or `update` returned. Where the ID lives is data: `status_id` names the field of
    `status.cloudflareMetadata` that holds it and `observed_id` the attribute of the observed object; a kind whose
    ID is more than a field overrides `object_id` or `id_of`.
    """

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
    status_id: ClassVar[str] = ""
    """The field of `status.cloudflare_metadata` that holds the Cloudflare ID."""
    observed_id: ClassVar[str] = "id"
    """The attribute of the observed object that holds its Cloudflare ID."""
    claim_label: ClassVar[str] = ""
    """A label recording the Cloudflare ID on the resource, so adoption skips objects other resources own and a
    crash between the claim and the status write loses nothing: the model's `KindInfo.claim_label`."""
    claim_in_status: ClassVar[bool] = True
    """Whether the status's ID is the claim of an object this resource created (no label written: the doc of
    `reconcilers.lifecycle`). False by default for a kind whose ID is not a plain status field (it overrides
    `object_id`)."""

    _status_field: ClassVar[str] = ""
    """`status_id` as the stored status spells it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        model = cls.__dict__.get("model")
        if model is not None:
            cls.claim_label = model.info.claim_label or ""
            if cls.creates and not cls.claim_label:
                raise TypeError(f"{model.info.kind} creates Cloudflare objects but declares no claim_label")
        if "claim_in_status" not in cls.__dict__:
            cls.claim_in_status = bool(cls.status_id) and cls.object_id is ManagedKind.object_id
        cls._status_field = wire_name(cls.status_id)  # read by the claim index on every watch event

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    # ---- what the manager reads of the kind --------------------------------------------------------------------

    @classmethod
    def resource_type(cls) -> ResourceType:
        info = cls.model.info
        return ResourceType(GROUP, VERSION, info.plural, info.kind, namespaced=info.namespaced)

    @classmethod
    def parents_of(cls, raw: JSON) -> list[Ref]:
        """The objects this one references, as its model declares them (`app.api.links`): read from the raw object,
        as this is called on every watch event."""
        return [Ref(*target) for target in targets_of(cls.model, raw)]

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
        if not label:
            return {}

        def claimed(raw: JSON) -> list[str]:
            value = cls.recorded_id(raw)
            return [value] if value else []

        return {CLAIM_INDEX: claimed}

    @classmethod
    def recorded_id(cls, raw: JSON) -> str | None:
        """The Cloudflare ID the stored resource claims: its claim label, else (`claim_in_status`) its status's."""
        value = (raw["metadata"].get("labels") or {}).get(cls.claim_label)
        if not value and cls.claim_in_status:
            metadata = (raw.get("status") or {}).get("cloudflareMetadata") or {}
            value = metadata.get(cls._status_field)
        return str(value) if value else None

    @classmethod
    def links(cls) -> Sequence[IndexLink]:
        """The objects of other kinds this kind's objects name by a value of one of its indexes (a rule's lists)."""
        return ()

    # ---- what each kind supplies -------------------------------------------------------------------------------

    def parse(self, raw: JSON) -> R:
        """The resource as its model reads it (ValidationError when the stored object is invalid)."""
        return cast(R, self.model.model_validate(raw))

    @abstractmethod
    async def connect(self, obj: R) -> L:
        """Resolve parents and credentials, or raise NotReady."""

    def object_id(self, obj: R) -> str | None:
        """The Cloudflare ID recorded in status."""
        meta = getattr(obj.status, "cloudflare_metadata", None)
        value = getattr(meta, self.status_id, None) if meta is not None and self.status_id else None
        return str(value) if value else None

    def id_of(self, observed: ObservedT) -> str:
        return str(getattr(observed, self.observed_id))

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

    def diff(self, link: L, obj: R, observed: ObservedT) -> dict[str, Any]:
        """What must change in Cloudflare for it to match the spec; empty when in sync."""
        return {}

    async def update(self, link: L, obj: R, observed: ObservedT, changes: dict[str, Any]) -> ObservedT:
        raise NotImplementedError

    async def delete(self, link: L, obj: R, object_id: str) -> None:
        raise NotImplementedError

    @abstractmethod
    def record(self, link: L, obj: R, observed: ObservedT) -> None:
        """Write IDs and read-only Cloudflare data into obj.status."""

    def describe(self, observed: ObservedT) -> str:
        return self.id_of(observed)

    def account_of(self, link: L) -> AccountLink | None:
        """The account the object is in: every link that reaches Cloudflare carries it as `account`."""
        account = getattr(link, "account", None)
        return account if isinstance(account, AccountLink) else None

    def adoption_note(self, observed: ObservedT) -> str:
        """Which object was adopted and why that one, for the Event (a key that is not unique says more)."""
        return f"adopted {self.describe(observed)}"

    async def after_sync(self, link: L, obj: R, observed: ObservedT) -> None:
        """What the kind keeps in step beside its Cloudflare object once that is in sync (a Tunnel's token Secret).
        May raise NotReady: the resource then waits with that reason."""

    def ready_state(self, obj: R, observed: ObservedT) -> tuple[str, str]:
        """Ready's reason and message once in sync (a kind may qualify them)."""
        return self.ready_reason, self.ready_message

    async def releasing(self, obj: R) -> None:
        """Called before the resource loses its finalizer (after any Cloudflare deletion): what must be undone while
        the resource still exists, so that a failure keeps the finalizer and is tried again (a token Secret's
        protection)."""

    async def released(self, obj: R) -> None:
        """Called once the resource has lost its finalizer (after any Cloudflare deletion); the cache shows it."""

    def dependants(self, key: Key) -> list[Ref]:
        """Objects that still reference this one and exist: its deletion waits for them."""
        return [
            child
            for child in self.ctx.index.children(self.ref(key))
            if child.kind != "Secret" and self.ctx.cached(child.kind, child.name, child.namespace or None) is not None
        ]

    def reconciling(self, key: Key) -> contextlib.AbstractContextManager[object]:
        """Held while the reconcile of `key` runs (a zone's DNS batch knows who may still join it)."""
        return contextlib.nullcontext()

    # ---- what kinds may use ------------------------------------------------------------------------------------

    @property
    def kind(self) -> str:
        return self.model.info.kind

    @staticmethod
    def done_with(raw: JSON) -> bool:
        """Whether kflare is done with a resource: being deleted, and its finalizer gone (it stays in the cache until
        the watch reports its deletion)."""
        meta = raw["metadata"]
        return bool(meta.get("deletionTimestamp")) and FINALIZER not in (meta.get("finalizers") or [])

    def pending_intent(self, obj: R) -> dict[str, str] | None:
        """The create intent whose create may have reached Cloudflare unrecorded: none is recorded yet, or only the
        ID the create replaces (the doc of `reconcilers.lifecycle`)."""
        intent = create_intent(obj)
        if intent is None:
            return None
        recorded = obj.metadata.labels.get(self.claim_label) or self.object_id(obj)
        return intent if not recorded or recorded == intent.get("replaces") else None

    def ref(self, key: Key) -> Ref:
        return Ref(self.kind, key[0], key[1])

    def logger(self, key: Key) -> ContextLogger:
        return logger_of(self.kind, key)

    def holder_of(self, cloudflare_id: str, obj: R) -> Holder | None:
        """The other resource of this kind (in any namespace) whose status or claim label records the object."""
        informer = self.ctx.informer_of(self.kind)
        for other in [] if informer is None else informer.by_index(CLAIM_INDEX, cloudflare_id):
            if other["metadata"].get("uid") != obj.metadata.uid:
                return holder_of(other)
        return None

    def owner_of(self, cloudflare_id: str, obj: R) -> str | None:
        """Who else holds the Cloudflare object, as `obj`'s namespace may be told (`Holder.described_to`)."""
        holder = self.holder_of(cloudflare_id, obj)
        return None if holder is None else holder.described_to(obj.metadata.namespace)

    def claimed_by_other(self, cloudflare_id: str, obj: R) -> bool:
        """Whether another resource of this kind (in any namespace) claims the Cloudflare object."""
        return self.holder_of(cloudflare_id, obj) is not None

    def first_unclaimed(
        self, found: Sequence[ObservedT], obj: R, reason: str, what: Callable[[ObservedT], str]
    ) -> ObservedT | None:
        """The object an adoption lookup found by its key, unless another resource of this kind holds it: then this
        one waits (re-checked every RETRY_PARENT) and says who holds it, rather than sharing one object."""
        for candidate in found:
            owner = self.owner_of(self.id_of(candidate), obj)
            if owner is not None:
                raise NotReady(reason, f"{what(candidate)} is managed by {owner}", requeue_after=RETRY_PARENT)
            return candidate
        return None
