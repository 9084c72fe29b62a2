"""What the `cloudflare-tunnel` class costs: translation time and xDS size at scale, how long a route change takes to
be served by Envoy, and Envoy's throughput against the same backend reached directly.

1. Translation: `--routes` HTTPRoutes (one hostname and two rules each, over 50 Services), translated `--repeat`
   times: median and worst wall time, and the snapshot's size (what a cold Envoy fetches).
2. Route change to served, through the whole stack: the test API server with the Gateway API CRDs, `kflare run
   --gateway-enabled` with `--routes` HTTPRoutes on the class, an Envoy on its delta ADS stream, echo backends on
   loopback. Each of `--changes` patches flips one route's backend; the time from the PATCH returning to Envoy
   answering from the new backend: p50 and p99, and the bytes the change took on the xDS connection (Envoy's count
   of bytes received from kflare) with the xDS updates it made. Baseline: REST-JSON polling every 0.5 s, as this
   bench measured it before the push: p50 739 ms, p99 943 ms. Then the controller's resident memory with those
   routes. Before it, the xDS push alone, in process: a new snapshot of as many routes published, to Envoy serving
   it (translation not timed).
3. Requests per second through Envoy and to the backend directly (`--seconds` each, `--concurrency` clients),
   and their ratio.
4. Ingress-document writes, on the same stack with a kflare Tunnel in the emulator: `--routes` HTTPRoutes applied at
   once on a class naming the Tunnel; the document's writes (PUTs) until it holds all their hostnames, and the wall
   time; then writes while idle, for a change that leaves the hostnames alone, and for a hostname change. Baseline:
   one write per route (a writer per route).
5. What gRPC costs the process: the import time and resident memory of grpcio and the xDS messages, imported
   after what the process imports anyway.

    .venv/bin/python bench/gateway.py [--routes 1000] [--changes 30] [--seconds 5] [--imports 3]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.controlplane import ControlPlane, free_port
from app.xds import XdsServer
from bench.harness import FIRST_POLL, Controller, apply, bin_dir, cluster, kubectl, pause, rss_mib, stop_together
from reconcilers.gateway import envoy
from reconcilers.gateway.kinds import CONTROLLER_NAME, GATEWAY_GROUP
from reconcilers.gateway.snapshot import SnapshotStore
from reconcilers.gateway.translate import translate
from tests.dataplane.world import backend, endpoint_slice, http_route, service, world
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.envoy import _Thread, echo_app, running_envoy
from tests.fixtures.gateway import gateway_api_dir
from tests.kinds import cf


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_translation(routes: int, repeat: int) -> None:
    services = {f"svc-{i}": 8000 + i for i in range(50)}
    objects = [
        http_route(
            f"r{i}",
            [f"app{i}.example.com"],
            [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                    "backendRefs": [backend(f"svc-{i % 50}")],
                },
                {"backendRefs": [backend(f"svc-{(i + 1) % 50}", weight=9), backend(f"svc-{(i + 2) % 50}", weight=1)]},
            ],
        )
        for i in range(routes)
    ]
    w = world(objects, services)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = translate(w)
        times.append(time.perf_counter() - start)
    store = SnapshotStore()
    store.publish({**result.resources, "listeners": [envoy.ingress_listener("0.0.0.0", 8080)]})  # noqa: S104
    rds = len(json.dumps(result.resources["routes"], separators=(",", ":")))
    print(
        f"translation of {routes} HTTPRoutes: median {statistics.median(times) * 1000:.0f} ms,"
        f" worst {max(times) * 1000:.0f} ms"
    )
    print(f"  snapshot {store.size() / 1024:.0f} KiB (routes {rds / 1024:.0f} KiB), {len(result.hostnames)} hostnames")


def envoy_stats(http: httpx.Client, admin: int) -> dict[str, int]:
    data = http.get(f"http://127.0.0.1:{admin}/stats?format=json").json()
    return {s["name"]: s["value"] for s in data["stats"] if isinstance(s.get("value"), int)}


RX_BYTES = "cluster.kflare-xds.upstream_cx_rx_bytes_total"
XDS_UPDATES = {
    "virtual_hosts": "http.ingress.rds.vhds.kflare-ingress.update_success",
    "routes": "http.ingress.rds.kflare-ingress.update_success",
    "clusters": "cluster_manager.cds.update_success",
    "listeners": "listener_manager.lds.update_success",
}


def all_routes_have_status(plane: ControlPlane, count: int) -> bool:
    items = json.loads(kubectl(plane, "-n", "apps", "get", "httproutes", "-o", "json"))["items"]
    return len(items) >= count and all((item.get("status") or {}).get("parents") for item in items)


def bench_push(routes: int, changes: int) -> None:
    """The xDS push alone, in process: the leader's snapshot of `routes` HTTPRoutes changes (one route's backend;
    translated beforehand, not timed) and a real Envoy on the stream serves it. Baseline: REST-JSON polling every
    500 ms, whose wait alone averaged 250 ms."""
    servers = _Thread()
    ports = {"alpha": free_port(), "beta": free_port()}
    for name, port in ports.items():
        servers.serve(echo_app(name, []), port)
    envoy_port, xds_port = free_port(), free_port()
    store = SnapshotStore()
    servers.start(XdsServer(store, lambda: "bench", "127.0.0.1", xds_port), xds_port)
    listeners = [envoy.ingress_listener("127.0.0.1", envoy_port)]

    def snapshot(target: str) -> dict[str, list[dict[str, Any]]]:
        objects = [
            http_route("bench", ["bench.example.com"], [{"backendRefs": [backend(target)]}]),
            *(
                http_route(f"fill{i}", [f"app{i}.fill.example.com"], [{"backendRefs": [backend("alpha")]}])
                for i in range(routes - 1)
            ),
        ]
        return {**translate(world(objects, ports)).resources, "listeners": listeners}

    snapshots = {target: snapshot(target) for target in ports}
    store.publish(snapshots["alpha"])
    bootstrap = envoy.bootstrap(
        node_id="bench-push", xds_host="127.0.0.1", xds_port=xds_port, token="bench", admin_port=free_port()
    )
    try:
        with running_envoy(bootstrap), httpx.Client(timeout=5) as http:

            def serving() -> str | None:
                reply = http.get(f"http://127.0.0.1:{envoy_port}/", headers={"Host": "bench.example.com"})
                return str(reply.json()["backend"]) if reply.status_code == 200 else None

            deadline = time.monotonic() + 60
            while serving() != "alpha":
                if time.monotonic() > deadline:
                    sys.exit("the route was never served")
            took = []
            for i in range(changes):
                target = "beta" if i % 2 == 0 else "alpha"
                start = time.monotonic()
                store.publish(snapshots[target])
                while serving() != target:
                    pass
                took.append(time.monotonic() - start)
        print(
            f"xDS push (snapshot published to Envoy serving it), {routes} routes, {changes} changes:"
            f" p50 {percentile(took, 0.5) * 1000:.0f} ms, p99 {percentile(took, 0.99) * 1000:.0f} ms"
            " (baseline: REST polling every 500 ms waited 250 ms on average, up to 500 ms)"
        )
    finally:
        servers.stop()


def filler_routes(count: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": f"{GATEWAY_GROUP}/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": f"fill{i}", "namespace": "apps"},
            "spec": {
                "parentRefs": [{"name": "edge"}],
                "hostnames": [f"app{i}.fill.example.com"],
                "rules": [
                    {"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}], "backendRefs": [backend("alpha")]},
                    {"backendRefs": [backend("alpha", weight=9), backend("beta", weight=1)]},
                ],
            },
        }
        for i in range(count)
    ]


async def bench_change(
    changes: int, seconds: float, concurrency: int, routes: int, idle_seconds: float, costs: DependencyCost
) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="kflare-bench-gateway-"))
    crds = sorted(p for p in (gateway_api_dir() / "standard").glob("*.yaml") if "vap" not in p.name)
    plane, emulator = cluster(bin_dir(), workdir / "emulator", crds=crds)
    servers = _Thread()
    ports = {"alpha": free_port(), "beta": free_port()}
    for name, port in ports.items():
        servers.serve(echo_app(name, []), port)
    controller: Controller | None = None
    try:
        token = workdir / "token"
        token.write_text(uuid.uuid4().hex)
        xds_port, envoy_port = free_port(), free_port()
        docs: list[dict[str, Any]] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}},
            {
                "apiVersion": f"{GATEWAY_GROUP}/v1",
                "kind": "GatewayClass",
                "metadata": {"name": "cloudflare-tunnel"},
                "spec": {"controllerName": CONTROLLER_NAME},
            },
            {
                "apiVersion": f"{GATEWAY_GROUP}/v1",
                "kind": "Gateway",
                "metadata": {"name": "edge", "namespace": "apps"},
                "spec": {
                    "gatewayClassName": "cloudflare-tunnel",
                    "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}],
                },
            },
        ]
        for name, port in ports.items():
            svc = service(name)
            svc["metadata"] = {"name": name, "namespace": "apps"}
            docs.append({"apiVersion": "v1", **svc})
            eps = endpoint_slice(name, port)
            eps["metadata"] = {"name": f"{name}-x", "namespace": "apps", "labels": eps["metadata"]["labels"]}
            docs.append({"apiVersion": "discovery.k8s.io/v1", **eps})
        route = http_route("bench", ["bench.example.com"], [{"backendRefs": [backend("alpha")]}])
        route["metadata"] = {"name": "bench", "namespace": "apps"}
        docs.append({"apiVersion": f"{GATEWAY_GROUP}/v1", **route})
        docs += filler_routes(routes - 1)
        apply(plane, docs)
        controller = Controller(
            plane,
            emulator,
            workdir / "controller.log",
            "--gateway-enabled=true",
            f"--gateway-xds-bind-address=127.0.0.1:{xds_port}",
            f"--gateway-xds-token-file={token}",
            f"--gateway-data-plane-address=127.0.0.1:{envoy_port}",
        )
        bootstrap = envoy.bootstrap(
            node_id="bench",
            xds_host="127.0.0.1",
            xds_port=xds_port,
            token=token.read_text(),
            admin_port=free_port(),
        )
        admin = bootstrap["admin"]["address"]["socket_address"]["port_value"]
        with running_envoy(bootstrap), httpx.Client(timeout=5) as stats_http:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{envoy_port}", timeout=5) as http:

                async def serving() -> str | None:
                    reply = await http.get("/", headers={"Host": "bench.example.com"})
                    return reply.json()["backend"] if reply.status_code == 200 else None

                deadline = time.monotonic() + 60
                while await serving() != "alpha":
                    if time.monotonic() > deadline:
                        sys.exit("the route was never served")
                    await asyncio.sleep(0.05)
                # The first reconcile writes every route's status, and each write comes back as an event: the
                # changes are timed once the controller is through with them.
                settle, interval = time.monotonic() + 600, 0.05
                while not all_routes_have_status(plane, routes):
                    if time.monotonic() > settle:
                        sys.exit("the routes' statuses were never written")
                    await asyncio.sleep(interval)
                    interval = min(interval * 2, 1)
                costs.wait_ready()  # their imports done before anything is timed
                took: list[float] = []
                wire: list[int] = []
                updates = dict.fromkeys(XDS_UPDATES, 0)
                work_before = controller.scrape()
                for i in range(changes):
                    target = "beta" if i % 2 == 0 else "alpha"
                    patch = {"spec": {"rules": [{"backendRefs": [{"name": target, "port": 80}]}]}}
                    before = envoy_stats(stats_http, admin)
                    kubectl(plane, "-n", "apps", "patch", "httproute", "bench", "--type=merge", "-p", json.dumps(patch))
                    start = time.monotonic()
                    # Polled every 2 ms rather than flat out: a busy loop of requests takes a core from the
                    # controller it is timing (on 2 cores, a third of its time).
                    while True:
                        if await serving() == target:
                            break
                        await asyncio.sleep(0.002)
                    took.append(time.monotonic() - start)
                    after = before
                    # The VHDS update is counted once Envoy applied it, a moment after it serves from it.
                    while after.get(XDS_UPDATES["virtual_hosts"]) == before.get(XDS_UPDATES["virtual_hosts"]):
                        after = envoy_stats(stats_http, admin)
                    wire.append(after[RX_BYTES] - before[RX_BYTES])
                    for key, name in XDS_UPDATES.items():
                        updates[key] += after.get(name, 0) - before.get(name, 0)
                print(
                    f"route change (PATCH to Envoy serving it), {routes} routes, {changes} changes:"
                    f" p50 {percentile(took, 0.5) * 1000:.0f} ms, p99 {percentile(took, 0.99) * 1000:.0f} ms"
                )
                print("  baseline: REST-JSON polling every 500 ms, before the push: p50 739 ms, p99 943 ms")
                print("  where a change's time goes in the controller: " + reconcile_times(work_before, controller))
                print(
                    f"  xDS bytes per change on the wire: median {statistics.median(wire) / 1024:.1f} KiB,"
                    f" most {max(wire) / 1024:.1f} KiB; updates over the {changes} changes: "
                    + ", ".join(f"{key} {count}" for key, count in updates.items())
                )
                rss = rss_mib(controller.pid)
                print(f"controller resident memory with {routes} HTTPRoutes: {rss:.0f} MiB")
                via = await rps(f"http://127.0.0.1:{envoy_port}/", {"Host": "bench.example.com"}, seconds, concurrency)
                direct = await rps(f"http://127.0.0.1:{ports['alpha']}/", {}, seconds, concurrency)
                print(
                    f"requests per second ({concurrency} clients, {seconds:g} s): through Envoy {via:.0f},"
                    f" backend directly {direct:.0f}, ratio {via / direct:.2f}"
                )
        bench_document_writes(plane, emulator, routes, idle_seconds)
    finally:
        stop_together(*([controller.stop] if controller else []), emulator.stop, servers.stop)
        plane.stop()


def reconcile_times(before: dict[tuple[str, frozenset[tuple[str, str]]], float], controller: Controller) -> str:
    """Mean time per reconcile, and waiting in the queue before it, of the class's aggregates since `before`."""
    after = controller.scrape()

    def delta(name: str, reconciler: str) -> float:
        key = (name, frozenset({("name", reconciler), ("controller", reconciler)}))
        return after.get(key, 0.0) - before.get(key, 0.0)

    parts = []
    for reconciler in ("gateway-class", "gateway-tunnels"):
        count = delta("workqueue_work_duration_seconds_count", reconciler)
        if count:
            work = delta("workqueue_work_duration_seconds_sum", reconciler) / count
            waited = delta("workqueue_queue_duration_seconds_sum", reconciler) / max(
                delta("workqueue_queue_duration_seconds_count", reconciler), 1
            )
            parts.append(
                f"{reconciler} {count:.0f} reconciles, {work * 1000:.0f} ms each, {waited * 1000:.0f} ms queued"
            )
    return "; ".join(parts) or "no reconcile counted"


def bench_document_writes(plane: ControlPlane, emulator: EmulatorProcess, routes: int, idle_seconds: float) -> None:
    token = base64.b64encode(emulator.token.encode()).decode()
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cf", "namespace": "apps"},
         "data": {"CF_API_TOKEN": token}},
        {"apiVersion": "kflare.dev/v1alpha1", "kind": "CloudflareAccount", "metadata": {"name": "main"},
         "spec": {"accountID": emulator.account_id, "tokenSecretRef": {"name": "cf", "namespace": "apps"}}},
        {"apiVersion": "kflare.dev/v1alpha1", "kind": "Tunnel", "metadata": {"name": "edge", "namespace": "apps"},
         "spec": {"name": "bench-edge", "accountRef": {"name": "main"}, "credentialsSecretRef": {"name": "edge-tok"}}},
        {"apiVersion": f"{GATEWAY_GROUP}/v1", "kind": "GatewayClass", "metadata": {"name": "bench-tunnel"},
         "spec": {"controllerName": CONTROLLER_NAME,
                  "parametersRef": {"group": "kflare.dev", "kind": "Tunnel", "name": "edge", "namespace": "apps"}}},
        {"apiVersion": f"{GATEWAY_GROUP}/v1", "kind": "Gateway", "metadata": {"name": "edge-t", "namespace": "apps"},
         "spec": {"gatewayClassName": "bench-tunnel", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}},
    ]  # fmt: skip
    apply(plane, docs)
    kubectl(plane, "-n", "apps", "wait", "--for=condition=Ready", "tunnel/edge", "--timeout=60s")
    tunnel_id = json.loads(kubectl(plane, "-n", "apps", "get", "tunnel", "edge", "-o", "json"))["status"][
        "cloudflareMetadata"
    ]["tunnelID"]
    path = f"/accounts/{emulator.account_id}/cfd_tunnel/{tunnel_id}/configurations"

    def rules() -> int:
        return len((cf(emulator, "GET", path)["config"] or {}).get("ingress") or [])

    def writes() -> int:
        return len(emulator.calls(method="PUT", path=f"/cfd_tunnel/{tunnel_id}/configurations"))

    def wait_for(count: int, what: str) -> None:
        deadline, interval = time.monotonic() + 300, FIRST_POLL
        while rules() != count:
            if time.monotonic() > deadline:
                sys.exit(f"the ingress document never held {what}")
            interval = pause(interval, most=0.2)

    def route(i: int, hostname: str, prefix: str = "/") -> dict[str, Any]:
        return {"apiVersion": f"{GATEWAY_GROUP}/v1", "kind": "HTTPRoute",
                "metadata": {"name": f"doc{i}", "namespace": "apps"},
                "spec": {"parentRefs": [{"name": "edge-t"}], "hostnames": [hostname],
                         "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": prefix}}],
                                    "backendRefs": [{"name": "alpha", "port": 80}]}]}}  # fmt: skip

    wait_for(1, "the catch-all")  # the class writes the empty document first: one write before the routes
    first = writes()
    start = time.monotonic()
    batch = [route(i, f"app{i}.bench.example.org") for i in range(routes)]
    apply(plane, batch)
    wait_for(routes + 1, f"{routes} hostnames")
    took, applied = time.monotonic() - start, writes() - first
    print(
        f"ingress document for {routes} HTTPRoutes applied at once: {applied} writes, {took:.1f} s to hold them all"
        f" (baseline: {routes} writes, one per route)"
    )
    idle = writes()
    time.sleep(idle_seconds)
    print(f"  writes in {idle_seconds:g} s idle: {writes() - idle}")
    before = writes()
    apply(plane, [route(0, "app0.bench.example.org", "/v2")])
    apply(plane, [route(1, "renamed.bench.example.org")])
    deadline, interval = time.monotonic() + 60, FIRST_POLL
    while "renamed.bench.example.org" not in json.dumps(cf(emulator, "GET", path)):
        if time.monotonic() > deadline:
            sys.exit("the renamed hostname never reached the document")
        interval = pause(interval, most=0.2)
    print(f"  writes for a rule change then a hostname change: {writes() - before} (baseline 1)")


async def rps(url: str, headers: dict[str, str], seconds: float, concurrency: int) -> float:
    count = 0
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=10, limits=limits) as http:
        deadline = time.monotonic() + seconds

        async def worker() -> None:
            nonlocal count
            while time.monotonic() < deadline:
                reply = await http.get(url, headers=headers)
                if reply.status_code == 200:
                    count += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / seconds


DEPENDENCY_COST = """
import json, os, sys, time, resource
import fastapi, uvicorn, kubernetes_asyncio, httpx, pydantic, prometheus_client, cryptography  # imported anyway
import app.kube.manager, reconcilers.gateway.controller
print("ready", flush=True)
sys.stdin.readline()
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
before, start = rss(), time.perf_counter()
import grpc, grpc.aio
took_grpc, rss_grpc = time.perf_counter() - start, rss()
import app.xds  # the xDS messages it encodes
print(json.dumps({"grpc_s": took_grpc, "total_s": time.perf_counter() - start, "before": before,
                  "grpc_mib": rss_grpc - before, "total_mib": rss() - before}), flush=True)
os._exit(0)  # what it measured is printed: tearing its imports down would only take time
"""


class DependencyCost:
    """`times` processes, each importing what the process imports anyway, then timing the gRPC imports when told to.
    They start with the stack's setup, which nothing times (their own imports take a second or more each), and are
    told one at a time once the rest of the benchmark is over, so that nothing else runs while one times."""

    def __init__(self, times: int) -> None:
        root = Path(__file__).resolve().parents[1]
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", DEPENDENCY_COST],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=root,
            )
            for _ in range(times)
        ]

    def wait_ready(self) -> None:
        """Until each has imported what comes before what it times."""
        for proc in self.procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the import timing process exited with {proc.wait()}")

    def measure(self) -> None:
        runs = []
        for proc in self.procs:
            out, _ = proc.communicate("go\n", timeout=120)
            if proc.returncode:
                raise RuntimeError(f"the import timing process exited with {proc.returncode}")
            runs.append(json.loads(out))
        best = min(runs, key=lambda r: r["total_s"])
        print(
            f"grpcio + xds-protos, imported after the rest of the process ({best['before']:.0f} MiB):"
            f" {best['total_s'] * 1000:.0f} ms and {best['total_mib']:.1f} MiB resident"
            f" (grpcio alone {best['grpc_s'] * 1000:.0f} ms, {best['grpc_mib']:.1f} MiB); best of {len(runs)}"
        )

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--routes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--idle", type=float, default=5, help="seconds the ingress document's idle writes are counted")
    parser.add_argument("--imports", type=int, default=3, help="processes that time the gRPC imports, the best shown")
    args = parser.parse_args()
    bench_translation(args.routes, args.repeat)
    bench_push(args.routes, args.changes)
    costs = DependencyCost(max(1, args.imports))
    try:
        asyncio.run(bench_change(args.changes, args.seconds, args.concurrency, args.routes, args.idle, costs))
        costs.measure()
    finally:
        costs.stop()


if __name__ == "__main__":
    main()
