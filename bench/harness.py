"""What the benchmarks share: the test control plane with kflare's CRDs, the emulator, `kflare run` as its own
process (with plain-HTTP metrics the benchmarks read), kubectl, and waiting for objects to be Ready.

A benchmark starts a control plane of its own, unless `KFLARE_BENCH_PLANE` names the directory of one already running
with kflare's CRDs (the smoke runs of tests/bench share one so): it then uses that one, emptied first of what an
earlier benchmark left in it, and leaves it running.

Not a benchmark itself; the scripts beside it import it as `bench.harness`.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from app.api import GROUP
from app.api.registry import KINDS
from app.controlplane import ControlPlane, bin_dir_from_env, free_port
from app.memory import skip_last_collection
from tests.fixtures.emulator import DEFAULT_STATE, EmulatorProcess
from tests.helpers import crd_names

skip_last_collection()  # a benchmark that is done has no garbage worth collecting

API = "kflare.dev/v1alpha1"
NS = "bench"
UNLIMITED = 1_000_000
"""Calls per window for the emulator and the controller when a benchmark counts calls, not waits for them."""
SHARED_PLANE = "KFLARE_BENCH_PLANE"
"""The variable naming the work directory (its kubeconfig) of a running control plane the benchmarks share."""
SHARED_EMULATOR = "KFLARE_BENCH_EMULATOR"
"""The variable naming the URL of a running emulator the benchmarks share, started with its default state and rate
limit, which each puts back to them."""
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")


FIRST_POLL = 0.05
"""Seconds before the second look at what a benchmark waits for; each wait after it doubles, up to `LAST_POLL`."""
LAST_POLL = 0.5


def pause(interval: float, most: float = LAST_POLL) -> float:
    """Sleep `interval` seconds between two looks at what is waited for; the next interval, doubled up to `most`. A
    short wait ends within tens of milliseconds of what it waits for; a long one looks every `most` seconds, as a
    listing of thousands of objects more often would load the API server the benchmark measures."""
    time.sleep(interval)
    return min(interval * 2, most)


def bin_dir() -> Path:
    bins = bin_dir_from_env()
    if bins is None:
        from app.dev import default_bin_dir  # builds them; imported here as it loads the whole process (a second)

        bins = default_bin_dir()
    if bins is None:
        raise SystemExit("no kube-apiserver: run `make test-bins`")
    return bins


def stop_on_sigterm() -> None:
    """SIGTERM (a timeout, a test run stopping) unwinds as an exception does, so the benchmark's `finally` stops the
    processes it started instead of leaving them running."""

    def unwind(signum: int, _: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, unwind)


def kubectl(plane: ControlPlane, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [str(plane.binary("kubectl")), "--kubeconfig", str(plane.kubeconfig_path), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return done.stdout


def apply(plane: ControlPlane, docs: list[dict[str, Any]]) -> None:
    """One `kubectl apply` of everything, as a user applies a directory (it sends the objects one by one)."""
    kubectl(plane, "apply", "--server-side", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cluster(
    bins: Path,
    work: Path,
    state: Mapping[str, Any] | None = None,
    *,
    unlimited: bool = False,
    crds: Sequence[Path] = (),
) -> tuple[ControlPlane, EmulatorProcess]:
    """A started control plane with every kflare CRD established (and the CRDs of the files `crds`) and the
    namespaces `kflare-system` and `bench`, and a started emulator (seeded with `state`; its rate limit lifted when
    `unlimited`).

    With `KFLARE_BENCH_PLANE` set, the plane is that one, emptied (`empty`); its `stop()` leaves it running, as it
    stops only what it started. With `KFLARE_BENCH_EMULATOR` set, the emulator is that one, back to its starting
    state and then given what `state` holds beyond it; its `stop()` leaves it running too."""
    stop_on_sigterm()
    shared = os.environ.get(SHARED_PLANE)
    if shared:
        plane = ControlPlane(bin_dir=bins, workdir=Path(shared))
    else:
        plane = ControlPlane.in_tempdir(bins)
        plane.start()
    try:
        # The plane is made ready while the emulator starts: each takes a second or more.
        with ThreadPoolExecutor(1) as pool:
            prepared = pool.submit(prepare, plane, shared=bool(shared), crds=crds)
            emulator = EmulatorProcess(state, workdir=work)
            if url := os.environ.get(SHARED_EMULATOR):
                emulator.attach(url)
                beyond = {
                    k: [item for item in v if item not in DEFAULT_STATE.get(k, [])] for k, v in (state or {}).items()
                }
                if any(beyond.values()):
                    emulator.seed(beyond)
            else:
                emulator.start()
            try:
                prepared.result()
            except BaseException:
                emulator.stop()
                raise
    except BaseException:
        plane.stop()
        raise
    try:
        if unlimited:
            emulator.set_rate_limit(UNLIMITED, 300, 1)
    except BaseException:
        stop_together(emulator.stop, plane.stop)
        raise
    return plane, emulator


def prepare(plane: ControlPlane, *, shared: bool, crds: Sequence[Path] = ()) -> None:
    """A shared plane emptied, or kflare's CRDs installed in a new one; the CRDs of the files `crds` installed unless
    all are there already (an apply costs the API server seconds even when nothing changes, as it compiles every
    validation rule again); each established; and the namespaces `kflare-system` and `bench`. The emptying, the
    namespaces and the CRDs each take a kubectl or two, at once rather than one after the other."""
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in ("kflare-system", NS)]
    with ThreadPoolExecutor(2) as pool:
        done = [pool.submit(apply, plane, namespaces), *([pool.submit(empty, plane)] if shared else [])]
        installed = []
        if not shared:
            from app.api.crds import render_crds

            manifests = "\n---\n".join(render_crds(helm=False).values())
            installed += crd_names(kubectl(plane, "apply", "--server-side", "-o", "name", "-f", "-", stdin=manifests))
        if crds:
            files = [f"--filename={path}" for path in crds]
            try:
                installed += crd_names(kubectl(plane, "get", "-o", "name", *files))
            except subprocess.CalledProcessError:  # one is missing
                installed += crd_names(kubectl(plane, "apply", "--server-side", "-o", "name", *files))
        if installed:
            plane.wait_established(installed)
        for each in done:
            each.result()


def stop_together(*stops: Callable[[], object]) -> None:
    """Call each of `stops` at once, in threads: each waits for its process to exit, a good part of a second."""
    with ThreadPoolExecutor(len(stops)) as pool:
        for stopped in [pool.submit(stop) for stop in stops]:
            stopped.result()


def empty(plane: ControlPlane) -> None:
    """Delete what an earlier benchmark left in a shared plane, so that no count of Ready objects or reconciles, and
    no controller, sees it: every kflare object, and the Secrets, Events and Leases outside the system namespaces.
    No controller runs to remove their finalizers, so they are dropped too: before or after the deletion, either
    way the object goes. kubectl takes a hundredth of a second per kind it lists, and the listings, like the patch
    and the deletion, run two at a time."""
    kinds = [f"{model.info.plural}.{GROUP}" for model in KINDS] + ["secrets", "events", "leases"]
    halves = (kinds[::2], kinds[1::2])
    with ThreadPoolExecutor(2) as pool:
        listed = pool.map(lambda some: json.loads(kubectl(plane, "get", ",".join(some), "-A", "-o", "json")), halves)
        items = [item for listing in listed for item in listing["items"]]
        left = [item for item in items if item["metadata"].get("namespace") not in SYSTEM_NAMESPACES]
        held = [item for item in left if item["metadata"].get("finalizers")]
        steps: list[tuple[list[str], list[dict[str, Any]]]] = []
        if held:
            steps.append(
                (["patch", "-f", "-", "--type=merge", "-p", json.dumps({"metadata": {"finalizers": None}})], held)
            )
        if left:
            steps.append((["delete", "-f", "-", "--ignore-not-found", "--wait=false"], left))
        started = [
            pool.submit(kubectl, plane, *args, stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
            for args, objects in steps
        ]
        for each in started:
            each.result()


def account_docs(emulator: EmulatorProcess, name: str = "bench", account_id: str | None = None) -> list[dict[str, Any]]:
    """The API token Secret `cf` in the bench namespace and a CloudflareAccount `name` reading it."""
    token = base64.b64encode(emulator.token.encode()).decode()
    secret = {"name": "cf", "namespace": NS}
    return [
        {"apiVersion": "v1", "kind": "Secret", "metadata": secret, "data": {"CF_API_TOKEN": token}},
        {
            "apiVersion": API,
            "kind": "CloudflareAccount",
            "metadata": {"name": name},
            "spec": {"accountID": account_id or emulator.account_id, "tokenSecretRef": secret},
        },
    ]


class Controller:
    """`kflare run` with plain-HTTP metrics (the benchmarks read them), ready when started.

    `drift` turns drift checks on at that interval (seconds); `unlimited` lifts the controller's own call budget, for
    benchmarks that lift the emulator's rate limit to count calls without waiting minutes for them."""

    def __init__(
        self,
        plane: ControlPlane,
        emulator: EmulatorProcess,
        log: Path,
        *extra: str,
        drift: float | None = None,
        unlimited: bool = False,
    ) -> None:
        self.metrics_port, probe_port = free_port(), free_port()
        self.log = log
        argv = [
            str(Path(sys.executable).with_name("kflare")),
            "run",
            f"--kubeconfig={plane.kubeconfig_path}",
            f"--cloudflare-api-url={emulator.base_url}",
            f"--health-probe-bind-address=127.0.0.1:{probe_port}",
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            "--metrics-secure=false",
            "--webhook-port=0",
            "--namespace=kflare-system",
            "--log-level=warning",
            *([f"--drift-check-interval={round(drift * 1000)}ms"] if drift else []),
            *([f"--cloudflare-rate-limit={UNLIMITED}"] if unlimited else []),
            *extra,
        ]
        self.proc = subprocess.Popen(argv, stdout=log.open("ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"controller exited with {self.proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{probe_port}/readyz", timeout=1) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"controller not ready: {log.read_text()[-2000:]}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def scrape(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    def reconciled_all(self, objects: dict[str, int]) -> dict[str, int] | None:
        """Reconciles per controller once every object of each kind has been reconciled by this process (its
        counters cover every object, nothing queued or running), else None."""
        series = self.scrape()

        def total(name: str, controller: str) -> float:
            return sum(v for (n, labels), v in series.items() if n == name and ("controller", controller) in labels)

        done = {c: int(total("controller_runtime_reconcile_total", c)) for c in objects}
        idle = all(
            total("workqueue_depth", c) == 0 and total("controller_runtime_active_workers", c) == 0 for c in objects
        )
        return done if idle and all(done[c] >= n for c, n in objects.items()) else None

    def wait_reconciled(self, objects: dict[str, int], timeout: float) -> dict[str, int]:
        deadline = time.monotonic() + timeout
        interval = FIRST_POLL
        while (done := self.reconciled_all(objects)) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"not every object reconciled after {timeout}s: {objects}")
            interval = pause(interval)
        return done


def items(plane: ControlPlane, plural: str) -> list[dict[str, Any]]:
    return list(json.loads(kubectl(plane, "get", plural, "-A", "-o", "json"))["items"])


KIND_OF_PLURAL = {model.info.plural: model.info.kind for model in KINDS}


def controller_ready(controller: Controller, kind: str) -> int:
    """Objects of `kind` Ready, as the controller's `kflare_resources` gauge counts them."""
    return int(
        sum(
            value
            for (name, labels), value in controller.scrape().items()
            if name == "kflare_resources" and ("kind", kind) in labels and ("ready", "True") in labels
        )
    )


def ready_count(plane: ControlPlane, plural: str) -> int:
    return sum(
        1
        for item in items(plane, plural)
        for c in (item.get("status") or {}).get("conditions") or []
        if c["type"] == "Ready" and c["status"] == "True"
    )


def wait_ready(
    plane: ControlPlane, plural: str, count: int, timeout: float, controller: Controller | None = None
) -> float:
    """Seconds until `count` objects of `plural` are Ready. With `controller`, its `kflare_resources` gauge is
    watched first (a scrape of counts, where listing thousands of objects with kubectl every half second would load
    the API server the benchmark measures), and the API server is asked once it says so."""
    started = time.monotonic()
    interval = FIRST_POLL
    if controller is not None:
        kind = KIND_OF_PLURAL[plural.split(".")[0]]
        while controller_ready(controller, kind) < count:
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"only {controller_ready(controller, kind)} of {count} {plural} Ready")
            interval = pause(interval)
    while ready_count(plane, plural) < count:
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"only {ready_count(plane, plural)} of {count} {plural} Ready after {timeout}s")
        interval = pause(interval)
    return time.monotonic() - started


def drift_round(drift: float) -> None:
    """Wait one drift round: every object's check falls due within the interval +- 10 % of its last reconcile."""
    time.sleep(drift * 1.25)
