"""What every reconciler may use: the Kubernetes client and caches, the Cloudflare clients, policy settings, and what
the rule kinds share."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from app.api.constants import DeletionPolicy
from app.api.tenancy import ALL_NAMESPACES, NamespacePolicy
from app.cloudflare.client import CloudflareClient
from app.cloudflare.models import CustomList, Ruleset
from app.kube.client import JSON, KubeClient
from app.kube.events import EventRecorder
from app.kube.index import DependencyIndex, Ref
from app.kube.informer import Informer
from app.kube.referenced import ReferencedObjects
from reconcilers.collections import Collections

ENTRYPOINT = "entrypoint"


@dataclass(frozen=True)
class AccountLink:
    """A Ready account's Cloudflare ID and a client for its token, with who may use it and who may adopt through
    it (the account's policies, or the controller's default where it sets none)."""

    account_id: str
    client: CloudflareClient
    users: NamespacePolicy = field(default_factory=lambda: ALL_NAMESPACES, compare=False)
    adopters: NamespacePolicy = field(default_factory=lambda: ALL_NAMESPACES, compare=False)


def lists_key(account_id: str) -> str:
    """The key of an account's custom lists in `RulesetEngine.lists`: by Cloudflare ID, as a rule knows its account."""
    return f"account:{account_id}"


@dataclass
class RulesetEngine:
    """What every rule kind (and IPList) of one manager shares: the entry points and each account's custom lists as
    last read or written, a lock per entry point, and which kinds write rules."""

    rulesets: Collections[Ruleset] = field(default_factory=lambda: Collections(id_of=lambda _: ENTRYPOINT))
    """Each (zone, phase) entry point, under `rules:<zone ID>:<phase>`."""
    lists: Collections[CustomList] = field(
        default_factory=lambda: Collections(id_of=lambda found: found.id, name_of=lambda found: found.name)
    )
    """Each account's custom lists (`account:<id>`): which `$name`s a rule may use, and IPList's own reads."""
    kinds: set[str] = field(default_factory=set)
    """The rule kinds, whose caches hold the rules of a (zone, phase) and the rules naming a list."""
    _locks: weakref.WeakValueDictionary[str, asyncio.Lock] = field(default_factory=weakref.WeakValueDictionary)

    def lock(self, collection: str) -> asyncio.Lock:
        """The lock of one entry point's writes. Kept while someone holds or awaits it, so the locks of zones long
        gone do not pile up."""
        lock = self._locks.get(collection)
        if lock is None:
            lock = self._locks[collection] = asyncio.Lock()
        return lock


@dataclass(frozen=True)
class Caches:
    """The API server's objects as this process caches them, and who depends on whom: what every kind reads."""

    informer_of: Callable[[str], Informer | None]
    """The cache of a kind, by kind name (the manager makes new ones each time this process becomes leader)."""
    index: DependencyIndex
    """Each object's parents and children, as the kinds' references declare them."""

    def cached(self, kind: str, name: str, namespace: str | None = None) -> JSON | None:
        informer = self.informer_of(kind)
        return None if informer is None else informer.get(name, namespace)

    def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        """A namespace's labels as the cache of namespaces holds them (None: not cached)."""
        raw = self.cached("Namespace", namespace)
        return None if raw is None else dict(raw["metadata"].get("labels") or {})

    def cached_all(self, kind: str) -> list[JSON]:
        informer = self.informer_of(kind)
        return [] if informer is None else informer.list()


@dataclass(frozen=True)
class Credentials:
    """What turns a reference to an account into a Cloudflare client, and who may use it: the referenced token
    Secrets, a client per token, and the accounts' links as last made."""

    caches: Caches
    secrets: ReferencedObjects
    """The Secrets resources reference (tokens, binding values): watched one by one, and only those."""
    cloudflare: Callable[[str], CloudflareClient]
    """A client for an API token; one per token, sharing the process's connection pool and the token's budget."""
    default_account_namespaces: NamespacePolicy
    """Who may use (and adopt through) an account that says nothing: `--default-account-namespaces`."""
    account_links: dict[str, tuple[JSON, tuple[str, str], JSON, AccountLink]]
    """Each Ready account's link, by name, with the account and token Secret it was made from (the cached objects
    themselves): made again only when either changes."""


@dataclass(frozen=True)
class Queue:
    """The manager's queues, for a kind whose reconcile decides about other objects."""

    enqueue: Callable[[Ref], None]
    """Queue an object of any kind for reconciling."""
    queued: Callable[[Ref], bool]
    """Whether an object waits in its kind's queue for the next free worker (False while it backs off)."""


@dataclass
class Context:
    """Everything one life of the manager gives the reconcilers, as the process assembles it. The lifecycle and the
    Gateway class hold it whole; a kind receives only the parts its constructor names (`managed_kind.build`)."""

    kube: KubeClient
    recorder: EventRecorder
    secrets: ReferencedObjects
    """The Secrets resources reference (tokens, binding values): watched one by one, and only those."""
    index: DependencyIndex
    cloudflare: Callable[[str], CloudflareClient]
    """A client for an API token; one per token, sharing the process's connection pool and the token's budget."""
    default_deletion_policy: DeletionPolicy = DeletionPolicy.DELETE
    default_account_namespaces: NamespacePolicy = field(default_factory=lambda: ALL_NAMESPACES)
    """Who may use (and adopt through) an account that says nothing: `--default-account-namespaces`."""
    dns_batch_size: int = 0
    """DNS writes of a zone per call; 0: the plan's cap."""
    informer_of: Callable[[str], Informer | None] = lambda _: None
    """The cache of a kind, by kind name (the manager makes new ones each time this process becomes leader)."""
    enqueue: Callable[[Ref], None] = lambda _: None
    """Queue an object of any kind for reconciling."""
    queued: Callable[[Ref], bool] = lambda _: True
    """Whether an object waits in its kind's queue for the next free worker (False while it backs off)."""
    own_write: Callable[[str, JSON], None] = lambda kind, obj: None
    """Tell the kind's controller that this object is the result of a write the current reconcile made."""
    configmaps: ReferencedObjects | None = None
    """The ConfigMaps resources reference (a Worker's script), like the Secrets."""
    rulesets: RulesetEngine = field(default_factory=RulesetEngine)
    """What the rule kinds and IPList share for one life of the manager."""
    caches: Caches = field(init=False)
    credentials: Credentials = field(init=False)
    queue: Queue = field(init=False)

    def __post_init__(self) -> None:
        # The parts read the fields through callables and shared objects, so a part stays current as they change.
        self.caches = Caches(lambda kind: self.informer_of(kind), self.index)
        self.credentials = Credentials(self.caches, self.secrets, self.cloudflare, self.default_account_namespaces, {})
        self.queue = Queue(lambda ref: self.enqueue(ref), lambda ref: self.queued(ref))

    def cached(self, kind: str, name: str, namespace: str | None = None) -> JSON | None:
        return self.caches.cached(kind, name, namespace)

    def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        return self.caches.namespace_labels(namespace)

    def cached_all(self, kind: str) -> list[JSON]:
        return self.caches.cached_all(kind)
