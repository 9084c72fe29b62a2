"""The controller manager: every kind's controller, the dependency index, the Secret watches, leader election and
drift checks, in one asyncio process.

Only the leader runs informers and workers; a standby holds no cache (so it stays small) and takes over by listing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from app.kube import metrics
from app.kube.client import CONFIGMAPS, JSON, KubeClient
from app.kube.controller import Controller, Observer, Outcome, Workers
from app.kube.drift import DriftScheduler, Member
from app.kube.events import EventRecorder
from app.kube.index import DependencyIndex, Ref
from app.kube.informer import EventType, Informer, Key, key_of
from app.kube.leader import LeaderElector
from app.kube.referenced import ReferencedObjects
from app.kube.registrations import AggregateReconciler, DocumentsOf, IndexLink, Input, Registration, Watch
from app.memory import trim_heap

log = logging.getLogger(__name__)

SECRET_KIND = "Secret"
TRIM_CHECK = 5.0
"""Seconds between looks at whether a burst of work has drained (see `Manager._trim_after_bursts`)."""
TRIM_AFTER = 100
"""Reconciles that make a burst: fewer (a drift round of a small cluster) leave little to give back."""
CONFIGMAP_KIND = "ConfigMap"
_UNSEEN = object()


def default_identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class _Feeder:
    """An informer's handler feeding an aggregate's queue, named by it: `_feed` runs again each term, adding one."""

    feeds: str
    handle: Callable[[EventType, JSON], None]

    def __call__(self, event: EventType, obj: JSON) -> None:
        self.handle(event, obj)


@dataclass
class Manager:
    kube: KubeClient
    namespace: str
    identity: str = field(default_factory=default_identity)
    leader_elect: bool = False
    lease_name: str = "kflare-leader"
    lease_duration: float = 12.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    workers: int = 4
    reconcile_timeout: float = 300.0
    drift_interval: float = 0.0
    resync_period: float = 36000.0
    controllers: dict[str, Controller] = field(default_factory=dict)
    registrations: dict[str, Registration] = field(default_factory=dict)
    watches: dict[str, Informer] = field(default_factory=dict)
    watch_specs: dict[str, Watch] = field(default_factory=dict)
    aggregates: dict[str, Workers] = field(default_factory=dict)
    aggregate_reconcilers: dict[str, AggregateReconciler] = field(default_factory=dict)
    index: DependencyIndex = field(default_factory=DependencyIndex)
    named: dict[str, dict[Ref, frozenset[tuple[IndexLink, str]]]] = field(default_factory=dict)
    """Per naming kind, what each object names through its IndexLinks, kept while it names something (this term's)."""
    readable_namespaces: frozenset[str] | None = None
    """Where referenced Secrets and ConfigMaps may be read (`--granted-namespaces`); None: everywhere."""
    secrets: ReferencedObjects = field(init=False)
    configmaps: ReferencedObjects = field(init=False)
    recorder: EventRecorder = field(init=False)
    drift: DriftScheduler = field(init=False)
    elector: LeaderElector | None = None
    leading: bool = False
    synced: bool = False
    _task: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        readable = self.readable_namespaces
        self.secrets = ReferencedObjects(self.kube, self._referenced_changed(SECRET_KIND), readable=readable)
        self.configmaps = ReferencedObjects(
            self.kube, self._referenced_changed(CONFIGMAP_KIND), CONFIGMAPS, readable=readable
        )
        self.recorder = EventRecorder(self.kube, self.identity)
        self.drift = DriftScheduler(self.drift_interval, self._enqueue_member, self._open_round)

    # ---- wiring ------------------------------------------------------------------------------------------------

    def register(self, registration: Registration) -> Controller:
        rt = registration.reconciler.resource_type()
        controller = Controller(
            self.kube,
            rt,
            registration.reconciler,
            workers=max(self.workers, registration.workers or 0),
            reconcile_timeout=self.reconcile_timeout,
        )
        for name, indexer in registration.reconciler.indexes().items():
            controller.informer.add_index(name, indexer)
        controller.informer.add_handler(self._indexer(rt.kind, registration))
        controller.observers.append(self._observer(rt.kind, registration))
        self.controllers[rt.kind] = controller
        self.registrations[rt.kind] = registration
        return controller

    def watch(self, spec: Watch) -> Informer:
        """Cache and index a kind that has no controller here (idempotent; the last spec of a kind wins)."""
        kind = spec.rt.kind
        self.watch_specs[kind] = spec
        informer = Informer(self.kube, spec.rt)
        for name, indexer in spec.indexes.items():
            informer.add_index(name, indexer)

        def on_event(event: EventType, obj: JSON) -> None:
            ref = Ref(kind, *key_of(obj))
            if event == "DELETED":
                self.index.remove(ref)
            else:
                self.index.set_parents(ref, spec.parents_of(obj))
            for woken in (ref, *spec.wakes(obj)):
                for child in self.index.children(woken):
                    self.enqueue(child)

        informer.add_handler(on_event)
        self.watches[kind] = informer
        for aggregate in self.aggregate_reconcilers.values():
            self._feed(aggregate)
        return informer

    def register_aggregate(self, reconciler: AggregateReconciler) -> Workers:
        """Run `reconciler` over document keys, fed by its inputs' informers (watching those no controller has)."""
        self.aggregate_reconcilers[reconciler.name] = reconciler
        workers = Workers(reconciler.name, reconciler, workers=self.workers, reconcile_timeout=self.reconcile_timeout)
        self.aggregates[reconciler.name] = workers
        for rt in reconciler.inputs():
            if self.informer_of(rt.kind) is None:
                self.watch(Watch(rt))
        self._feed(reconciler)
        return workers

    def _feed(self, reconciler: AggregateReconciler) -> None:
        """Connect the aggregate's queue to its inputs' current informers (again after each new term)."""
        for rt, feed in reconciler.inputs().items():
            informer = self.informer_of(rt.kind)
            fed = (h.feeds for h in informer.handlers if isinstance(h, _Feeder)) if informer is not None else ()
            if informer is None or reconciler.name in fed:
                continue
            spec = feed if isinstance(feed, Input) else Input(feed)
            for index, indexer in spec.indexes.items():
                if index not in informer.indexers:
                    informer.add_index(index, indexer)
            informer.add_handler(self._feeder(reconciler.name, rt.kind, spec.documents_of, spec.state or _input_state))

    def _feeder(self, name: str, kind: str, documents_of: DocumentsOf, state_of: Callable[[JSON], object]) -> _Feeder:
        fed: dict[Key, frozenset[str]] = {}
        seen: dict[Key, object] = {}

        def on_event(event: EventType, obj: JSON) -> None:
            key = key_of(obj)
            before = fed.get(key, frozenset())
            if event == "DELETED":
                # What it maps to now as well: a document that appeared since its last event (a Gateway made after
                # the GatewayParameters it reads) depends on it too.
                now = frozenset(documents_of(obj))
                fed.pop(key, None)
                seen.pop(key, None)
            else:
                now = frozenset(documents_of(obj))
                state = state_of(obj)
                if now == before and seen.get(key) == state:
                    return  # a status echo: nothing the document is computed from changed
                fed[key], seen[key] = now, state
            workers = self.aggregates.get(name)
            if workers is not None:
                for document in sorted(before | now):
                    workers.enqueue(("", document))

        return _Feeder(name, on_event)

    def informer_of(self, kind: str) -> Informer | None:
        controller = self.controllers.get(kind)
        return controller.informer if controller is not None else self.watches.get(kind)

    def note_own_write(self, kind: str, obj: JSON) -> None:
        controller = self.controllers.get(kind)
        if controller is not None:
            controller.note_own_write(obj)

    def enqueue(self, ref: Ref) -> None:
        """Queue an object of a kind, or a document of an aggregate (`Ref(<aggregate's name>, "", <document>)`)."""
        controller = self.controllers.get(ref.kind)
        if controller is not None:
            controller.enqueue((ref.namespace, ref.name))
        elif (workers := self.aggregates.get(ref.kind)) is not None:
            workers.enqueue((ref.namespace, ref.name))

    def queued(self, ref: Ref) -> bool:
        """Whether the object waits in its kind's queue for the next free worker (not backing off after a failure)."""
        controller = self.controllers.get(ref.kind)
        return controller is not None and controller.queue.is_queued((ref.namespace, ref.name))

    def _enqueue_member(self, member: Member) -> None:
        self.enqueue(Ref(*member))

    def _open_round(self, kind: str, group: str) -> None:
        registration = self.registrations.get(kind)
        if registration is not None and registration.open_drift_round is not None:
            registration.open_drift_round(group)

    def naming(self, kind: str, obj: JSON) -> list[Ref]:
        """The objects that name `obj`, of `kind`, through an IndexLink: found in their kinds' indexes."""
        informer = self.informer_of(kind)
        found: list[Ref] = []
        for naming_kind, registration in self.registrations.items():
            for link in registration.reconciler.links():
                if link.kind != kind:
                    continue
                values_of = None if informer is None else informer.indexers.get(link.by)
                naming_informer = self.informer_of(naming_kind)
                if values_of is None or naming_informer is None:
                    continue
                for value in values_of(obj):
                    found.extend(Ref(naming_kind, *key_of(o)) for o in naming_informer.by_index(link.index, value))
        return found

    def _named(self, link: IndexLink, value: str) -> list[Ref]:
        informer = self.informer_of(link.kind)
        return [Ref(link.kind, *key_of(o)) for o in ([] if informer is None else informer.by_index(link.by, value))]

    def _indexer(self, kind: str, registration: Registration) -> Callable[[EventType, JSON], None]:
        reconciler = registration.reconciler
        parents_of = reconciler.parents_of
        serving_state = reconciler.serving_state
        indexes = reconciler.indexes()
        links = [(link, indexes[link.index]) for link in reconciler.links()]
        served: dict[Ref, object] = {}
        named: dict[Ref, frozenset[tuple[IndexLink, str]]] = {}
        self.named[kind] = named

        def on_event(event: EventType, obj: JSON) -> None:
            key = key_of(obj)
            ref = Ref(kind, *key)
            if links:
                now = frozenset(
                    () if event == "DELETED" else ((link, v) for link, values_of in links for v in values_of(obj))
                )
                before = named.pop(ref, frozenset())
                if now:
                    named[ref] = now
                for link, value in before - now:
                    for target in self._named(link, value):
                        self.enqueue(target)  # what waits for this object to stop naming it may go on
            if event == "DELETED":
                for parent in self.index.remove(ref):
                    self.enqueue(parent)  # a parent waiting with InUse may go on now
                for watcher in (self.secrets, self.configmaps):
                    watcher.reference(ref, [])
                self.drift.forget((kind, *key))
                served.pop(ref, None)
            else:
                parents = parents_of(obj)
                for lost in self.index.set_parents(ref, parents):
                    self.enqueue(lost)
                self.secrets.reference(ref, [(p.namespace, p.name) for p in parents if p.kind == SECRET_KIND])
                self.configmaps.reference(ref, [(p.namespace, p.name) for p in parents if p.kind == CONFIGMAP_KIND])
                state = serving_state(obj)
                if served.get(ref, _UNSEEN) == state:
                    return  # nothing its children read has changed (a status echo, a Ready flip for a 503)
                served[ref] = state
            for child in self.index.children(ref):
                self.enqueue(child)
            for naming in self.naming(kind, obj):
                self.enqueue(naming)

        return on_event

    def _referenced_changed(self, kind: str) -> Callable[[Key], None]:
        def changed(key: Key) -> None:
            for child in self.index.children(Ref(kind, *key)):
                self.enqueue(child)

        return changed

    def _observer(self, kind: str, registration: Registration) -> Observer:
        def observe(key: Key, outcome: Outcome) -> None:
            if not outcome.synced:
                return
            group = None
            if registration.drift_group is not None:
                raw = self.controllers[kind].informer.get(key[1], key[0] or None)
                group = None if raw is None else registration.drift_group(raw)
            self.drift.plan((kind, *key), group)

        return observe

    # ---- running -----------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="manager")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self.elector is not None and self.leading:
            await self.elector.release()

    @property
    def alive(self) -> bool:
        """False when a background task died: /healthz fails and the kubelet restarts the process."""
        if self._task is None or self._task.done():
            return False
        if not self.leading:
            return True
        return (
            all(c.alive for c in self.controllers.values())
            and all(a.alive for a in self.aggregates.values())
            and all(w.alive for w in self.watches.values())
        )

    @property
    def ready(self) -> bool:
        return self.synced if self.leading else self._task is not None and not self._task.done()

    async def _run(self) -> None:
        if not self.leader_elect:
            await self._lead()
            return
        self.elector = LeaderElector(
            self.kube,
            self.namespace,
            self.lease_name,
            self.identity,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
        )
        while True:
            # Losing the lease stops the workers; the process then campaigns again as a standby.
            await self.elector.run(self._lead)

    async def _lead(self) -> None:
        self.leading = True
        metrics.LEADER.labels(self.lease_name).set(1)
        try:
            for controller in self.controllers.values():
                controller.start_informer()
            for informer in self.watches.values():
                informer.start()
            await asyncio.gather(
                *(c.informer.synced.wait() for c in self.controllers.values()),
                *(w.synced.wait() for w in self.watches.values()),
            )
            # The Secrets the accounts reference are watched once the accounts are known: wait for them too, so
            # that no first reconcile reports a Secret missing that is merely not listed yet.
            await asyncio.gather(
                *(w.wait_synced(k, timeout=30) for w in (self.secrets, self.configmaps) for k in w.watched),
                return_exceptions=True,
            )
            self.synced = True
            for workers in (*self.controllers.values(), *self.aggregates.values()):
                workers.start_workers()
            self.drift.start()
            log.info("controllers started", extra={"kinds": sorted(self.controllers), "identity": self.identity})
            trimmer = asyncio.create_task(self._trim_after_bursts(), name="trim-after-bursts")
            try:
                while True:
                    await asyncio.sleep(self.resync_period)
                    for controller in self.controllers.values():
                        for obj in controller.informer.list():
                            controller.enqueue(key_of(obj))
            finally:
                trimmer.cancel()
                await asyncio.gather(trimmer, return_exceptions=True)
        finally:
            self.leading = False
            self.synced = False
            metrics.LEADER.labels(self.lease_name).set(0)
            self.drift.shutdown()
            await asyncio.gather(
                *(c.stop() for c in (*self.controllers.values(), *self.aggregates.values())),
                *(w.stop() for w in self.watches.values()),
                return_exceptions=True,
            )
            await self.secrets.stop()
            await self.configmaps.stop()
            # Fresh informers and queues for a later term: the old ones were shut down.
            for kind in list(self.controllers):
                registration = self.registrations[kind]
                del self.controllers[kind]
                self.register(registration)
            self.watches.clear()
            for spec in list(self.watch_specs.values()):
                self.watch(spec)
            for reconciler in list(self.aggregate_reconcilers.values()):
                self.register_aggregate(reconciler)

    async def _trim_after_bursts(self) -> None:
        """Once the queues have drained after work, give the heap's free memory back (`app.memory.trim_heap`): a
        bulk apply or a restart leaves tens of MiB free but resident otherwise. Looked at every `TRIM_CHECK`
        seconds; trimmed again only after `TRIM_AFTER` more reconciles."""
        trimmed_at = 0
        while True:
            await asyncio.sleep(TRIM_CHECK)
            workers = (*self.controllers.values(), *self.aggregates.values())
            finished = sum(w.finished for w in workers)
            if finished - trimmed_at < TRIM_AFTER or not all(w.queue.idle for w in workers):
                continue
            trimmed_at = finished
            await asyncio.to_thread(trim_heap)


def _input_state(obj: JSON) -> object:
    """What an aggregate's input contributes: all of it but its status and the server's bookkeeping."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields")}
    return repr(({k: v for k, v in obj.items() if k not in ("status", "metadata")}, sorted(meta.items())))
