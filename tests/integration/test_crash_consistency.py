"""A controller killed at any point never duplicates nor orphans a Cloudflare object.

The controller is SIGKILLed again and again while it creates, updates and deletes 50 records; the kill points are
drawn at random from the stream of Cloudflare writes, so they land between "created in Cloudflare" and "ID written
to status", between a delete and the finalizer's removal, and everywhere else. After a last, undisturbed run, the
emulator must hold exactly the records the manifests describe.
"""

from __future__ import annotations

import contextlib
import random
import time
from pathlib import Path

import pytest

from app.controlplane import ControlPlane
from tests.fixtures.controller import ControllerProcess, Kflare, controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.helpers import eventually
from tests.integration.test_first_slice import records

pytestmark = pytest.mark.integration

RECORDS = 50
KILLS_PER_PHASE = 6


def write_count(emulator: EmulatorProcess, since: float) -> int:
    return len([c for c in emulator.calls(since=since) if c["method"] in ("POST", "PATCH", "PUT", "DELETE")])


async def run_with_kills(
    plane: ControlPlane, emulator: EmulatorProcess, workdir: Path, rng: random.Random, budget: int
) -> int:
    """Start and SIGKILL the controller KILLS_PER_PHASE times, each after a random number of Cloudflare writes."""
    kills = 0
    for _ in range(KILLS_PER_PHASE):
        since = time.time()
        target = rng.randint(1, max(1, budget // KILLS_PER_PHASE))
        proc = ControllerProcess(plane, emulator, workdir).start()
        try:

            async def written(target: int = target, since: float = since) -> bool:
                return write_count(emulator, since) >= target

            # When the phase has no writes left, the kill lands on an idle controller.
            with contextlib.suppress(AssertionError):
                await eventually(written, timeout=15, what=f"{target} Cloudflare writes")
            proc.kill()
            kills += 1
        finally:
            proc.stop()
    return kills


async def test_sigkill_while_creating_updating_and_deleting(
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare_crds: None,
    kflare: Kflare,
    tmp_path: Path,
) -> None:
    rng = random.Random(20261129)
    with controller_process(control_plane, fresh_emulator, tmp_path):
        zone_id = await kflare.ready_zone("crash.example")

    for i in range(RECORDS):
        await kflare.make_record(f"r{i}", "zone", name=f"r{i}.crash.example", type="A", content=f"192.0.2.{i + 1}")
    kills = await run_with_kills(control_plane, fresh_emulator, tmp_path, rng, RECORDS)

    for i in range(0, RECORDS, 2):
        await kflare.patch("DNSRecord", f"r{i}", {"spec": {"content": f"198.51.100.{i + 1}"}})
    kills += await run_with_kills(control_plane, fresh_emulator, tmp_path, rng, RECORDS // 2)

    for i in range(1, RECORDS, 4):
        await kflare.delete("DNSRecord", f"r{i}")
    kills += await run_with_kills(control_plane, fresh_emulator, tmp_path, rng, RECORDS // 4)

    deleted = set(range(1, RECORDS, 4))
    expected = sorted(
        (f"r{i}.crash.example", f"198.51.100.{i + 1}" if i % 2 == 0 else f"192.0.2.{i + 1}")
        for i in range(RECORDS)
        if i not in deleted
    )
    with controller_process(control_plane, fresh_emulator, tmp_path):

        async def converged() -> bool:
            held = sorted((r["name"], r["content"]) for r in records(fresh_emulator, zone_id, type="A"))
            assert held == expected, f"{len(held)} records in Cloudflare, {len(expected)} described"
            return True

        await eventually(converged, timeout=60, what="Cloudflare to hold exactly the described records")
        for i in deleted:
            await kflare.gone("DNSRecord", f"r{i}")
        for i in set(range(RECORDS)) - deleted:
            await kflare.ready("DNSRecord", f"r{i}")
        await kflare.cleanup()
    assert kills == 3 * KILLS_PER_PHASE
