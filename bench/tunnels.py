"""What converging and keeping many tunnels costs in Cloudflare calls: N Tunnels, each with its TunnelConfiguration
and a DNSRecord pointing at it, in one account and one zone.

Runs the real stack on this machine (the test control plane, the emulator with its rate limit lifted, `kflare run`
as its own process), then prints the Cloudflare calls to converge, and the calls of one drift round by kind of call,
beside the baseline of a controller that reads each object on its own (a GET per tunnel, its token, its
configuration and its record).

    .venv/bin/python bench/tunnels.py [--tunnels 100] [--drift 20]
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.api.crds import render_crds
from app.controlplane import ControlPlane
from app.dev import default_bin_dir
from bench.converge import apply, kubectl, start_controller, stop, wait_ready
from tests.fixtures.emulator import EmulatorProcess

KINDS = ("cloudflareaccounts", "zones", "dnsrecords", "tunnels", "tunnelconfigurations")
CALL_CLASSES = (
    ("tunnel listings", r"GET .*/cfd_tunnel$"),
    ("tunnel GETs", r"GET .*/cfd_tunnel/[^/]+$"),
    ("token reads", r"GET .*/token$"),
    ("configuration GETs", r"GET .*/configurations$"),
    ("record listings", r"GET .*/dns_records$"),
    ("writes", r"^(POST|PUT|PATCH|DELETE) "),
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
    api = "kflare.dev/v1alpha1"
    docs: list[dict[str, object]] = [
        {
            "apiVersion": api,
            "kind": "Zone",
            "metadata": {"name": "zone", "namespace": "bench"},
            "spec": {"name": "bench.example", "accountRef": {"name": "acct"}},
        }
    ]
    for i in range(count):
        name = f"t{i:04d}"
        docs += [
            {
                "apiVersion": api,
                "kind": "Tunnel",
                "metadata": {"name": name, "namespace": "bench"},
                "spec": {"name": name, "accountRef": {"name": "acct"}, "credentialsSecretRef": {"name": f"{name}-tok"}},
            },
            {
                "apiVersion": api,
                "kind": "TunnelConfiguration",
                "metadata": {"name": name, "namespace": "bench"},
                "spec": {
                    "tunnelRef": {"name": name},
                    "ingress": [{"hostname": f"{name}.bench.example", "service": f"http://{name}.bench.svc:80"}],
                },
            },
            {
                "apiVersion": api,
                "kind": "DNSRecord",
                "metadata": {"name": name, "namespace": "bench"},
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
    parser.add_argument("--drift", type=int, default=20, help="drift check interval in seconds")
    args = parser.parse_args()
    bins = default_bin_dir()
    if bins is None:
        raise SystemExit("no kube-apiserver: run `make test-bins`")
    work = Path(tempfile.mkdtemp(prefix="kflare-bench-"))
    plane = ControlPlane.in_tempdir(bins)
    plane.start()
    emulator = EmulatorProcess(workdir=work).start()
    controller = None
    try:
        emulator.set_rate_limit(1_000_000, 300, 1)
        kubectl(plane, "apply", "--server-side", "-f", "-", stdin="\n---\n".join(render_crds(helm=False).values()))
        for crd in KINDS:
            kubectl(plane, "wait", "--for=condition=Established", f"crd/{crd}.kflare.dev", "--timeout=60s")
        kubectl(plane, "create", "namespace", "kflare-system")
        kubectl(plane, "create", "namespace", "bench")
        token = base64.b64encode(emulator.token.encode()).decode()
        apply(
            plane,
            [
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "cf", "namespace": "bench"},
                    "data": {"CF_API_TOKEN": token},
                },
                {
                    "apiVersion": "kflare.dev/v1alpha1",
                    "kind": "CloudflareAccount",
                    "metadata": {"name": "acct"},
                    "spec": {"accountID": emulator.account_id, "tokenSecretRef": {"name": "cf", "namespace": "bench"}},
                },
            ],
        )
        controller = start_controller(plane, emulator, args.drift, work / "controller.log")
        wait_ready(plane, "cloudflareaccounts", 1, 60)
        emulator.clear_calls()
        apply(plane, manifests(args.tunnels))
        took = max(wait_ready(plane, plural, args.tunnels, 600) for plural in ("tunnelconfigurations", "dnsrecords"))
        converge = emulator.calls()

        emulator.clear_calls()
        time.sleep(args.drift * 1.25)  # one drift round: every check falls due within interval ± 10 %
        round_calls = classify(emulator.calls())
        baseline = 4 * args.tunnels

        print(f"kflare tunnels benchmark: {args.tunnels} Tunnels, configurations and records (emulator, this machine)")
        print(
            f"  {'Cloudflare calls to converge':<40} {len(converge):>8}  {len(converge) / args.tunnels:.2f} per tunnel"
        )
        print(f"  {'wall time to converge':<40} {took:>7.1f}s")
        print(f"  {'Cloudflare calls per drift round':<40} {sum(round_calls.values()):>8}  baseline {baseline}")
        for name, count in round_calls.items():
            print(f"    {name:<38} {count:>8}")
        converged = classify(converge)
        print("  converge calls by kind: " + ", ".join(f"{name} {count}" for name, count in converged.items()))
    finally:
        if controller is not None:
            stop(controller)
        emulator.stop()
        plane.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
