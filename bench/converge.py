"""What converging and keeping many DNS records costs: Cloudflare calls, wall time, CPU and memory.

Runs the real stack on this machine: the test control plane, the Cloudflare emulator with its real rate limit
(1,200 calls per 300 s, then a lockout), and `kflare run` as its own process. Then, for each scale (by default
1,000 records in 5 zones, then 5,000 in 25):

1. applies the account, the zones and the records at once and waits for all of them to be Ready: Cloudflare calls
   to converge (all, and those for the records), wall time, 429s;
2. lets one drift round pass (after step 3): Cloudflare calls per round and the controller's CPU per idle
   reconcile;
3. restarts the controller (converging ran without drift checks; now they are on) and waits until every object has
   been reconciled by the new process (its reconcile counters per kind cover every object and its queues are
   drained): the calls it made until then, and writes;
4. (first scale) the account's GET answers 503 for `--outage` seconds: status writes (resourceVersion changes)
   and Warning Events on the Zones and records meanwhile;
5. RSS with all resources Ready, and its slope per resource between the two scales; and RSS after the last
   scale's restart, for which `--secrets-mib` of Secrets nobody references are added to the cluster first;
6. what sizes the pod (the chart's `resources`): the controller's CPU seconds from the apply to all Ready, its peak
   RSS while converging and after the restart (VmHWM: the highest RSS since the process started, which for a
   later scale covers reconciling the earlier scales' objects at its start too), and its CPU while it idles with
   every object Ready and drift checks off (over `--settle` seconds).

The floor, measured in the same run on the same API server once the controller has stopped: what the API server
alone needs for the same objects, `kubectl apply` of each scale's new Zones and records (into another namespace,
which no controller reads) plus, by a trivial client (`FLOOR_IN_FLIGHT` at once), the two writes per object no
controller that never orphans a Cloudflare object can do without: its finalizer, then its status. Each scale's wall
time to all Ready is printed beside it as a multiple of it (and of the apply and status writes alone).

The baseline, measured in the same run: the same first scale converged with every write sent alone
(`--dns-batch-size=1`), on the same API server emptied and the emulator back to its starting state with its rate
limit lifted (its calls would take minutes otherwise).

    .venv/bin/python bench/converge.py [--scales 1000:5,5000:25] [--drift 20] [--outage 60] [--secrets-mib 100]
        [--settle 5] [--no-baseline]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import importlib
import itertools
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.api.constants import FINALIZER
from app.controlplane import ControlPlane
from bench.harness import (
    FIRST_POLL,
    NS,
    UNLIMITED,
    Controller,
    account_docs,
    apply,
    bin_dir,
    cluster,
    cpu_seconds,
    empty,
    items,
    kubectl,
    pause,
    rss_mib,
    stop_together,
    wait_ready,
)
from tests.fixtures.emulator import EmulatorProcess

CLOUDFLARE_SUSTAINED = 1200 / 300  # calls per second Cloudflare allows a token


FLOOR_NS = "floor"
FLOOR_IN_FLIGHT = 32
"""Writes the floor's client keeps in flight (as a controller with that many workers would)."""


def zone_docs(first: int, count: int, namespace: str = NS) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "kflare.dev/v1alpha1",
            "kind": "Zone",
            "metadata": {"name": f"z{z}", "namespace": namespace},
            "spec": {"name": f"bench{z}.example", "accountRef": {"name": "bench"}},
        }
        for z in range(first, first + count)
    ]


def record_docs(first_zone: int, zones: int, per_zone: int, namespace: str = NS) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "kflare.dev/v1alpha1",
            "kind": "DNSRecord",
            "metadata": {"name": f"r{z}-{i}", "namespace": namespace},
            "spec": {
                "zoneRef": {"name": f"z{z}"},
                "name": f"h{i}.bench{z}.example",
                "type": "A",
                "content": f"10.{z % 250}.{i // 250}.{i % 250 + 1}",
                "ttl": 300,
            },
        }
        for z in range(first_zone, first_zone + zones)
        for i in range(per_zone)
    ]


def counts(calls: list[dict[str, Any]]) -> tuple[int, int, int, int]:
    """All calls, those for records, writes, 429s."""
    records = sum("/dns_records" in c["path"] for c in calls)
    writes = sum(c["method"] != "GET" for c in calls)
    return len(calls), records, writes, sum(c["status"] == 429 for c in calls)


def baseline(
    plane: ControlPlane, emulator: EmulatorProcess, work: Path, records: int, zones: int
) -> tuple[int, int, float]:
    """The same apply with each write sent alone: calls, of which for records, and wall time. On the same plane,
    emptied, and the same emulator, back to its starting state with its rate limit lifted (the calls would take
    minutes otherwise)."""
    empty(plane)
    emulator.reset()
    emulator.set_rate_limit(UNLIMITED, 300, 1)
    controller = Controller(plane, emulator, work / "baseline.log", "--dns-batch-size=1")
    try:
        started = time.monotonic()
        apply(plane, account_docs(emulator) + zone_docs(0, zones) + record_docs(0, zones, records // zones))
        wait_ready(plane, "dnsrecords.kflare.dev", records, 1800)
        seconds = time.monotonic() - started
        total, for_records, _, _ = counts(emulator.calls())
        return total, for_records, seconds
    finally:
        controller.stop()


def floor(plane: ControlPlane, docs: list[dict[str, Any]]) -> tuple[float, float, float]:
    """Seconds the API server takes for `docs` without kflare: one `kubectl apply`, then one metadata write each (a
    finalizer), then one status write each: the two writes per object a controller that never orphans an object
    cannot do without."""
    started = time.monotonic()
    apply(plane, docs)
    applied = time.monotonic() - started
    patched, written = asyncio.run(write_objects(plane, docs))
    return applied, patched, written


async def write_objects(plane: ControlPlane, docs: list[dict[str, Any]]) -> tuple[float, float]:
    """What a trivial controller writes once per object, `FLOOR_IN_FLIGHT` writes at once: its finalizer, then a
    Ready condition. Seconds from the first write of each to the last answer (the client's setup is not counted)."""
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(plane.kubeconfig_path), client_configuration=configuration)
    configuration.connection_pool_maxsize = FLOOR_IN_FLIGHT
    async with client.ApiClient(configuration) as api:
        objects = client.CustomObjectsApi(api)
        slots = asyncio.Semaphore(FLOOR_IN_FLIGHT)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ready = {"type": "Ready", "status": "True", "reason": "Synced", "message": "", "lastTransitionTime": now}
        status = {"status": {"observedGeneration": 1, "conditions": [{**ready, "observedGeneration": 1}]}}
        finalizer = {"metadata": {"finalizers": [FINALIZER]}}

        async def write(doc: dict[str, Any], body: dict[str, Any], patch: Any) -> None:
            plural = "zones" if doc["kind"] == "Zone" else "dnsrecords"
            async with slots:
                await patch(
                    "kflare.dev",
                    "v1alpha1",
                    doc["metadata"]["namespace"],
                    plural,
                    doc["metadata"]["name"],
                    body,
                    _content_type="application/merge-patch+json",
                )

        started = time.monotonic()
        await asyncio.gather(*(write(doc, finalizer, objects.patch_namespaced_custom_object) for doc in docs))
        patched = time.monotonic()
        await asyncio.gather(*(write(doc, status, objects.patch_namespaced_custom_object_status) for doc in docs))
        return patched - started, time.monotonic() - patched


def kube_writes(controller: Controller) -> dict[tuple[str, str], float]:
    """The controller's writes to the API server so far, by (resource, subresource)."""
    out: dict[tuple[str, str], float] = {}
    for (name, labels), value in controller.scrape().items():
        if name == "kflare_kubernetes_writes_total":
            tags = dict(labels)
            key = (tags["resource"], tags["subresource"])
            out[key] = out.get(key, 0) + value
    return out


def other_writes(written: dict[tuple[str, str], float]) -> int:
    counted = {("dnsrecords", ""), ("zones", ""), ("dnsrecords", "status"), ("zones", "status"), ("events", "")}
    return int(sum(v for k, v in written.items() if k not in counted))


def peak_rss_mib(pid: int) -> float:
    """The highest RSS of process `pid` since it started (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def add_noise(plane: ControlPlane, mib: int) -> None:
    """`mib` MiB of Secrets (512 KiB each) in a namespace of their own, which no kflare object references."""
    kubectl(plane, "create", "namespace", "noise")
    blob = base64.b64encode(os.urandom(384 * 1024)).decode()  # 512 KiB once encoded
    noise = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"noise-{i}", "namespace": "noise"},
            "data": {"blob": blob},
        }
        for i in range(mib * 2)
    ]
    for chunk in range(0, len(noise), 20):
        apply(plane, noise[chunk : chunk + 20])


def wait_in_cloudflare(emulator: EmulatorProcess, records: int, timeout: float) -> float:
    """When the emulator first held `records` records (what external-dns's wall time measures)."""
    deadline, interval = time.monotonic() + timeout, FIRST_POLL
    while time.monotonic() < deadline:
        if emulator.counts()["dns_records"] >= records:
            return time.monotonic()
        interval = pause(interval, most=0.2)
    raise RuntimeError(f"fewer than {records} records in the emulator after {timeout}s")


def changed_since(plane: ControlPlane, versions: dict[str, str]) -> int:
    now = {f"{i['kind']}/{i['metadata']['name']}": i["metadata"]["resourceVersion"] for i in objects_of(plane)}
    return sum(now.get(key) != version for key, version in versions.items())


def objects_of(plane: ControlPlane) -> list[dict[str, Any]]:
    return items(plane, "zones.kflare.dev") + items(plane, "dnsrecords.kflare.dev")


def warnings_since(plane: ControlPlane, since: float) -> int:
    events = json.loads(kubectl(plane, "get", "events", "-n", NS, "-o", "json"))["items"]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(since))
    return sum(
        1
        for e in events
        if e.get("type") == "Warning"
        and (e.get("lastTimestamp") or e.get("eventTime") or e["metadata"]["creationTimestamp"])[:19] >= stamp
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", default="1000:5,5000:25", help="records:zones, cumulative, comma-separated")
    parser.add_argument("--drift", type=float, default=20, help="drift check interval in seconds")
    parser.add_argument("--outage", type=float, default=60, help="seconds the account's GET answers 503")
    parser.add_argument(
        "--settle", type=float, default=5, help="seconds the process idles before its RSS is read (at most 3 at start)"
    )
    parser.add_argument("--secrets-mib", type=int, default=100)
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()
    scales = [tuple(int(n) for n in s.split(":")) for s in args.scales.split(",")]
    bins = bin_dir()
    work = Path(tempfile.mkdtemp(prefix="kflare-bench-"))
    rows: list[tuple[str, str, str]] = []
    plane, emulator = cluster(bins, work)
    controller: Controller | None = None
    try:
        # The floor's client is imported while the controller starts, which nothing times (it is half a second of
        # the benchmark's wall time otherwise).
        client_imported = threading.Thread(target=importlib.import_module, args=("kubernetes_asyncio.config",))
        client_imported.start()
        # Converging runs without drift checks: a round falling due meanwhile would count as a cost of converging.
        controller = Controller(plane, emulator, work / "controller.log")
        client_imported.join()
        time.sleep(min(3, args.settle))  # a settled, idle process
        rss_empty = rss_mib(controller.pid)
        rss_at: list[tuple[int, float]] = []
        rss_noise = 0.0
        walls: list[tuple[str, float]] = []
        records_so_far = zones_so_far = 0
        for n, (records, zones) in enumerate(scales):
            new_zones = zones - zones_so_far
            new_records = records - records_so_far
            docs = (account_docs(emulator) if n == 0 else []) + zone_docs(zones_so_far, new_zones)
            docs += record_docs(zones_so_far, new_zones, new_records // new_zones)
            emulator.clear_calls()
            written_before = kube_writes(controller)
            cpu_before = cpu_seconds(controller.pid)
            started = time.monotonic()
            apply(plane, docs)
            in_cloudflare = wait_in_cloudflare(emulator, records, 1800)
            wait_ready(plane, "dnsrecords.kflare.dev", records, 1800, controller)
            seconds = time.monotonic() - started
            cpu_converge, peak_converge = cpu_seconds(controller.pid) - cpu_before, peak_rss_mib(controller.pid)
            written = {k: v - written_before.get(k, 0) for k, v in kube_writes(controller).items()}
            total, for_records, writes, limited = counts(emulator.calls())
            label = f"{records:,} records, {zones} zones"
            what = "account, zones and records" if n == 0 else f"{new_records:,} more records in {new_zones} new zones"
            rows.append((f"[{label}] calls to converge", f"{total}", f"{what}; {limited} answered 429"))
            rows.append((f"[{label}] of which for the records", f"{for_records}", f"{writes} writes in all"))
            rows.append((f"[{label}] wall time to all Ready", f"{seconds:.1f} s", "Cloudflare's real rate limit on"))
            walls.append((label, seconds))
            rows.append((f"[{label}] time until every record is in Cloudflare", f"{in_cloudflare - started:.1f} s", ""))
            per = new_records + new_zones
            rows.append(
                (
                    f"[{label}] Kubernetes writes per new object",
                    f"{sum(written.values()) / per:.2f}",
                    f"metadata {written.get(('dnsrecords', ''), 0) + written.get(('zones', ''), 0):.0f}, "
                    f"status {written.get(('dnsrecords', 'status'), 0) + written.get(('zones', 'status'), 0):.0f}, "
                    f"Events {written.get(('events', ''), 0):.0f}, other {other_writes(written)}",
                )
            )
            rows.append((f"[{label}] CPU to converge", f"{cpu_converge:.1f} s", "controller, apply to all Ready"))
            rows.append((f"[{label}] peak RSS converging", f"{peak_converge:.1f} MiB", "VmHWM at all Ready"))
            cpu_idle = cpu_seconds(controller.pid)
            time.sleep(args.settle)
            if args.settle:
                idle = 1000 * (cpu_seconds(controller.pid) - cpu_idle) / args.settle
                rows.append((f"[{label}] idle CPU", f"{idle:.1f} mcores", f"over {args.settle:g} s, drift checks off"))
            rss_at.append((records + zones, rss_mib(controller.pid)))

            noisy = n + 1 == len(scales) and args.secrets_mib > 0
            if noisy:
                # The last restart finds Secrets nobody references in the cluster too: what they cost the process
                # is its RSS once every object is reconciled, beside the RSS before the restart.
                add_noise(plane, args.secrets_mib)
            controller.stop()
            restarted = time.time()
            controller = Controller(plane, emulator, work / f"controller-{n}.log", drift=args.drift)
            reconciles = controller.wait_reconciled({"cloudflareaccount": 1, "zone": zones, "dnsrecord": records}, 900)
            if noisy:
                rss_noise = rss_mib(controller.pid)
            rows.append((f"[{label}] peak RSS after a restart", f"{peak_rss_mib(controller.pid):.1f} MiB", "VmHWM"))
            restart_total, _, restart_writes, _ = counts(emulator.calls(since=restarted))
            rows.append(
                (
                    f"[{label}] calls after a restart",
                    f"{restart_total}",
                    f"writes {restart_writes}; {sum(reconciles.values())} reconciles until every object was",
                )
            )

            # One drift round: every object's check falls due within interval +- 10 % of its last reconcile.
            emulator.clear_calls()
            cpu_before = cpu_seconds(controller.pid)
            time.sleep(args.drift * 1.1)
            round_calls = emulator.calls()
            cpu_round = cpu_seconds(controller.pid) - cpu_before
            lists = sum(c["method"] == "GET" and c["path"].endswith("/dns_records") for c in round_calls)
            rows.append((f"[{label}] calls per drift round", f"{len(round_calls)}", f"{lists} record listings"))
            rows.append(
                (f"[{label}] CPU per idle reconcile", f"{1000 * cpu_round / (records + zones):.2f} ms", "round CPU")
            )

            if n == 0 and args.outage:
                versions = {
                    f"{i['kind']}/{i['metadata']['name']}": i["metadata"]["resourceVersion"] for i in objects_of(plane)
                }
                outage = time.time()
                fault = emulator.fault(r"^GET /client/v4/accounts/\w+$", "status", status=503)
                time.sleep(args.outage)
                emulator.delete_fault(fault)
                wait_ready(plane, "cloudflareaccounts.kflare.dev", 1, 120)
                rows.append(
                    (
                        f"[{label}] account 503 for {args.outage:g} s: status writes",
                        f"{changed_since(plane, versions)}",
                        f"on Zones and records; Warning Events: {warnings_since(plane, outage)}",
                    )
                )
            controller.stop()
            records_so_far, zones_so_far = records, zones
            if n + 1 < len(scales):  # the next scale converges without drift checks, as this one did
                controller = Controller(plane, emulator, work / f"controller-{n}-next.log")
                controller.wait_reconciled({"cloudflareaccount": 1, "zone": zones, "dnsrecord": records}, 900)

        # The floor, with no controller running: each scale's new objects, in the same order, in a namespace of its own.
        apply(plane, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FLOOR_NS}}])
        records_before = zones_before = 0
        for (records, zones), (label, seconds) in zip(scales, walls, strict=True):
            new_zones = zones - zones_before
            per_zone = (records - records_before) // new_zones
            docs = zone_docs(zones_before, new_zones, FLOOR_NS) + record_docs(
                zones_before, new_zones, per_zone, FLOOR_NS
            )
            applying, patching, writing = floor(plane, docs)
            rows.append(
                (
                    f"[{label}] floor: kubectl apply + a finalizer and a status write each",
                    f"{applying + patching + writing:.1f} s",
                    f"apply {applying:.1f} s, {len(docs):,} finalizers {patching:.1f} s "
                    f"({len(docs) / patching:.0f}/s), status writes {writing:.1f} s ({len(docs) / writing:.0f}/s); "
                    f"{FLOOR_IN_FLIGHT} in flight, no controller",
                )
            )
            rows.append(
                (
                    f"[{label}] wall time to all Ready / floor",
                    f"{seconds / (applying + patching + writing):.1f}x",
                    f"{seconds / (applying + writing):.1f}x of the apply and the status writes alone",
                )
            )
            records_before, zones_before = records, zones

        (n1, r1), (n2, r2) = rss_at[0], rss_at[-1]
        rows.append(("controller RSS, no resources", f"{rss_empty:.1f} MiB", "baseline"))
        for count, rss in rss_at:
            rows.append((f"controller RSS, {count:,} resources Ready", f"{rss:.1f} MiB", ""))
        if n2 > n1:
            rows.append(("RSS per resource", f"{(r2 - r1) * 1024 / (n2 - n1):.1f} KiB", f"slope from {n1:,} to {n2:,}"))
        if len(rss_at) > 2:  # and between each scale and the next, where a slope that grows would show
            for (m1, q1), (m2, q2) in itertools.pairwise(rss_at):
                rows.append(("RSS per resource", f"{(q2 - q1) * 1024 / (m2 - m1):.1f} KiB", f"from {m1:,} to {m2:,}"))

        if args.secrets_mib:
            rows.append(
                (
                    f"restarted, plus {args.secrets_mib} MiB of other Secrets",
                    f"{rss_noise:.1f} MiB",
                    f"every object reconciled; {rss_at[-1][1]:.1f} MiB before the restart",
                )
            )

        if not args.no_baseline:
            records, zones = scales[0]
            total, for_records, _ = baseline(plane, emulator, work, records, zones)
            rows.append(
                (f"baseline: {records:,} records, each write alone", f"{total}", f"{for_records} for the records")
            )
            rows.append(
                (
                    "baseline: its time at Cloudflare's limit",
                    f"{total / (0.8 * CLOUDFLARE_SUSTAINED):.0f} s",
                    "80 % share",
                )
            )
    finally:
        stop_together(*([controller.stop] if controller else []), emulator.stop)
        plane.stop()

    print("kflare converge benchmark (emulator, this machine)")
    for label, value, note in rows:
        print(f"  {label:<52} {value:>12}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
