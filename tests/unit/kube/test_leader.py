"""Leader election: a standby takes over a lease duration after the dead leader's last renewal, not up to two retry
periods later (it watches the Lease, so it sees each renewal when it happens, and tries when the lease expires)."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import time
from collections.abc import AsyncIterator
from typing import Any

from app.kube.client import JSON, KubeError, ResourceType
from app.kube.leader import LeaderElector


class FakeLeases:
    """One Lease behind the few calls the elector makes, with resourceVersion checks and a watch."""

    def __init__(self) -> None:
        self.lease: JSON | None = None
        self.version = 0
        self.changed = asyncio.Condition()
        self.gets: list[float] = []

    async def _store(self, lease: JSON) -> JSON:
        self.version += 1
        lease = copy.deepcopy(lease)
        lease.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.lease = lease
        async with self.changed:
            self.changed.notify_all()
        return copy.deepcopy(lease)

    async def get(self, rt: ResourceType, name: str, namespace: str | None = None) -> JSON:
        self.gets.append(time.monotonic())
        if self.lease is None:
            raise KubeError(404, "NotFound", name)
        return copy.deepcopy(self.lease)

    async def create(self, rt: ResourceType, body: JSON, namespace: str | None = None) -> JSON:
        if self.lease is not None:
            raise KubeError(409, "AlreadyExists", "")
        return await self._store(body)

    async def replace(self, rt: ResourceType, body: JSON, namespace: str | None = None) -> JSON:
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise KubeError(409, "Conflict", "")
        return await self._store(body)

    async def watch(self, rt: ResourceType, **_: Any) -> AsyncIterator[JSON]:
        seen = -1
        while True:
            if self.lease is not None and self.version != seen:
                seen = self.version
                yield {"type": "MODIFIED", "object": copy.deepcopy(self.lease)}
            async with self.changed:
                await self.changed.wait()


async def test_a_standby_takes_over_a_lease_duration_after_the_last_renewal() -> None:
    kube = FakeLeases()
    duration = 1.0
    now = dt.datetime.now(dt.UTC).isoformat()
    await kube.create(
        ResourceType("coordination.k8s.io", "v1", "leases", "Lease"),
        {"metadata": {"name": "l"}, "spec": {"holderIdentity": "old", "leaseDurationSeconds": 1, "renewTime": now}},
    )
    standby = LeaderElector(kube, "ns", "l", "new", lease_duration=duration, renew_deadline=0.8, retry_period=0.6)  # type: ignore[arg-type]
    elected = asyncio.Event()

    async def lead() -> None:
        elected.set()
        await asyncio.sleep(3600)

    running = asyncio.create_task(standby.run(lead))
    try:
        # The old leader renews every 0.05 s, and dies at its first renewal after one of the standby's polls: the
        # worst moment for a standby that only polls (it learns of that renewal a whole retry period late).
        polls = len(kube.gets)
        while len(kube.gets) < polls + 2:
            assert kube.lease is not None
            lease = copy.deepcopy(kube.lease)
            lease["spec"]["renewTime"] = dt.datetime.now(dt.UTC).isoformat()
            await kube.replace(ResourceType("coordination.k8s.io", "v1", "leases", "Lease"), lease)
            last_renewal = time.monotonic()
            await asyncio.sleep(0.05)
        await asyncio.wait_for(elected.wait(), 5)
        took = time.monotonic() - last_renewal
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert kube.lease is not None
    assert kube.lease["spec"]["holderIdentity"] == "new"
    assert duration <= took < duration + 0.15, f"took over {took:.2f} s after the last renewal"
