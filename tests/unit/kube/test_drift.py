"""The drift scheduler plans each check at the interval plus or minus a tenth after a sync, checks a group in one
round due when its first member is, and never checks what was deleted.

APScheduler is started paused and its jobs are fired by the test in order of their run dates: a fake clock that
moves only when the test says so."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

from app.kube.drift import DriftScheduler, Member

INTERVAL = 600.0
World = tuple[DriftScheduler, "Clock", list[Member], list[tuple[str, str]]]


class Clock:
    """The scheduler's jobs, fired on demand."""

    def __init__(self, drift: DriftScheduler) -> None:
        self.drift = drift

    def due(self) -> list[dt.datetime]:
        return sorted(job.next_run_time for job in self.drift.scheduler.get_jobs())

    def fire_next(self) -> None:
        job = min(self.drift.scheduler.get_jobs(), key=lambda j: j.next_run_time)
        job.remove()  # a one-off job is gone once it ran
        job.func(*job.args)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    checked: list[Member] = []
    rounds: list[tuple[str, str]] = []
    drift = DriftScheduler(INTERVAL, checked.append, lambda kind, group: rounds.append((kind, group)))
    drift.scheduler.start(paused=True)
    try:
        yield drift, Clock(drift), checked, rounds
    finally:
        drift.shutdown()


def rec(name: str) -> Member:
    return ("DNSRecord", "ns", name)


async def test_a_check_falls_due_at_the_interval_plus_or_minus_a_tenth(world: World) -> None:
    drift, clock, checked, _ = world
    before = dt.datetime.now(dt.UTC)
    for i in range(50):
        drift.plan(rec(f"r{i}"))
    after = dt.datetime.now(dt.UTC)
    due = clock.due()
    assert len(due) == 50
    assert before + dt.timedelta(seconds=0.9 * INTERVAL) <= due[0]
    assert due[-1] <= after + dt.timedelta(seconds=1.1 * INTERVAL)
    assert due[-1] - due[0] > dt.timedelta(seconds=INTERVAL / 100), "spread, so checks do not all come at once"
    clock.fire_next()
    assert len(checked) == 1


async def test_each_sync_plans_the_next_check_afresh(world: World) -> None:
    drift, clock, checked, _ = world
    drift.plan(rec("a"))
    drift.plan(rec("a"))
    assert len(clock.due()) == 1, "one check per object"
    clock.fire_next()
    assert checked == [rec("a")]
    assert clock.due() == []
    drift.plan(rec("a"))  # its reconcile synced again
    assert len(clock.due()) == 1


async def test_a_group_is_checked_in_one_round_due_with_its_first_member(world: World) -> None:
    drift, clock, checked, rounds = world
    drift.plan(rec("a"), "zone:z1")
    first_due = clock.due()
    drift.plan(rec("b"), "zone:z1")
    drift.plan(rec("c"), "zone:z1")
    drift.plan(rec("x"), "zone:z2")
    assert len(clock.due()) == 2, "one job per group"
    assert first_due[0] in clock.due(), "a later member does not push the group's check out"
    while clock.due():
        clock.fire_next()
    assert sorted(rounds) == [("DNSRecord", "zone:z1"), ("DNSRecord", "zone:z2")]
    assert sorted(checked) == [rec("a"), rec("b"), rec("c"), rec("x")]
    assert drift.checks == 2

    drift.plan(rec("a"), "zone:z1")  # after the round, members plan their next check as they sync
    clock.fire_next()
    assert checked[-1] == rec("a")
    assert rounds[-1] == ("DNSRecord", "zone:z1")


async def test_a_deleted_object_is_not_checked(world: World) -> None:
    drift, clock, checked, _ = world
    drift.plan(rec("alone"))
    drift.plan(rec("a"), "zone:z1")
    drift.plan(rec("b"), "zone:z1")
    drift.forget(rec("alone"))
    drift.forget(rec("b"))
    while clock.due():
        clock.fire_next()
    assert checked == [rec("a")]


async def test_no_checks_when_drift_checks_are_off() -> None:
    checked: list[Member] = []
    drift = DriftScheduler(0, checked.append)
    drift.start()
    drift.plan(rec("a"))
    drift.plan(rec("b"), "zone:z1")
    assert not drift.scheduler.running
    assert drift.scheduler.get_jobs() == []
    drift.shutdown()
