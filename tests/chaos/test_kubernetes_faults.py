"""Scenario 3: Kubernetes failing under two kflare replicas (leader election on, the chart's lease timings) while
resources of every kind churn.

On a control plane of its own (so no other test sees its API server go away), whose API server serves watches
straight from etcd (no watch cache, so a compacted revision is a `410 Gone` as etcd says it):

(a) the API server is restarted mid-churn (etcd stays);
(b) the controller's watches expire: its connections go silent (a proxy stops relaying), changes are made, etcd is
    compacted past every revision the controller saw, and its connections are broken, so each watch comes back
    with a revision that is gone;
(c) the leader is SIGKILLed during writes, and the standby must take over.

Every change made during a fault must be applied after it (Cloudflare ends up exactly as described, every resource
Ready); the standby takes over within 15 s; and the call log never shows one object written by both replicas in
the same stretch of time (each replica names itself in its User-Agent).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import random
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient

from app.controlplane import ControlPlane, bin_dir_from_env
from tests.chaos.faults_calls import WRITES, kflare_calls
from tests.chaos.faults_churn import Churn
from tests.chaos.faults_proxy import KubeProxy, kube_proxy
from tests.chaos.figures import Figures, size
from tests.fixtures.controller import SYSTEM_NAMESPACE, ControllerProcess, install_crds
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.kube import api_client_for, leaked, restart_apiserver
from tests.helpers import eventually

SCENARIO = "3 kubernetes faults"
CHURN_AROUND = size(ci=10, full=60)  # seconds of churn before and after each fault
PACE = 0.5
TAKEOVER = 15.0
SILENT = 4.0  # seconds the controller's connections stay silent in (b): under the renew deadline
LEASE = "chaos-kubernetes-faults"
HANDOVER = 1.0  # seconds: two replicas' writes of one object closer than this count as concurrent


@pytest.fixture(scope="module")
def own_plane() -> Iterator[ControlPlane]:
    bins = bin_dir_from_env()
    if bins is None:
        pytest.fail("no kube-apiserver: set K8S_TEST_BIN (`make chaos` does)")
    plane = ControlPlane.in_tempdir(bins, extra_args=["--watch-cache=false"])
    plane.start()
    try:
        install_crds(plane)
        yield plane
    finally:
        plane.stop()
        left = leaked(plane)
        assert not left, f"control plane left behind: {left}"


@pytest.fixture
async def own_kube(own_plane: ControlPlane) -> AsyncIterator[ApiClient]:
    api = await api_client_for(own_plane.kubeconfig_path)
    try:
        yield api
    finally:
        await api.close()


def compact_etcd(plane: ControlPlane) -> int:
    """Compact etcd at its current revision (through its gRPC gateway); the revision."""
    with httpx.Client(base_url=plane.etcd_url, timeout=10) as etcd:
        key = base64.b64encode(b"\0").decode()
        revision = int(etcd.post("/v3/kv/range", json={"key": key, "limit": 1}).json()["header"]["revision"])
        etcd.post("/v3/kv/compaction", json={"revision": revision, "physical": True}).raise_for_status()
    return revision


class Replicas:
    """Two `kflare run --leader-elect` replicas through the proxy."""

    def __init__(self, plane: ControlPlane, emulator: EmulatorProcess, workdir: Path, proxy: KubeProxy) -> None:
        self.args = (
            f"--kubeconfig={proxy.kubeconfig()}",
            "--leader-elect=true",
            f"--lease-name={LEASE}",
            "--drift-check-interval=30s",
        )
        self.plane, self.emulator, self.workdir = plane, emulator, workdir
        self.procs = [ControllerProcess(plane, emulator, workdir, *self.args).start() for _ in range(2)]

    def identity(self, proc: ControllerProcess) -> str | None:
        found = re.search(r'"identity": "([^"]+)"', proc.log())
        return found.group(1) if found else None

    def log_count(self, pattern: str) -> int:
        return sum(len(re.findall(pattern, proc.log())) for proc in self.procs)

    def stop(self) -> None:
        for proc in self.procs:
            proc.stop()


async def lease_holder(api: ApiClient) -> str:
    lease = await client.CoordinationV1Api(api).read_namespaced_lease(LEASE, SYSTEM_NAMESPACE)
    return str(lease.spec.holder_identity or "")


def concurrent_writes(calls: list[dict[str, Any]]) -> int:
    """Objects written by both replicas at once: one replica's write arriving while the other's was in flight, or
    within HANDOVER seconds of it. Leadership may move back and forth (an API server down past the renew deadline
    makes the leader step down), but a real handover leaves a gap: the old leader stops by its renew deadline after
    its last renewal, the new one starts a lease duration after it."""
    by_object: dict[str, list[dict[str, Any]]] = {}
    for call in calls:
        if call["method"] in WRITES:
            by_object.setdefault(call["path"], []).append(call)
    return sum(
        any(
            a["user_agent"] != b["user_agent"] and b["time"] < a["time"] + (a["duration_ms"] or 0) / 1000 + HANDOVER
            for a, b in itertools.pairwise(writes)
        )
        for writes in by_object.values()
    )


@pytest.mark.timeout(size(ci=600, full=1800))
async def test_kubernetes_faults_during_churn(
    own_plane: ControlPlane,
    own_kube: ApiClient,
    fresh_emulator: EmulatorProcess,
    tmp_path: Path,
    figures: Figures,
) -> None:
    plane, emulator = own_plane, fresh_emulator
    rng = random.Random(1403)
    token = emulator.seed({"tokens": [{"name": "chaos", "user": "chaos-kubernetes", "permissions": ["*"]}]})
    churn = Churn(own_kube, emulator, token["tokens"][0]["value"], rng)
    lost: dict[str, int] = {}
    during: dict[str, int] = {}
    with kube_proxy(plane) as proxy:
        replicas = Replicas(plane, emulator, tmp_path, proxy)
        try:
            began = time.time()
            await churn.setup()

            async def fault(name: str, act: Any) -> None:
                """Churn around a fault; count the changes made from its start until the controller is back."""
                background = asyncio.ensure_future(churn.run(3600, PACE))
                try:
                    await asyncio.sleep(CHURN_AROUND)
                    before = churn.changes
                    await act()
                    await asyncio.sleep(CHURN_AROUND)
                    during[name] = churn.changes - before
                finally:
                    background.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await background
                await churn.restore()
                try:
                    await eventually(churn.converged, timeout=180, interval=2.0, what=f"convergence after {name}")
                    lost[name] = 0
                except AssertionError:
                    lost[name] = len(await asyncio.to_thread(churn.cloudflare_mismatches)) or 1

            # (a) the API server restarted
            await fault("API server restart", lambda: asyncio.to_thread(restart_apiserver, plane, 2.0))

            # (b) watches expired: silent connections, changes, compaction, broken connections
            gone_before = replicas.log_count("watch window expired")

            async def expire() -> None:
                proxy.pause()
                try:
                    for _ in range(10):
                        await churn.step()
                    await asyncio.to_thread(compact_etcd, plane)
                    await asyncio.sleep(max(0.0, SILENT - 2))
                finally:
                    proxy.reset()
                    proxy.resume()

            await fault("watch expiry (410)", expire)
            gone = replicas.log_count("watch window expired") - gone_before
            relists = replicas.log_count(r'"relists": ([2-9]|\d\d+)')

            # (c) the leader SIGKILLed during writes
            takeover: float | None = None

            async def kill_leader() -> None:
                nonlocal takeover
                holder = await lease_holder(own_kube)
                leader = next(p for p in replicas.procs if replicas.identity(p) == holder)
                killed = time.monotonic()
                leader.kill()

                async def new_holder() -> bool:
                    return (await lease_holder(own_kube)) not in ("", holder)

                await eventually(new_holder, timeout=60, interval=0.1, what="the standby to take the lease")
                takeover = time.monotonic() - killed

            await fault("leader SIGKILL", kill_leader)

            clashes = concurrent_writes(kflare_calls(emulator.calls(since=began)))
            for name, count in during.items():
                figures.record(SCENARIO, f"changes during {name}", count)
                figures.record(SCENARIO, f"changes lost ({name})", lost[name], target="0", ok=lost[name] == 0)
            figures.record(SCENARIO, "410s seen", gone, target=">= 1", ok=gone >= 1)
            figures.record(SCENARIO, "relists", relists)
            figures.record(
                SCENARIO,
                "takeover (s)",
                "never" if takeover is None else round(takeover, 1),
                target=f"<= {TAKEOVER:g}",
                ok=takeover is not None and takeover <= TAKEOVER,
            )
            figures.record(SCENARIO, "concurrent reconciles", clashes, target="0", ok=clashes == 0)
            figures.record(SCENARIO, "leadership changes", replicas.log_count('"became leader"') - 1)

            assert all(count == 0 for count in lost.values()), f"changes lost: {lost}"
            assert gone >= 1, "no watch met 410 Gone: the expiry did not happen"
            assert takeover is not None, "the standby never took over"
            assert takeover <= TAKEOVER, f"takeover took {takeover:.1f} s"
            assert clashes == 0, f"{clashes} objects written by both replicas at once"
        finally:
            try:
                await churn.cleanup()
            finally:
                replicas.stop()
