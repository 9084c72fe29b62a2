"""Scenario 1, DNS in depth: a controller killed at any point never duplicates nor orphans a Cloudflare object.

The controller is SIGKILLed again and again while it creates, updates and deletes 50 records. Its writes to
Cloudflare are slowed a little, so each kill, drawn at random from the stream of writes, lands while writes are
in flight: between "sent to Cloudflare" and its answer, between "created in Cloudflare" and "ID written to status",
between a delete and the finalizer's removal, and everywhere else. Every kill is checked to have landed so: the
process it ended had written to Cloudflare, and work was left for the next one. After a last, undisturbed run, the
emulator must hold exactly the records the manifests describe.

Two variants: writes sent one by one (`--dns-batch-size=1`), killed after a random number of them; and writes
batched per zone, killed while a batch is in flight at Cloudflare, or while the claims and statuses of its records
are being written to Kubernetes (after its answer, or after the recovery that finds what a killed batch created).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from app.controlplane import ControlPlane
from tests.fixtures.controller import GROUP, VERSION, ControllerProcess, Kflare, controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.helpers import eventually
from tests.integration.test_first_slice import records

pytestmark = pytest.mark.integration

RECORDS = 50
KILLS_PER_PHASE = 6
RECORD_WRITES = r"^(POST|PATCH|PUT|DELETE) /client/v4/zones/\w+/dns_records"
# Each record write waits 0 to 600 ms, 300 on average: slow enough that a kill finds writes in flight, and uneven
# enough that the four workers' writes are not answered in step.
WRITE_LATENCIES = [100] * 6


def write_count(emulator: EmulatorProcess, since: float) -> int:
    """Cloudflare writes sent since `since` and answered (a write in flight when its sender died is not)."""
    writes = [c for c in emulator.calls(since=since) if c["method"] in ("POST", "PATCH", "PUT", "DELETE")]
    return sum(c["status"] is not None for c in writes)


async def interrupted_creates(kflare: Kflare) -> int:
    """DNSRecords whose create intent is live: a kill came between the intent and the status recording the ID."""
    listing = await kflare.objects.list_namespaced_custom_object(GROUP, VERSION, kflare.namespace, "dnsrecords")
    return sum(
        "kflare.dev/create-intent" in (i["metadata"].get("annotations") or {})
        and not ((i.get("status") or {}).get("cloudflareMetadata") or {}).get("recordID")
        for i in listing["items"]
    )


async def unfinished(kflare: Kflare) -> int:
    """DNSRecords the controller still has work on: deleted but not gone, or not Ready for their generation."""
    listing = await kflare.objects.list_namespaced_custom_object(GROUP, VERSION, kflare.namespace, "dnsrecords")
    left = 0
    for item in listing["items"]:
        meta = item["metadata"]
        conditions = (item.get("status") or {}).get("conditions") or []
        ready = any(
            c["type"] == "Ready" and c["status"] == "True" and c.get("observedGeneration") == meta["generation"]
            for c in conditions
        )
        left += bool(meta.get("deletionTimestamp")) or not ready
    return left


def in_flight(emulator: EmulatorProcess, since: float) -> int:
    """Cloudflare writes sent since `since` and not answered yet."""
    writes = [c for c in emulator.calls(since=since) if c["method"] in ("POST", "PATCH", "PUT", "DELETE")]
    return sum(c["status"] is None for c in writes)


async def run_with_kills(
    plane: ControlPlane, emulator: EmulatorProcess, workdir: Path, rng: random.Random, kflare: Kflare, batched: bool
) -> int:
    """Start and SIGKILL the controller KILLS_PER_PHASE times, drawn so that the work left outlasts the kills.
    One by one: each kill after a random number of Cloudflare writes. Batched: a kill while a batch is in flight,
    or once a random number of its records have been written back. Fails if a kill landed on a controller that had
    not written to Cloudflare, or that had finished its work: every kill interrupts writes in progress."""
    interrupted = 0
    for kill in range(KILLS_PER_PHASE):
        before = await unfinished(kflare)
        if batched and before == 0 and kill > 0:
            # A batch does a phase's work in one or two calls: on a busy machine an earlier kill may have come
            # after all of it. Nothing is left to interrupt; the phase's kills so far did land mid-work.
            break
        assert before > 0, f"kill {kill}: no work left before it"
        target = rng.randint(1, max(1, before // (2 * (KILLS_PER_PHASE - kill))))
        since = time.time()
        proc = ControllerProcess(plane, emulator, workdir, *([] if batched else ["--dns-batch-size=1"])).start()
        try:
            if not batched:

                async def landed(target: int = target, since: float = since) -> bool:
                    return write_count(emulator, since) >= target

                what = f"kill {kill}: {target} Cloudflare writes"
            else:
                # A batch in flight, or part of the work written back (after a batch's answer; or recovered with no
                # write at all, when an earlier kill's batch had reached Cloudflare), whichever comes first.
                async def landed(target: int = target, since: float = since, before: int = before) -> bool:
                    return in_flight(emulator, since) > 0 or before - await unfinished(kflare) >= target

                what = f"kill {kill}: a batch in flight or {target} records written back"
            await eventually(landed, timeout=30, interval=0.02, what=what)
            proc.kill()
        finally:
            proc.stop()
        made = write_count(emulator, since) + in_flight(emulator, since)
        after = await unfinished(kflare)
        assert made >= 1 or batched, f"kill {kill}: the controller had not written to Cloudflare"
        assert after > 0 or (batched and kill > 0), (
            f"kill {kill} after {made} writes landed on an idle controller: its work was done"
        )
        interrupted += await interrupted_creates(kflare)
    return interrupted


@pytest.mark.parametrize("batched", [False, True], ids=["one-by-one", "batched"])
async def test_sigkill_while_creating_updating_and_deleting(
    batched: bool,
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare_crds: None,
    kflare: Kflare,
    tmp_path: Path,
) -> None:
    rng = random.Random(20261129)
    with controller_process(control_plane, fresh_emulator, tmp_path):
        zone_id = await kflare.ready_zone("crash.example")
    for latency in WRITE_LATENCIES:
        fresh_emulator.fault(RECORD_WRITES, "latency", latency_ms=latency, probability=0.5)

    def name(i: int) -> str:
        return f"r{i}.crash.example"

    for i in range(RECORDS):
        await kflare.make_record(f"r{i}", "zone", name=name(i), type="A", content=f"192.0.2.{i + 1}")

    interrupted = await run_with_kills(control_plane, fresh_emulator, tmp_path, rng, kflare, batched)
    # The window that matters most was hit: killed after the create was sent, before its claim was written.
    assert interrupted > 0, "no kill landed between a create intent and its claim"

    updated = range(0, RECORDS, 2)
    for i in updated:
        await kflare.patch("DNSRecord", f"r{i}", {"spec": {"content": f"198.51.100.{i + 1}"}})

    await run_with_kills(control_plane, fresh_emulator, tmp_path, rng, kflare, batched)

    deleted = set(range(1, RECORDS, 2))
    for i in deleted:
        await kflare.delete("DNSRecord", f"r{i}")

    await run_with_kills(control_plane, fresh_emulator, tmp_path, rng, kflare, batched)

    expected = sorted(
        (name(i), f"198.51.100.{i + 1}" if i % 2 == 0 else f"192.0.2.{i + 1}")
        for i in range(RECORDS)
        if i not in deleted
    )
    with controller_process(control_plane, fresh_emulator, tmp_path):

        async def converged() -> bool:
            now = sorted((r["name"], r["content"]) for r in records(fresh_emulator, zone_id, type="A"))
            assert now == expected, f"{len(now)} records in Cloudflare, {len(expected)} described"
            return True

        await eventually(converged, timeout=60, what="Cloudflare to hold exactly the described records")
        for i in deleted:
            await kflare.gone("DNSRecord", f"r{i}")
        for i in set(range(RECORDS)) - deleted:
            await kflare.ready("DNSRecord", f"r{i}")
        await kflare.cleanup()
