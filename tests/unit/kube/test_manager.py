"""The manager wires the kinds together: a parent's change reaches its children, a child's deletion its parent, a
referenced Secret's change the objects that use it; a synced reconcile plans a drift check (per group where the
kind has them); the process is ready once the caches are filled, and stops without leaving tasks behind."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.kube.client import JSON, SECRETS, ResourceType
from app.kube.controller import Outcome
from app.kube.index import Ref
from app.kube.informer import Indexer, Key
from app.kube.manager import Manager, Registration
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
