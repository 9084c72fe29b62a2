"""Leader election: a standby takes over a lease duration after the dead leader's last renewal, not up to two retry
periods later (it watches the Lease, so it sees each renewal when it happens, and tries when the lease expires)."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

from app.kube.client import JSON, LEASES, KubeError, ResourceType
from app.kube.leader import EXPIRY_MARGIN, LeaderElector
from tests.unit.cloudflare.helpers import FakeClock, idle
from tests.unit.cloudflare.helpers import eventually as until


class FakeLeases:
    """One Lease behind the few calls the elector makes, with resourceVersion checks and a watch."""

    def __init__(self) -> None:
        self.lease: JSON | None = None
        self.version = 0
        self.changed = asyncio.Condition()
        self.gets: list[str] = []

    async def _store(self, lease: JSON) -> JSON:
        self.version += 1
        lease = copy.deepcopy(lease)
        lease.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.lease = lease
        async with self.changed:
            self.changed.notify_all()
        return copy.deepcopy(lease)

    async def get(self, rt: ResourceType, name: str, namespace: str | None = None) -> JSON:
        self.gets.append(name)
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
    # On a virtual clock: the takeover's moment is exact, whatever the machine's load.
    clock = FakeClock()
    kube = FakeLeases()
    duration, retry_period = 1.0, 0.6
    await kube.create(LEASES, {"metadata": {"name": "l"}, "spec": {**renewal(clock, "old"), "leaseDurationSeconds": 1}})
    standby = LeaderElector(
        kube,  # type: ignore[arg-type]
        "ns",
        "l",
        "new",
        lease_duration=duration,
        renew_deadline=0.8,
        retry_period=retry_period,
        clock=clock,
    )
    elected_at: list[float] = []

    async def lead() -> None:
        elected_at.append(clock.now())
        await asyncio.Event().wait()

    running = asyncio.create_task(standby.run(lead))
    try:
        # The old leader renews every 0.05 s, and dies at its first renewal after one of the standby's polls: the
        # worst moment for a standby that only polls (it learns of that renewal a whole retry period late).
        await until(lambda: len(kube.gets) > 0)
        polls = len(kube.gets)
        while True:
            assert kube.lease is not None
            lease = copy.deepcopy(kube.lease)
            lease["spec"].update(renewal(clock, "old"))
            await kube.replace(LEASES, lease)
            last_renewal = clock.now()
            await idle()
            if len(kube.gets) >= polls + 2:
                break
            clock.advance(0.05)
            await idle()  # a poll due now runs before the next renewal
        await clock.run([asyncio.create_task(until(lambda: bool(elected_at)))])
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert kube.lease is not None
    assert kube.lease["spec"]["holderIdentity"] == "new"
    took = elected_at[0] - last_renewal
    assert duration <= took <= duration + EXPIRY_MARGIN + 1e-9, f"took {took:.3f} s after the last renewal"


def renewal(clock: FakeClock, holder: str) -> dict[str, Any]:
    """A renewal's record, stamped from the virtual clock so that each one differs from the last."""
    return {"holderIdentity": holder, "renewTime": dt.datetime.fromtimestamp(clock.now(), dt.UTC).isoformat()}
