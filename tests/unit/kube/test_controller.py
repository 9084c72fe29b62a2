"""A controller reconciles what calls for it and nothing else: a change of spec, labels, annotations, finalizers
or deletion does; a change of status alone does not, nor does the echo of the controller's own write, whenever the
watch delivers it; a change made during a reconcile is reconciled once that reconcile ends, never beside it.

One worker and a FIFO queue: when a later event's reconcile is seen, any reconcile an earlier event called for has
run before it, so "no reconcile" is proven without waiting for time to pass."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from app.kube.client import JSON, KubeError, ResourceType
from app.kube.controller import Controller, Outcome
from app.kube.informer import Key
from app.kube.metrics import REGISTRY
from tests.unit.kube.feed import FeedKube, obj, seen, until

WIDGETS = ResourceType("test.kflare.dev", "v1", "widgets", "Widget")
A, B = ("ns", "a"), ("ns", "b")


class Script:
    """A reconciler that records what it was asked, runs a scripted action during a chosen reconcile, and notes
    whether two reconciles of one key ever overlapped."""

    def __init__(self) -> None:
        self.calls: list[Key] = []
        self.running: set[Key] = set()
        self.overlapped = False
        self.during: dict[Key, Callable[[], Awaitable[None]]] = {}

    async def reconcile(self, key: Key) -> Outcome:
        self.overlapped |= key in self.running
        self.running.add(key)
        self.calls.append(key)
        try:
            action = self.during.pop(key, None)
            if action is not None:
                await action()
        finally:
            self.running.discard(key)
        return Outcome.done()

    async def timed_out(self, key: Key, seconds: float) -> None:
        raise AssertionError("no reconcile here runs out of time")

    async def reconciled(self, count: int) -> None:
        await until(lambda: len(self.calls) >= count, f"{count} reconciles (so far {self.calls})")


@pytest.fixture
async def world() -> AsyncIterator[tuple[FeedKube, Controller, Script]]:
    kube = FeedKube()
    kube.put(WIDGETS, obj("a", 1), obj("b", 1))
    script = Script()
    controller = Controller(kube, WIDGETS, script, workers=1)  # type: ignore[arg-type]
    controller.start_informer()
    await controller.informer.synced.wait()
    controller.start_workers()
    await script.reconciled(2)  # each object once, as listed
    try:
        yield kube, controller, script
    finally:
        await controller.stop()


def changed(base: JSON, rv: int, **meta: Any) -> JSON:
    item = copy.deepcopy(base)
    item["metadata"].update(meta, resourceVersion=str(rv))
    return item


async def test_a_status_only_change_calls_for_no_reconcile(world: tuple[FeedKube, Controller, Script]) -> None:
    kube, _, script = world
    kube.push(WIDGETS, "MODIFIED", obj("a", 5, status={"conditions": [{"type": "Ready", "status": "False"}]}))
    kube.push(WIDGETS, "MODIFIED", obj("b", 6, generation=2))
    await script.reconciled(3)
    assert script.calls[2:] == [B], "a's status change was not reconciled; b's spec change was"


@pytest.mark.parametrize(
    "change",
    [
        {"generation": 2},
        {"labels": {"team": "web"}},
        {"annotations": {"kflare.dev/paused": "true"}},
        {"finalizers": ["kflare.dev/finalizer"]},
        {"deletionTimestamp": "2026-01-01T00:00:00Z"},
    ],
    ids=lambda change: next(iter(change)),
)
async def test_changes_that_call_for_a_reconcile(
    world: tuple[FeedKube, Controller, Script], change: dict[str, Any]
) -> None:
    kube, _, script = world
    kube.push(WIDGETS, "MODIFIED", changed(obj("a", 1), 5, **change))
    await script.reconciled(3)
    assert script.calls[2:] == [A]


async def test_the_echo_of_its_own_write_calls_for_no_reconcile(world: tuple[FeedKube, Controller, Script]) -> None:
    """The reconcile writes a label and status (as a DNSRecord's record-id label); the watch echoes it later."""
    kube, controller, script = world
    written = obj("a", 5, labels={"kflare.dev/record-id": "r1"}, status={"id": "r1"})

    async def write() -> None:
        controller.note_own_write(written)

    script.during[A] = write
    kube.push(WIDGETS, "MODIFIED", obj("a", 4, generation=2))  # a spec change: reconcile, which writes
    await script.reconciled(3)
    kube.push(WIDGETS, "MODIFIED", written)  # the echo, after the reconcile ended
    kube.push(WIDGETS, "MODIFIED", obj("b", 6, generation=2))
    await script.reconciled(4)
    assert script.calls[2:] == [A, B]


async def test_an_echo_that_arrives_before_the_writes_reply_calls_for_no_reconcile(
    world: tuple[FeedKube, Controller, Script],
) -> None:
    kube, controller, script = world
    written = obj("a", 5, labels={"kflare.dev/record-id": "r1"}, status={"id": "r1"})

    async def write() -> None:
        kube.push(WIDGETS, "MODIFIED", written)
        await seen(controller.informer, 5)  # the watch was faster than the write's reply
        controller.note_own_write(written)

    script.during[A] = write
    kube.push(WIDGETS, "MODIFIED", obj("a", 4, generation=2))
    await script.reconciled(3)
    kube.push(WIDGETS, "MODIFIED", obj("b", 6, generation=2))
    await script.reconciled(4)
    assert script.calls[2:] == [A, B]
    assert not script.overlapped


def create_with_intent() -> list[JSON]:
    """What one reconcile of a create writes, in order: the finalizer, the intent annotation, the status with the
    Cloudflare ID, the intent's removal. Each echo but the last differs from the object the reconcile ends with."""
    finalizers = ["kflare.dev/finalizer"]
    return [
        obj("a", 5, generation=2, finalizers=finalizers),
        obj("a", 6, generation=2, annotations={"kflare.dev/create-intent": "1"}, finalizers=finalizers),
        obj(
            "a",
            7,
            generation=2,
            annotations={"kflare.dev/create-intent": "1"},
            status={"id": "r1"},
            finalizers=finalizers,
        ),
        obj("a", 8, generation=2, annotations={}, status={"id": "r1"}, finalizers=finalizers),
    ]


@pytest.mark.parametrize("echoes", ["after the reconcile", "during the reconcile"])
async def test_the_echoes_of_a_reconciles_successive_writes_call_for_no_reconcile(
    world: tuple[FeedKube, Controller, Script], echoes: str
) -> None:
    kube, controller, script = world
    writes = create_with_intent()

    async def write() -> None:
        for written in writes:
            if echoes == "during the reconcile":
                kube.push(WIDGETS, "MODIFIED", written)
                await seen(controller.informer, int(written["metadata"]["resourceVersion"]))
            controller.note_own_write(written)

    script.during[A] = write
    kube.push(WIDGETS, "MODIFIED", obj("a", 4, generation=2))
    await script.reconciled(3)
    if echoes == "after the reconcile":
        for written in writes:
            kube.push(WIDGETS, "MODIFIED", written)
    kube.push(WIDGETS, "MODIFIED", obj("b", 9, generation=2))
    await script.reconciled(4)
    assert script.calls[2:] == [A, B]


async def test_someone_elses_change_during_a_reconcile_is_reconciled_after_it(
    world: tuple[FeedKube, Controller, Script],
) -> None:
    kube, controller, script = world

    async def user_edits_meanwhile() -> None:
        kube.push(WIDGETS, "MODIFIED", obj("a", 5, generation=3))
        await seen(controller.informer, 5)

    script.during[A] = user_edits_meanwhile
    kube.push(WIDGETS, "MODIFIED", obj("a", 4, generation=2))
    await script.reconciled(4)
    assert script.calls[2:] == [A, A]
    assert not script.overlapped, "never two reconciles of one key at once"


@pytest.mark.parametrize("reply", ["before the deletion's event", "after the deletion's event"])
async def test_a_deletion_during_a_reconcile_is_reconciled_though_its_write_carries_it(
    world: tuple[FeedKube, Controller, Script], reply: str
) -> None:
    """The object is deleted while a reconcile runs; that reconcile then writes its status, and the write's reply
    (and echo) already carries the deletionTimestamp it never acted on: the deletion still gets its reconcile (else
    the finalizer is never released, and the object stays Terminating)."""
    kube, controller, script = world
    deleted = obj("a", 5, generation=3, deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["kflare.dev/f"])
    written = changed(deleted, 6, generation=3)
    written["status"] = {"ready": True}

    async def deleted_meanwhile() -> None:
        if reply == "before the deletion's event":
            controller.note_own_write(written)
            kube.push(WIDGETS, "MODIFIED", deleted)
            await seen(controller.informer, 5)
        else:
            kube.push(WIDGETS, "MODIFIED", deleted)
            await seen(controller.informer, 5)
            controller.note_own_write(written)
        kube.push(WIDGETS, "MODIFIED", written)
        await seen(controller.informer, 6)

    script.during[A] = deleted_meanwhile
    kube.push(WIDGETS, "MODIFIED", obj("a", 4, generation=2))
    await script.reconciled(4)
    assert script.calls[2:] == [A, A]
    assert not script.overlapped


async def test_someone_elses_status_change_during_a_reconcile_calls_for_no_other(
    world: tuple[FeedKube, Controller, Script],
) -> None:
    kube, controller, script = world

    async def status_meanwhile() -> None:
        kube.push(WIDGETS, "MODIFIED", obj("a", 5, generation=2, status={"note": "from elsewhere"}))
        await seen(controller.informer, 5)

    script.during[A] = status_meanwhile
    kube.push(WIDGETS, "MODIFIED", obj("a", 4, generation=2))
    await script.reconciled(3)
    kube.push(WIDGETS, "MODIFIED", obj("b", 6, generation=2))
    await script.reconciled(4)
    assert script.calls[2:] == [A, B]


async def test_an_object_deleted_and_made_again_alike_is_reconciled(
    world: tuple[FeedKube, Controller, Script],
) -> None:
    kube, _, script = world
    kube.push(WIDGETS, "DELETED", obj("a", 5))
    kube.push(WIDGETS, "ADDED", obj("a", 6))  # same generation, labels and annotations as the one before
    await script.reconciled(3)
    assert script.calls[2:] == [A]


@pytest.mark.parametrize("status", [404, 409])
async def test_an_object_deleted_or_changed_under_a_write_is_looked_at_again_without_an_error(
    world: tuple[FeedKube, Controller, Script], caplog: pytest.LogCaptureFixture, status: int
) -> None:
    kube, _, script = world

    async def raced() -> None:
        raise KubeError(status, "NotFound" if status == 404 else "Conflict", "the object changed under the write")

    script.during[A] = raced
    kube.push(WIDGETS, "MODIFIED", changed(obj("a", 1), 5, labels={"edited": "yes"}))
    with caplog.at_level("INFO", logger="app.kube.controller"):
        await script.reconciled(4)  # the raced reconcile, then its retry
    assert script.calls[2:] == [A, A]
    assert not [r for r in caplog.records if r.levelname == "ERROR"], "a race of writes is no failure"
    assert any("looked at again" in r.getMessage() for r in caplog.records)


class RateLimitedOnce:
    """Refused by Cloudflare's rate limit the first time (the reconcile asks for Cloudflare's Retry-After), then
    reconciled."""

    def __init__(self) -> None:
        self.calls: list[Key] = []

    async def reconcile(self, key: Key) -> Outcome:
        self.calls.append(key)
        if len(self.calls) == 1:
            return Outcome(requeue_after=0.05, failed=True)
        return Outcome.done()

    async def timed_out(self, key: Key, seconds: float) -> None:
        raise AssertionError("no reconcile here runs out of time")


async def test_a_rate_limited_reconcile_counts_as_an_error_and_waits_out_its_pause() -> None:
    """The deploy guide's alert on reconcile errors fires on rate limiting: a reconcile paced by Retry-After moves
    controller_runtime_reconcile_errors_total, and the key comes back after the pause."""
    kube = FeedKube()
    kube.put(WIDGETS, obj("a", 1))
    reconciler = RateLimitedOnce()
    controller = Controller(kube, WIDGETS, reconciler, workers=1)  # type: ignore[arg-type]
    errors = REGISTRY.get_sample_value("controller_runtime_reconcile_errors_total", {"controller": "widget"}) or 0.0
    controller.start_informer()
    await controller.informer.synced.wait()
    controller.start_workers()
    try:
        await until(lambda: len(reconciler.calls) >= 2, "the reconcile after the pause")
        after = REGISTRY.get_sample_value("controller_runtime_reconcile_errors_total", {"controller": "widget"})
        assert after == errors + 1
        assert REGISTRY.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": "widget", "result": "error"}
        )
    finally:
        await controller.stop()
