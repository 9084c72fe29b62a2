"""What every reconciler may use: the Kubernetes client and caches, the Cloudflare clients, policy settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.api.constants import DeletionPolicy
from app.cloudflare.client import CloudflareClient
from app.kube.client import JSON, KubeClient
from app.kube.events import EventRecorder
from app.kube.index import DependencyIndex, Ref
from app.kube.informer import Informer
from app.kube.referenced import ReferencedObjects


@dataclass
class Context:
    kube: KubeClient
    recorder: EventRecorder
    secrets: ReferencedObjects
    """The Secrets resources reference (tokens, binding values): watched one by one, and only those."""
    index: DependencyIndex
    cloudflare: Callable[[str], CloudflareClient]
    """A client for an API token; one per token, sharing the process's connection pool and the token's budget."""
    default_deletion_policy: DeletionPolicy = DeletionPolicy.DELETE
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
    shared: dict[str, Any] = field(default_factory=dict)
    """State several kinds' reconcilers share for one life of the manager (the ruleset engine's entry points)."""

    def cached(self, kind: str, name: str, namespace: str | None = None) -> JSON | None:
        informer = self.informer_of(kind)
        return None if informer is None else informer.get(name, namespace)

    def cached_all(self, kind: str) -> list[JSON]:
        informer = self.informer_of(kind)
        return [] if informer is None else informer.list()
