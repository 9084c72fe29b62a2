"""Kinds watched without a controller (a Gateway API kind, a Service) and reconcilers keyed by a Cloudflare
document that many resources feed: a change of an input reconciles the documents it fed and feeds, once each; a
status echo of an input reconciles nothing; the caches of watched kinds are indexed and readable."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping

import pytest

from app.kube.client import JSON, ResourceType
from app.kube.controller import Outcome
from app.kube.informer import Key
from app.kube.manager import Manager
from app.kube.registrations import DocumentsOf, Input, Watch
from tests.unit.kube.feed import FeedKube, obj, until

ROUTES = ResourceType("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute")
GATEWAYS = ResourceType("gateway.networking.k8s.io", "v1", "gateways", "Gateway")
SERVICES = ResourceType("", "v1", "services", "Service")


def route(name: str, rv: int, gateway: str, *, generation: int = 1) -> JSON:
    item = obj(name, rv, generation=generation)
    item["spec"] = {"parentRefs": [{"name": gateway}]}
    return item


class Tunnels:
    """One document per tunnel: a Gateway names its tunnel, a route feeds its Gateway's tunnel."""

    name = "tunnel-ingress"

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.log: list[Key] = []

    def inputs(self) -> Mapping[ResourceType, DocumentsOf]:
        def of_gateway(raw: JSON) -> Iterable[str]:
            return [raw["spec"]["tunnel"]]

        def of_route(raw: JSON) -> Iterable[str]:
            gateways = self.manager.informer_of("Gateway")
            assert gateways is not None
            for parent in raw["spec"]["parentRefs"]:
                gateway = gateways.get(parent["name"], raw["metadata"]["namespace"])
                if gateway is not None:
                    yield gateway["spec"]["tunnel"]

        return {GATEWAYS: of_gateway, ROUTES: of_route}

    async def reconcile(self, key: Key) -> Outcome:
        self.log.append(key)
        return Outcome.done()

    async def timed_out(self, key: Key, seconds: float) -> None:
        raise AssertionError("no reconcile here runs out of time")


@pytest.fixture
async def world() -> AsyncIterator[tuple[FeedKube, Manager, Tunnels]]:
    kube = FeedKube()
    gw_a, gw_b = obj("a", 1), obj("b", 1)
    gw_a["spec"], gw_b["spec"] = {"tunnel": "t1"}, {"tunnel": "t2"}
    kube.put(GATEWAYS, gw_a, gw_b)
    kube.put(ROUTES, route("r1", 1, "a"), route("r2", 1, "a"))
    kube.put(SERVICES, obj("echo", 1))
    manager = Manager(kube, "kflare-system", workers=1)  # type: ignore[arg-type]
    manager.watch(Watch(SERVICES, indexes={"app": lambda raw: [raw["metadata"]["name"]]}))
    tunnels = Tunnels(manager)
    manager.register_aggregate(tunnels)
    manager.start()
    await until(lambda: manager.ready, "the caches to fill")
    await until(lambda: sorted(set(tunnels.log)) == [("", "t1"), ("", "t2")], "every document's first reconcile")
    try:
        yield kube, manager, tunnels
    finally:
        await manager.stop()
    assert not manager.alive


async def test_watched_kinds_are_cached_and_indexed(world: tuple[FeedKube, Manager, Tunnels]) -> None:
    _, manager, _ = world
    services = manager.informer_of("Service")
    assert services is not None
    assert [s["metadata"]["name"] for s in services.by_index("app", "echo")] == ["echo"]
    assert manager.informer_of("HTTPRoute") is not None, "an aggregate's inputs are watched"


async def test_a_route_moving_to_another_gateway_reconciles_both_documents(
    world: tuple[FeedKube, Manager, Tunnels],
) -> None:
    kube, _, tunnels = world
    del tunnels.log[:]
    kube.push(ROUTES, "MODIFIED", route("r1", 5, "b", generation=2))
    await until(lambda: len(tunnels.log) >= 2, "the document it left and the one it joined")
    assert sorted(tunnels.log) == [("", "t1"), ("", "t2")]


async def test_a_status_echo_of_an_input_reconciles_nothing(world: tuple[FeedKube, Manager, Tunnels]) -> None:
    kube, _, tunnels = world
    del tunnels.log[:]
    echoed = route("r2", 6, "a")
    echoed["status"] = {"parents": [{"conditions": [{"type": "Accepted", "status": "True"}]}]}
    kube.push(ROUTES, "MODIFIED", echoed)
    # Then a change feeding only the other document, queued after anything the echo would have enqueued.
    gateway = obj("b", 7, generation=2)
    gateway["spec"] = {"tunnel": "t2"}
    kube.push(GATEWAYS, "MODIFIED", gateway)
    await until(lambda: ("", "t2") in tunnels.log, "the other document's reconcile")
    assert tunnels.log == [("", "t2")], "the echo reconciled nothing"


async def test_a_deleted_input_reconciles_what_it_fed(world: tuple[FeedKube, Manager, Tunnels]) -> None:
    kube, _, tunnels = world
    del tunnels.log[:]
    kube.push(ROUTES, "DELETED", route("r2", 8, "a"))
    await until(lambda: len(tunnels.log) >= 1, "the document it fed")
    assert tunnels.log == [("", "t1")]


class StatusReader:
    """A document that reads its inputs' status (a Tunnel's ID): a status change reconciles it, a spec change of
    what it does not read does not."""

    name = "status-reader"

    def __init__(self) -> None:
        self.log: list[Key] = []

    def inputs(self) -> Mapping[ResourceType, DocumentsOf | Input]:
        return {GATEWAYS: Input(lambda raw: ["doc"], lambda raw: (raw.get("status") or {}).get("id"))}

    async def reconcile(self, key: Key) -> Outcome:
        self.log.append(key)
        return Outcome.done()

    async def timed_out(self, key: Key, seconds: float) -> None:
        raise AssertionError("no reconcile here runs out of time")


async def test_an_input_read_with_its_status_reconciles_on_a_status_change() -> None:
    kube = FeedKube()
    kube.put(GATEWAYS, obj("a", 1))
    manager = Manager(kube, "kflare-system", workers=1)  # type: ignore[arg-type]
    reader = StatusReader()
    manager.register_aggregate(reader)
    manager.start()
    try:
        await until(lambda: reader.log == [("", "doc")], "the first reconcile")
        with_id = obj("a", 2)
        with_id["status"] = {"id": "t-1"}
        kube.push(GATEWAYS, "MODIFIED", with_id)
        await until(lambda: len(reader.log) == 2, "the reconcile of the status change")
        relabelled = obj("a", 3, generation=2)
        relabelled["status"] = {"id": "t-1"}
        relabelled["metadata"]["labels"] = {"x": "y"}
        kube.push(GATEWAYS, "MODIFIED", relabelled)
        newer = obj("a", 4, generation=3)
        newer["status"] = {"id": "t-2"}
        kube.push(GATEWAYS, "MODIFIED", newer)
        await until(lambda: len(reader.log) == 3, "the reconcile of the next status change")
        assert reader.log == [("", "doc")] * 3, "the change of what it does not read reconciled nothing"
    finally:
        await manager.stop()


class IndexedReader(StatusReader):
    """A document that finds its inputs by an index of their cache, which it asks for with the input."""

    name = "indexed-reader"

    def inputs(self) -> Mapping[ResourceType, DocumentsOf | Input]:
        def tunnel(raw: JSON) -> list[str]:
            return [str((raw.get("spec") or {}).get("tunnel"))]

        return {GATEWAYS: Input(lambda raw: ["doc"], indexes={"tunnel": tunnel})}


async def test_an_inputs_index_is_kept_on_its_cache_and_follows_changes() -> None:
    """The index is on the cache the input is read from: a lookup by it answers what a scan would, after a change
    too."""
    kube = FeedKube()
    gw_a, gw_b = obj("a", 1), obj("b", 1)
    gw_a["spec"], gw_b["spec"] = {"tunnel": "t1"}, {"tunnel": "t2"}
    kube.put(GATEWAYS, gw_a, gw_b)
    manager = Manager(kube, "kflare-system", workers=1)  # type: ignore[arg-type]
    manager.register_aggregate(IndexedReader())
    manager.start()
    try:
        informer = manager.informer_of("Gateway")
        assert informer is not None
        await until(lambda: len(informer.cache) == 2, "the cache to fill")
        assert [g["metadata"]["name"] for g in informer.by_index("tunnel", "t2")] == ["b"]
        assert [g["metadata"]["name"] for g in informer.by_index("tunnel", "t1")] == ["a"]
        moved = obj("a", 2)
        moved["spec"] = {"tunnel": "t2"}
        kube.push(GATEWAYS, "MODIFIED", moved)
        await until(lambda: len(informer.by_index("tunnel", "t2")) == 2, "the index to follow the change")
        assert informer.by_index("tunnel", "t1") == []
    finally:
        await manager.stop()
