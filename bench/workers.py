"""What converging and keeping 200 Workers with bindings costs in Cloudflare calls, and that an idle resync uploads
nothing.

The real stack on this machine (test control plane, emulator with its rate limit lifted, `kflare run` as its own
process). Two accounts (Free allows 100 Workers each), each with 10 KV namespaces, 2 R2 buckets and a D1 database;
WORKERS Workers split over them, each bound to a plain-text value, a Secret key, a KV namespace, an R2 bucket and the
D1 database. Then:

1. calls to converge (all Ready), and uploads among them (one per Worker);
2. one drift round: calls (one listing per account per collection), beside one GET per object;
3. a restart (an idle resync of everything by a new process): calls until every object was reconciled, and uploads
   among them, which must be 0.

    .venv/bin/python bench/workers.py [--workers 200] [--drift 20]
"""

from __future__ import annotations

import argparse
import base64
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import API, NS, Controller, account_docs, apply, bin_dir, cluster, drift_round, wait_ready
from tests.fixtures.emulator import ACCOUNT_ID, DEFAULT_STATE

SECOND_ACCOUNT = "abcdef0123456789abcdef0123456789"
KV_PER_ACCOUNT, R2_PER_ACCOUNT = 10, 2


def is_upload(call: dict[str, Any]) -> bool:
    return call["method"] == "PUT" and "/workers/scripts/" in call["path"] and not call["path"].endswith("/settings")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--drift", type=float, default=20, help="drift check interval in seconds")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kflare-bench-workers-"))
    state = {**DEFAULT_STATE, "accounts": [*DEFAULT_STATE["accounts"], {"id": SECOND_ACCOUNT, "name": "second"}]}
    plane, emulator = cluster(bin_dir(), work, state, unlimited=True)
    controller = None
    try:
        secret = base64.b64encode(b"bench-secret-value").decode()
        accounts = {"a": ACCOUNT_ID, "b": SECOND_ACCOUNT}
        docs: list[dict[str, Any]] = [
            *account_docs(emulator, "acct-a", ACCOUNT_ID),
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "app", "namespace": NS},
                "data": {"key": secret},
            },
        ]
        for short, account_id in accounts.items():
            ref = {"name": f"acct-{short}"}
            if short != "a":
                docs.append(account_docs(emulator, f"acct-{short}", account_id)[1])
            for k in range(KV_PER_ACCOUNT):
                docs.append(
                    {
                        "apiVersion": API,
                        "kind": "KVNamespace",
                        "metadata": {"name": f"kv-{short}{k}", "namespace": NS},
                        "spec": {"accountRef": ref, "title": f"kv-{short}{k}"},
                    }
                )
            for r in range(R2_PER_ACCOUNT):
                docs.append(
                    {
                        "apiVersion": API,
                        "kind": "R2Bucket",
                        "metadata": {"name": f"r2-{short}{r}", "namespace": NS},
                        "spec": {"accountRef": ref, "name": f"bucket-{short}{r}"},
                    }
                )
            docs.append(
                {
                    "apiVersion": API,
                    "kind": "D1Database",
                    "metadata": {"name": f"d1-{short}", "namespace": NS},
                    "spec": {"accountRef": ref, "name": f"db-{short}"},
                }
            )
        apply(plane, docs)
        controller = Controller(plane, emulator, work / "controller.log", drift=args.drift, unlimited=True)
        storage = len(accounts) * (KV_PER_ACCOUNT + R2_PER_ACCOUNT + 1)
        wait_ready(plane, "kvnamespaces.kflare.dev", len(accounts) * KV_PER_ACCOUNT, 120)
        wait_ready(plane, "r2buckets.kflare.dev", len(accounts) * R2_PER_ACCOUNT, 120)
        wait_ready(plane, "d1databases.kflare.dev", len(accounts), 120)

        shorts = list(accounts)
        workers = []
        for i in range(args.workers):
            short = shorts[i % len(shorts)]
            workers.append(
                {
                    "apiVersion": API,
                    "kind": "WorkerScript",
                    "metadata": {"name": f"w{i}", "namespace": NS},
                    "spec": {
                        "accountRef": {"name": f"acct-{short}"},
                        "name": f"worker-{i}",
                        "script": f"export default {{ fetch() {{ return new Response('worker {i}'); }} }};",
                        "bindings": [
                            {"name": "GREETING", "plainText": f"hello {i}"},
                            {"name": "KEY", "secretKeyRef": {"name": "app", "key": "key"}},
                            {"name": "CACHE", "kvNamespaceRef": {"name": f"kv-{short}{i % KV_PER_ACCOUNT}"}},
                            {"name": "FILES", "r2BucketRef": {"name": f"r2-{short}{i % R2_PER_ACCOUNT}"}},
                            {"name": "DB", "d1DatabaseRef": {"name": f"d1-{short}"}},
                        ],
                    },
                }
            )
        emulator.clear_calls()
        started = time.monotonic()
        for chunk in range(0, len(workers), 100):
            apply(plane, workers[chunk : chunk + 100])
        wait_ready(plane, "workerscripts.kflare.dev", len(workers), 900)
        converge_seconds = time.monotonic() - started
        converge_calls = emulator.calls()
        converge_uploads = sum(1 for c in converge_calls if is_upload(c))

        emulator.clear_calls()
        drift_round(args.drift)
        round_calls = emulator.calls()
        round_uploads = sum(1 for c in round_calls if is_upload(c))
        controller.stop()

        restarted = time.time()
        controller = Controller(plane, emulator, work / "controller-2.log", drift=args.drift, unlimited=True)
        objects = {
            "cloudflareaccount": len(accounts),
            "kvnamespace": len(accounts) * KV_PER_ACCOUNT,
            "r2bucket": len(accounts) * R2_PER_ACCOUNT,
            "d1database": len(accounts),
            "workerscript": len(workers),
        }
        controller.wait_reconciled(objects, 600)
        restart_calls = emulator.calls(since=restarted)
        restart_uploads = sum(1 for c in restart_calls if is_upload(c))

        objects_total = len(workers) + storage
        rows = [
            (
                "Cloudflare calls to converge the Workers",
                f"{len(converge_calls)}",
                f"uploads {converge_uploads} ({converge_seconds:.1f} s)",
            ),
            (
                "Cloudflare calls per drift round",
                f"{len(round_calls)}",
                f"uploads {round_uploads}; {objects_total} objects",
            ),
            ("baseline: one GET per object", f"{objects_total}", "a check per object, as the Go controller"),
            ("Cloudflare calls on an idle resync", f"{len(restart_calls)}", "a new process reconciles everything"),
            ("uploads on an idle resync (must be 0)", f"{restart_uploads}", "OK" if restart_uploads == 0 else "FAIL"),
        ]
        print(f"kflare Workers benchmark: {len(workers)} Workers with 5 bindings each, {len(accounts)} accounts")
        for label, value, note in rows:
            print(f"  {label:<42} {value:>8}  {note}")
        return 0 if restart_uploads == 0 and round_uploads == 0 else 1
    finally:
        if controller is not None:
            controller.stop()
        emulator.stop()
        plane.stop()


if __name__ == "__main__":
    sys.exit(main())
