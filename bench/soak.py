"""Soak: many resources, drift checks every minute and steady churn for a long time; what must stay flat does?

Runs the real stack (the test control plane, the emulator with its rate limit lifted, `kflare run` as its own
process with drift checks every `--drift` seconds), applies `--resources` DNS records (100 per zone) and waits
until all are Ready, then for `--minutes`:

- every 10 s, churn: `--churn` records get new content (spread over the zones), and one record is deleted and made
  again;
- every minute, drift: one record is changed in Cloudflare behind kflare's back (the drift check puts it back);
- every 15 s, a sample of the controller: RSS, open sockets (its /proc/<pid>/fd), asyncio tasks
  (`kflare_asyncio_tasks`) and the reconcile latency histogram (`controller_runtime_reconcile_time_seconds`).

It prints one row per `--window` minutes (RSS, sockets, tasks at its end; reconciles, p50 and p99 in it) and the
slopes over the soak after `--warmup` seconds (least squares; per hour), which must be about 0 for RSS, sockets
and tasks.

    .venv/bin/python bench/soak.py [--resources 2000] [--minutes 30] [--window 5] [--drift 60] [--churn 20]
    .venv/bin/python bench/soak.py --resources 200 --minutes 3 --window 1     # a quick check
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import NS, Controller, account_docs, apply, bin_dir, cluster, kubectl, rss_mib, wait_ready

PER_ZONE = 100
SAMPLE_EVERY = 15.0
CHURN_EVERY = 10.0
LATENCY = "controller_runtime_reconcile_time_seconds"


def sockets(pid: int) -> int:
    fds = Path(f"/proc/{pid}/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            count += os.readlink(fd).startswith("socket:")
        except OSError:
            continue
    return count


@dataclass
class Sample:
    at: float
    rss: float
    sockets: int
    tasks: float
    buckets: dict[float, float] = field(default_factory=dict)
    """Cumulative reconciles per upper bound, over every controller."""


def sample(controller: Controller, started: float) -> Sample:
    series = controller.scrape()
    buckets: dict[float, float] = {}
    for (name, labels), value in series.items():
        if name == f"{LATENCY}_bucket":
            bound = float(dict(labels)["le"])
            buckets[bound] = buckets.get(bound, 0.0) + value
    tasks = sum(v for (name, _), v in series.items() if name == "kflare_asyncio_tasks")
    return Sample(time.monotonic() - started, rss_mib(controller.pid), sockets(controller.pid), tasks, buckets)


def quantile(first: Sample, last: Sample, q: float) -> tuple[int, float]:
    """Reconciles between two samples and the q-quantile of their latency (linear within a bucket)."""
    bounds = sorted(last.buckets)
    counts = [last.buckets[b] - first.buckets.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0
    if total <= 0:
        return 0, 0.0
    rank = q * total
    below, lower = 0.0, 0.0
    for bound, cumulative in zip(bounds, counts, strict=True):
        if cumulative >= rank:
            if bound == float("inf"):
                return int(total), lower
            share = (rank - below) / max(cumulative - below, 1e-9)
            return int(total), lower + (bound - lower) * share
        below, lower = cumulative, bound
    return int(total), lower


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope, per hour, of (seconds, value) points."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    if var == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / var * 3600


def record(zone: int, i: int, content: str) -> dict[str, Any]:
    return {
        "apiVersion": "kflare.dev/v1alpha1",
        "kind": "DNSRecord",
        "metadata": {"name": f"r{zone}-{i}", "namespace": NS},
        "spec": {"zoneRef": {"name": f"z{zone}"}, "name": f"h{i}.soak{zone}.example", "type": "A", "content": content},
    }


def zone(z: int) -> dict[str, Any]:
    return {
        "apiVersion": "kflare.dev/v1alpha1",
        "kind": "Zone",
        "metadata": {"name": f"z{z}", "namespace": NS},
        "spec": {"name": f"soak{z}.example", "accountRef": {"name": "bench"}},
    }


def address(rng: random.Random) -> str:
    return f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


def drift_one(emulator: Any, rng: random.Random) -> None:
    """Change one record in Cloudflare as someone in the dashboard would."""
    headers = {"Authorization": f"Bearer {emulator.token}"}
    with httpx.Client(base_url=emulator.base_url, headers=headers, timeout=10) as cf:
        zones = cf.get("/zones", params={"per_page": 50}).json()["result"]
        chosen = rng.choice(zones)
        found = cf.get(f"/zones/{chosen['id']}/dns_records", params={"type": "A", "per_page": 100}).json()["result"]
        if found:
            victim = rng.choice(found)
            cf.patch(f"/zones/{chosen['id']}/dns_records/{victim['id']}", json={"content": "192.0.2.250"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resources", type=int, default=2000, help="DNS records (100 per zone)")
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--window", type=float, default=5, help="minutes per row of the table")
    parser.add_argument("--drift", type=float, default=60, help="drift check interval in seconds")
    parser.add_argument("--warmup", type=float, default=60, help="seconds left out of the slopes (settling)")
    parser.add_argument("--churn", type=int, default=0, help="records changed every 10 s (default: 1 %%)")
    args = parser.parse_args()
    churn = args.churn or max(1, args.resources // 100)
    bins = bin_dir()
    rng = random.Random(14)
    work = Path(tempfile.mkdtemp(prefix="kflare-soak-"))
    plane, emulator = cluster(bins, work, unlimited=True)
    try:
        zones = max(1, -(-args.resources // PER_ZONE))
        names = [(i % zones, i // zones) for i in range(args.resources)]
        docs = account_docs(emulator) + [zone(z) for z in range(zones)]
        docs += [record(z, i, address(rng)) for z, i in names]
        controller = Controller(plane, emulator, work / "controller.log", drift=args.drift)
        started = time.monotonic()
        apply(plane, docs)
        wait_ready(plane, "dnsrecords.kflare.dev", args.resources, 3600)
        print(f"{args.resources:,} records in {zones} zones Ready in {time.monotonic() - started:.0f} s", flush=True)
        soak_start = time.monotonic()
        samples = [sample(controller, soak_start)]
        next_churn = next_drift = next_sample = soak_start
        end = soak_start + args.minutes * 60
        changed = recreated = drifted = 0
        while (now := time.monotonic()) < end:
            if now >= next_churn:
                next_churn += CHURN_EVERY
                picked = rng.sample(names, min(churn, len(names)))
                apply(plane, [record(z, i, address(rng)) for z, i in picked])
                changed += len(picked)
                z, i = rng.choice(names)
                kubectl(plane, "delete", "dnsrecord", "-n", NS, f"r{z}-{i}", "--wait=true", "--timeout=60s")
                apply(plane, [record(z, i, address(rng))])
                recreated += 1
            if now >= next_drift:
                next_drift += 60
                drift_one(emulator, rng)
                drifted += 1
            if now >= next_sample:
                next_sample += SAMPLE_EVERY
                samples.append(sample(controller, soak_start))
            time.sleep(max(0.0, min(next_churn, next_drift, next_sample, end) - time.monotonic()))
        samples.append(sample(controller, soak_start))
        unready = args.resources - wait_settled(plane, args.resources)
        controller.stop()
    finally:
        emulator.stop()
        plane.stop()
    report(samples, args, changed, recreated, drifted, unready)
    return 0


def wait_settled(plane: Any, expected: int) -> int:
    with contextlib.suppress(RuntimeError):
        wait_ready(plane, "dnsrecords.kflare.dev", expected, 120)
    items = json.loads(kubectl(plane, "get", "dnsrecords.kflare.dev", "-A", "-o", "json"))["items"]
    return sum(
        any(
            c["type"] == "Ready"
            and c["status"] == "True"
            and c.get("observedGeneration") == i["metadata"]["generation"]
            for c in (i.get("status") or {}).get("conditions") or []
        )
        for i in items
    )


def report(
    samples: list[Sample], args: argparse.Namespace, changed: int, recreated: int, drifted: int, unready: int
) -> None:
    window = args.window * 60
    rows = [("window (min)", "RSS MiB", "sockets", "tasks", "reconciles", "p50 ms", "p99 ms")]
    start = samples[0]
    edge = window
    for s in samples[1:]:
        if s.at >= edge or s is samples[-1]:
            n, p50 = quantile(start, s, 0.5)
            _, p99 = quantile(start, s, 0.99)
            label = f"{start.at / 60:.0f}-{s.at / 60:.0f}"
            rows.append(
                (
                    label,
                    f"{s.rss:.1f}",
                    str(s.sockets),
                    f"{s.tasks:.0f}",
                    str(n),
                    f"{p50 * 1000:.0f}",
                    f"{p99 * 1000:.0f}",
                )
            )
            start, edge = s, edge + window
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(f"\nsoak: {args.resources:,} records, {args.minutes:g} min, drift checks every {args.drift:g} s")
    print(f"churn: {changed} records changed, {recreated} deleted and made again; {drifted} drifted in Cloudflare")
    for r in rows:
        print("  ".join(c.rjust(widths[i]) for i, c in enumerate(r)))
    print(f"\nslopes after the first {args.warmup:g} s (least squares over samples every {SAMPLE_EVERY:g} s):")
    for name, values, unit in (
        ("RSS", [s.rss for s in samples], " MiB"),
        ("open sockets", [float(s.sockets) for s in samples], ""),
        ("asyncio tasks", [s.tasks for s in samples], ""),
    ):
        settled = [(s.at, v) for s, v in zip(samples, values, strict=True) if s.at >= args.warmup]
        per_hour = slope(settled)
        kept = [v for _, v in settled] or values
        span = f"first {kept[0]:.1f}, last {kept[-1]:.1f}, min {min(kept):.1f}, max {max(kept):.1f}"
        print(f"{name} slope: {per_hour:+.2f}{unit}/h ({span})")
    print(f"not Ready at the end (after 120 s to settle): {unready}")


if __name__ == "__main__":
    raise SystemExit(main())
