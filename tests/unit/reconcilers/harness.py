"""The lifecycle in one process: real kinds and the real Cloudflare client against the emulator (in process), and a
Kubernetes API held in memory that can "crash" the controller at any write, as a SIGKILL would.

A crash is `Crash`, a BaseException, so no `except Exception` in the code under test can swallow it. After a crash
the test builds a new Runtime from what the API server stored, exactly as a restarted Pod starts from its LIST.

`MemoryKflare` drives every registered kind the way `kflare run` would be driven (the Samples of tests/kinds take
either): what a test applies is reconciled, object by object, until nothing more is written (`Runtime.settle`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime as dt
import json
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from app.api.base import GROUP, VERSION
from app.cloudflare.http import HttpConfig
from app.cloudflare.session import CloudflareSession
from app.emulator.app import EmulatorApp, create_app
from app.emulator.context import Emulator
from app.kube.client import JSON, JSON_PATCH, SECRETS, KubeError, ResourceType
from app.kube.index import DependencyIndex, Ref
from app.kube.informer import Informer, compact, key_of
from reconcilers import registry
from reconcilers.claims import CLAIM_INDEXES, CLAIMS
from reconcilers.context import Context
from reconcilers.dns_record import DNSRecordKind
from reconcilers.lifecycle import Lifecycle
from reconcilers.managed_kind import ManagedKind, build, indexes, resource_type
from reconcilers.tenancy import GRANTS
from reconcilers.writer import merge_patch
from tests.fixtures.driver import Driver, is_ready, token_data

TOKEN = "harness-token-0123456789abcdef"
ACCOUNT_ID = "a" * 32
SETTLE_PASSES = 8


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
        obj = self.objects.get(key)
        if obj is None:
            raise KubeError(404, "NotFound", f"{rt.plural} {name!r} not found")
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

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> JSON:
        """GET and DELETE (with a UID precondition) of a cluster-scoped kflare object by its path: what the
        lifecycle reads and deletes of claims."""
        *_, plural, name = path.split("/")
        kind = {"cloudflareclaims": "CloudflareClaim"}[plural]
        found = self.objects.get((kind, "", name))
        if found is None:
            raise KubeError(404, "NotFound", f"{plural} {name!r} not found")
        if method == "GET":
            return copy.deepcopy(found)
        assert method == "DELETE", method
        wanted = ((body or {}).get("preconditions") or {}).get("uid")
        if wanted is not None and wanted != found["metadata"]["uid"]:
            raise KubeError(409, "Conflict", "precondition failed: UID")
        self.writes += 1
        del self.objects[(kind, "", name)]
        return {}

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        """A user's DELETE: the object is marked for deletion while finalizers hold it, else removed at once."""
        key = (kind, namespace, name)
        obj = self.objects[key]
        if not obj["metadata"].get("finalizers"):
            del self.objects[key]
            return
        if not obj["metadata"].get("deletionTimestamp"):
            obj["metadata"]["deletionTimestamp"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            self.version += 1
            obj["metadata"]["resourceVersion"] = str(self.version)


class NoEvents:
    async def record(self, obj: JSON, **_: Any) -> None:
        return None


@dataclass
class MemorySecrets:
    secrets: dict[tuple[str, str], JSON]
    readable: frozenset[str] | None = None
    """As `ReferencedObjects.readable`: the namespaces the installation lets kflare read Secrets in (None: all)."""
    rt: ResourceType = SECRETS

    def may_read(self, namespace: str) -> bool:
        return self.readable is None or namespace in self.readable

    def get(self, key: tuple[str, str]) -> JSON | None:
        return self.secrets.get(key)

    async def wait_synced(self, key: tuple[str, str], timeout: float = 10.0) -> None:
        return None


@dataclass
class KubeSecrets:
    """The Secrets as the API server holds them (the controller writes some: a Tunnel's token)."""

    kube: MemoryKube
    readable: frozenset[str] | None = None
    """As `ReferencedObjects.readable`: the namespaces the installation lets kflare read Secrets in (None: all)."""
    rt: ResourceType = SECRETS

    def may_read(self, namespace: str) -> bool:
        return self.readable is None or namespace in self.readable

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


_IDLE_APPS: dict[str, list[FastAPI]] = {}
"""Emulator apps of closed `Cloudflare`s, by the state they were booted with. Building an app (its routes, and
their matching on the first calls) costs more than most cases' reconciles; `reset` puts one back to exactly the
objects its state seeds, with no calls, faults or spent limits."""


def _state_key(state: dict[str, Any] | None) -> str | None:
    try:
        return json.dumps(state, sort_keys=True)
    except (TypeError, ValueError):
        return None  # not plain JSON: this state gets an app of its own


def _emulator_app(key: str | None, state: dict[str, Any] | None) -> FastAPI:
    """An emulator booted with `state`: an idle app booted with the same one, reset, else a new one."""
    idle = _IDLE_APPS.get(key, []) if key is not None else []
    if not idle:
        return create_app(state)
    app = idle.pop()
    assert isinstance(app, EmulatorApp)
    app.emulator.reset()
    return app


class Cloudflare:
    """The emulator in process and a session whose clients reach it: behind httpx's ASGI transport, or `served` on
    a loopback port (where the Samples' synchronous calls reach it too)."""

    def __init__(self, state: dict[str, Any] | None = None, *, served: EmulatorServer | None = None) -> None:
        self._key: str | None = None
        if served is None:
            self._key = _state_key(state)
            self.app = _emulator_app(self._key, state)
            transport = httpx.ASGITransport(app=self.app)
            self.session = CloudflareSession(HttpConfig(base_url="http://emulator/client/v4"), transport=transport)
            self.http = httpx.AsyncClient(transport=transport, base_url="http://emulator/client/v4")
            return
        # The reconcilers reach the served app in process, as the ASGI transport does: only the Samples'
        # synchronous calls need the socket, and while one waits for its reply nothing else runs on this loop.
        self.app = served.app
        transport = httpx.ASGITransport(app=self.app)
        self.session = CloudflareSession(HttpConfig(base_url="http://emulator/client/v4"), transport=transport)
        self.http = httpx.AsyncClient(transport=transport, base_url="http://emulator/client/v4")

    async def get(self, path: str, **params: Any) -> Any:
        reply = await self.http.get(path, params=params, headers={"Authorization": f"Bearer {TOKEN}"})
        body = reply.json()
        assert body["success"], body
        return body["result"]

    def writes(self) -> int:
        """The calls that may have changed something in Cloudflare, so far."""
        return sum(1 for call in self.emulator.calls.select() if call.method != "GET")

    @property
    def emulator(self) -> Emulator:
        assert isinstance(self.app, EmulatorApp)
        return self.app.emulator

    async def aclose(self) -> None:
        await self.http.aclose()
        await self.session.aclose()
        if self._key is not None:  # the next Cloudflare of the same state takes the app (and resets it)
            _IDLE_APPS.setdefault(self._key, []).append(self.app)
            self._key = None


class SkippingClock:
    """Time that passes the moment it is waited for. Reconciles run one at a time here, so nothing a DNS batch
    waits for (another record joining it) can happen while it waits: waiting in real time would only be slower."""

    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.time += max(0.0, seconds)
        await asyncio.sleep(0)


@dataclass
class Runtime:
    """One life of the controller process: caches listed from `kube`, one instance of each kind."""

    kube: MemoryKube
    cloudflare: Cloudflare
    kinds: Sequence[type[ManagedKind]]  # type: ignore[type-arg]
    secrets: MemorySecrets | KubeSecrets
    default_deletion_policy: str = "delete"
    """As `--default-deletion-policy` gives it to the kinds (app.server: the Context's field)."""
    informers: dict[str, Informer] = field(default_factory=dict)
    reconcilers: dict[str, Lifecycle[Any, Any, Any]] = field(default_factory=dict)
    enqueued: list[Ref] = field(default_factory=list)
    index: DependencyIndex = field(default_factory=DependencyIndex)

    def __post_init__(self) -> None:
        ctx = Context(
            kube=self.kube,  # type: ignore[arg-type]
            recorder=NoEvents(),  # type: ignore[arg-type]
            secrets=self.secrets,  # type: ignore[arg-type]
            index=self.index,
            cloudflare=lambda token: self.cloudflare.session.client(token),
            default_deletion_policy=self.default_deletion_policy,
            informer_of=self.informers.get,
            enqueue=self.enqueued.append,
            # Reconciles run one at a time here, so no other object is ever queued behind a busy worker: a DNS
            # batch must not wait for records that cannot run before it goes.
            queued=lambda _: False,
        )
        for kind in self.kinds:
            rt = resource_type(kind)
            informer = Informer(self.kube, rt)  # type: ignore[arg-type]
            for name, indexer in indexes(kind).items():
                informer.add_index(name, indexer)
            for (stored_kind, _, _), obj in self.kube.objects.items():
                if stored_kind == rt.kind:
                    informer.put(copy.deepcopy(obj))
            self.informers[rt.kind] = informer
            self.reconcilers[rt.kind] = reconciler = Lifecycle(build(kind, ctx), ctx)
            if isinstance(reconciler.of, DNSRecordKind):
                reconciler.of.batches.clock = SkippingClock()
        for (stored_kind, namespace, name), obj in self.kube.objects.items():
            reconciler = self.reconcilers.get(stored_kind)
            if reconciler is not None:
                self.index.set_parents(Ref(stored_kind, namespace, name), reconciler.parents_of(obj))
        # The claims of adopted objects and the grants, watched as `register_all` watches them.
        claims = self.informers[CLAIMS.kind] = Informer(self.kube, CLAIMS)  # type: ignore[arg-type]
        for index, indexer in CLAIM_INDEXES.items():
            claims.add_index(index, indexer)
        self.informers[GRANTS.kind] = Informer(self.kube, GRANTS)  # type: ignore[arg-type]
        for watched in WATCHED:
            self.sync(watched)

    def sync(self, kind: str) -> None:
        """What the watch would deliver: the informer catches up with the API server."""
        informer = self.informers[kind]
        for key in list(informer.cache):
            if self.kube.get(kind, key[1], key[0]) is None:
                informer.pop(key)
        reconciler = self.reconcilers.get(kind)
        for (stored_kind, namespace, name), obj in self.kube.objects.items():
            if stored_kind == kind:
                informer.put(compact(obj))  # a copy: the cache strips it in place
                if reconciler is not None:
                    self.index.set_parents(Ref(kind, namespace, name), reconciler.parents_of(obj))

    async def reconcile(self, kind: str, name: str, namespace: str = "") -> Any:
        for synced in (kind, *WATCHED):
            self.sync(synced)
        return await self.reconcilers[kind].reconcile((namespace, name))

    async def settle(self, passes: int = SETTLE_PASSES) -> None:
        """Reconcile every object, kind by kind in the order given (parents first), until a whole pass writes
        nothing to Kubernetes or Cloudflare: what the controller's queues come to once every event is handled. The
        reconcilers are idempotent, so a world still changing after `passes` is a bug, not slowness."""
        for _ in range(passes):
            before = (self.kube.writes, self.cloudflare.writes())
            versions = {key: obj["metadata"]["resourceVersion"] for key, obj in self.kube.objects.items()}
            for kind in self.reconcilers:
                self.sync(kind)
                for namespace, name in sorted(self.informers[kind].cache):
                    await self.reconcile(kind, name, namespace)
            if (self.kube.writes, self.cloudflare.writes()) == before:
                return
        changed = sorted(
            f"{kind} {namespace}/{name}".replace(" /", " ")
            for (kind, namespace, name), obj in self.kube.objects.items()
            if versions.get((kind, namespace, name)) != obj["metadata"]["resourceVersion"]
        )
        raise AssertionError(
            f"still writing after {passes} passes over every object; the last changed {changed or 'only Cloudflare'}"
        )


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


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self.listening.set()


class EmulatorServer:
    """The emulator app served by uvicorn on a loopback port, from a thread whose event loop alone touches its
    state: the Samples' synchronous calls (`tests.kinds.cf`) and the reconcilers' reach the same Cloudflare."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self.app = create_app(state)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
        self._server = _Server(config)
        self._thread = threading.Thread(target=self._server.run, name="emulator", daemon=True)
        self._admin: httpx.Client | None = None
        self.port = 0

    def start(self, timeout: float = 10.0) -> EmulatorServer:
        self._thread.start()
        if not self._server.listening.wait(timeout) or not self._server.started:
            raise RuntimeError("the emulator did not listen")
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        self._admin = httpx.Client(base_url=f"http://127.0.0.1:{self.port}/__emulator", timeout=10, trust_env=False)
        return self

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
        self._server.should_exit = True
        self._thread.join(10)

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def reset(self) -> None:
        """Back to the starting state (asked of the server, so that its own loop changes it)."""
        assert self._admin is not None
        self._admin.post("/reset").raise_for_status()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/client/v4"

    @property
    def token(self) -> str:
        return str(self._bootstrap["token"])

    @property
    def account_id(self) -> str:
        return str(self._bootstrap["account_id"])

    @property
    def _bootstrap(self) -> dict[str, Any]:
        assert isinstance(self.app, EmulatorApp)
        return self.app.emulator.bootstrap


REGISTERED = registry.KINDS
WATCHED = (CLAIMS.kind, GRANTS.kind)
"""Kinds the runtime watches without a controller of their own that the lifecycle reads."""
CLUSTER_KINDS = {kind.model.info.kind for kind in REGISTERED if not kind.model.info.namespaced}


class MemoryKflare(Driver):
    """The Samples' driver over the harness: what a test applies goes into a MemoryKube, and every kind the
    controller registers reconciles it until nothing more is written (`Runtime.settle`), against the emulator
    served in process. `ready` and `gone` then say at once what `kflare run` would come to."""

    def __init__(
        self, served: EmulatorServer, *, namespace: str = "matrix", default_deletion_policy: str = "delete"
    ) -> None:
        self.namespace, self.account, self.emulator = namespace, f"acct-{namespace}", served
        self.account_id = served.account_id
        self.kube = MemoryKube()
        self.cloudflare = Cloudflare(served=served)
        self.runtime = Runtime(self.kube, self.cloudflare, REGISTERED, KubeSecrets(self.kube), default_deletion_policy)

    def _where(self, kind: str) -> str:
        return "" if kind in CLUSTER_KINDS else self.namespace

    def _create(self, manifest: dict[str, Any]) -> JSON:
        """A user's POST: refused if the name is taken, as the API server would."""
        meta = manifest["metadata"]
        if self.kube.get(manifest["kind"], meta["name"], meta.get("namespace") or "") is not None:
            raise KubeError(409, "AlreadyExists", f"{manifest['kind']} {meta['name']!r} already exists")
        meta.setdefault("uid", str(uuid.uuid4()))
        return self.kube.add(manifest)

    async def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        manifest = copy.deepcopy(manifest)
        manifest.setdefault("apiVersion", f"{GROUP}/{VERSION}")
        if namespace := self._where(manifest["kind"]):
            manifest["metadata"].setdefault("namespace", namespace)
        return self._create(manifest)

    async def ready(
        self, kind: str, name: str, *, reason: str | None = None, status: str = "True", timeout: float = 30.0
    ) -> dict[str, Any]:
        await self.runtime.settle()
        obj = self.kube.get(kind, name, self._where(kind))
        assert obj is not None, f"{kind} {name} does not exist"
        if is_ready(obj, status, reason):
            return obj
        conditions = (obj.get("status") or {}).get("conditions")
        raise AssertionError(f"{kind} {name} settled without Ready={status} {reason or ''}: {conditions}")

    async def delete(self, kind: str, name: str) -> None:
        with contextlib.suppress(KeyError):
            self.kube.delete(kind, name, self._where(kind))

    async def gone(self, kind: str, name: str, timeout: float = 30.0) -> None:
        await self.runtime.settle()
        left = self.kube.get(kind, name, self._where(kind))
        assert left is None, f"{kind} {name} settled undeleted: {left}"

    async def token_secret(self, token: str | None = None, name: str = "cf-token") -> None:
        self._create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": self.namespace},
                "data": token_data(token or self.emulator.token),
            }
        )

    async def aclose(self) -> None:
        await self.cloudflare.aclose()


Check = Callable[[Runtime], Any]
__all__ = ["Crash", "MemoryKube", "Runtime", "key_of", "merge_patch"]
