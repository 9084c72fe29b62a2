"""Watches only the Secrets and ConfigMaps that something references, one small watch per object.

Watching every Secret in the cluster would make the controller's memory and CPU grow with Secrets it never reads
(certificates, Helm release records...). Instead, each referenced object gets its own informer, filtered on the API
server by `metadata.name`, started when the first reference appears and stopped when the last one goes. One
resource may reference several (a Worker's binding Secrets and its script's ConfigMap).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from app.kube.client import JSON, SECRETS, KubeClient, ResourceType
from app.kube.informer import EventType, Informer, Key

log = logging.getLogger(__name__)

ObjectKey = Key  # (namespace, name)


@dataclass
class ReferencedObjects:
    """The referenced objects of one core kind (Secrets, or ConfigMaps)."""

    kube: KubeClient
    on_change: Callable[[ObjectKey], None]
    rt: ResourceType = SECRETS
    readable: frozenset[str] | None = None
    """The namespaces whose objects of this kind kflare was given access to (the chart's `rbac.namespaces`); None:
    every namespace. An object elsewhere is never watched: the watch would only be refused."""
    _informers: dict[ObjectKey, Informer] = field(default_factory=dict)
    _referrers: dict[ObjectKey, set[object]] = field(default_factory=dict)

    def get(self, key: ObjectKey) -> JSON | None:
        informer = self._informers.get(key)
        return None if informer is None else informer.get(key[1], key[0])

    def synced(self, key: ObjectKey) -> bool:
        informer = self._informers.get(key)
        return informer is not None and informer.synced.is_set()

    async def wait_synced(self, key: ObjectKey, timeout: float = 10.0) -> None:
        informer = self._informers.get(key)
        if informer is not None:
            await asyncio.wait_for(informer.synced.wait(), timeout)

    def revision(self, keys: Iterable[ObjectKey]) -> tuple[int, ...]:
        """The cache revisions of the watches of `keys` (0 for one not watched): what derives from those objects
        can be remembered per it."""
        return tuple(
            informer.revision if (informer := self._informers.get(key)) is not None else 0 for key in sorted(keys)
        )

    def may_read(self, namespace: str) -> bool:
        return self.readable is None or namespace in self.readable

    @property
    def watched(self) -> set[ObjectKey]:
        return set(self._informers)

    def reference(self, referrer: object, keys: Iterable[ObjectKey]) -> None:
        """Record that `referrer` now references `keys` (none, one or several), starting and stopping watches."""
        wanted = set(keys)
        for current, referrers in list(self._referrers.items()):
            if current not in wanted and referrer in referrers:
                referrers.discard(referrer)
                if not referrers:
                    self._drop(current)
        for key in wanted:
            self._watch(referrer, key)

    def _watch(self, referrer: object, key: ObjectKey) -> None:
        self._referrers.setdefault(key, set()).add(referrer)
        if key not in self._informers and self.may_read(key[0]):
            informer = Informer(self.kube, self.rt, namespace=key[0], field_selector=f"metadata.name={key[1]}")

            def changed(_: EventType, __: JSON, key: ObjectKey = key) -> None:
                self.on_change(key)

            informer.add_handler(changed)
            self._informers[key] = informer
            informer.start()

    def _drop(self, key: ObjectKey) -> None:
        self._referrers.pop(key, None)
        informer = self._informers.pop(key, None)
        if informer is not None:
            name = f"stop-watch:{self.rt.plural}:{key[0]}/{key[1]}"
            asyncio.get_running_loop().create_task(informer.stop(), name=name)

    async def stop(self) -> None:
        informers = list(self._informers.values())
        self._informers.clear()
        self._referrers.clear()
        await asyncio.gather(*(i.stop() for i in informers), return_exceptions=True)
