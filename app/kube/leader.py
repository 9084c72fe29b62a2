"""Leader election on a `coordination.k8s.io/v1` Lease, with client-go's rules.

A candidate takes the Lease when it is free or when its holder has not renewed it for a lease duration, measured
on this process's clock from when the record was last seen to change (so clock skew between replicas does not
matter). The leader renews every retry period and steps down if it cannot renew within the renew deadline. Every
write carries the resourceVersion read, so two candidates can never both win. On a clean shutdown the leader
releases the Lease, and a standby takes over at its next try instead of a lease duration later.

A candidate also watches the Lease while it waits, so it sees each renewal when it happens rather than at its next
poll, and it tries again the moment the lease it saw last would expire: a leader that dies is replaced a lease
duration after its last renewal (client-go's rule), not up to two retry periods later.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TypeVar

from app.clock import Clock, MonotonicClock
from app.kube.client import JSON, LEASES, KubeClient, KubeError

log = logging.getLogger(__name__)

EXPIRY_MARGIN = 0.01  # seconds past the expiry to try at, so that the try finds the lease expired

T = TypeVar("T")


def _micro_time(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LeaderElector:
    kube: KubeClient
    namespace: str
    name: str
    identity: str
    lease_duration: float = 12.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    clock: Clock = field(default_factory=MonotonicClock)
    """The durations, deadlines and periods above are kept on it (tests drive it)."""

    _observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
    _observed_at: float = 0.0
    _observed_duration: float = 0.0
    _leading: bool = False
    _seen: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def leading(self) -> bool:
        return self._leading

    async def run(self, lead: Callable[[], Coroutine[object, object, None]]) -> None:
        """Campaign until elected, run `lead()` while leading; return when leadership is lost or lead() ends."""
        following = asyncio.create_task(self._follow(), name="leader-follow")
        try:
            while True:
                if await self._try_acquire_or_renew():
                    break
                self._seen.clear()
                with contextlib.suppress(TimeoutError):
                    await self._within(self._seen.wait(), self._until_next_try())
        finally:
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
        self._leading = True
        log.info("became leader", extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity})
        leading: asyncio.Task[None] = asyncio.ensure_future(lead())
        renewing = asyncio.create_task(self._renew_loop(), name="leader-renew")
        try:
            done, _ = await asyncio.wait({leading, renewing}, return_when=asyncio.FIRST_COMPLETED)
            if renewing in done:
                log.error("lost leadership", extra={"lease": f"{self.namespace}/{self.name}"})
        finally:
            self._leading = False
            for task in (leading, renewing):
                task.cancel()
            await asyncio.gather(leading, renewing, return_exceptions=True)

    def _until_next_try(self) -> float:
        """A retry period, or less: until the lease another candidate holds would expire, if that comes first."""
        holder = self._observed[0] if self._observed is not None else ""
        if not holder or holder == self.identity:
            return self.retry_period
        expires_in = self._observed_at + self._observed_duration - self.clock.now() + EXPIRY_MARGIN
        if expires_in <= 0:
            return self.retry_period  # expired already and still not ours: the try failed, retry at the usual pace
        return min(self.retry_period, expires_in)

    def _see(self, lease: JSON) -> None:
        """Note the Lease's record; a change restarts the lease duration (on this process's clock)."""
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity") or "", spec.get("renewTime") or "")
        self._observed_duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock.now()
            self._seen.set()

    async def _follow(self) -> None:
        """Watch the Lease while campaigning, noting each change as it happens; polling still decides."""
        selector = f"metadata.name={self.name}"
        while True:
            try:
                version = ""
                while True:
                    async for event in self.kube.watch(
                        LEASES,
                        namespace=self.namespace,
                        resource_version=version,
                        timeout_seconds=300,
                        field_selector=selector,
                    ):
                        lease = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            raise KubeError(int(lease.get("code", 500)), str(lease.get("reason", "")), "")
                        version = (lease.get("metadata") or {}).get("resourceVersion") or version
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self._see(lease)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the polls carry on without the watch, which only makes them quicker
                log.debug("watching the leader lease failed: %r", exc)
                await self.clock.sleep(self.retry_period)

    async def _within(self, work: Awaitable[T], seconds: float) -> T:
        """What `work` comes to, unless `seconds` pass first on the elector's clock: then it is cancelled and this
        raises TimeoutError."""
        doing = asyncio.ensure_future(work)
        timer = asyncio.ensure_future(self.clock.sleep(seconds))
        try:
            await asyncio.wait((doing, timer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            doing.cancel()  # a no-op once it is done
            await asyncio.gather(doing, timer, return_exceptions=True)
        if doing.cancelled():
            raise TimeoutError
        return doing.result()

    async def _renew_loop(self) -> None:
        last_renew = self.clock.now()
        while True:
            await self.clock.sleep(self.retry_period)
            try:
                renewed = await self._within(self._try_acquire_or_renew(), self.renew_deadline)
            except TimeoutError:
                renewed = False
            if renewed:
                last_renew = self.clock.now()
            elif self.clock.now() - last_renew > self.renew_deadline:
                return

    async def _try_acquire_or_renew(self) -> bool:
        now = dt.datetime.now(dt.UTC)
        try:
            lease = await self.kube.get(LEASES, self.name, self.namespace)
        except KubeError as exc:
            if not exc.not_found:
                log.warning("reading the leader lease failed: %s", exc)
                return False
            return await self._create(now)
        except (OSError, TimeoutError) as exc:
            log.warning("reading the leader lease failed: %r", exc)
            return False
        self._see(lease)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        duration = self._observed_duration
        if holder and holder != self.identity and self.clock.now() - self._observed_at < duration:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder != self.identity:
            transitions += 1
            spec["acquireTime"] = _micro_time(now)
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=int(self.lease_duration),
            renewTime=_micro_time(now),
            leaseTransitions=transitions,
        )
        lease["spec"] = spec
        try:
            updated = await self.kube.replace(LEASES, lease, self.namespace)
        except KubeError as exc:
            if not exc.conflict:
                log.warning("updating the leader lease failed: %s", exc)
            return False
        except (OSError, TimeoutError) as exc:
            log.warning("updating the leader lease failed: %r", exc)
            return False
        self._remember(updated)
        return True

    async def _create(self, now: dt.datetime) -> bool:
        body: JSON = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": _micro_time(now),
                "renewTime": _micro_time(now),
                "leaseTransitions": 0,
            },
        }
        try:
            created = await self.kube.create(LEASES, body, self.namespace)
        except KubeError as exc:
            if not exc.conflict:
                log.warning("creating the leader lease failed: %s", exc)
            return False
        self._remember(created)
        return True

    def _remember(self, lease: JSON) -> None:
        spec = lease.get("spec") or {}
        self._observed = (spec.get("holderIdentity") or "", spec.get("renewTime") or "")
        self._observed_at = self.clock.now()

    async def release(self) -> None:
        """Give the Lease up so that a standby takes over at once."""
        try:
            lease = await self.kube.get(LEASES, self.name, self.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time(dt.datetime.now(dt.UTC)))
            await self.kube.replace(LEASES, lease, self.namespace)
            log.info("released leadership", extra={"lease": f"{self.namespace}/{self.name}"})
        except (KubeError, OSError, TimeoutError) as exc:
            log.warning("releasing the leader lease failed: %r", exc)
