"""What converging and keeping rules and a large IP list costs in Cloudflare calls.

Runs the real stack on this machine (the test control plane, the emulator with its rate limit lifted, `kflare run`):

1. RULES rules of the seven rule kinds that take many rules (WAF custom, rate limiting, transform of the three
   types, redirect, cache, configuration, origin) in one Business zone (its limits fit them), applied at once, out
   of priority order: Cloudflare calls to converge, beside the baseline of one write per rule plus one read and
   one create per (zone, phase);
2. one drift round of those rules: calls per round, beside the one-GET-per-rule baseline;
3. an IPList of ITEMS items: calls to converge, and calls per drift round beside the deploy guide's figure
   (2, plus 1 per 500 items past the first 500).

    .venv/bin/python bench/rules.py [--rules 100] [--items 10000] [--drift 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import API, NS, Controller, account_docs, apply, bin_dir, cluster, drift_round, wait_ready

SHARES = (  # kind, share of the rules, spec beside zoneRef/expression/priority, phases it writes
    ("WAFCustomRule", 35, {"action": "block"}),
    ("RateLimitRule", 5, {"ratelimit": {"characteristics": ["cf.colo.id", "ip.src"], "requestsPerPeriod": 100}}),
    ("TransformRule", 20, None),
    ("RedirectRule", 15, {"fromValue": {"targetURL": {"value": "https://example.com/"}}}),
    ("CacheRule", 10, {"cache": True}),
    ("ConfigurationRule", 10, {"rocketLoader": False}),
    ("OriginRule", 5, {"origin": {"port": 8443}}),
)
TRANSFORMS = (
    {"type": "urlRewrite", "uri": {"path": {"value": "/new"}}},
    {"type": "requestHeaders", "headers": [{"name": "X-Bench", "operation": "set", "value": "1"}]},
    {"type": "responseHeaders", "headers": [{"name": "X-Bench", "operation": "add", "value": "1"}]},
)


def rules(total: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    scale = total / sum(share for _, share, _ in SHARES)
    for kind, share, extra in SHARES:
        for i in range(max(1, round(share * scale))):
            spec = extra if extra is not None else TRANSFORMS[i % 3]
            out.append(
                {
                    "apiVersion": API,
                    "kind": kind,
                    "metadata": {"name": f"{kind.lower()}-{i}", "namespace": NS},
                    "spec": {
                        "zoneRef": {"name": "zone"},
                        "expression": f'http.request.uri.path eq "/{kind.lower()}/{i}"',
                        "priority": (i * 7919) % 1000,  # applied out of priority order on purpose
                        **spec,
                    },
                }
            )
    return out[:total]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules", type=int, default=100)
    parser.add_argument("--items", type=int, default=10000)
    parser.add_argument("--drift", type=float, default=20, help="drift check interval in seconds")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kflare-bench-rules-"))
    plane, emulator = cluster(bin_dir(), work, unlimited=True)
    controller = None
    try:
        zone = {
            "apiVersion": API,
            "kind": "Zone",
            "metadata": {"name": "zone", "namespace": NS},
            "spec": {"name": "rules.example", "accountRef": {"name": "bench"}, "plan": "business"},
        }
        apply(plane, [*account_docs(emulator), zone])
        controller = Controller(plane, emulator, work / "controller.log", drift=args.drift, unlimited=True)
        wait_ready(plane, "zones.kflare.dev", 1, 120)

        documents = rules(args.rules)
        phases = 9 if args.rules >= 40 else len({d["kind"] for d in documents}) + 2
        emulator.clear_calls()
        started = time.monotonic()
        apply(plane, documents)
        for kind in {d["kind"] for d in documents}:
            count = sum(1 for d in documents if d["kind"] == kind)
            wait_ready(plane, f"{kind.lower()}s.kflare.dev", count, 600)
        rules_seconds = time.monotonic() - started
        rule_calls = emulator.calls()
        by_method = Counter(c["method"] for c in rule_calls)

        emulator.clear_calls()
        drift_round(args.drift)
        round_calls = [c for c in emulator.calls() if "/rulesets" in c["path"]]
        round_reads = sum(1 for c in round_calls if c["method"] == "GET")
        round_writes = sum(1 for c in round_calls if c["method"] != "GET")

        items = [{"ip": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"} for i in range(args.items)]
        ip_list = {
            "apiVersion": API,
            "kind": "IPList",
            "metadata": {"name": "big", "namespace": NS},
            "spec": {"accountRef": {"name": "bench"}, "name": "big", "items": items},
        }
        emulator.clear_calls()
        started = time.monotonic()
        apply(plane, [ip_list])
        wait_ready(plane, "iplists.kflare.dev", 1, 600)
        list_seconds = time.monotonic() - started
        list_calls = [c for c in emulator.calls() if "/rules/lists" in c["path"]]
        emulator.clear_calls()
        drift_round(args.drift)
        list_round = [c for c in emulator.calls() if "/rules/lists" in c["path"]]

        expected_list_round = 2 + max(0, (args.items - 500 + 499) // 500)
        print(
            f"kflare rules benchmark: {len(documents)} rules of 7 kinds in one zone, an IP list of {args.items} items"
        )
        print(f"  converge rules: {len(rule_calls)} calls ({dict(by_method)}) in {rules_seconds:.1f}s")
        print(f"    baseline: {len(documents)} rule writes + about 2 per phase ({phases} phases): "
              f"{len(documents) + 2 * phases}")  # fmt: skip
        print(f"  drift round of the rules: {round_reads} reads, {round_writes} writes "
              f"(one read per (zone, phase): {phases}; one GET per rule would be {len(documents)})")  # fmt: skip
        print(f"  converge the list: {len(list_calls)} calls in {list_seconds:.1f}s")
        print(f"  drift round of the list: {len(list_round)} calls (deploy guide: {expected_list_round})")
    finally:
        if controller is not None:
            controller.stop()
        emulator.stop()
        plane.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
