"""DNS writes of a zone go out together; one bad operation gets its own error and blocks no other; each caller gets
its own result. Driven against the emulator in process, through the real client."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from app.cloudflare.errors import Terminal, Transient
from app.kube.controller import Outcome, Workers
from app.kube.informer import Key
from reconcilers.dns_batch import ZoneBatcher, ops_per_call
from tests.helpers import eventually
from tests.unit.cloudflare.helpers import FakeClock, idle
from tests.unit.cloudflare.helpers import eventually as until
from tests.unit.reconcilers.harness import TOKEN, Cloudflare, emulator_state

pytestmark = pytest.mark.heavy

ZONE_ID = "c" * 32
RECORDS = f"/zones/{ZONE_ID}/dns_records"


async def calls(cloudflare: Cloudflare) -> list[dict[str, Any]]:
    """The writes Cloudflare was sent (the test's own reads left out)."""
    reply = await cloudflare.http.get("http://emulator/__emulator/calls", params={"path": "dns_records"})
    return [c for c in reply.json()["calls"] if c["method"] != "GET"]


@pytest.fixture
async def cloudflare() -> Any:
    cf = Cloudflare(emulator_state([{"id": ZONE_ID, "name": "example.com"}]))
    yield cf
    await cf.aclose()


def batcher(cloudflare: Cloudflare, quiet: float = 0.01, **kwargs: Any) -> ZoneBatcher:
    return ZoneBatcher(cloudflare.session.client(TOKEN), ZONE_ID, quiet=quiet, **kwargs)


def a_record(i: int, content: str | None = None) -> dict[str, Any]:
    return {"type": "A", "name": f"h{i}.example.com", "content": content or f"192.0.2.{i + 1}", "ttl": 1}


async def test_writes_due_together_are_one_call_and_each_caller_gets_its_record(cloudflare: Cloudflare) -> None:
    zone = batcher(cloudflare)
    created = await asyncio.gather(*(zone.create(f"uid-{i}", a_record(i)) for i in range(50)))
    assert [r.name for r in created] == [f"h{i}.example.com" for i in range(50)]
    assert [c["path"] for c in await calls(cloudflare)] == [f"/client/v4{RECORDS}/batch"]

    patched, _ = await asyncio.gather(
        zone.patch("uid-0", created[0].id, {"content": "198.51.100.1"}), zone.delete("uid-1", created[1].id)
    )
    assert patched.content == "198.51.100.1"
    held = await cloudflare.get(RECORDS, per_page=500)
    assert len(held) == 49
    assert len(await calls(cloudflare)) == 2


async def test_a_bad_operation_gets_its_own_error_and_the_others_are_applied(cloudflare: Cloudflare) -> None:
    zone = batcher(cloudflare)
    results = await asyncio.gather(
        *(zone.create(f"uid-{i}", a_record(i, "not-an-address" if i == 5 else None)) for i in range(16)),
        return_exceptions=True,
    )
    assert isinstance(results[5], Terminal)
    assert all(not isinstance(r, BaseException) for i, r in enumerate(results) if i != 5)
    held = await cloudflare.get(RECORDS, per_page=500)
    assert len(held) == 15
    # Split in halves down to the bad one: about 2*log2(16) calls, not one per record.
    assert len(await calls(cloudflare)) <= 2 * 4 + 1


async def test_a_transient_failure_fails_every_operation_of_the_batch(cloudflare: Cloudflare) -> None:
    fault = {"route": "dns_records", "kind": "status", "status": 503, "count": 1}
    await cloudflare.http.post("http://emulator/__emulator/faults", json=fault)
    zone = batcher(cloudflare)
    results = await asyncio.gather(*(zone.create(f"u{i}", a_record(i)) for i in range(4)), return_exceptions=True)
    assert all(isinstance(r, Transient) for r in results)
    assert await cloudflare.get(RECORDS) == []
    assert len(await calls(cloudflare)) == 1, "no split for an error that is not the operations' fault"


async def test_the_plans_cap_splits_a_large_batch(cloudflare: Cloudflare) -> None:
    zone = batcher(cloudflare, limit=20)
    await asyncio.gather(*(zone.create(f"u{i}", a_record(i)) for i in range(50)))
    assert len(await calls(cloudflare)) == 3
    assert ops_per_call("free") == 200
    assert ops_per_call("pro") == 3500


async def test_an_abandoned_wait_is_not_sent_and_a_retry_sees_what_was(cloudflare: Cloudflare) -> None:
    zone = batcher(cloudflare, quiet=0.2)
    waiting = asyncio.create_task(zone.create("uid-a", a_record(1)))
    kept = asyncio.create_task(zone.create("uid-b", a_record(2)))
    while len(zone.pending) < 2:  # noqa: ASYNC110 - yield until both tasks have submitted; the batch waits
        await asyncio.sleep(0)
    waiting.cancel()
    await kept
    assert [r["name"] for r in await cloudflare.get(RECORDS)] == ["h2.example.com"]
    await zone.settled("uid-a")  # nothing of uid-a in flight: a retry may decide at once


async def _submitted(zone: ZoneBatcher, n: int, start: int) -> list[asyncio.Task[Any]]:
    tasks = [asyncio.create_task(zone.create(f"u{i}", a_record(i))) for i in range(start, start + n)]
    while len(zone.pending) < start + n:  # noqa: ASYNC110 - yield until every task has submitted
        await asyncio.sleep(0)
    return tasks


async def test_a_growing_batch_waits_out_a_pause_that_would_send_a_lone_edit(cloudflare: Cloudflare) -> None:
    # The pause between two bursts of a bulk apply is on the batcher's clock, which only the test moves.
    clock = FakeClock()
    zone = batcher(cloudflare, quiet=0.05, quiet_max=5.0, clock=clock)
    first = await _submitted(zone, 40, 0)
    clock.advance(0.15)  # longer than a lone edit's spell (0.075 s), shorter than 40 operations' (1.05 s)
    await idle()
    assert len(zone.pending) == 40, "the growing batch went out in the pause"
    second = await _submitted(zone, 40, 40)
    await clock.run([*first, *second])
    assert len(await calls(cloudflare)) == 1, "both bursts in one batch"

    await cloudflare.http.delete("http://emulator/__emulator/calls")
    lone = asyncio.create_task(zone.create("lone", a_record(90)))
    await idle()
    assert len(zone.pending) == 1
    clock.advance(0.15)
    await until(lone.done)  # with the clock standing still: its spell is over, or it waits for ever
    assert len(await calls(cloudflare)) == 1, "a lone edit is not held for a bulk apply's spell"
    await clock.run([asyncio.create_task(zone.create("next", a_record(91)))])
    assert len(await calls(cloudflare)) == 2


async def test_an_abandoned_wait_leaves_no_unretrieved_error_behind(cloudflare: Cloudflare) -> None:
    """A reconcile cut while its operation waits (not sent) or is in a batch that then fails: nobody awaits the
    outcome any more, and asyncio must not log "Future exception was never retrieved" for it."""
    unretrieved: list[str] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: unretrieved.append(str(context.get("message"))))
    try:
        fault = {"route": "dns_records", "kind": "status", "status": 503, "count": 1}
        await cloudflare.http.post("http://emulator/__emulator/faults", json=fault)
        zone = batcher(cloudflare, quiet=0.2)
        unsent = asyncio.create_task(zone.create("uid-a", a_record(1)))
        in_batch = asyncio.create_task(zone.create("uid-b", a_record(2)))
        kept = asyncio.create_task(zone.create("uid-c", a_record(3)))
        while len(zone.pending) < 3:  # noqa: ASYNC110 - yield until every task has submitted; the batch waits
            await asyncio.sleep(0)
        unsent.cancel()
        while zone.pending:  # noqa: ASYNC110 - yield until the batch is on its way
            await asyncio.sleep(0.01)
        in_batch.cancel()
        with pytest.raises(Transient):
            await kept
        await asyncio.gather(unsent, in_batch, return_exceptions=True)
        del unsent, in_batch, kept, zone
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert unretrieved == []


async def test_a_batch_goes_before_its_reconciles_timeout_would_cut_it(cloudflare: Cloudflare) -> None:
    """A reconcile that may still join (here: one that never does) holds the batch, but never past half the time the
    waiting reconcile had left: cut by its timeout, it would retry, wait again and be cut again, and the record
    would never be written while Cloudflare answers slowly."""
    zone = batcher(cloudflare, quiet=0.01, hold=60.0, expected=lambda: 1)
    outcomes: list[Outcome] = []
    timeouts: list[Key] = []

    class Writes:
        async def reconcile(self, key: Key) -> Outcome:
            await zone.create(key[1], a_record(1))
            return Outcome.done()

        async def timed_out(self, key: Key, seconds: float) -> None:
            timeouts.append(key)

    workers = Workers("dnsrecord", Writes(), workers=1, reconcile_timeout=2.0)
    workers.observers.append(lambda key, outcome: outcomes.append(outcome))
    workers.start_workers()
    try:
        workers.enqueue(("ns", "uid-a"))
        await eventually(lambda: _true(outcomes or timeouts), timeout=10, what="the reconcile to end")
        assert timeouts == [], "the reconcile was cut while its write waited in the batch"
        assert [r["name"] for r in await cloudflare.get(RECORDS)] == ["h1.example.com"]
    finally:
        await workers.stop()


async def _true(value: object) -> bool:
    return bool(value)
