"""Drift checks: each resource is looked at again a while after it last synced, plus or minus a tenth at random.

A kind may put its objects in groups (DNS records by zone) that Cloudflare can list in one call: the group is
checked as one job, due when its first member is, and the kind reads the group's listing once for all members.
Scheduling is APScheduler's; a job only opens the round and enqueues keys, the workers do the reading.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from apscheduler.schedulers.asyncio import AsyncIOScheduler

log = logging.getLogger(__name__)

Member = tuple[str, str, str]  # (kind, namespace, name)


@dataclass
class DriftScheduler:
    interval: float
    enqueue: Callable[[Member], None]
    open_round: Callable[[str, str], None] = lambda kind, group: None
    jitter: float = 0.1
    scheduler: AsyncIOScheduler = field(default_factory=lambda: AsyncIOScheduler(timezone=dt.UTC))
    groups: dict[str, set[Member]] = field(default_factory=dict)
    checks: int = 0

    @property
    def enabled(self) -> bool:
        return self.interval > 0

    def start(self) -> None:
        if self.enabled and not self.scheduler.running:
            self.scheduler.start()

    def shutdown(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    def plan(self, member: Member, group: str | None = None) -> None:
        """Plan the next check of `member` (alone, or with its group) after a successful reconcile."""
        if not self.enabled:
            return
        job_id = f"{member[0]}|{group}" if group else "|".join(member)
        if group:
            self.groups.setdefault(job_id, set()).add(member)
            if self.scheduler.get_job(job_id) is not None:
                return  # the group's check is already due earlier
        delay = self.interval * random.uniform(1 - self.jitter, 1 + self.jitter)
        when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay)
        self.scheduler.add_job(
            self._due,
            "date",
            run_date=when,
            id=job_id,
            args=[job_id, member, group],
            replace_existing=True,
            misfire_grace_time=None,
        )

    def forget(self, member: Member) -> None:
        job_id = "|".join(member)
        if self.scheduler.get_job(job_id) is not None:
            self.scheduler.remove_job(job_id)
        for members in self.groups.values():
            members.discard(member)

    def _due(self, job_id: str, member: Member, group: str | None) -> None:
        self.checks += 1
        if group is None:
            self.enqueue(member)
            return
        members = self.groups.pop(job_id, set())
        self.open_round(member[0], group)
        for each in sorted(members):
            self.enqueue(each)
