"""What the `cloudflare-tunnel` class costs: translation time and xDS size at scale, how long a route change takes to
be served by Envoy, and Envoy's throughput against the same backend reached directly.

1. Translation: `--routes` HTTPRoutes (one hostname and two rules each, over 50 Services), translated `--repeat`
   times: median and worst wall time, and the snapshot's size (what a cold Envoy fetches).
2. Route change to served, through the whole stack: the test API server with the Gateway API CRDs, `kflare run
   --gateway-enabled`, an Envoy polling its xDS every `--refresh`, an echo backend on loopback. Each of `--changes`
   patches flips the route's backend; the time from the PATCH returning to Envoy answering from the new backend:
   p50 and p99. Baseline: the polling period itself (the floor of REST xDS).
3. Requests per second through Envoy and to the backend directly (`--seconds` each, `--concurrency` clients),
   and their ratio.
4. Ingress-document writes, on the same stack with a kflare Tunnel in the emulator: `--routes` HTTPRoutes applied at
   once on a class naming the Tunnel; the document's writes (PUTs) until it holds all their hostnames, and the wall
   time; then writes while idle, for a change that leaves the hostnames alone, and for a hostname change. Baseline:
   one write per route (a writer per route).

    .venv/bin/python bench/gateway.py [--routes 1000] [--changes 30] [--refresh 0.5] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.controlplane import ControlPlane, free_port
from bench.harness import Controller, bin_dir, cluster, kubectl
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
    store.publish({**result.resources, "listeners": [envoy.ingress_listener("0.0.0.0", 8080, 0.5)]})  # noqa: S104
    rds = len(json.dumps(result.resources["routes"], separators=(",", ":")))
    print(
        f"translation of {routes} HTTPRoutes: median {statistics.median(times) * 1000:.0f} ms,"
        f" worst {max(times) * 1000:.0f} ms"
    )
    print(f"  snapshot {store.size() / 1024:.0f} KiB (routes {rds / 1024:.0f} KiB), {len(result.hostnames)} hostnames")


async def bench_change(changes: int, refresh: float, seconds: float, concurrency: int, routes: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="kflare-bench-gateway-"))
    plane, emulator = cluster(bin_dir(), workdir)
    servers = _Thread()
    ports = {"alpha": free_port(), "beta": free_port()}
    for name, port in ports.items():
        servers.serve(echo_app(name, []), port)
    try:
        crds = sorted(p for p in (gateway_api_dir() / "standard").glob("*.yaml") if "vap" not in p.name)
        kubectl(plane, "apply", "--server-side", *(f"--filename={c}" for c in crds))
        kubectl(plane, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        kubectl(plane, "create", "namespace", "apps")
        token = workdir / "token"
        token.write_text(uuid.uuid4().hex)
        xds_port, envoy_port = free_port(), free_port()
        docs: list[dict[str, Any]] = [
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
        kubectl(plane, "apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs))
        controller = Controller(
            plane,
            emulator,
            workdir / "controller.log",
            "--gateway-enabled=true",
            f"--gateway-xds-bind-address=127.0.0.1:{xds_port}",
            f"--gateway-xds-token-file={token}",
            f"--gateway-data-plane-address=127.0.0.1:{envoy_port}",
            f"--gateway-xds-refresh={int(refresh * 1000)}ms",
            "--log-level=info",
        )
        bootstrap = envoy.bootstrap(
            node_id="bench",
            xds_host="127.0.0.1",
            xds_port=xds_port,
            token=token.read_text(),
            admin_port=free_port(),
            refresh=refresh,
        )
        try:
            with running_envoy(bootstrap):
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{envoy_port}", timeout=5) as http:

                    async def serving() -> str | None:
                        reply = await http.get("/", headers={"Host": "bench.example.com"})
                        return reply.json()["backend"] if reply.status_code == 200 else None

                    deadline = time.monotonic() + 60
                    while await serving() != "alpha":
                        if time.monotonic() > deadline:
                            sys.exit("the route was never served")
                        await asyncio.sleep(0.05)
                    took, published = [], []
                    xds_body = {"node": {"id": "bench", "metadata": {envoy.TOKEN_METADATA: token.read_text()}}}
                    xds_url = f"http://127.0.0.1:{xds_port}/v3/discovery:routes"

                    async def routes_version() -> str:
                        reply = await http.post(xds_url, json=xds_body)
                        return str(reply.json()["version_info"])

                    for i in range(changes):
                        target = "beta" if i % 2 == 0 else "alpha"
                        patch = {"spec": {"rules": [{"backendRefs": [{"name": target, "port": 80}]}]}}
                        before = await routes_version()
                        kubectl(
                            plane, "-n", "apps", "patch", "httproute", "bench", "--type=merge", "-p", json.dumps(patch)
                        )
                        start = time.monotonic()
                        while await routes_version() == before:
                            pass
                        published.append(time.monotonic() - start)
                        while await serving() != target:
                            pass
                        took.append(time.monotonic() - start)
                    for label, values in (("PATCH to Envoy serving it", took), ("PATCH to xDS serving it", published)):
                        print(
                            f"route change ({label}), {changes} changes: p50 {percentile(values, 0.5) * 1000:.0f} ms,"
                            f" p99 {percentile(values, 0.99) * 1000:.0f} ms"
                        )
                    print(f"  baseline: Envoy polls each {refresh * 1000:.0f} ms (REST xDS)")
                    via = await rps(
                        f"http://127.0.0.1:{envoy_port}/", {"Host": "bench.example.com"}, seconds, concurrency
                    )
                    direct = await rps(f"http://127.0.0.1:{ports['alpha']}/", {}, seconds, concurrency)
                    print(
                        f"requests per second ({concurrency} clients, {seconds:g} s): through Envoy {via:.0f},"
                        f" backend directly {direct:.0f}, ratio {via / direct:.2f}"
                    )
            bench_document_writes(plane, emulator, routes)
        finally:
            controller.stop()
    finally:
        servers.stop()
        emulator.stop()
        plane.stop()


def bench_document_writes(plane: ControlPlane, emulator: EmulatorProcess, routes: int) -> None:
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
    kubectl(plane, "apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs))
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
        deadline = time.monotonic() + 300
        while rules() != count:
            if time.monotonic() > deadline:
                sys.exit(f"the ingress document never held {what}")
            time.sleep(0.2)

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
    kubectl(plane, "apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in batch))
    wait_for(routes + 1, f"{routes} hostnames")
    took, applied = time.monotonic() - start, writes() - first
    print(
        f"ingress document for {routes} HTTPRoutes applied at once: {applied} writes, {took:.1f} s to hold them all"
        f" (baseline: {routes} writes, one per route)"
    )
    idle = writes()
    time.sleep(5)
    print(f"  writes in 5 s idle: {writes() - idle}")
    before = writes()
    kubectl(plane, "apply", "-f", "-", stdin=json.dumps(route(0, "app0.bench.example.org", "/v2")))
    kubectl(plane, "apply", "-f", "-", stdin=json.dumps(route(1, "renamed.bench.example.org")))
    deadline = time.monotonic() + 60
    while "renamed.bench.example.org" not in json.dumps(cf(emulator, "GET", path)):
        if time.monotonic() > deadline:
            sys.exit("the renamed hostname never reached the document")
        time.sleep(0.2)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--routes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--refresh", type=float, default=0.5)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    bench_translation(args.routes, args.repeat)
    asyncio.run(bench_change(args.changes, args.refresh, args.seconds, args.concurrency, args.routes))


if __name__ == "__main__":
    main()
