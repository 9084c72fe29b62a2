"""One controller per kind: an informer feeding a work queue drained by workers that run the kind's reconciler."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from app.kube import metrics
from app.kube.client import KubeClient, KubeError, ResourceType
from app.kube.informer import EventType, Informer, Key, key_of, strip
from app.kube.workqueue import ShutDown, WorkQueue

log = logging.getLogger(__name__)

OWN_WRITES_KEPT = 6
"""A reconcile's own writes remembered per object (a create makes four): their echoes are not reconciles."""


@dataclass(frozen=True)
class Outcome:
    """What a reconcile asks of the queue: nothing, a later look, or a retry with back-off."""

    requeue_after: float | None = None
    retry: bool = False  # a retryable failure: back off exponentially per key
    failed: bool = False
    """A failure paced by `requeue_after` rather than by back-off (Cloudflare's Retry-After): still an error, so
    `controller_runtime_reconcile_errors_total` and the alert on it see rate limiting, as the deploy guide says."""
    synced: bool = False  # Cloudflare matches the spec: the drift check may be planned

    @classmethod
    def done(cls, *, synced: bool = False) -> Outcome:
        return cls(synced=synced)


class Reconciler(Protocol):
    async def reconcile(self, key: Key) -> Outcome: ...

    async def timed_out(self, key: Key, seconds: float) -> None:
        """Record that the reconcile of `key` ran out of time (the status says so)."""


Observer = Callable[[Key, Outcome], None]

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("reconcile_deadline", default=None)


def reconcile_deadline() -> float | None:
    """When the running reconcile is cut by its timeout, in the event loop's clock (None: it is not, or none runs).
    Work done on its behalf elsewhere (a DNS batch) answers before then, while the reconcile still waits for it."""
    return _DEADLINE.get()


def _resource_version(obj: Mapping[str, object]) -> str:
    meta = obj.get("metadata")
    version = meta.get("resourceVersion", "") if isinstance(meta, Mapping) else ""
    return version if isinstance(version, str) else ""


def _fingerprint(obj: Mapping[str, object]) -> int:
    """What of an object calls for a reconcile when it changes, as one number: it is kept for every object."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        meta = {}
    return hash(
        (
            meta.get("generation"),
            meta.get("deletionTimestamp"),
            repr(meta.get("labels")),
            repr(meta.get("annotations")),
            repr(meta.get("finalizers")),
        )
    )


class _Series:
    """One queue's labelled series, bound once: `labels()` takes a lock and builds a key on every call, and each
    reconcile touches a dozen series."""

    def __init__(self, name: str, queue: WorkQueue[Key]) -> None:
        self.adds = metrics.WORKQUEUE_ADDS.labels(name, name)
        self.depth = metrics.WORKQUEUE_DEPTH.labels(name, name)
        self.retries = metrics.WORKQUEUE_RETRIES.labels(name, name)
        self.queue_duration = metrics.WORKQUEUE_QUEUE_DURATION.labels(name, name)
        self.work_duration = metrics.WORKQUEUE_WORK_DURATION.labels(name, name)
        self.active = metrics.ACTIVE_WORKERS.labels(name)
        self.time = metrics.RECONCILE_TIME.labels(name)
        self.errors = metrics.RECONCILE_ERRORS.labels(name)
        self.timeouts = metrics.RECONCILE_TIMEOUTS.labels(name)
        self.success = metrics.RECONCILE_TOTAL.labels(name, "success")
        self.error = metrics.RECONCILE_TOTAL.labels(name, "error")
        self.requeue_after = metrics.RECONCILE_TOTAL.labels(name, "requeue_after")
        # Read when scraped: summing the running keys' times after every reconcile costs O(workers) each.
        metrics.WORKQUEUE_UNFINISHED.labels(name, name).set_function(lambda: sum(queue.processing_seconds()))
        metrics.WORKQUEUE_LONGEST.labels(name, name).set_function(lambda: max(queue.processing_seconds(), default=0.0))


@dataclass
class Workers:
    """A work queue drained by workers that run a reconciler, with the queue's and the reconciles' metrics.

    A kind's Controller feeds it from the kind's informer; an aggregate (one Cloudflare document fed by many
    resources, keyed by the document) feeds it from the informers of all its inputs."""

    name: str
    reconciler: Reconciler
    workers: int = 4
    reconcile_timeout: float = 300.0
    queue: WorkQueue[Key] = field(init=False)
    _series: _Series | None = field(default=None, init=False)
    observers: list[Observer] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    finished: int = field(default=0, init=False)
    """Reconciles finished since the workers started (how the manager tells a burst of work has passed)."""

    def __post_init__(self) -> None:
        self.queue = WorkQueue(self.name)

    @property
    def reconciler_kind(self) -> str:
        return self.name

    @property
    def series(self) -> _Series:
        # Bound at first use, so that a standby, which never queues anything, exports none of them.
        if self._series is None:
            self._series = _Series(self.name, self.queue)
        return self._series

    def enqueue(self, key: Key) -> None:
        self.queue.add(key)
        self.series.adds.inc()
        self.series.depth.set(self.queue.depth)

    def start_workers(self) -> None:
        metrics.MAX_CONCURRENT.labels(self.name).set(self.workers)
        # Binds every series of the queue: the counters start at 0, as controller-runtime's do, so that a rate over
        # them sees the first error.
        self.series.depth.set(self.queue.depth)
        for i in range(self.workers):
            self._tasks.append(asyncio.create_task(self._work(), name=f"worker:{self.name}:{i}"))

    async def stop(self) -> None:
        self.queue.shut_down()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    @property
    def alive(self) -> bool:
        return all(not t.done() for t in self._tasks)

    def _settle(self, key: Key) -> None:
        """After a reconcile of `key` (a Controller admits what changed meanwhile)."""

    async def _work(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            series = self.series
            series.depth.set(self.queue.depth)
            series.queue_duration.observe(self.queue.last_wait)
            series.active.inc()
            started = time.monotonic()
            try:
                await self._process(key)
            except Exception:  # a worker must outlive any bug in one reconcile
                log.exception("worker error", extra={"kind": self.reconciler_kind, "object_name": key[1]})
                self._retry(key)
            finally:
                elapsed = time.monotonic() - started
                series.active.dec()
                series.time.observe(elapsed)
                series.work_duration.observe(elapsed)
                self.queue.done(key)
                series.depth.set(self.queue.depth)
                self.finished += 1
                self._settle(key)

    async def _process(self, key: Key) -> None:
        try:
            if self.reconcile_timeout > 0:
                async with asyncio.timeout(self.reconcile_timeout) as scope:
                    deadline = _DEADLINE.set(scope.when())
                    try:
                        outcome = await self.reconciler.reconcile(key)
                    finally:
                        _DEADLINE.reset(deadline)
            else:
                outcome = await self.reconciler.reconcile(key)
        except TimeoutError:
            self.series.timeouts.inc()
            self.series.errors.inc()
            self.series.error.inc()
            await self.reconciler.timed_out(key, self.reconcile_timeout)
            self._retry(key)
            return
        except asyncio.CancelledError:
            raise
        except KubeError as error:
            if not (error.not_found or error.conflict):
                self._failed(key)
                return
            # The object went away, or changed, under a write: the ordinary race of a controller with its users.
            # The retry reads the newest copy (or finds it gone) and decides again; nothing here is a failure.
            log.info(
                "object changed or deleted during the reconcile; looked at again",
                extra={**self._where(key), "status": error.status},
            )
            self.series.requeue_after.inc()
            self._retry(key)
            return
        except Exception:
            self._failed(key)
            return
        if outcome.retry:
            self.series.errors.inc()
            self.series.error.inc()
            self._retry(key)
        elif outcome.failed:
            # The key's back-off is kept (not forgotten), so a failure after the pause still backs off further.
            self.series.errors.inc()
            self.series.error.inc()
            self.queue.add_after(key, outcome.requeue_after or 0.0)
        else:
            self.queue.forget(key)
            if outcome.requeue_after is not None:
                self.series.requeue_after.inc()
                self.queue.add_after(key, outcome.requeue_after)
            else:
                self.series.success.inc()
        for observer in self.observers:
            observer(key, outcome)

    def _where(self, key: Key) -> dict[str, str | None]:
        return {"kind": self.reconciler_kind, "namespace": key[0] or None, "object_name": key[1]}

    def _failed(self, key: Key) -> None:
        """A reconcile raised: a bug or an unexpected reply. Logged with its traceback (called in an except block)."""
        log.exception("reconcile failed", extra=self._where(key))
        self.series.errors.inc()
        self.series.error.inc()
        self._retry(key)

    def _retry(self, key: Key) -> None:
        self.queue.add_rate_limited(key)
        self.series.retries.inc()


class Controller(Workers):
    """One kind's controller: its informer feeds the queue, minus the echoes of the controller's own writes."""

    def __init__(
        self,
        kube: KubeClient,
        rt: ResourceType,
        reconciler: Reconciler,
        *,
        workers: int = 4,
        reconcile_timeout: float = 300.0,
    ) -> None:
        super().__init__(rt.kind.lower(), reconciler, workers, reconcile_timeout)
        self.kube, self.rt = kube, rt
        self._seen: dict[Key, int] = {}
        self._own: dict[Key, tuple[str, ...]] = {}
        """Versions of the controller's own writes whose echo has not arrived yet; empty for an idle object (a
        deque each was 600 bytes an object, most of a cached object's own size)."""
        self._pending: dict[Key, list[tuple[str, int]]] = {}
        self.informer = Informer(kube, rt)
        self.informer.add_handler(self._on_event)

    @property
    def reconciler_kind(self) -> str:
        return self.rt.kind

    def _on_event(self, kind: EventType, obj: dict[str, object]) -> None:
        key = key_of(obj)
        if kind == "DELETED":
            for table in (self._seen, self._own, self._pending):
                table.pop(key, None)
            return
        version = _resource_version(obj)
        fingerprint = _fingerprint(obj)
        if self.queue.is_processing(key):
            # Maybe the echo of a write whose reply the running reconcile has not read yet: decide when it ends, in
            # the watch's order (an own write's echo can carry someone else's earlier change, a deletion, which
            # must still call for a reconcile).
            self._pending.setdefault(key, []).append((version, fingerprint))
            return
        if version in self._own.get(key, ()):
            self._seen[key] = fingerprint  # the echo of this controller's own write
            self._echoed(key, version)
            return
        self._echoed(key, version)
        self._admit(key, fingerprint)

    def _echoed(self, key: Key, version: str) -> None:
        """The watch delivers an object's versions in order: own writes up to `version` have had their echo."""
        own = self._own.get(key)
        if not own:
            return
        try:
            through = int(version)
            kept = tuple(v for v in own if int(v) > through)
        except ValueError:
            kept = tuple(v for v in own if v != version)
        if kept:
            self._own[key] = kept
        else:
            del self._own[key]

    def _admit(self, key: Key, fingerprint: int) -> None:
        # Like controller-runtime's generation, label and annotation predicates: a change of status alone does
        # not call for another reconcile.
        if self._seen.get(key) == fingerprint:
            return
        self._seen[key] = fingerprint
        self.enqueue(key)

    def note_own_write(self, obj: dict[str, object]) -> None:
        """The reconcile that wrote `obj` goes on with it: its echo from the watch needs no reconcile of its own."""
        strip(obj)  # as its echo will be
        key = key_of(obj)
        version = _resource_version(obj)
        self._own[key] = (*self._own.get(key, ())[1 - OWN_WRITES_KEPT :], version)
        # What the object is known as is left to the echo: the reply also carries what others changed meanwhile (a
        # deletion while the reconcile ran), which the reconcile never acted on, and whose own event must still
        # call for another reconcile when it is settled.

    def _settle(self, key: Key) -> None:
        """After a reconcile: changes seen meanwhile that were not its own writes call for another one."""
        own = self._own.get(key, ())
        for version, fingerprint in self._pending.pop(key, []):  # in the watch's order
            if version in own:
                self._seen[key] = fingerprint
            else:
                self._admit(key, fingerprint)
            self._echoed(key, version)

    def start_informer(self) -> None:
        self.informer.start()

    async def stop(self) -> None:
        await super().stop()
        await self.informer.stop()

    @property
    def alive(self) -> bool:
        return self.informer.alive and super().alive
