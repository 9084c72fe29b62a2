"""Informers list, then watch from that version; 410 Gone relists and reports what vanished meanwhile; a broken
watch reconnects. Driven by a scripted API instead of a server, so each failure happens exactly when wanted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx

from app.kube.client import JSON, SECRETS, KubeError, ResourceType
from app.kube.informer import LAST_APPLIED, Informer
from app.kube.referenced import ReferencedObjects

WIDGETS = ResourceType("test.kflare.dev", "v1", "widgets", "Widget")


def obj(name: str, rv: str, namespace: str = "ns") -> JSON:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}}


class ScriptedKube:
    """LIST answers from `lists` in turn; each WATCH plays the next script: a list of events, or an exception."""

    def __init__(self, lists: list[list[JSON]], watches: list[list[JSON] | BaseException]) -> None:
        self.lists = lists
        self.watches = watches
        self.list_calls: list[dict[str, Any]] = []
        self.watch_calls: list[dict[str, Any]] = []
        self.idle = asyncio.Event()

    async def list(self, rt: ResourceType, namespace: str | None = None, **query: Any) -> JSON:
        self.list_calls.append({"namespace": namespace, **query})
        items = self.lists.pop(0)
        rv = max((int(i["metadata"]["resourceVersion"]) for i in items), default=1)
        return {"items": items, "metadata": {"resourceVersion": str(rv)}}

    async def watch(self, rt: ResourceType, **kwargs: Any) -> AsyncIterator[JSON]:
        self.watch_calls.append(kwargs)
        if not self.watches:
            self.idle.set()
            await asyncio.Event().wait()  # a quiet, healthy watch
        script = self.watches.pop(0)
        if isinstance(script, BaseException):
            raise script
        for event in script:
            yield event


async def run_until_idle(informer: Informer, kube: ScriptedKube) -> None:
    informer.start()
    try:
        await asyncio.wait_for(kube.idle.wait(), 10)
    finally:
        await informer.stop()


async def test_list_then_watch_from_its_version_with_bookmarks() -> None:
    kube = ScriptedKube(
        lists=[[obj("a", "5")]],
        watches=[
            [
                {"type": "ADDED", "object": obj("b", "6")},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
            ]
        ],
    )
    seen: list[tuple[str, str]] = []
    informer = Informer(kube, WIDGETS)  # type: ignore[arg-type]
    informer.add_handler(lambda kind, o: seen.append((kind, o["metadata"]["name"])))
    await run_until_idle(informer, kube)
    assert seen == [("ADDED", "a"), ("ADDED", "b")]
    assert kube.watch_calls[0]["resource_version"] == "5"
    assert kube.watch_calls[1]["resource_version"] == "9", "resumes from the bookmark, not from the list"
    assert set(informer.cache) == {("ns", "a"), ("ns", "b")}
    assert informer.get("a", "ns")["kind"] == "Widget"  # type: ignore[index]


async def test_gone_relists_and_reports_what_vanished_meanwhile() -> None:
    kube = ScriptedKube(
        lists=[[obj("a", "5"), obj("b", "5")], [obj("a", "12"), obj("c", "12")]],
        watches=[[{"type": "ERROR", "object": {"code": 410, "reason": "Expired", "message": "too old"}}]],
    )
    seen: list[tuple[str, str]] = []
    informer = Informer(kube, WIDGETS)  # type: ignore[arg-type]
    informer.add_handler(lambda kind, o: seen.append((kind, o["metadata"]["name"])))
    await run_until_idle(informer, kube)
    assert len(kube.list_calls) == 2
    assert seen[2:] == [("MODIFIED", "a"), ("ADDED", "c"), ("DELETED", "b")]
    assert set(informer.cache) == {("ns", "a"), ("ns", "c")}
    assert informer.relists == 2


async def test_a_broken_watch_reconnects_from_the_last_version() -> None:
    kube = ScriptedKube(
        lists=[[obj("a", "5")]],
        watches=[
            [{"type": "MODIFIED", "object": obj("a", "7")}],
            httpx.RemoteProtocolError("connection reset"),
            KubeError(500, "InternalError", "etcd is restarting"),
            [{"type": "DELETED", "object": obj("a", "8")}],
        ],
    )
    seen: list[tuple[str, str]] = []
    informer = Informer(kube, WIDGETS)  # type: ignore[arg-type]
    informer.add_handler(lambda kind, o: seen.append((kind, o["metadata"]["resourceVersion"])))
    await run_until_idle(informer, kube)
    assert [c["resource_version"] for c in kube.watch_calls] == ["5", "7", "7", "7", "8"]
    assert len(kube.list_calls) == 1, "two failures in a row are retried without a relist"
    assert seen == [("ADDED", "5"), ("MODIFIED", "7"), ("DELETED", "8")]
    assert informer.cache == {}


async def test_only_referenced_secrets_are_watched_each_by_name() -> None:
    kube = ScriptedKube(lists=[[obj("token", "3", "a")], [obj("other", "4", "b")]], watches=[])
    changed: list[tuple[str, str]] = []
    watcher = ReferencedObjects(kube, changed.append)  # type: ignore[arg-type]
    watcher.reference("account-1", [("a", "token")])
    watcher.reference("account-2", [("a", "token")])
    await watcher.wait_synced(("a", "token"))
    assert watcher.watched == {("a", "token")}
    assert kube.list_calls[0] == {"namespace": "a", "limit": 500, "fieldSelector": "metadata.name=token"}
    assert watcher.get(("a", "token")) is not None
    assert changed == [("a", "token")]

    watcher.reference("account-1", [("b", "other")])  # account-1 moved to another Secret
    assert watcher.watched == {("a", "token"), ("b", "other")}
    watcher.reference("account-2", [])  # the last reference to a/token went away
    assert watcher.watched == {("b", "other")}
    await watcher.stop()
    assert watcher.watched == set()
    assert SECRETS.path("a", "token") == "/api/v1/namespaces/a/secrets/token"


def test_the_revision_changes_with_every_change_of_the_cache_and_is_never_shared() -> None:
    a = Informer(ScriptedKube([], []), WIDGETS)  # type: ignore[arg-type]
    b = Informer(ScriptedKube([], []), WIDGETS)  # type: ignore[arg-type]
    assert a.revision != b.revision
    seen = {a.revision, b.revision}
    a.put(obj("x", "1"))
    assert a.revision not in seen
    seen.add(a.revision)
    a.get("x", "ns")
    a.list()
    assert a.revision in seen  # reading changes nothing
    a.pop(("ns", "x"))
    assert a.revision not in seen


class UnservedKube(ScriptedKube):
    """The API server answers 404 for the resource (its CRD is not installed) until `served` is set."""

    def __init__(self, lists: list[list[JSON]]) -> None:
        super().__init__(lists, [])
        self.served = False
        self.refused = 0
        self.refused_twice = asyncio.Event()

    async def list(self, rt: ResourceType, namespace: str | None = None, **query: Any) -> JSON:
        if not self.served:
            self.refused += 1
            if self.refused >= 2:
                self.refused_twice.set()
            raise KubeError(404, "NotFound", "the server could not find the requested resource")
        return await super().list(rt, namespace, **query)


async def test_an_optional_api_not_served_is_synced_and_empty_until_it_is() -> None:
    """A CRD of a later Gateway API bundle missing from the cluster must not keep the controller unready; once it
    is installed, its objects arrive."""
    optional = ResourceType("test.kflare.dev", "v1", "gadgets", "Gadget", optional=True)
    kube = UnservedKube([[obj("g", "3")]])
    informer = Informer(kube, optional, unserved_retry=0.01)  # type: ignore[arg-type]
    informer.start()
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
        assert informer.list() == []
        kube.served = True
        await asyncio.wait_for(kube.idle.wait(), 10)
        assert [o["metadata"]["name"] for o in informer.list()] == ["g"]
    finally:
        await informer.stop()


async def test_a_required_api_not_served_is_never_synced() -> None:
    kube = UnservedKube([])
    informer = Informer(kube, WIDGETS)  # type: ignore[arg-type]
    informer.start()
    try:
        await asyncio.wait_for(kube.refused_twice.wait(), 10)
        assert not informer.synced.is_set()
    finally:
        await informer.stop()


def applied(name: str, rv: str) -> JSON:
    """An object as `kubectl apply` leaves it: managed fields and, client-side, the whole object as applied."""
    widget = obj(name, rv)
    widget["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]
    widget["metadata"]["annotations"] = {LAST_APPLIED: '{"apiVersion": "v1", "spec": {}}', "team": "dns"}
    return widget


async def test_the_cache_holds_neither_managed_fields_nor_the_last_applied_copy() -> None:
    kube = ScriptedKube(lists=[[applied("a", "5")]], watches=[[{"type": "ADDED", "object": applied("b", "6")}]])
    handed: list[JSON] = []
    informer = Informer(kube, WIDGETS)  # type: ignore[arg-type]
    informer.add_handler(lambda kind, o: handed.append(o))
    await run_until_idle(informer, kube)
    reply = informer.put(applied("c", "7"))  # the reply of the controller's own write
    for cached in [*informer.list(), *handed, reply]:
        assert "managedFields" not in cached["metadata"]
        assert cached["metadata"]["annotations"] == {"team": "dns"}  # what kflare reads is kept
    assert sorted(o["metadata"]["name"] for o in informer.list()) == ["a", "b", "c"]
