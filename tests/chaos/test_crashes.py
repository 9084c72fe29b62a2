"""Scenario 1: the controller SIGKILLed at random points while it creates, adopts, updates and deletes a mixed set
of every kind that creates Cloudflare objects; after each kill it restarts and must converge to exactly what the
manifests describe.

A unit per kind and per variant (created then deleted; created with the retain policy; pre-seeded in the emulator
and adopted, which keeps it by default), each in its own namespace (tests/chaos/crashes.py). The units go through
three phases (birth: create or adopt; update, for kinds with a field that changes in place; delete), each phase
split into batches. For each batch the test writes the batch's changes while a controller runs, then SIGKILLs it
once a random number of writes has been made since: writes to Cloudflare (POST/PUT/PATCH/DELETE in the emulator's
call log, counted as sent, so a write may be in flight), or writes to Kubernetes (creates, updates, patches and
deletes of kflare's objects, Secrets and ConfigMaps by the controller's own user, counted in the API server's audit
log, which the chaos session's control plane keeps: tests/chaos/secrets_audit.py). Cloudflare writes are slowed a
little so that kills find them in flight. A new controller then starts, and the test waits until every check holds:

- 0 duplicates: no key held twice in Cloudflare;
- 0 orphans: nothing left of a deleted resource whose policy deletes;
- 0 wrongly deleted: every object of a live, retained or adopted resource still there;
- every live resource Ready for its generation and as its spec says; every deleted one gone.

A kill that came after the batch's work was done is reported apart (it tests nothing but a restart).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes_asyncio.client.api_client import ApiClient

from app.controlplane import ControlPlane
from tests.chaos.crashes import (
    CONTROLLER_USER,
    VARIANTS,
    ChaosController,
    Unit,
    Verdict,
    check,
    clean_up,
    converge,
    make_units,
    register_written_secrets,
    sample_units,
    start_controller,
)
from tests.chaos.figures import SCALE, Figures, size
from tests.chaos.secrets_audit import AuditLog
from tests.fixtures.emulator import EmulatorProcess

pytestmark = pytest.mark.integration

SCENARIO = "1 crashes"
COPIES = size(ci=1, full=2)
"""Units per kind and variant."""
KILLS_PER_PHASE = size(ci=4, full=70)
CONVERGE_TIMEOUT = 120.0
WRITES = ("POST", "PUT", "PATCH", "DELETE")
PHASES = ("create", "adopt", "update", "delete (deleted)", "delete (kept)")


def cloudflare_writes(emulator: EmulatorProcess, since: float) -> int:
    """Cloudflare writes sent since `since`, answered or still in flight."""
    return sum(c["method"] in WRITES for c in emulator.calls(since=since))


def batches(steps: list[tuple[Unit, str]], count: int) -> list[list[tuple[Unit, str]]]:
    """`count` batches of as even a size as can be (fewer if there are fewer steps)."""
    count = min(count, len(steps))
    return [steps[i * len(steps) // count : (i + 1) * len(steps) // count] for i in range(count)]


@pytest.mark.timeout(size(ci=600, full=14400))
async def test_sigkill_at_random_writes_converges_to_the_manifests(
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare_crds: None,
    kube: ApiClient,
    audit: AuditLog,
    figures: Figures,
    tmp_path: Path,
) -> None:
    assert audit.path.exists(), "the chaos control plane keeps no audit log"
    rng = random.Random(20261201)
    emulator = fresh_emulator
    emulator.set_rate_limit(1_000_000, 300, 1)  # the test's own reads share the controller's token
    emulator.set_options(lists_per_account=len(VARIANTS) * COPIES)  # the Free plan allows one list
    args = ("--drift-check-interval=0s",)

    def start() -> ChaosController:
        return start_controller(control_plane, emulator, tmp_path, *args)

    proc = start()
    units = await make_units(kube, emulator, list(sample_units(COPIES)))
    kinds = sorted({u.kind for u in units})
    print(f"\n{len(units)} units over {len(kinds)} kinds, parents Ready")

    for latency in (100, 100, 100):
        emulator.fault(r"^(POST|PUT|PATCH|DELETE) ", "latency", latency_ms=latency, probability=0.5)

    phases: list[tuple[str, list[tuple[Unit, str]]]] = [
        ("birth", [(u, "birth") for u in units]),
        ("update", [(u, "update") for u in units if u.sample.update(u.ctx) is not None]),
        ("delete", [(u, "delete") for u in units]),
    ]
    kills = {"cloudflare writes": 0, "kubernetes writes": 0}
    late = 0
    covered: set[str] = set()
    worst = Verdict()
    failed: list[str] = []
    converge_times: list[float] = []
    point = 0
    try:
        for _, steps in phases:
            rng.shuffle(steps)
            for batch in batches(steps, KILLS_PER_PHASE):
                point += 1
                cf_steps = sum(unit.writes_cloudflare(step) for unit, step in batch)
                counter = rng.choice(("cloudflare writes", "kubernetes writes")) if cf_steps else "kubernetes writes"
                target = rng.randint(1, cf_steps if counter == "cloudflare writes" else len(batch))
                since, offset = time.time(), audit.offset()
                for unit, step in batch:
                    await unit.act(step)

                def count(counter: str = counter, since: float = since, offset: int = offset) -> int:
                    if counter == "cloudflare writes":
                        return cloudflare_writes(emulator, since)
                    return audit.writes_by(CONTROLLER_USER, offset)

                landed = await wait_for_count(count, target, batch, emulator)
                proc.kill()
                made_cf, made_kube = cloudflare_writes(emulator, since), audit.writes_by(CONTROLLER_USER, offset)
                if landed:
                    kills[counter] += 1
                    covered.update(unit.phase(step) for unit, step in batch)
                else:
                    late += 1
                restarted = time.monotonic()
                proc = start()
                verdict = await converge(units, emulator, CONVERGE_TIMEOUT)
                took = time.monotonic() - restarted
                converge_times.append(took)
                merge(worst, verdict)
                phases_here = sorted({unit.phase(step) for unit, step in batch})
                print(
                    f"kill {point:3d}: after {target} {counter} ({'landed' if landed else 'work already done'}; "
                    f"{made_cf} cloudflare, {made_kube} kubernetes writes made) during {len(batch)} steps "
                    f"[{', '.join(phases_here)}] -> converged in {took:.1f}s: {verdict.line()}"
                )
                if not verdict.ok():
                    failed.append(f"kill {point}: {verdict}")
                    break
            if failed:
                break
        await register_written_secrets(units)
    finally:
        total = sum(kills.values())
        target_points = ">= 200" if SCALE == "full" else ">= 10"
        figures.record(
            SCENARIO, "kill points", total, target=target_points, ok=total >= (200 if SCALE == "full" else 10)
        )
        for counter, n in kills.items():
            figures.record(SCENARIO, f"kill points by {counter}", n, target=">= 1", ok=n >= 1)
        figures.record(SCENARIO, "kills after the work was done (not counted)", late)
        figures.record(SCENARIO, "kinds in the mixed set", len(kinds), target=f"{len(kinds)}")
        figures.record(
            SCENARIO,
            "phases covered by a kill",
            ", ".join(p for p in PHASES if p in covered),
            target="all 5",
            ok=covered >= set(PHASES),
        )
        for name, count_ in worst.counts().items():
            figures.record(SCENARIO, name.replace("_", " "), count_, target="0", ok=count_ == 0)
        figures.record(SCENARIO, "time to converge after restart, max (s)", max(converge_times, default=0.0))
        proc.stop()
        proc = start()
        try:
            await clean_up(units)
        finally:
            proc.stop()
    assert not failed, failed
    assert total >= (200 if SCALE == "full" else 10)
    assert covered >= set(PHASES), f"phases no kill landed in: {set(PHASES) - covered}"


def merge(worst: Verdict, verdict: Verdict) -> None:
    for name, found in vars(verdict).items():
        getattr(worst, name).extend(f for f in found if f not in getattr(worst, name))


async def wait_for_count(
    count: Callable[[], int], target: int, batch: list[tuple[Unit, str]], emulator: EmulatorProcess
) -> bool:
    """Poll the counter until it reaches `target` (True), or the batch's work is done first (False)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    last_done_check = 0.0
    while loop.time() < deadline:
        if count() >= target:
            return True
        if loop.time() - last_done_check > 1.0:
            last_done_check = loop.time()
            if (await check([u for u, _ in batch], emulator)).ok() and count() < target:
                return False
        await asyncio.sleep(0.02)
    return False
