"""DNS writes of one zone that are due together go out as one `POST /zones/{id}/dns_records/batch`.

Each reconcile submits its own operation (create, patch or delete) and awaits its own result, as if it had made the
call alone. The batcher holds operations while more may join: the reconciles of a bulk apply reach it over seconds,
paced by their Kubernetes writes. Reconciles of a zone announce themselves when they begin (`taking_part`), so the
batcher knows who may still write: a batch goes out once none of them is left to submit and no operation has joined
for a quiet spell (QUIET for a lone edit, longer as the batch grows, up to QUIET_MAX), or when it is full, or after
HOLD seconds at the most, and before any of its reconciles has used half the time it had left when it submitted
(its timeout would cut it before the answer came: it would retry and wait again, and under a slow Cloudflare no batch
would ever go). Records waiting out a back-off are not waited for: they may not run for minutes. It sends up to
the plan's cap per call (200 on Free, 3,500 on paid plans) and maps Cloudflare's answer back: the result lists come
in the order sent, per operation type.

Cloudflare applies a batch all or nothing. When one is refused (a 4xx), the batch is split in halves and each half
sent again, down to single operations, so the one bad record gets its own error and every other operation is
applied: one bad record costs about 2·log2(n) extra calls, and never blocks the others. A transient failure (5xx,
timeout, 429) fails every operation of the batch with that error; each reconcile retries with its own back-off.
A batch of one is sent as the plain call, which costs the same and reads better in Cloudflare's audit log.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from app.clock import Clock, MonotonicClock
from app.cloudflare.calls import JsonBody
from app.cloudflare.client import CloudflareClient
from app.cloudflare.errors import (
    CloudflareError,
    Conflict,
    InvalidToken,
    NotFound,
    PermissionDenied,
    Terminal,
    Transient,
)
from app.cloudflare.models import DNSRecord
from app.kube.controller import reconcile_deadline

QUIET = 0.2  # a batch goes out once no operation has joined it for this long and no reconcile may still join...
QUIET_MAX = 2.0  # ...a spell that grows with the batch, to this at the most...
HOLD = 60.0  # ...or when its first operation has waited this long, or when it is full
# A minute, because a bulk apply on a busy API server reaches the controller over more than 30 s, and a batch cut
# there costs a call per zone; a record's answers are cached by resolvers for minutes anyway.
OPS_PER_CALL = {"free": 200}
PAID_OPS_PER_CALL = 3500

OpKind = Literal["delete", "patch", "post"]
OpBody = Mapping[str, JsonBody]
"""The create body, or the patch with its `id`, or `{"id": ...}` for a delete."""


def ops_per_call(plan: str | None) -> int:
    return OPS_PER_CALL.get(plan or "free", PAID_OPS_PER_CALL)


@dataclass(eq=False)
class _Op:
    kind: OpKind
    body: OpBody
    owner: str  # the resource the operation is for
    done: asyncio.Future[DNSRecord | None]
    sending: asyncio.Task[None] | None = None
    alone: bool = False
    latest: float = float("inf")
    """When the batch must go for this operation's reconcile to be there for the answer (the batcher's clock)."""


Applied = Callable[[OpKind, OpBody, DNSRecord | None], None]


@dataclass
class ZoneBatcher:
    client: CloudflareClient
    zone_id: str
    applied: Applied = lambda kind, body, record: None
    """Called for every operation Cloudflare applied, even one whose reconcile gave up waiting for it."""
    limit: int = 200
    quiet: float = QUIET
    quiet_max: float = QUIET_MAX
    hold: float = HOLD
    pending: list[_Op] = field(default_factory=list)
    _arrived: float = 0.0
    inflight: dict[str, set[_Op]] = field(default_factory=dict)
    calls: int = 0
    expected: Callable[[], int] = lambda: 0
    """How many reconciles of the zone have begun and may still submit an operation."""
    clock: Clock = field(default_factory=MonotonicClock)
    _flusher: asyncio.Task[None] | None = None
    _wake: asyncio.Event | None = None
    _sends: set[asyncio.Task[None]] = field(default_factory=set)

    async def create(self, owner: str, body: OpBody) -> DNSRecord:
        created = await self._submit("post", body, owner)
        assert created is not None
        return created

    async def patch(self, owner: str, record_id: str, changes: OpBody) -> DNSRecord:
        patched = await self._submit("patch", {**changes, "id": record_id}, owner)
        assert patched is not None
        return patched

    async def delete(self, owner: str, record_id: str) -> None:
        await self._submit("delete", {"id": record_id}, owner)

    async def settled(self, owner: str) -> None:
        """Wait until no operation of `owner` is in flight: a retry after a timed-out reconcile must see what the
        abandoned operation did before deciding anything (else a create could be sent twice)."""
        for op in list(self.inflight.get(owner, ())):
            with contextlib.suppress(Exception):
                await asyncio.shield(op.done)

    async def _submit(self, kind: OpKind, body: OpBody, owner: str) -> DNSRecord | None:
        loop = asyncio.get_running_loop()
        op = _Op(kind, body, owner, loop.create_future())
        now = self.clock.now()
        deadline = reconcile_deadline()
        if deadline is not None:  # in the loop's clock: what is left of it is a span on any clock
            op.latest = now + max(0.0, deadline - loop.time()) / 2
        self.pending.append(op)
        self._arrived = now
        taking_part = _TAKING_PART.get()
        if taking_part is not None:
            taking_part.submitted()  # this reconcile makes no other write: the batch need not wait for it
        self.wake()
        self.inflight.setdefault(owner, set()).add(op)
        op.done.add_done_callback(lambda _: self._finished(op))
        # A reconcile cut while waiting no longer reads the outcome; whoever still awaits it gets it all the same.
        op.done.add_done_callback(_retrieve)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name=f"dns-batch:{self.zone_id}")
        try:
            return await asyncio.shield(op.done)
        except asyncio.CancelledError:
            # The reconcile was cut (its timeout, a shutdown). Not sent yet: it never will be. Sent alone: the call
            # is abandoned, as an unbatched call would be. Sent with others: the batch goes on for their sake.
            if op in self.pending:
                self.pending.remove(op)
                _settle(op, error=asyncio.CancelledError())
            elif op.alone and op.sending is not None:
                op.sending.cancel()
            raise

    def wake(self) -> None:
        """Look again whether the batch should go (an operation arrived, a reconcile that might have joined ended)."""
        if self._wake is not None:
            self._wake.set()

    def _finished(self, op: _Op) -> None:
        ops = self.inflight.get(op.owner)
        if ops is not None:
            ops.discard(op)
            if not ops:
                del self.inflight[op.owner]

    async def _flush(self) -> None:
        first = self.clock.now()
        self._wake = wake = asyncio.Event()
        try:
            while len(self.pending) < self.limit:
                now = self.clock.now()
                latest = min([first + self.hold, *(op.latest for op in self.pending)])
                if now >= latest:
                    break
                spell = self._quiet_spell()
                quiet = now >= self._arrived + spell
                if quiet and self.expected() <= 0:
                    break
                due = latest if quiet else min(latest, self._arrived + spell)
                wake.clear()
                await self._woken_or_due(wake, due - now)
        finally:
            self._wake = None
        while self.pending:
            ops, self.pending = self.pending[: self.limit], self.pending[self.limit :]
            # Each batch on its own task: one that hangs (until the client's deadline) holds up no other.
            task = asyncio.create_task(self._send(ops), name=f"dns-batch-send:{self.zone_id}")
            for op in ops:
                op.sending, op.alone = task, len(ops) == 1
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)

    async def _woken_or_due(self, wake: asyncio.Event, seconds: float) -> None:
        """Returns when `wake` is set or `seconds` have passed on the batcher's clock, whichever is first."""
        woken = asyncio.ensure_future(wake.wait())
        due = asyncio.ensure_future(self.clock.sleep(seconds))
        try:
            await asyncio.wait((woken, due), return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            due.cancel()
            await asyncio.gather(woken, due, return_exceptions=True)

    def _quiet_spell(self) -> float:
        """A lone edit goes out after QUIET. A batch that keeps growing is a bulk apply, whose next member may be
        a moment behind (kubectl sends objects one at a time and pauses between its chunks, and the API server's
        watch delivers them in bursts), so it waits longer for it: a spell cut short sends a part of the batch
        and makes the rest one more call."""
        return min(self.quiet_max, self.quiet * (1 + len(self.pending) / 2))  # QUIET_MAX at 18 operations

    async def _send(self, ops: list[_Op]) -> None:
        try:
            if len(ops) == 1:
                results = [await self._single(ops[0])]
            else:
                results = await self._batch(ops)
        except (Conflict, NotFound, Terminal) as refused:
            if len(ops) == 1 or isinstance(refused, InvalidToken | PermissionDenied):
                for op in ops:  # the token's fault is every operation's: splitting would only spend calls
                    _settle(op, error=refused)
                return
            half = len(ops) // 2
            await self._send(ops[:half])
            await self._send(ops[half:])
            return
        except (CloudflareError, OSError, TimeoutError) as failed:
            for op in ops:
                _settle(op, error=failed)
            return
        except BaseException as unexpected:
            for op in ops:
                _settle(op, error=unexpected if isinstance(unexpected, Exception) else asyncio.CancelledError())
            raise
        for op, result in zip(ops, results, strict=True):
            self.applied(op.kind, op.body, result)
            _settle(op, result=result)

    async def _single(self, op: _Op) -> DNSRecord | None:
        self.calls += 1
        if op.kind == "post":
            return await self.client.create_dns_record(self.zone_id, op.body)
        record_id = str(op.body["id"])
        if op.kind == "patch":
            return await self.client.patch_dns_record(
                self.zone_id, record_id, {k: v for k, v in op.body.items() if k != "id"}
            )
        with contextlib.suppress(NotFound):  # already gone counts as deleted
            await self.client.delete_dns_record(self.zone_id, record_id)
        return None

    async def _batch(self, ops: list[_Op]) -> list[DNSRecord | None]:
        self.calls += 1
        deletes = [op for op in ops if op.kind == "delete"]
        patches = [op for op in ops if op.kind == "patch"]
        posts = [op for op in ops if op.kind == "post"]
        result = await self.client.batch_dns_records(
            self.zone_id,
            deletes=[str(op.body["id"]) for op in deletes],
            patches=[op.body for op in patches],
            posts=[op.body for op in posts],
        )
        answered: dict[int, DNSRecord | None] = {id(op): None for op in deletes}
        for group, records in ((patches, result.patches), (posts, result.posts)):
            if len(records) != len(group):
                raise Transient(f"the DNS batch answered {len(records)} results for {len(group)} operations")
            answered.update({id(op): record for op, record in zip(group, records, strict=True)})
        return [answered[id(op)] for op in ops]


def _retrieve(done: asyncio.Future[DNSRecord | None]) -> None:
    """Mark the operation's error as seen, so that asyncio does not log it as never retrieved."""
    if not done.cancelled():
        done.exception()


def _settle(op: _Op, *, result: DNSRecord | None = None, error: BaseException | None = None) -> None:
    if op.done.done():
        return
    if error is not None:
        op.done.set_exception(error)
    else:
        op.done.set_result(result)


class _TakingPart:
    """One reconcile of a record of a zone: running (`active`), and until it submits, one the batch may wait for."""

    def __init__(self, batches: Batches, zone_id: str, owner: str) -> None:
        self.batches, self.zone_id, self.owner, self.open = batches, zone_id, owner, True
        batches.unsubmitted[zone_id] = batches.unsubmitted.get(zone_id, 0) + 1
        batches.active.setdefault(zone_id, set()).add(owner)

    def submitted(self) -> None:
        if self.open:
            self.open = False
            left = self.batches.unsubmitted[self.zone_id] - 1
            if left:
                self.batches.unsubmitted[self.zone_id] = left
            else:
                del self.batches.unsubmitted[self.zone_id]
            self.batches.wake(self.zone_id)

    def ended(self) -> None:
        self.submitted()
        owners = self.batches.active.get(self.zone_id)
        if owners is not None:
            owners.discard(self.owner)


_TAKING_PART: contextvars.ContextVar[_TakingPart | None] = contextvars.ContextVar("dns_batch_taking_part", default=None)


@dataclass
class Batches:
    """One batcher per zone and token, and who may still write to each zone.

    `waiting_of(zone_id)` tells which records of the zone wait for work (new, changed or being deleted) by their
    resource UID: those not running yet sit in the work queue, behind the workers, and will write soon; a batch
    waits for them too (up to HOLD), which is what makes a bulk apply one batch per zone and not one per gap."""

    waiting_of: Callable[[str], set[str]] = lambda zone_id: set()
    capacity: int = 256
    """Reconciles of records that run at once: with all of them busy, a queued record cannot join a batch."""
    clock: Clock = field(default_factory=MonotonicClock)
    """Time for the batchers' spells and holds (tests drive it)."""
    batchers: dict[tuple[str, str], ZoneBatcher] = field(default_factory=dict)
    unsubmitted: dict[str, int] = field(default_factory=dict)
    active: dict[str, set[str]] = field(default_factory=dict)

    @contextlib.contextmanager
    def taking_part(self, zone_id: str | None, owner: str) -> Iterator[None]:
        """Around a reconcile of a record of the zone: until it submits or ends, the zone's batch may wait for it."""
        if zone_id is None:
            yield
            return
        part = _TakingPart(self, zone_id, owner)
        token = _TAKING_PART.set(part)
        try:
            yield
        finally:
            _TAKING_PART.reset(token)
            part.ended()
            self.wake(zone_id)

    def expected(self, zone_id: str) -> int:
        """Writes that may still join the zone's batch: running reconciles that have not submitted, and records
        waiting in the queue (not running, nothing in flight)."""
        unsubmitted = self.unsubmitted.get(zone_id, 0)
        if sum(len(owners) for owners in self.active.values()) >= self.capacity:
            return unsubmitted  # every worker is busy: nothing queued can start before this batch goes
        running = self.active.get(zone_id, set())
        inflight = {owner for (zone, _), b in self.batchers.items() if zone == zone_id for owner in b.inflight}
        queued = self.waiting_of(zone_id) - running - inflight
        return unsubmitted + len(queued)

    def wake(self, zone_id: str) -> None:
        for (zone, _), batcher in self.batchers.items():
            if zone == zone_id:
                batcher.wake()

    applied: Callable[[str, OpKind, OpBody, DNSRecord | None], None] = lambda zone, kind, body, rec: None

    def of(self, client: CloudflareClient, zone_id: str, plan: str | None, size: int | None = None) -> ZoneBatcher:
        key = (zone_id, client.fingerprint)
        batcher = self.batchers.get(key)
        if batcher is None:

            def applied(kind: OpKind, body: OpBody, record: DNSRecord | None) -> None:
                self.applied(zone_id, kind, body, record)

            batcher = self.batchers[key] = ZoneBatcher(
                client, zone_id, applied, expected=lambda: self.expected(zone_id), clock=self.clock
            )
        batcher.client = client  # the newest client of the token (the session may have been renewed)
        batcher.limit = min(size, ops_per_call(plan)) if size else ops_per_call(plan)
        return batcher
