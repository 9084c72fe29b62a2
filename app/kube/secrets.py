"""Watches only the Secrets that something references, one small watch per Secret.

Watching every Secret in the cluster would make the controller's memory and CPU grow with Secrets it never reads
(certificates, Helm release records...). Instead, each referenced Secret gets its own informer, filtered on the API
server by `metadata.name`, started when the first reference appears and stopped when the last one goes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from app.kube.client import JSON, SECRETS, KubeClient
from app.kube.informer import EventType, Informer, Key

log = logging.getLogger(__name__)

SecretKey = Key  # (namespace, name)


@dataclass
class SecretWatcher:
    kube: KubeClient
    on_change: Callable[[SecretKey], None]
    _informers: dict[SecretKey, Informer] = field(default_factory=dict)
    _referrers: dict[SecretKey, set[object]] = field(default_factory=dict)

    def get(self, key: SecretKey) -> JSON | None:
        informer = self._informers.get(key)
        return None if informer is None else informer.get(key[1], key[0])

    def synced(self, key: SecretKey) -> bool:
        informer = self._informers.get(key)
        return informer is not None and informer.synced.is_set()

    async def wait_synced(self, key: SecretKey, timeout: float = 10.0) -> None:
        informer = self._informers.get(key)
        if informer is not None:
            await asyncio.wait_for(informer.synced.wait(), timeout)

    @property
    def watched(self) -> set[SecretKey]:
        return set(self._informers)

    def reference(self, referrer: object, key: SecretKey | None) -> None:
        """Record that `referrer` now references `key` (or nothing), starting and stopping watches to match."""
        for current, referrers in list(self._referrers.items()):
            if current != key and referrer in referrers:
                referrers.discard(referrer)
                if not referrers:
                    self._drop(current)
        if key is None:
            return
        self._referrers.setdefault(key, set()).add(referrer)
        if key not in self._informers:
            informer = Informer(self.kube, SECRETS, namespace=key[0], field_selector=f"metadata.name={key[1]}")

            def changed(_: EventType, __: JSON, key: SecretKey = key) -> None:
                self.on_change(key)

            informer.add_handler(changed)
            self._informers[key] = informer
            informer.start()

    def _drop(self, key: SecretKey) -> None:
        self._referrers.pop(key, None)
        informer = self._informers.pop(key, None)
        if informer is not None:
            asyncio.get_running_loop().create_task(informer.stop(), name=f"stop-secret-watch:{key[0]}/{key[1]}")

    async def stop(self) -> None:
        informers = list(self._informers.values())
        self._informers.clear()
        self._referrers.clear()
        await asyncio.gather(*(i.stop() for i in informers), return_exceptions=True)
