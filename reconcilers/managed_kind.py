"""What a kind supplies to the lifecycle: its model, where its Cloudflare ID lives (data), and the Cloudflare calls
(the eight methods of `ManagedKind`). What only some kinds need is a capability they inherit
(`reconcilers.capabilities`); what follows from the declaration (the kind's resource, parents, indexes, the ID a
resource records) is derived here, by the functions after the class."""

from __future__ import annotations

import contextlib
import inspect
import json
from abc import ABC, abstractmethod
from operator import attrgetter
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from app.api.base import GROUP, VERSION, wire_name
from app.api.constants import CREATE_INTENT_ANNOTATION, Reason
from app.api.links import reference_target, targets_of
from app.api.resource import Resource
from app.cloudflare.calls import JsonBody
from app.kube.client import JSON, ResourceType
from app.kube.index import Ref
from app.kube.informer import Indexer
from reconcilers.capabilities import Indexed, RecordsIdElsewhere, ServesChildren
from reconcilers.context import AccountLink, Caches, Context, Credentials
from reconcilers.holders import CLAIM_INDEX, Owners
from reconcilers.waiting import RECORDED, Parent, Stored, can_serve, parent_found

R = TypeVar("R", bound=Resource[Any, Any])
L = TypeVar("L")  # what connect() resolves: parents' IDs and a Cloudflare client
ObservedT = TypeVar("ObservedT")  # the Cloudflare object as observed

Changes = dict[str, JsonBody]
"""What `diff` found must change, by field: sent to Cloudflare as (part of) a request body, so JSON."""


def create_intent(obj: Stored) -> dict[str, str] | None:
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
    """What a kind supplies to the lifecycle: data saying what it manages and where the ID lives, and eight calls.

    `connect` resolves parents and credentials into a link; `observe` reads the object by ID, `find` by the
    resource's key (adoption and crash recovery); `create`, `update` (with what `diff` found) and `delete` write
    it; `record` writes what was observed into the status. Every call gets what it needs: `link` is what `connect`
    resolved, `observed` what `observe`, `find`, `create` or `update` returned. The ID is data: `status_id` names
    the field of `status.cloudflareMetadata` that holds it and `observed_id` the attribute (a dotted path) of the
    observed object. An observed object that has a `described()` names itself in messages.
    """

    model: ClassVar[type[Resource[Any, Any]]]
    kind: ClassVar[str]
    """The model's kind name."""
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
    """The attribute of the observed object that holds its Cloudflare ID (`list.id`: an attribute's)."""
    claim_label: ClassVar[str] = ""
    """A label recording the Cloudflare ID on the resource, so adoption skips objects other resources own and a
    crash between the claim and the status write loses nothing: the model's `KindInfo.claim_label`."""
    claim_in_status: ClassVar[bool] = True
    """Whether the status's ID is the claim of an object this resource created (no label written: the doc of
    `reconcilers.lifecycle`). False by default for a kind whose ID is not a plain status field
    (`RecordsIdElsewhere`)."""

    serves_once: ClassVar[str] = ""
    """The field of `status.cloudflare_metadata` whose value says the Cloudflare object exists, for children that
    wait on this kind (`ManagedKind.parent`): `status_id` unless the kind records something else (a bucket's creation
    date, a Worker's upload)."""

    _status_field: ClassVar[str] = ""
    """`status_id` as the stored status spells it."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        model = cls.__dict__.get("model")
        if model is not None:
            cls.kind = model.info.kind
            cls.claim_label = model.info.claim_label or ""
            if cls.creates and not cls.claim_label:
                raise TypeError(f"{model.info.kind} creates Cloudflare objects but declares no claim_label")
        if "claim_in_status" not in cls.__dict__:
            cls.claim_in_status = bool(cls.status_id) and not issubclass(cls, RecordsIdElsewhere)
        cls._status_field = wire_name(cls.status_id)  # read by the claim index on every watch event
        if model is not None:
            RECORDED[cls.kind] = wire_name(cls.serves_once or cls.status_id)

    def __init__(self, caches: Caches, credentials: Credentials) -> None:
        """A kind receives the parts of the manager's `Context` its constructor names, by name (`build`): these two
        every kind uses; one that needs more (the Kubernetes client, the queues) names them in its own."""
        self.caches, self.credentials = caches, credentials
        self.owners: Owners[ObservedT] = Owners(self.kind, caches.informer_of, lambda observed: id_of(self, observed))

    def parent(self, obj: R, field: str, *, shown: str = "", gone: bool = True) -> Parent:
        """The parent the spec's reference `field` names (the kind its type declares: `app.api.links`), as cached,
        or NotReady `<Kind>NotFound`; its `serving()` waits for what it records (`serves_once`), or `<Kind>NotReady`."""
        value = getattr(obj.spec, field).model_dump(by_alias=True, exclude_none=True)
        target = reference_target(type(obj.spec), field, value, obj.namespace or "")
        return parent_found(self.caches, target, shown=shown, gone=gone)

    # ---- the calls -----------------------------------------------------------------------------------------------

    @abstractmethod
    async def connect(self, obj: R) -> L:
        """Resolve parents and credentials, or raise NotReady."""

    @abstractmethod
    async def observe(self, link: L, obj: R, object_id: str) -> ObservedT | None:
        """The Cloudflare object by ID, None if Cloudflare no longer has it."""

    async def find(self, link: L, obj: R) -> ObservedT | None:
        """The Cloudflare object this resource's key names (for adoption and crash recovery)."""
        return None

    async def create(self, link: L, obj: R) -> ObservedT:
        raise NotImplementedError

    def diff(self, link: L, obj: R, observed: ObservedT) -> Changes:
        """What must change in Cloudflare for it to match the spec; empty when in sync."""
        return {}

    async def update(self, link: L, obj: R, observed: ObservedT, changes: Changes) -> ObservedT:
        raise NotImplementedError

    async def delete(self, link: L, obj: R, object_id: str) -> None:
        raise NotImplementedError

    @abstractmethod
    def record(self, link: L, obj: R, observed: ObservedT) -> None:
        """Write IDs and read-only Cloudflare data into obj.status."""


KindClass = type[ManagedKind[Any, Any, Any]]


class AnyKind(Protocol):
    """What is read of a kind where the types of its resource and its Cloudflare object do not matter."""

    @property
    def kind(self) -> str: ...

    @property
    def status_id(self) -> str: ...

    @property
    def observed_id(self) -> str: ...

    @property
    def claim_label(self) -> str: ...


@runtime_checkable
class Described(Protocol):
    def described(self) -> str:
        """The object as a message names it ("zone example.com (<id>)")."""


K = TypeVar("K", bound=ManagedKind[Any, Any, Any])


def build(kind: type[K], ctx: Context) -> K:
    """An instance of `kind`, given the parts of `ctx` its constructor names (`caches`, `credentials`, `queue`,
    `kube`, `configmaps`, `rulesets`, `dns_batch_size`, ...): each kind states what it uses, and receives only that."""
    wanted = [name for name in inspect.signature(kind.__init__).parameters if name != "self"]
    missing = [name for name in wanted if not hasattr(ctx, name)]
    if missing:
        raise TypeError(f"{kind.__qualname__} asks for {', '.join(missing)}, which the manager does not provide")
    return kind(**{name: getattr(ctx, name) for name in wanted})


def described(kind: AnyKind, observed: object) -> str:
    if isinstance(observed, Described):
        return observed.described()
    return f"{kind.kind} {id_of(kind, observed)}"


def id_of(kind: AnyKind, observed: object) -> str:
    """The Cloudflare ID of an observed object, where `observed_id` says."""
    return str(attrgetter(kind.observed_id)(observed))


def resource_type(kind: KindClass) -> ResourceType:
    info = kind.model.info
    return ResourceType(GROUP, VERSION, info.plural, info.kind, namespaced=info.namespaced)


def parents_of(kind: KindClass, raw: JSON) -> list[Ref]:
    """The objects this one references, as its model declares them (`app.api.links`): read from the raw object, as
    this is called on every watch event."""
    return [Ref(*target) for target in targets_of(kind.model, raw)]


def serving_state(kind: KindClass, raw: JSON) -> object:
    """What children read of this object: its spec, its status but the conditions, whether it can serve them and
    whether it is being deleted. Children are enqueued when this changes, not on every status echo."""
    if issubclass(kind, ServesChildren):
        return kind.serving_state(raw)
    status = {k: v for k, v in (raw.get("status") or {}).items() if k != "conditions"}
    read = (raw.get("spec"), status, can_serve(raw), bool(raw["metadata"].get("deletionTimestamp")))
    return hash(json.dumps(read, sort_keys=True))  # kept per object: a number, not the texts


def indexes(kind: KindClass) -> dict[str, Indexer]:
    """Indexes the kind's cache keeps: the claim label, so "who owns this ID" is one lookup, and the kind's own."""
    more = kind.more_indexes() if issubclass(kind, Indexed) else {}
    if not kind.claim_label:
        return more

    def claimed(raw: JSON) -> list[str]:
        value = recorded_id(kind, raw)
        return [value] if value else []

    return {CLAIM_INDEX: claimed, **more}


def recorded_id(kind: KindClass, raw: JSON) -> str | None:
    """The Cloudflare ID the stored resource claims: its claim label, else (`claim_in_status`) its status's."""
    value = (raw["metadata"].get("labels") or {}).get(kind.claim_label)
    if not value and kind.claim_in_status:
        metadata = (raw.get("status") or {}).get("cloudflareMetadata") or {}
        value = metadata.get(kind._status_field)
    return str(value) if value else None


def status_object_id(kind: AnyKind, obj: Stored) -> str | None:
    """The Cloudflare ID recorded in status, where `status_id` says."""
    meta = getattr(obj.status, "cloudflare_metadata", None)
    value = getattr(meta, kind.status_id, None) if meta is not None and kind.status_id else None
    return str(value) if value else None


def object_id(kind: AnyKind, obj: Stored) -> str | None:
    """The Cloudflare ID the resource records."""
    if isinstance(kind, RecordsIdElsewhere):
        found = kind.object_id(obj)
        return None if found is None else str(found)
    return status_object_id(kind, obj)


def account_of(link: object) -> AccountLink | None:
    """The account the object is in: every link that reaches Cloudflare carries it as `account`."""
    account = getattr(link, "account", None)
    return account if isinstance(account, AccountLink) else None


def pending_intent(kind: AnyKind, obj: Stored) -> dict[str, str] | None:
    """The create intent whose create may have reached Cloudflare unrecorded: none is recorded yet, or only the ID
    the create replaces (the doc of `reconcilers.lifecycle`)."""
    intent = create_intent(obj)
    if intent is None:
        return None
    recorded = obj.metadata.labels.get(kind.claim_label) or object_id(kind, obj)
    return intent if not recorded or recorded == intent.get("replaces") else None
