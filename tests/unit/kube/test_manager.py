"""The manager wires the kinds together: a parent's change reaches its children, a child's deletion its parent, a
referenced Secret's change the objects that use it; a synced reconcile plans a drift check (per group where the
kind has them); the process is ready once the caches are filled, and stops without leaving tasks behind."""

from __future__ import annotations

import ctypes
from collections.abc import AsyncIterator, Sequence

import pytest

import app.kube.manager as manager_module
from app.kube.client import JSON, SECRETS, ResourceType
from app.kube.controller import Outcome
from app.kube.index import Ref
from app.kube.informer import Indexer, Key
from app.kube.manager import Manager
from app.kube.registrations import IndexLink, Registration
from app.memory import trim_heap
from tests.unit.kube.feed import FeedKube, obj, until

PARENTS = ResourceType("test.kflare.dev", "v1", "parents", "Parent")
CHILDREN = ResourceType("test.kflare.dev", "v1", "children", "Child")


class Kind:
    """A kind's reconciler: records its reconciles; a child names its parent and maybe a Secret in its spec."""

    rt: ResourceType
    log: list[tuple[str, Key]]

    def __init__(self, log: list[tuple[str, Key]]) -> None:
        self.log = log

    @classmethod
    def resource_type(cls) -> ResourceType:
        return cls.rt

    @classmethod
    def parents_of(cls, raw: JSON) -> list[Ref]:
        spec = raw.get("spec") or {}
        namespace = raw["metadata"].get("namespace", "")
        refs = [Ref("Parent", namespace, spec["parent"])] if "parent" in spec else []
        if "secret" in spec:
            refs.append(Ref("Secret", namespace, spec["secret"]))
        return refs

    @classmethod
    def indexes(cls) -> dict[str, Indexer]:
        return {}

    @classmethod
    def links(cls) -> Sequence[IndexLink]:
        return ()

    @classmethod
    def serving_state(cls, raw: JSON) -> object:
        """What children read: here its generation and spec, not its status."""
        return raw["metadata"].get("generation"), repr(raw.get("spec"))

    async def reconcile(self, key: Key) -> Outcome:
        self.log.append((self.rt.kind, key))
        return Outcome.done(synced=True)

    async def timed_out(self, key: Key, seconds: float) -> None:
        raise AssertionError("no reconcile here runs out of time")


class Parent(Kind):
    rt = PARENTS


class Child(Kind):
    rt = CHILDREN


def child(name: str, rv: int, **spec: str) -> JSON:
    item = obj(name, rv)
    item["spec"] = dict(spec)
    return item


@pytest.fixture
async def world() -> AsyncIterator[tuple[FeedKube, Manager, list[tuple[str, Key]]]]:
    kube = FeedKube()
    kube.put(PARENTS, obj("p", 1))
    kube.put(CHILDREN, child("c1", 1, parent="p", secret="token"), child("c2", 1, parent="p"), child("o", 1))
    kube.put(SECRETS, obj("token", 1))
    log: list[tuple[str, Key]] = []
    manager = Manager(kube, "kflare-system", workers=1, drift_interval=600.0)  # type: ignore[arg-type]
    manager.register(Registration(Parent(log)))
    manager.register(Registration(Child(log), drift_group=lambda raw: f"parent:{raw['spec'].get('parent')}"))
    assert not manager.ready
    manager.start()
    await until(lambda: manager.ready, "the caches to fill")
    await until(lambda: len(log) >= 4, "every object's first reconcile")
    try:
        yield kube, manager, log
    finally:
        await manager.stop()
    assert not manager.alive


async def test_a_parents_change_reaches_its_children_only(
    world: tuple[FeedKube, Manager, list[tuple[str, Key]]],
) -> None:
    kube, _, log = world
    del log[:]
    kube.push(PARENTS, "MODIFIED", obj("p", 5, generation=2))
    await until(lambda: len(log) >= 3, "the parent and its children")
    assert sorted(log) == [("Child", ("ns", "c1")), ("Child", ("ns", "c2")), ("Parent", ("ns", "p"))]


async def test_a_parents_status_echo_reaches_no_child(world: tuple[FeedKube, Manager, list[tuple[str, Key]]]) -> None:
    """A parent's status write (its Ready flipping for a passing Cloudflare error, or the echo of its own write)
    changes nothing its children read: they are not enqueued."""
    kube, _, log = world
    del log[:]
    changed = obj("p", 6)
    changed["status"] = {"conditions": [{"type": "Ready", "status": "False", "reason": "APIError"}]}
    kube.push(PARENTS, "MODIFIED", changed)
    # A change of an unrelated child, queued after anything the status change would have enqueued (one worker).
    unrelated = obj("o", 8, generation=2)
    unrelated["spec"] = {}
    kube.push(CHILDREN, "MODIFIED", unrelated)
    await until(lambda: ("Child", ("ns", "o")) in log, "the unrelated child's reconcile")
    assert log == [("Child", ("ns", "o"))]
    kube.push(PARENTS, "MODIFIED", obj("p", 9, generation=3))
    await until(lambda: len(log) >= 3, "the children, for the parent's generation change")
    assert sorted(key for kind, key in log[1:] if kind == "Child") == [("ns", "c1"), ("ns", "c2")]


async def test_a_childs_deletion_reaches_its_parent(world: tuple[FeedKube, Manager, list[tuple[str, Key]]]) -> None:
    kube, _, log = world
    del log[:]
    kube.push(CHILDREN, "DELETED", child("c2", 5, parent="p"))
    await until(lambda: len(log) >= 1, "the parent, which may be waiting for its children to go")
    assert log == [("Parent", ("ns", "p"))]


async def test_a_referenced_secrets_change_reaches_the_objects_using_it(
    world: tuple[FeedKube, Manager, list[tuple[str, Key]]],
) -> None:
    kube, manager, log = world
    assert manager.secrets.watched == {("ns", "token")}, "only the referenced Secret is watched"
    del log[:]
    kube.push(SECRETS, "MODIFIED", obj("token", 5), field_selector="metadata.name=token")
    await until(lambda: len(log) >= 1, "the object using the Secret")
    assert log == [("Child", ("ns", "c1"))]


async def test_synced_objects_get_drift_checks_per_group(
    world: tuple[FeedKube, Manager, list[tuple[str, Key]]],
) -> None:
    _, manager, _ = world
    assert len(manager.drift.scheduler.get_jobs()) == 3, "the parent alone, the children one check per group"
    assert sorted(sorted(members) for members in manager.drift.groups.values()) == [
        [("Child", "ns", "c1"), ("Child", "ns", "c2")],
        [("Child", "ns", "o")],
    ]


async def test_a_dead_worker_makes_the_process_unhealthy(
    world: tuple[FeedKube, Manager, list[tuple[str, Key]]],
) -> None:
    _, manager, _ = world
    assert manager.alive
    manager.controllers["Child"]._tasks[0].cancel()
    await until(lambda: not manager.alive, "the manager to notice")


LISTS = ResourceType("test.kflare.dev", "v1", "lists", "List")
RULES = ResourceType("test.kflare.dev", "v1", "rules", "Rule")


class Listed(Kind):
    """A list, named by its spec's name."""

    rt = LISTS

    @classmethod
    def indexes(cls) -> dict[str, Indexer]:
        return {"name": lambda raw: [raw["spec"]["name"]]}


class Naming(Kind):
    """A rule naming lists by name (none of which need exist)."""

    rt = RULES

    @classmethod
    def indexes(cls) -> dict[str, Indexer]:
        return {"lists": lambda raw: raw["spec"]["lists"].split()}

    @classmethod
    def links(cls) -> Sequence[IndexLink]:
        return (IndexLink("List", "lists", "name"),)


def named(key: str, rv: int, *, generation: int = 1, **spec: str) -> JSON:
    item = obj(key, rv, generation=generation)
    item["spec"] = dict(spec)
    return item


@pytest.fixture
async def linked() -> AsyncIterator[tuple[FeedKube, Manager, list[tuple[str, Key]]]]:
    kube = FeedKube()
    kube.put(LISTS, named("office", 1, name="office"), named("other", 1, name="other"))
    rules = [named("r1", 1, lists="office"), named("r2", 1, lists="office other"), named("r3", 1, lists="other")]
    kube.put(RULES, *rules, *(named(f"n{i}", 1, lists=f"gone{i} office") for i in range(20)))
    log: list[tuple[str, Key]] = []
    manager = Manager(kube, "kflare-system", workers=1)  # type: ignore[arg-type]
    manager.register(Registration(Listed(log)))
    manager.register(Registration(Naming(log)))
    manager.start()
    await until(lambda: manager.ready, "the caches to fill")
    await until(lambda: len(log) >= 25, "every object's first reconcile")
    try:
        yield kube, manager, log
    finally:
        await manager.stop()


async def test_an_object_that_stops_naming_another_wakes_it(
    linked: tuple[FeedKube, Manager, list[tuple[str, Key]]],
) -> None:
    """A list whose deletion waits for the rules naming it goes on when one is deleted or no longer names it."""
    kube, _, log = linked
    del log[:]
    kube.push(RULES, "DELETED", named("r1", 5, lists="office"))
    await until(lambda: len(log) >= 1, "the list r1 named")
    assert log == [("List", ("ns", "office"))]
    del log[:]
    kube.push(RULES, "MODIFIED", named("r2", 6, generation=2, lists="other"))
    await until(lambda: len(log) >= 2, "r2 itself and the list it no longer names")
    assert sorted(log) == [("List", ("ns", "office")), ("Rule", ("ns", "r2"))]


async def test_a_named_objects_change_wakes_the_objects_naming_it(
    linked: tuple[FeedKube, Manager, list[tuple[str, Key]]],
) -> None:
    """A list appearing (or changing what rules read of it) wakes the rules naming it, found by their index."""
    kube, _, log = linked
    del log[:]
    kube.push(LISTS, "MODIFIED", named("other", 7, generation=2, name="other"))
    await until(lambda: len(log) >= 3, "the list and the rules naming it")
    assert sorted(log) == [("List", ("ns", "other")), ("Rule", ("ns", "r2")), ("Rule", ("ns", "r3"))]


async def test_deleted_objects_leave_nothing_behind_in_the_indexes_and_links(
    linked: tuple[FeedKube, Manager, list[tuple[str, Key]]],
) -> None:
    kube, manager, _ = linked
    rules = manager.informer_of("Rule")
    assert rules is not None
    assert {f"gone{i}" for i in range(20)} <= rules.index_values("lists")
    for i in range(20):
        kube.push(RULES, "DELETED", named(f"n{i}", 10 + i, lists=f"gone{i} office"))
    await until(lambda: len(rules.cache) == 3, "the deletions to be seen")
    assert rules.index_values("lists") == {"office", "other"}
    assert set(manager.named["Rule"]) == {Ref("Rule", "ns", f"r{i}") for i in (1, 2, 3)}
    for name in ("r1", "r2", "r3"):
        kube.push(RULES, "DELETED", named(name, 40, lists=""))
    await until(lambda: not rules.cache, "the last deletions to be seen")
    assert rules.index_values("lists") == set()
    assert manager.named["Rule"] == {}


async def test_the_heap_is_trimmed_once_a_burst_of_work_has_drained(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a bulk apply the process gives its free heap back, once per burst: not on every quiet spell."""
    trims: list[int] = []
    monkeypatch.setattr(manager_module, "TRIM_CHECK", 0.01)
    monkeypatch.setattr(manager_module, "TRIM_AFTER", 3)
    kube = FeedKube()
    kube.put(PARENTS, obj("p1", 1), obj("p2", 1), obj("p3", 1))
    log: list[tuple[str, Key]] = []
    manager = Manager(kube, "kflare-system", workers=1, drift_interval=600.0)  # type: ignore[arg-type]
    manager.register(Registration(Parent(log)))

    def trim() -> bool:
        trims.append(len(log))
        return True

    monkeypatch.setattr(manager_module, "trim_heap", trim)
    manager.start()
    try:
        await until(lambda: len(trims) == 1, "a trim after the first three reconciles")
        kube.push(PARENTS, "ADDED", obj("p4", 1))  # one reconcile: no burst
        await until(lambda: len(log) == 4, "the fourth reconcile")
        kube.push(PARENTS, "ADDED", obj("p5", 1))
        kube.push(PARENTS, "ADDED", obj("p6", 1))
        await until(lambda: len(trims) == 2, "a trim once three more reconciles drained")
        assert trims == [3, 6]
    finally:
        await manager.stop()


def test_the_heap_trim_reaches_glibc() -> None:
    """kflare's image and CI run on glibc: the trim is there (it answers whether it gave anything back)."""
    assert hasattr(ctypes.CDLL(None), "malloc_trim")
    assert trim_heap() in (True, False)
