"""Informers: LIST, then WATCH from that resourceVersion with bookmarks, keeping a cache the reconcilers read.

A watch that ends normally resumes from the last resourceVersion seen (bookmarks keep it fresh, so a quiet
collection does not fall out of the server's window); `410 Gone` means the window was missed and forces a relist;
any other failure reconnects with capped exponential back-off. After a relist, objects that vanished while the
watch was down are reported as deleted, so no handler misses a deletion.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from app import multimap
from app.kube.client import JSON, KubeClient, KubeError, ResourceType

log = logging.getLogger(__name__)

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
Handler = Callable[[EventType, JSON], Awaitable[None] | None]
Key = tuple[str, str]  # (namespace or "", name)
Indexer = Callable[[JSON], Iterable[str]]
"""The values an object is found under in one index (a claim label's value, a referenced name...)."""

LIST_PAGE = 500
_REVISIONS = itertools.count(1)


def compact(value: Any) -> Any:
    """The same JSON value sharing its keys and short strings with every other cached object.

    Each watch event is decoded on its own, so a thousand cached objects hold a thousand copies of "metadata",
    "namespace", "Ready", "Synced"... Interning them roughly halves what a cached object costs."""
    if isinstance(value, dict):
        return {sys.intern(k) if isinstance(k, str) else k: compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compact(v) for v in value]
    if isinstance(value, str) and len(value) <= 64:
        return sys.intern(value)
    return value


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def strip(obj: JSON) -> JSON:
    """`obj` without what the API server repeats in every object and kflare never reads: its `managedFields` (often
    the larger part of an object) and the annotation client-side `kubectl apply` keeps, a whole copy of the object
    as it was applied. In place, so that the copy the caller goes on with (a write's reply) is the cached one's
    twin; kflare's writes are merge patches of the keys they change, so what is stripped is never written back."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(LAST_APPLIED, None)
    return obj


def key_of(obj: JSON) -> Key:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


@dataclass
class Informer:
    """Watches one resource type (optionally one namespace, or one object by field selector)."""

    kube: KubeClient
    rt: ResourceType
    namespace: str | None = None
    field_selector: str | None = None
    watch_timeout: int = 300
    handlers: list[Handler] = field(default_factory=list)
    cache: dict[Key, JSON] = field(default_factory=dict)
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    resource_version: str = ""
    relists: int = 0
    revision: int = field(default_factory=lambda: next(_REVISIONS))
    """Changes with every change of the cache, and is never shared by two caches (nor two states of one): what
    derives from caches can be remembered per their revisions."""
    indexers: dict[str, Indexer] = field(default_factory=dict)
    unserved_retry: float = 60.0
    """How often an optional API that is not served is asked for again."""
    _indexed: dict[str, multimap.MultiMap[str, Key]] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)

    def add_index(self, name: str, indexer: Indexer) -> None:
        """Keep the cache findable by `indexer`'s values, so a lookup costs O(1) instead of a scan of the cache."""
        self.indexers[name] = indexer
        table: multimap.MultiMap[str, Key] = {}
        for key, obj in self.cache.items():
            for value in indexer(obj):
                multimap.add(table, value, key)
        self._indexed[name] = table

    def by_index(self, name: str, value: str) -> list[JSON]:
        keys = multimap.members(self._indexed.get(name, {}), value)
        return [self.cache[k] for k in sorted(keys) if k in self.cache]

    def index_values(self, name: str) -> set[str]:
        """The values the index holds objects under (a value none holds any longer is forgotten)."""
        return set(self._indexed.get(name, {}))

    def put(self, obj: JSON) -> JSON:
        """Store `obj` in the cache (a watch event, or the reply of the controller's own write), stripped of what
        kflare never reads (`strip`); returns the cached copy."""
        key = key_of(obj)
        self._unindex(key)
        self.revision = next(_REVISIONS)
        obj = self.cache[key] = compact(strip(obj))
        for name, indexer in self.indexers.items():
            table = self._indexed.setdefault(name, {})
            for value in indexer(obj):
                multimap.add(table, value, key)
        return obj

    def pop(self, key: Key) -> JSON | None:
        self._unindex(key)
        self.revision = next(_REVISIONS)
        return self.cache.pop(key, None)

    def _unindex(self, key: Key) -> None:
        old = self.cache.get(key)
        if old is None:
            return
        for name, indexer in self.indexers.items():
            table = self._indexed.get(name, {})
            for value in indexer(old):
                multimap.discard(table, value, key)

    def get(self, name: str, namespace: str | None = None) -> JSON | None:
        return self.cache.get((namespace or "", name))

    def list(self, namespace: str | None = None) -> list[JSON]:
        if namespace is None:
            return list(self.cache.values())
        return [o for (ns, _), o in self.cache.items() if ns == namespace]

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"informer:{self.rt.plural}:{self.field_selector or ''}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _notify(self, kind: EventType, obj: JSON) -> None:
        for handler in self.handlers:
            try:
                result = handler(kind, obj)
                if result is not None:
                    await result
            except Exception:
                log.exception("informer handler failed", extra={"resource": self.rt.plural})

    async def _relist(self) -> None:
        items: dict[Key, JSON] = {}
        cont = ""
        while True:
            query: dict[str, str | int | bool] = {"limit": LIST_PAGE}
            if cont:
                query["continue"] = cont
            if self.field_selector:
                query["fieldSelector"] = self.field_selector
            page = await self.kube.list(self.rt, self.namespace, **query)
            for obj in page.get("items") or []:
                # LIST items carry no kind; handlers and reconcilers want self-describing objects.
                obj.setdefault("kind", self.rt.kind)
                obj.setdefault("apiVersion", self.rt.api_version)
                items[key_of(obj)] = compact(strip(obj))
            cont = page.get("metadata", {}).get("continue") or ""
            if not cont:
                self.resource_version = page["metadata"]["resourceVersion"]
                break
        self.relists += 1
        log.debug("listed", extra={"resource": self.rt.plural, "relists": self.relists, "items": len(items)})
        old, self.cache = self.cache, items
        self.revision = next(_REVISIONS)
        for name, indexer in list(self.indexers.items()):
            self.add_index(name, indexer)
        for key, obj in items.items():
            previous = old.get(key)
            if previous is None:
                await self._notify("ADDED", obj)
            elif previous["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                await self._notify("MODIFIED", obj)
        for key, obj in old.items():
            if key not in items:
                await self._notify("DELETED", obj)
        self.synced.set()

    async def _watch(self) -> None:
        async for event in self.kube.watch(
            self.rt,
            namespace=self.namespace,
            resource_version=self.resource_version,
            timeout_seconds=self.watch_timeout,
            field_selector=self.field_selector,
        ):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                raise KubeError(int(obj.get("code", 500)), str(obj.get("reason", "")), str(obj.get("message", "")))
            rv = obj.get("metadata", {}).get("resourceVersion")
            if rv:
                self.resource_version = rv
            if kind == "BOOKMARK":
                continue
            obj.setdefault("kind", self.rt.kind)
            obj.setdefault("apiVersion", self.rt.api_version)
            key = key_of(obj)
            if kind == "DELETED":
                self.pop(key)
                await self._notify("DELETED", obj)
            elif kind in ("ADDED", "MODIFIED"):
                # Handlers get the cached copy: what they keep of it (names in references) is then shared with it.
                await self._notify(kind, self.put(obj))

    async def _run(self) -> None:
        failures = 0
        need_list = True
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                await self._watch()
                failures = 0  # a watch that ran to its timeout is healthy: resume from the last version
            except asyncio.CancelledError:
                raise
            except KubeError as exc:
                if exc.gone:
                    log.info("watch window expired, relisting", extra={"resource": self.rt.plural})
                    need_list = True
                    continue
                if exc.not_found and self.rt.optional:
                    if not self.synced.is_set():
                        log.warning(
                            "%s.%s is not served by this cluster: taken as empty until it is",
                            self.rt.plural,
                            self.rt.group,
                            extra={"resource": self.rt.plural},
                        )
                        self.synced.set()
                    need_list = True
                    await asyncio.sleep(self.unserved_retry)
                    continue
                failures += 1
                log.warning("watch failed: %s", exc, extra={"resource": self.rt.plural, "failures": failures})
            except (httpx.HTTPError, TimeoutError, ValueError, OSError) as exc:
                failures += 1
                log.warning("watch connection broke: %r", exc, extra={"resource": self.rt.plural, "failures": failures})
            if failures:
                # 0.1 s doubling to 30 s, with jitter so a restarted API server is not hit by every watch at once.
                delay = min(30.0, 0.1 * 2 ** min(failures, 10)) * random.uniform(0.5, 1.0)
                await asyncio.sleep(delay)
                if failures >= 3:
                    need_list = True  # a long outage may have outlived the watch window anyway
