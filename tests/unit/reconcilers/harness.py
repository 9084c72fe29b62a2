"""The lifecycle in one process: real kinds and the real Cloudflare client against the emulator (in process), and a
Kubernetes API held in memory that can "crash" the controller at any write, as a SIGKILL would.

A crash is `Crash`, a BaseException, so no `except Exception` in the code under test can swallow it. After a crash
the test builds a new Runtime from what the API server stored, exactly as a restarted Pod starts from its LIST.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.cloudflare.http import HttpConfig
from app.cloudflare.session import CloudflareSession
from app.emulator import create_app
from app.kube.client import JSON, JSON_PATCH, KubeError, ResourceType
from app.kube.index import DependencyIndex, Ref
from app.kube.informer import Informer, key_of
from reconcilers.context import Context
from reconcilers.lifecycle import ManagedKind, merge_patch

TOKEN = "harness-token-0123456789abcdef"
ACCOUNT_ID = "a" * 32


class Crash(BaseException):
    """The controller process dies here."""


def apply_merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            apply_merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


@dataclass
class MemoryKube:
    """The part of the API server the lifecycle writes to: merge patches of metadata and status, the finalizer's
    JSON patch. `crash_at` kills the process at that write (1-based), before or after the server applied it."""

    objects: dict[tuple[str, str, str], JSON] = field(default_factory=dict)
    writes: int = 0
    crash_at: int | None = None
    crash_after_apply: bool = True
    version: int = 100

    def add(self, obj: JSON) -> JSON:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{meta['name']}")
        meta.setdefault("generation", 1)
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        self.objects[(obj["kind"], meta.get("namespace") or "", meta["name"])] = obj
        return copy.deepcopy(obj)

    def get(self, kind: str, name: str, namespace: str = "") -> JSON | None:
        found = self.objects.get((kind, namespace, name))
        return None if found is None else copy.deepcopy(found)

    async def create(self, rt: ResourceType, body: JSON, namespace: str | None = None) -> JSON:
        """POST (the controller creates Secrets): refused with 409 if the name is taken."""
        self.writes += 1
        crash = self.crash_at is not None and self.writes >= self.crash_at
        if crash and not self.crash_after_apply:
            raise Crash
        name = body["metadata"]["name"]
        if (rt.kind, namespace or "", name) in self.objects:
            raise KubeError(409, "AlreadyExists", f"{rt.plural} {name!r} already exists")
        created = self.add({**copy.deepcopy(body), "kind": rt.kind})
        if crash:
            raise Crash
        return created

    async def patch(
        self,
        rt: ResourceType,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        content_type: str = "",
    ) -> JSON:
        self.writes += 1
        crash = self.crash_at is not None and self.writes >= self.crash_at
        if crash and not self.crash_after_apply:
            raise Crash
        key = (rt.kind, namespace or "", name)
        obj = self.objects[key]
        if content_type == JSON_PATCH:
            for op in patch:
                if op["op"] == "remove" and op["path"].startswith("/metadata/finalizers/"):
                    obj["metadata"]["finalizers"].pop(int(op["path"].rsplit("/", 1)[1]))
        else:
            meta_patch = patch.get("metadata") or {}
            wanted = meta_patch.get("resourceVersion")
            if wanted is not None and wanted != obj["metadata"]["resourceVersion"]:
                raise AssertionError("conflict: the lifecycle wrote with a stale resourceVersion")
            if subresource == "status":
                apply_merge(obj.setdefault("status", {}), patch.get("status") or {})
            else:
                apply_merge(obj["metadata"], {k: v for k, v in meta_patch.items() if k != "resourceVersion"})
                if not rt.group:  # a core object (a Secret): its data as well
                    apply_merge(obj, {k: v for k, v in patch.items() if k not in ("metadata", "status")})
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        if obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get("finalizers"):
            del self.objects[key]
        if crash:
            raise Crash
        return copy.deepcopy(obj)


class NoEvents:
    async def record(self, obj: JSON, **_: Any) -> None:
        return None


@dataclass
class MemorySecrets:
    secrets: dict[tuple[str, str], JSON]

    def get(self, key: tuple[str, str]) -> JSON | None:
        return self.secrets.get(key)

    async def wait_synced(self, key: tuple[str, str], timeout: float = 10.0) -> None:
        return None


@dataclass
class KubeSecrets:
    """The Secrets as the API server holds them (the controller writes some: a Tunnel's token)."""

    kube: MemoryKube

    def get(self, key: tuple[str, str]) -> JSON | None:
        return self.kube.get("Secret", key[1], key[0])

    async def wait_synced(self, key: tuple[str, str], timeout: float = 10.0) -> None:
        return None


def emulator_state(zones: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "accounts": [{"id": ACCOUNT_ID, "name": "harness"}],
        "tokens": [{"name": "t", "value": TOKEN, "permissions": ["*"]}],
        "zones": zones,
    }


class Cloudflare:
    """The emulator in process and a session whose clients reach it."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.app = create_app(state)
        transport = httpx.ASGITransport(app=self.app)
        self.session = CloudflareSession(HttpConfig(base_url="http://emulator/client/v4"), transport=transport)
        self.http = httpx.AsyncClient(transport=transport, base_url="http://emulator/client/v4")

    async def get(self, path: str, **params: Any) -> Any:
        reply = await self.http.get(path, params=params, headers={"Authorization": f"Bearer {TOKEN}"})
        body = reply.json()
        assert body["success"], body
        return body["result"]

    async def aclose(self) -> None:
        await self.http.aclose()
        await self.session.aclose()


@dataclass
class Runtime:
    """One life of the controller process: caches listed from `kube`, one instance of each kind."""

    kube: MemoryKube
    cloudflare: Cloudflare
    kinds: list[type[ManagedKind]]  # type: ignore[type-arg]
    secrets: MemorySecrets | KubeSecrets
    informers: dict[str, Informer] = field(default_factory=dict)
    reconcilers: dict[str, ManagedKind] = field(default_factory=dict)  # type: ignore[type-arg]
    enqueued: list[Ref] = field(default_factory=list)

    def __post_init__(self) -> None:
        index = DependencyIndex()
        ctx = Context(
            kube=self.kube,  # type: ignore[arg-type]
            recorder=NoEvents(),  # type: ignore[arg-type]
            secrets=self.secrets,  # type: ignore[arg-type]
            index=index,
            cloudflare=lambda token: self.cloudflare.session.client(token),
            informer_of=self.informers.get,
            enqueue=self.enqueued.append,
        )
        for kind in self.kinds:
            rt = kind.resource_type()
            informer = Informer(self.kube, rt)  # type: ignore[arg-type]
            for name, indexer in kind.indexes().items():
                informer.add_index(name, indexer)
            for (stored_kind, _, _), obj in self.kube.objects.items():
                if stored_kind == rt.kind:
                    informer.put(copy.deepcopy(obj))
            self.informers[rt.kind] = informer
            self.reconcilers[rt.kind] = kind(ctx)
        for (stored_kind, namespace, name), obj in self.kube.objects.items():
            reconciler = self.reconcilers.get(stored_kind)
            if reconciler is not None:
                index.set_parents(Ref(stored_kind, namespace, name), reconciler.parents_of(obj))

    def sync(self, kind: str) -> None:
        """What the watch would deliver: the informer catches up with the API server."""
        informer = self.informers[kind]
        for key in list(informer.cache):
            if self.kube.get(kind, key[1], key[0]) is None:
                informer.pop(key)
        for (stored_kind, _, _), obj in self.kube.objects.items():
            if stored_kind == kind:
                informer.put(copy.deepcopy(obj))

    async def reconcile(self, kind: str, name: str, namespace: str = "") -> Any:
        self.sync(kind)
        return await self.reconcilers[kind].reconcile((namespace, name))


def ready(obj: JSON, **status: Any) -> JSON:
    obj = copy.deepcopy(obj)
    obj["status"] = {
        **status,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Synced",
                "message": "",
                "lastTransitionTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        ],
    }
    return obj


def mark_deleted(kube: MemoryKube, kind: str, name: str, namespace: str = "") -> None:
    obj = kube.objects[(kind, namespace, name)]
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"


Check = Callable[[Runtime], Any]
__all__ = ["Crash", "MemoryKube", "Runtime", "key_of", "merge_patch"]
