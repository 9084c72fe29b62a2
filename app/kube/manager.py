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
from typing import Protocol

from app.kube import metrics
from app.kube.client import JSON, KubeClient, ResourceType
from app.kube.controller import Controller, Observer, Outcome, Reconciler
from app.kube.drift import DriftScheduler, Member
from app.kube.events import EventRecorder
from app.kube.index import DependencyIndex, Ref
from app.kube.informer import EventType, Indexer, Informer, Key, key_of
from app.kube.leader import LeaderElector
from app.kube.secrets import SecretWatcher

log = logging.getLogger(__name__)

SECRET_KIND = "Secret"


class KindReconciler(Reconciler, Protocol):
    @classmethod
    def resource_type(cls) -> ResourceType: ...

    @classmethod
    def parents_of(cls, raw: JSON) -> list[Ref]: ...

    @classmethod
    def indexes(cls) -> dict[str, Indexer]: ...


@dataclass
class Registration:
    reconciler: KindReconciler
    drift_group: Callable[[JSON], str | None] | None = None
    open_drift_round: Callable[[str], None] | None = None


def default_identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass
class Manager:
    kube: KubeClient
    namespace: str
    identity: str = field(default_factory=default_identity)
    leader_elect: bool = False
    lease_name: str = "kflare-leader"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    workers: int = 4
    reconcile_timeout: float = 300.0
    drift_interval: float = 0.0
    resync_period: float = 36000.0
    controllers: dict[str, Controller] = field(default_factory=dict)
    registrations: dict[str, Registration] = field(default_factory=dict)
    index: DependencyIndex = field(default_factory=DependencyIndex)
    secrets: SecretWatcher = field(init=False)
    recorder: EventRecorder = field(init=False)
    drift: DriftScheduler = field(init=False)
    elector: LeaderElector | None = None
    leading: bool = False
    synced: bool = False
    _task: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.secrets = SecretWatcher(self.kube, self._secret_changed)
        self.recorder = EventRecorder(self.kube, self.identity)
        self.drift = DriftScheduler(self.drift_interval, self._enqueue_member, self._open_round)

    # ---- wiring ------------------------------------------------------------------------------------------------

    def register(self, registration: Registration) -> Controller:
        rt = registration.reconciler.resource_type()
        controller = Controller(
            self.kube, rt, registration.reconciler, workers=self.workers, reconcile_timeout=self.reconcile_timeout
        )
        for name, indexer in registration.reconciler.indexes().items():
            controller.informer.add_index(name, indexer)
        controller.informer.add_handler(self._indexer(rt.kind, registration))
        controller.observers.append(self._observer(rt.kind, registration))
        self.controllers[rt.kind] = controller
        self.registrations[rt.kind] = registration
        return controller

    def informer_of(self, kind: str) -> Informer | None:
        controller = self.controllers.get(kind)
        return None if controller is None else controller.informer

    def note_own_write(self, kind: str, obj: JSON) -> None:
        controller = self.controllers.get(kind)
        if controller is not None:
            controller.note_own_write(obj)

    def enqueue(self, ref: Ref) -> None:
        controller = self.controllers.get(ref.kind)
        if controller is not None:
            controller.enqueue((ref.namespace, ref.name))

    def _enqueue_member(self, member: Member) -> None:
        self.enqueue(Ref(*member))

    def _open_round(self, kind: str, group: str) -> None:
        registration = self.registrations.get(kind)
        if registration is not None and registration.open_drift_round is not None:
            registration.open_drift_round(group)

    def _indexer(self, kind: str, registration: Registration) -> Callable[[EventType, JSON], None]:
        parents_of = registration.reconciler.parents_of

        def on_event(event: EventType, obj: JSON) -> None:
            key = key_of(obj)
            ref = Ref(kind, *key)
            if event == "DELETED":
                for parent in self.index.remove(ref):
                    self.enqueue(parent)  # a parent waiting with InUse may go on now
                self.secrets.reference(ref, None)
                self.drift.forget((kind, *key))
            else:
                parents = parents_of(obj)
                for lost in self.index.set_parents(ref, parents):
                    self.enqueue(lost)
                secret = next((p for p in parents if p.kind == SECRET_KIND), None)
                self.secrets.reference(ref, None if secret is None else (secret.namespace, secret.name))
            for child in self.index.children(ref):
                self.enqueue(child)

        return on_event

    def _secret_changed(self, key: Key) -> None:
        for child in self.index.children(Ref(SECRET_KIND, *key)):
            self.enqueue(child)

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
        return not self.leading or all(c.alive for c in self.controllers.values())

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
            await asyncio.gather(*(c.informer.synced.wait() for c in self.controllers.values()))
            # The Secrets the accounts reference are watched once the accounts are known: wait for them too, so
            # that no first reconcile reports a Secret missing that is merely not listed yet.
            await asyncio.gather(
                *(self.secrets.wait_synced(k, timeout=30) for k in self.secrets.watched), return_exceptions=True
            )
            self.synced = True
            for controller in self.controllers.values():
                controller.start_workers()
            self.drift.start()
            log.info("controllers started", extra={"kinds": sorted(self.controllers), "identity": self.identity})
            while True:
                await asyncio.sleep(self.resync_period)
                for controller in self.controllers.values():
                    for obj in controller.informer.list():
                        controller.enqueue(key_of(obj))
        finally:
            self.leading = False
            self.synced = False
            metrics.LEADER.labels(self.lease_name).set(0)
            self.drift.shutdown()
            await asyncio.gather(*(c.stop() for c in self.controllers.values()), return_exceptions=True)
            await self.secrets.stop()
            for kind in list(self.controllers):
                # Fresh informers and queues for a later term: the old ones were shut down.
                registration = self.registrations[kind]
                del self.controllers[kind]
                self.register(registration)
