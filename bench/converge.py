"""What converging and keeping many DNS records costs: Cloudflare calls, wall time, CPU and memory.

Runs the real stack on this machine: the test control plane, the Cloudflare emulator (its rate limit lifted, so
the figures are about kflare and not about waiting), and `kflare run` as its own process. Then:

1. applies RECORDS DNSRecords spread over ZONES zones and waits for all of them to be Ready: Cloudflare calls and
   wall time to converge (and the time the same calls would take at Cloudflare's 1,200 calls per 5 minutes);
2. lets one drift round pass: Cloudflare calls per round, beside the one-GET-per-record baseline, and the
   controller's CPU time per idle reconcile;
3. the controller's RSS: with no resources (the baseline), with all of them, and with 100 MiB of unrelated Secrets
   in the cluster on top;
4. after that restart, waits until every object has been reconciled by the new process (its reconcile counters
   per kind cover every object and its queues are drained: each object is queued once when the new process lists
   it, so an empty queue with no reconcile running means each was reconciled) and counts the Cloudflare calls the
   new process made until then, and its writes.

    .venv/bin/python bench/converge.py [--records 1000] [--zones 5] [--drift 20] [--secrets-mib 100]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.api.crds import render_crds
from app.controlplane import ControlPlane, free_port
from app.dev import default_bin_dir
from tests.fixtures.emulator import EmulatorProcess

CLOUDFLARE_SUSTAINED = 1200 / 300  # calls per second Cloudflare allows a token


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


def apply(plane: ControlPlane, docs: list[dict[str, object]]) -> None:
    kubectl(plane, "apply", "--server-side", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_controller(
    plane: ControlPlane, emulator: EmulatorProcess, drift: int, log: Path, metrics_port: int = 0
) -> subprocess.Popen[bytes]:
    port = free_port()
    metrics = f"127.0.0.1:{metrics_port}" if metrics_port else "0"  # plain HTTP: this benchmark reads it
    argv = [
        str(Path(sys.executable).with_name("kflare")),
        "run",
        f"--kubeconfig={plane.kubeconfig_path}",
        f"--cloudflare-api-url={emulator.base_url}",
        "--cloudflare-rate-limit=1000000",
        f"--health-probe-bind-address=127.0.0.1:{port}",
        f"--metrics-bind-address={metrics}",
        "--metrics-secure=false",
        "--webhook-port=0",
        "--namespace=kflare-system",
        f"--drift-check-interval={drift}s",
        "--log-level=warning",
    ]
    proc = subprocess.Popen(argv, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            import urllib.request

            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as reply:
                if reply.status == 200:
                    return proc
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"controller not ready: {log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def ready_count(plane: ControlPlane, plural: str) -> int:
    listing = json.loads(kubectl(plane, "get", plural, "-A", "-o", "json"))
    return sum(
        1
        for item in listing["items"]
        for c in (item.get("status") or {}).get("conditions") or []
        if c["type"] == "Ready" and c["status"] == "True"
    )


def wait_ready(plane: ControlPlane, plural: str, count: int, timeout: float) -> float:
    started = time.monotonic()
    while ready_count(plane, plural) < count:
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"only {ready_count(plane, plural)} of {count} {plural} Ready after {timeout}s")
        time.sleep(0.5)
    return time.monotonic() - started


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The controller's metrics: (series name, labels) -> value."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def reconciled_all(port: int, objects: dict[str, int]) -> dict[str, int] | None:
    """Reconciles per controller once every object of each kind (controller name -> count) has been reconciled
    by this process, else None: its reconcile counters cover every object and no work is queued or running."""
    series = scrape(port)

    def total(name: str, controller: str) -> float:
        return sum(v for (n, labels), v in series.items() if n == name and ("controller", controller) in labels)

    done = {c: int(total("controller_runtime_reconcile_total", c)) for c in objects}
    idle = all(total("workqueue_depth", c) == 0 and total("controller_runtime_active_workers", c) == 0 for c in objects)
    return done if idle and all(done[c] >= n for c, n in objects.items()) else None


def wait_reconciled(port: int, objects: dict[str, int], timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while (done := reconciled_all(port, objects)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"not every object reconciled after {timeout}s: {objects}")
        time.sleep(0.5)
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--zones", type=int, default=5)
    parser.add_argument("--drift", type=int, default=20, help="drift check interval in seconds")
    parser.add_argument("--secrets-mib", type=int, default=100)
    args = parser.parse_args()
    bins = default_bin_dir()
    if bins is None:
        raise SystemExit("no kube-apiserver: run `make test-bins`")
    work = Path(tempfile.mkdtemp(prefix="kflare-bench-"))
    plane = ControlPlane.in_tempdir(bins)
    plane.start()
    emulator = EmulatorProcess(workdir=work).start()
    try:
        emulator.set_rate_limit(1_000_000, 300, 1)
        kubectl(plane, "apply", "--server-side", "-f", "-", stdin="\n---\n".join(render_crds(helm=False).values()))
        for crd in ("cloudflareaccounts", "zones", "dnsrecords"):
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
                    "metadata": {"name": "bench"},
                    "spec": {"accountID": emulator.account_id, "tokenSecretRef": {"name": "cf", "namespace": "bench"}},
                },
            ],
        )
        controller = start_controller(plane, emulator, args.drift, work / "controller.log")
        time.sleep(3)  # a settled, idle process
        rss_empty = rss_mib(controller.pid)

        zones = [
            {
                "apiVersion": "kflare.dev/v1alpha1",
                "kind": "Zone",
                "metadata": {"name": f"z{z}", "namespace": "bench"},
                "spec": {"name": f"bench{z}.example", "accountRef": {"name": "bench"}},
            }
            for z in range(args.zones)
        ]
        apply(plane, zones)
        wait_ready(plane, "zones.kflare.dev", args.zones, 120)

        per_zone = args.records // args.zones
        records = [
            {
                "apiVersion": "kflare.dev/v1alpha1",
                "kind": "DNSRecord",
                "metadata": {"name": f"r{z}-{i}", "namespace": "bench"},
                "spec": {
                    "zoneRef": {"name": f"z{z}"},
                    "name": f"h{i}.bench{z}.example",
                    "type": "A",
                    "content": f"10.{z}.{i // 250}.{i % 250 + 1}",
                    "ttl": 300,
                },
            }
            for z in range(args.zones)
            for i in range(per_zone)
        ]
        emulator.clear_calls()
        started = time.monotonic()
        for chunk in range(0, len(records), 250):
            apply(plane, records[chunk : chunk + 250])
        wait_ready(plane, "dnsrecords.kflare.dev", len(records), 1800)
        converge_seconds = time.monotonic() - started
        converge_calls = len(emulator.calls())
        rss_loaded = rss_mib(controller.pid)

        # One drift round: every record's check falls due within interval ± 10 %.
        emulator.clear_calls()
        cpu_before = cpu_seconds(controller.pid)
        time.sleep(args.drift * 1.25)
        round_calls = emulator.calls()
        cpu_round = cpu_seconds(controller.pid) - cpu_before
        gets = sum(1 for c in round_calls if c["method"] == "GET" and "/dns_records/" in c["path"])
        lists = sum(1 for c in round_calls if c["method"] == "GET" and c["path"].endswith("/dns_records"))
        writes = sum(1 for c in round_calls if c["method"] != "GET")
        stop(controller)

        # The same cluster with 100 MiB of Secrets nobody references.
        kubectl(plane, "create", "namespace", "noise")
        blob = base64.b64encode(os.urandom(384 * 1024)).decode()  # 512 KiB once encoded
        noise = [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"noise-{i}", "namespace": "noise"},
                "data": {"blob": blob},
            }
            for i in range(args.secrets_mib * 2)
        ]
        for chunk in range(0, len(noise), 20):
            apply(plane, noise[chunk : chunk + 20])
        restarted = time.time()
        metrics_port = free_port()
        controller = start_controller(plane, emulator, args.drift, work / "controller-2.log", metrics_port)
        objects = {"cloudflareaccount": 1, "zone": args.zones, "dnsrecord": len(records)}
        reconciles = wait_reconciled(metrics_port, objects, 600)
        restart_seconds = time.time() - restarted
        restart_calls = emulator.calls(since=restarted)
        restart_writes = sum(1 for c in restart_calls if c["method"] != "GET")
        rss_noise = rss_mib(controller.pid)
        stop(controller)

        per_record = (rss_loaded - rss_empty) * 1024 / len(records)
        at_limit = converge_calls / (0.8 * CLOUDFLARE_SUSTAINED)
        rows = [
            ("Cloudflare calls to converge", f"{converge_calls}", f"{converge_calls / len(records):.2f} per record"),
            ("wall time to all Ready", f"{converge_seconds:.1f} s", "rate limit lifted"),
            ("same calls at Cloudflare's limit", f"{at_limit:.0f} s", "80 % share of 1,200 per 5 min"),
            ("Cloudflare calls per drift round", f"{len(round_calls)}", f"lists {lists}, GETs {gets}, writes {writes}"),
            ("baseline: one GET per record", f"{len(records)}", "a check per object, as the Go controller"),
            ("CPU per idle reconcile", f"{1000 * cpu_round / len(records):.2f} ms", "drift round CPU / records"),
            ("controller RSS, no resources", f"{rss_empty:.1f} MiB", "baseline"),
            ("controller RSS, all Ready", f"{rss_loaded:.1f} MiB", f"+{per_record:.1f} KiB per record"),
            (f"restarted, plus {args.secrets_mib} MiB of other Secrets", f"{rss_noise:.1f} MiB", "all reconciled"),
            (
                "Cloudflare calls after the restart",
                f"{len(restart_calls)}",
                f"writes {restart_writes}, until every object was reconciled ({restart_seconds:.1f} s)",
            ),
            (
                "reconciles after the restart",
                f"{sum(reconciles.values())}",
                ", ".join(f"{kind} {n}" for kind, n in reconciles.items()),
            ),
        ]
        print(f"kflare converge benchmark: {len(records)} DNSRecords in {args.zones} zones (emulator, this machine)")
        for label, value, note in rows:
            print(f"  {label:<42} {value:>12}  {note}")
    finally:
        emulator.stop()
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
