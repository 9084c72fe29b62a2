"""What converging and keeping many tunnels costs in Cloudflare calls: N Tunnels, each with its TunnelConfiguration
and a DNSRecord pointing at it, in one account and one zone.

Runs the real stack on this machine (the test control plane, the emulator with its rate limit lifted, `kflare run`
as its own process), then prints the Cloudflare calls to converge (without drift checks), the calls a restarted
process makes until it has reconciled every object (with drift checks on), and the calls of the drift round that
follows by kind of call, beside the baseline of a controller that reads each object on its own (a GET per tunnel,
its token, its configuration and its record).

    .venv/bin/python bench/tunnels.py [--tunnels 100] [--drift 20]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import API, NS, Controller, account_docs, apply, bin_dir, cluster, drift_round, wait_ready

CALL_CLASSES = (
    ("tunnel listings", r"GET .*/cfd_tunnel$"),
    ("tunnel GETs", r"GET .*/cfd_tunnel/[^/]+$"),
    ("token reads", r"GET .*/token$"),
    ("configuration GETs", r"GET .*/configurations$"),
    ("record listings", r"GET .*/dns_records$"),
    ("writes", r"^(POST|PUT|PATCH|DELETE) "),
    ("other reads", r"^GET "),
)


def classify(calls: list[dict[str, object]]) -> dict[str, int]:
    counts = dict.fromkeys((name for name, _ in CALL_CLASSES), 0)
    for call in calls:
        line = f"{call['method']} {call['path']}"
        for name, pattern in CALL_CLASSES:
            if re.search(pattern, line):
                counts[name] += 1
                break
    return counts


def manifests(count: int) -> list[dict[str, object]]:
    api = API
    docs: list[dict[str, object]] = [
        {
            "apiVersion": api,
            "kind": "Zone",
            "metadata": {"name": "zone", "namespace": NS},
            "spec": {"name": "bench.example", "accountRef": {"name": "bench"}},
        }
    ]
    for i in range(count):
        name = f"t{i:04d}"
        docs += [
            {
                "apiVersion": api,
                "kind": "Tunnel",
                "metadata": {"name": name, "namespace": NS},
                "spec": {
                    "name": name,
                    "accountRef": {"name": "bench"},
                    "credentialsSecretRef": {"name": f"{name}-tok"},
                },
            },
            {
                "apiVersion": api,
                "kind": "TunnelConfiguration",
                "metadata": {"name": name, "namespace": NS},
                "spec": {
                    "tunnelRef": {"name": name},
                    "ingress": [{"hostname": f"{name}.bench.example", "service": f"http://{name}.bench.svc:80"}],
                },
            },
            {
                "apiVersion": api,
                "kind": "DNSRecord",
                "metadata": {"name": name, "namespace": NS},
                "spec": {
                    "zoneRef": {"name": "zone"},
                    "name": f"{name}.bench.example",
                    "type": "CNAME",
                    "tunnelRef": {"name": name},
                },
            },
        ]
    return docs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tunnels", type=int, default=100)
    parser.add_argument("--drift", type=float, default=20, help="drift check interval in seconds")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kflare-bench-tunnels-"))
    plane, emulator = cluster(bin_dir(), work, unlimited=True)
    controller = None
    try:
        apply(plane, account_docs(emulator))
        # Converging runs without drift checks: a check falling due meanwhile would count as a cost of converging.
        controller = Controller(plane, emulator, work / "controller.log", unlimited=True)
        wait_ready(plane, "cloudflareaccounts.kflare.dev", 1, 60)
        emulator.clear_calls()
        apply(plane, manifests(args.tunnels))
        took = sum(
            wait_ready(plane, f"{plural}.kflare.dev", args.tunnels, 600)
            for plural in ("tunnels", "tunnelconfigurations", "dnsrecords")
        )
        converge = emulator.calls()
        controller.stop()

        # A new process with drift checks on reconciles everything within a few seconds, so every object's first
        # check falls due within the same round, and the round below counts each object once.
        emulator.clear_calls()
        controller = Controller(plane, emulator, work / "controller-drift.log", drift=args.drift, unlimited=True)
        objects = {"cloudflareaccount": 1, "zone": 1, "dnsrecord": args.tunnels}
        objects |= {"tunnel": args.tunnels, "tunnelconfiguration": args.tunnels}
        controller.wait_reconciled(objects, 600)
        restart = classify(emulator.calls())

        emulator.clear_calls()
        drift_round(args.drift)
        round_calls = classify(emulator.calls())
        baseline = 4 * args.tunnels

        print(f"kflare tunnels benchmark: {args.tunnels} Tunnels, configurations and records (emulator, this machine)")
        rows = [
            ("Cloudflare calls to converge", f"{len(converge)}", f"{len(converge) / args.tunnels:.2f} per tunnel"),
            ("wall time to converge", f"{took:.1f} s", ""),
            ("Cloudflare calls after a restart", f"{sum(restart.values())}", f"token reads {restart['token reads']}"),
            ("Cloudflare calls per drift round", f"{sum(round_calls.values())}", f"baseline {baseline}"),
            *((f"  {name}", f"{count}", "") for name, count in round_calls.items()),
        ]
        for label, value, note in rows:
            print(f"  {label:<40} {value:>8}  {note}")
        converged = classify(converge)
        print("  converge calls by kind: " + ", ".join(f"{name} {count}" for name, count in converged.items()))
    finally:
        if controller is not None:
            controller.stop()
        emulator.stop()
        plane.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
