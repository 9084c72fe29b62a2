"""Scenario 2: Cloudflare answering badly while resources of every kind churn.

For the churn's duration the emulator answers 20 % of calls with a 5xx (JSON errors and the HTML pages of
Cloudflare's proxy), lets 5 % hang, resets 3 % of connections, and now and then refuses a burst of calls with 429
and a Retry-After. The controller runs with a reconcile timeout short enough that a hung call is given up within the
run (the response-start bound alone is a minute). The emulator's rate limiter holds the controller's token to
Cloudflare's budget (1,200 calls per 300 s with a five-minute lockout; at CI size the same rate over a shorter window
and lockout), and the controller is told the same budget.

Once the faults stop: Cloudflare holds exactly what the manifests describe and every resource is Ready; the limiter
never locked the token out; no window of the budget's length saw more of the controller's calls than its 80 % share.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client.api_client import ApiClient

from app.controlplane import ControlPlane
from tests.chaos.faults_calls import busiest_window, kflare_calls, retries
from tests.chaos.faults_churn import Churn
from tests.chaos.figures import Figures, size
from tests.fixtures.controller import ControllerProcess
from tests.fixtures.emulator import EmulatorProcess
from tests.helpers import eventually

SCENARIO = "2 cloudflare faults"
CHURN_SECONDS = size(ci=90, full=600)
PACE = size(ci=1, full=2)  # seconds between two changes, on average
# Cloudflare's budget is 1,200 calls per 300 s and a 300 s lockout; CI keeps the rate and shortens the window.
WINDOW = size(ci=60, full=300)
BUDGET = 1200 * WINDOW // 300
LOCKOUT = WINDOW
SHARE = 0.8
EVERY_CALL = r"^(GET|POST|PUT|PATCH|DELETE) /client/v4/"
# (share of all calls, fault): the faults are tried in this order, each on the calls the earlier ones left.
FAULTS: list[tuple[float, dict[str, Any]]] = [
    (0.05, {"kind": "hang"}),
    (0.03, {"kind": "drop"}),
    (0.08, {"kind": "status", "status": 500}),
    (0.04, {"kind": "status", "status": 502, "html": True}),
    (0.05, {"kind": "status", "status": 503}),
    (0.03, {"kind": "status", "status": 504, "html": True}),
]
BURST_EVERY = size(ci=15, full=30)


def inject(emulator: EmulatorProcess) -> None:
    left = 1.0
    for share, fault in FAULTS:
        options = {k: v for k, v in fault.items() if k != "kind"}
        emulator.fault(EVERY_CALL, fault["kind"], probability=share / left, **options)
        left -= share


async def bursts(emulator: EmulatorProcess, rng: random.Random) -> None:
    """Every BURST_EVERY seconds or so, Cloudflare refuses every call with 429 (code 971) for a few seconds, and
    says so in its Retry-After: as its rate limiter does, the refusal ends when the Retry-After does (calls made
    after it succeed, however many were refused)."""
    while True:
        await asyncio.sleep(BURST_EVERY * rng.uniform(0.5, 1.5))
        seconds = rng.randint(1, 5)
        burst = await asyncio.to_thread(emulator.fault, EVERY_CALL, "status", status=429, retry_after=seconds)
        try:
            await asyncio.sleep(seconds)
        finally:
            await asyncio.to_thread(emulator.delete_fault, burst)


async def watch_lockouts(emulator: EmulatorProcess, budget: str, seen: list[float]) -> None:
    """Note every lockout of the controller's budget (the limiter's state, once a second)."""
    locked = False
    while True:
        state = await asyncio.to_thread(emulator.rate_limit_state)
        now_locked = (state["budgets"].get(budget) or {}).get("locked_for", 0) > 0
        if now_locked and not locked:
            seen.append(time.time())
        locked = now_locked
        await asyncio.sleep(1.0)


@pytest.mark.timeout(size(ci=600, full=1800))
async def test_cloudflare_faults_during_churn(
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare_crds: None,
    kube: ApiClient,
    tmp_path: Path,
    figures: Figures,
) -> None:
    emulator = fresh_emulator
    rng = random.Random(1402)
    user = "chaos-cloudflare-faults"
    token = emulator.seed({"tokens": [{"name": "chaos", "user": user, "permissions": ["*"]}]})["tokens"][0]
    emulator.set_rate_limit(BUDGET, WINDOW, LOCKOUT)
    proc = ControllerProcess(
        control_plane,
        emulator,
        tmp_path,
        "--drift-check-interval=30s",
        "--reconcile-timeout=10s",
        f"--cloudflare-rate-limit={BUDGET}",
        f"--cloudflare-rate-window={WINDOW}s",
        f"--cloudflare-budget-share={SHARE}",
    ).start()
    lockouts: list[float] = []
    monitor = asyncio.ensure_future(watch_lockouts(emulator, f"user:{user}", lockouts))
    churn = Churn(kube, emulator, token["value"], rng)
    try:
        await asyncio.to_thread(proc.wait_ready)
        began = time.time()
        await churn.setup()
        changes_before = churn.changes

        faults_on = time.time()
        inject(emulator)
        burster = asyncio.ensure_future(bursts(emulator, rng))
        try:
            await churn.run(CHURN_SECONDS, PACE)
            await churn.restore(timeout=size(ci=240, full=600))
        finally:
            burster.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await burster
            emulator.clear_faults()
        faults_off = time.time()

        converge_error: AssertionError | None = None
        try:
            await eventually(churn.converged, timeout=size(ci=240, full=600), interval=2.0, what="convergence")
        except AssertionError as exc:
            converge_error = exc
        converged_after = time.time() - faults_off

        everything = kflare_calls(emulator.calls(since=began))
        during = [c for c in everything if faults_on <= c["time"] < faults_off]
        limiter_refusals = sum(1 for c in everything if c["status"] == 429 and c["fault"] is None)
        figures.record(SCENARIO, "churn changes (under faults)", churn.changes - changes_before)
        figures.record(SCENARIO, "calls (under faults)", len(during))
        figures.record(SCENARIO, "retries", retries(during))
        figures.record(SCENARIO, "5xx answered", sum(1 for c in during if (c["status"] or 0) >= 500))
        figures.record(SCENARIO, "hangs", sum(1 for c in during if c["fault_kind"] == "hang"))
        figures.record(SCENARIO, "drops", sum(1 for c in during if c["fault_kind"] == "drop"))
        figures.record(SCENARIO, "429s answered (bursts)", sum(1 for c in during if c["status"] == 429 and c["fault"]))
        figures.record(SCENARIO, "lockouts", len(lockouts), target="0", ok=not lockouts)
        figures.record(
            SCENARIO, "calls refused by the rate limiter", limiter_refusals, target="0", ok=limiter_refusals == 0
        )
        busiest = busiest_window(everything, WINDOW)
        allowed = int(BUDGET * SHARE)
        figures.record(
            SCENARIO,
            f"max calls in {WINDOW} s (budget {BUDGET})",
            busiest,
            target=f"<= {allowed}",
            ok=busiest <= allowed,
        )
        figures.record(
            SCENARIO,
            "converged after faults stopped (s)",
            round(converged_after, 1) if converge_error is None else "never",
            target="converges",
            ok=converge_error is None,
        )

        if converge_error is not None:
            raise converge_error
        assert not lockouts, f"the controller's token was locked out at {lockouts}"
        assert limiter_refusals == 0, f"{limiter_refusals} calls refused by the rate limiter"
        assert busiest <= allowed, f"{busiest} calls within {WINDOW} s, more than the {allowed} allowed"
    finally:
        monitor.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await monitor
        emulator.clear_faults()
        try:
            await churn.cleanup()
        finally:
            proc.stop()
