"""Admission reviews per second and latency of the webhook app on one core, beside a baseline.

Each target runs under uvicorn (HTTPS, as `kflare run` serves it, on the standard asyncio loop) in a subprocess
pinned to one core; this process, pinned to another core, drives it over loopback with httpx: a fixed number of
AdmissionReviews (valid and invalid DNSRecords on CREATE, and UPDATEs that change an immutable field) over a few
keep-alive connections, as the API server does. The objects are as the API server sends them: applied with
`kubectl apply` (the last applied configuration, managed fields) and, on UPDATE, stored (a status, kflare's managed
fields); `--bare` sends only their apiVersion, kind, name, namespace, uid, generation and spec. Targets:

- baseline: a FastAPI route that reads the body and returns a constant AdmissionReview (uvicorn, TLS, FastAPI's
  layers and routing, and httpx; no parsing or validation);
- bare ASGI: the same as a bare ASGI callable, without FastAPI (the floor of uvicorn, TLS and httpx alone);
- webhook: `webhooks.create_app()`, which answers a review before FastAPI's layers (`webhooks.app.WebhookApp`);
- webhook + metrics: the same app instrumented the way `kflare run` serves it.

Then expression checking: the webhook app answering WAFCustomRules (whose expressions it parses against the Rules
language, `app.api.expressions.validate_expression`) beside the same app answering DNSRecords, in the same mix of
valid, invalid and immutable-changing reviews.

Printed per target: reviews per second, p50 and p99 latency, the server's CPU time per review, and the reviews
per second one core could answer at that cost (the driver, httpx on one core, usually saturates first, so the
measured rate is a floor and the CPU time per review is the figure to compare).

Then memory under hostile clients, on the webhook listener exactly as `kflare run` builds it
(`app.server.webhook_listener`): the server's RSS once started, after `--hostile` valid reviews (the baseline), after
as many hostile requests (3 MiB reviews with 25,000 unknown fields, 3 MiB reviews of padding, deep nesting, bodies
over the limit with and without Content-Length, broken chunked encoding, 1 MiB of headers, requests whose headers
never end), `--concurrency` x 4 at a time, and again after a few idle seconds.

    .venv/bin/python bench/webhook.py [--reviews 5000] [--concurrency 8] [--rounds 3] [--plain] [--bare]
        [--hostile 200] [--idle 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import Response

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.controlplane import free_port

TARGETS = ("baseline", "bare ASGI", "webhook", "webhook + metrics")
BASELINES = ("baseline", "bare ASGI")
HOSTILE_TARGET = "kflare run's webhook listener"
STARTUP_TIMEOUT = 30.0
TARGET_TIMEOUT = 180.0
"""Seconds one target may take before the run is abandoned."""


# The server side: `bench/webhook.py --serve TARGET --port N --cpu C [--cert-dir D]`.


def _baseline_app() -> Any:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    answer = json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "x", "allowed": True}}
    ).encode()

    @app.post("/validate/{plural}")
    async def validate(plural: str, request: Request) -> Response:
        await request.body()
        return Response(answer, media_type="application/json")

    return app


def _bare_app() -> Any:
    answer = json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "x", "allowed": True}}
    ).encode()
    start = {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))],
    }

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body", False):
            pass
        await send(start)
        await send({"type": "http.response.body", "body": answer})

    return app


def _serve(target: str, port: int, cpu: int, cert_dir: Path | None) -> None:
    import uvicorn

    from app.server import GC_THRESHOLD, Listener, settle_heap
    from app.tls import ReloadingTLS

    # Pinned to the server's core once ready to serve: the round's servers start together, on every core.
    if target == HOSTILE_TARGET:
        from app.memory import pin_mmap_threshold
        from app.server import webhook_listener
        from app.settings import Settings

        pin_mmap_threshold()  # as `kflare run` does when it starts
        served = webhook_listener(Settings(webhook_cert_dir=cert_dir), "127.0.0.1", port)
        os.sched_setaffinity(0, {cpu})
        asyncio.run(served.server.serve())
        return
    if target == "baseline":
        app = _baseline_app()
    elif target == "bare ASGI":
        app = _bare_app()
    else:
        from webhooks import create_app

        app = create_app()
        if target == "webhook + metrics":
            from app.metrics.collectors import instrument

            app = instrument(app, "webhook")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="off", access_log=False)
    if cert_dir is not None:
        ReloadingTLS(cert_dir, ["127.0.0.1"]).apply(config)
    # Every target's process keeps its heap as `kflare run` does: its collector's thresholds, and what it holds
    # once started out of the collector's sight.
    gc.set_threshold(*GC_THRESHOLD)
    settle_heap()
    os.sched_setaffinity(0, {cpu})
    asyncio.run(Listener(config).serve())


# The driver.


KINDS = {"DNSRecord": "dnsrecords", "WAFCustomRule": "wafcustomrules"}
"""A kind without expression checking, and a rule kind whose expression the webhook parses (app/api/expressions.py)."""


def _reviews(count: int, kind: str = "DNSRecord", bare: bool = False) -> list[tuple[bytes, bool]]:
    """`count` AdmissionReview bodies for /validate/<kind's plural> and whether each should be allowed; `bare`: the
    objects without what the API server adds to them (see `_as_sent`)."""
    if kind == "WAFCustomRule":
        return _rule_reviews(count, bare)

    def record(**spec: Any) -> dict[str, Any]:
        base = {"zoneRef": {"name": "example-com"}, "name": "www.example.com", "type": "A", "content": "192.0.2.10"}
        return {
            "apiVersion": "kflare.dev/v1alpha1",
            "kind": "DNSRecord",
            "metadata": {"name": "www", "namespace": "bench", "uid": str(uuid.uuid4()), "generation": 1},
            "spec": {**base, **spec},
        }

    cases: list[tuple[str, dict[str, Any], dict[str, Any] | None, bool]] = [
        ("CREATE", record(proxied=True, ttl=300, comment="web front", tags=["team:web"]), None, True),
        ("CREATE", record(type="MX", content="mx.example.com", priority=10), None, True),
        ("CREATE", record(type="TXT", content="v=spf1 -all", proxied=True), None, False),
        ("CREATE", record(ttl=5), None, False),
        ("UPDATE", record(content="192.0.2.11"), record(), True),
        ("UPDATE", record(type="AAAA", content="2001:db8::1"), record(), False),
    ]
    return [_review("DNSRecord", "dnsrecords", *cases[n % len(cases)], bare=bare) for n in range(count)]


def _rule_reviews(count: int, bare: bool) -> list[tuple[bytes, bool]]:
    """`count` AdmissionReviews of WAFCustomRules, half of them invalid, in the mix the DNSRecords have: simple and
    compound expressions allowed, a misspelt field and an unbalanced parenthesis denied, an update of the expression
    allowed, one of the immutable zoneRef denied."""

    def rule(expression: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "kflare.dev/v1alpha1",
            "kind": "WAFCustomRule",
            "metadata": {"name": "admin", "namespace": "bench", "uid": str(uuid.uuid4()), "generation": 1},
            "spec": {"zoneRef": {"name": "example-com"}, "expression": expression, "action": "block", **spec},
        }

    simple = 'http.request.uri.path eq "/wp-admin"'
    compound = (
        '(http.request.uri.path eq "/wp-admin" or starts_with(http.request.uri.path, "/admin/"))'
        ' and not ip.src in {192.0.2.0/24 198.51.100.7} and http.request.method in {"GET" "POST"}'
        ' and lower(http.host) contains "example"'
    )
    cases: list[tuple[str, dict[str, Any], dict[str, Any] | None, bool]] = [
        ("CREATE", rule(simple, description="no admin pages"), None, True),
        ("CREATE", rule(compound, priority=10), None, True),
        ("CREATE", rule('http.request.uri.pth eq "/wp-admin"'), None, False),
        ("CREATE", rule('(http.request.uri.path eq "/a" and ip.src eq 192.0.2.1'), None, False),
        ("UPDATE", rule(compound), rule(simple), True),
        ("UPDATE", rule(simple, zoneRef={"name": "other-zone"}), rule(simple), False),
    ]
    return [_review("WAFCustomRule", "wafcustomrules", *cases[n % len(cases)], bare=bare) for n in range(count)]


def _as_sent(obj: dict[str, Any], stored: bool) -> dict[str, Any]:
    """`obj` as the API server sends it to a webhook: applied with `kubectl apply` (its last applied configuration
    and managed fields), and once `stored`, with the status kflare wrote and the managed fields of that write."""
    out = json.loads(json.dumps(obj))
    metadata = out["metadata"]
    applied = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    metadata["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": applied}
    metadata["creationTimestamp"] = "2026-01-01T00:00:00Z"
    spec = obj["spec"]
    spec_fields = {f"f:{key}": {".": {}, "f:name": {}} if isinstance(spec[key], dict) else {} for key in spec}
    managed = [
        {
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": obj["apiVersion"],
            "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}},
                "f:spec": {".": {}, **spec_fields},
            },
        }
    ]
    if stored:
        metadata["resourceVersion"] = "4711"
        metadata["finalizers"] = ["kflare.dev/finalizer"]
        managed.append(
            {
                "manager": "kflare",
                "operation": "Update",
                "apiVersion": obj["apiVersion"],
                "time": "2026-01-01T00:00:05Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {".": {}, "f:conditions": {}, "f:observedGeneration": {}}},
                "subresource": "status",
            }
        )
        out["status"] = {
            "observedGeneration": 1,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Synced",
                    "message": "in step with Cloudflare",
                    "lastTransitionTime": "2026-01-01T00:00:05Z",
                    "observedGeneration": 1,
                }
            ],
        }
    metadata["managedFields"] = managed
    return out


def _review(
    kind: str,
    plural: str,
    operation: str,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    allowed: bool,
    *,
    bare: bool = False,
) -> tuple[bytes, bool]:
    if not bare:
        obj, old = _as_sent(obj, operation == "UPDATE"), (None if old is None else _as_sent(old, True))
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": "kflare.dev", "version": "v1alpha1", "kind": kind},
        "resource": {"group": "kflare.dev", "version": "v1alpha1", "resource": plural},
        "namespace": "bench",
        "name": obj["metadata"]["name"],
        "operation": operation,
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(review).encode(), allowed


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Figures:
    target: str
    reviews: int
    seconds: float
    latencies: list[float]
    server_cpu: float
    denied: int

    @property
    def rate(self) -> float:
        return self.reviews / self.seconds

    @property
    def cpu_per_review(self) -> float:
        return max(self.server_cpu, 1e-9) / self.reviews

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def _drive(
    url: str, bodies: list[tuple[bytes, bool]], concurrency: int, verify: Any, check: bool
) -> tuple[float, list[float], int]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    latencies: list[float] = []
    denied = 0
    queue = list(reversed(bodies))
    async with httpx.AsyncClient(verify=verify, limits=limits, timeout=30) as http:

        async def worker() -> None:
            nonlocal denied
            while queue:
                body, allowed = queue.pop()
                start = time.perf_counter()
                reply = await http.post(url, content=body, headers={"content-type": "application/json"})
                latencies.append(time.perf_counter() - start)
                reply.raise_for_status()
                if check:
                    response = reply.json()["response"]
                    if response["allowed"] != allowed:
                        raise AssertionError(f"expected allowed={allowed}: {response}")
                    denied += not response["allowed"]

        wall = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - wall, latencies, denied


class Server:
    """A target under uvicorn in a process of its own (`--serve`), started without waiting for it: a round's servers
    start together, each on any core until it is ready to serve, then on the server's."""

    def __init__(self, target: str, args: argparse.Namespace, cert_dir: Path | None, kind: str = "DNSRecord") -> None:
        self.target, self.kind = target, kind
        self.port = free_port()
        argv = [sys.executable, __file__, "--serve", target, "--port", str(self.port), "--cpu", str(args.server_cpu)]
        if cert_dir is not None:
            argv += ["--cert-dir", str(cert_dir)]
        scheme = "https" if cert_dir is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}/validate/{KINDS[kind]}"
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_listening(self, verify: Any) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server of {self.target} exited with {self.proc.returncode}")
            try:
                httpx.post(self.url, content=b"{}", verify=verify, timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError(f"the server of {self.target} did not listen within {STARTUP_TIMEOUT:.0f}s")

    def stop(self) -> None:
        """At once: a target holds nothing that a graceful stop would save, and the next one is measured on its
        core as soon as this one is gone."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def measure(server: Server, args: argparse.Namespace, verify: Any) -> Figures:
    """The figures of `server` (listening), stopped afterwards."""
    try:
        check = server.target not in BASELINES
        warmup = _reviews(min(300, args.reviews), server.kind, args.bare)
        asyncio.run(asyncio.wait_for(_drive(server.url, warmup, args.concurrency, verify, check), TARGET_TIMEOUT))
        bodies = _reviews(args.reviews, server.kind, args.bare)
        cpu = _cpu_seconds(server.proc.pid)
        seconds, latencies, denied = asyncio.run(
            asyncio.wait_for(_drive(server.url, bodies, args.concurrency, verify, check), TARGET_TIMEOUT)
        )
        server_cpu = _cpu_seconds(server.proc.pid) - cpu
        label = server.target if server.kind == "DNSRecord" else f"{server.target}, {server.kind}"
        return Figures(label, args.reviews, seconds, latencies, server_cpu, denied)
    finally:
        server.stop()


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _hostile_requests(count: int) -> list[bytes]:
    """`count` raw HTTP requests to /validate/dnsrecords, every kind of abuse in turn."""

    def post(body: bytes, headers: bytes = b"") -> bytes:
        return (
            b"POST /validate/dnsrecords HTTP/1.1\r\nHost: kflare\r\nContent-Type: application/json\r\n"
            + headers
            + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
            + body
        )

    def review(spec: dict[str, Any]) -> bytes:
        request = {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "kflare.dev", "version": "v1alpha1", "kind": "DNSRecord"},
            "operation": "CREATE",
            "object": {"apiVersion": "kflare.dev/v1alpha1", "kind": "DNSRecord", "spec": spec},
        }
        return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()

    base = {"zoneRef": {"name": "z"}, "name": "www.example.com", "type": "A", "content": "192.0.2.1"}
    fields = review({**base, **{f"field{i:05d}" + "x" * 100: i for i in range(25_000)}})
    padding = review({**base, "data": {"pad": "x" * (3 * 1024 * 1024 - 400)}})
    nested = b"[" * 1_000_000 + b"]" * 1_000_000
    over = b" " * (4 * 1024 * 1024)
    kinds = [
        post(fields),
        post(padding),
        post(nested),
        post(over),
        b"POST /validate/dnsrecords HTTP/1.1\r\nHost: kflare\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"10000\r\n" + b"x" * 65536 + b"\r\n" for _ in range(64)),  # 4 MiB, no length
        b"POST /validate/dnsrecords HTTP/1.1\r\nHost: kflare\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab\r\nzz\r\n",
        post(b"{}", b"X-Pad: " + b"a" * (1024 * 1024) + b"\r\n"),
        b"POST /validate/dnsrecords HTTP/1.1\r\nHost: kflare\r\nContent-Ty",  # never ends
    ]
    return [kinds[n % len(kinds)] for n in range(count)]


async def _hostile(port: int, context: ssl.SSLContext, requests: list[bytes], concurrency: int) -> None:
    turns = asyncio.Semaphore(concurrency)

    async def one(data: bytes) -> None:
        async with turns:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"), 30
                )
            except (OSError, ssl.SSLError, TimeoutError):
                return
            try:
                writer.write(data)
                await asyncio.wait_for(writer.drain(), 60)
                await asyncio.wait_for(reader.read(), 60)  # until the server answers and closes
            except (OSError, ssl.SSLError, TimeoutError):
                pass
            finally:
                writer.close()

    await asyncio.gather(*(one(data) for data in requests))


def measure_hostile(server: Server, args: argparse.Namespace, verify: Any) -> dict[str, float]:
    """The hostile-clients RSS figures of `kflare run`'s webhook listener (`server`, listening), with valid reviews as
    the baseline; stopped afterwards."""
    try:
        figures = {"started": _rss_mib(server.proc.pid)}
        valid = _reviews(args.hostile, bare=args.bare)
        asyncio.run(asyncio.wait_for(_drive(server.url, valid, args.concurrency, verify, True), TARGET_TIMEOUT))
        figures["valid"] = _rss_mib(server.proc.pid)
        requests = _hostile_requests(args.hostile)
        asyncio.run(asyncio.wait_for(_hostile(server.port, verify, requests, args.concurrency * 4), TARGET_TIMEOUT))
        figures["hostile"] = _rss_mib(server.proc.pid)
        time.sleep(args.idle)  # a benchmark's pause, for the figure after idling: nothing to wait for
        figures["idle"] = _rss_mib(server.proc.pid)
        return figures
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--reviews", type=int, default=5000, help="reviews per target (default: %(default)s)")
    parser.add_argument("--concurrency", type=int, default=8, help="connections in flight (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per target, the best shown (default: 3)")
    parser.add_argument("--plain", action="store_true", help="plain HTTP instead of HTTPS")
    parser.add_argument(
        "--bare",
        action="store_true",
        help="objects without the managed fields, last applied configuration and status the API server sends",
    )
    parser.add_argument("--server-cpu", type=int, default=None, help="core of the server (default: the first)")
    parser.add_argument(
        "--hostile", type=int, default=200, help="valid, then hostile requests for the RSS figure (default: 200)"
    )
    parser.add_argument("--idle", type=float, default=5, help="seconds idle before the last RSS figure (default: 5)")
    parser.add_argument("--serve", choices=(*TARGETS, HOSTILE_TARGET), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cpu", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cert-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve, args.port, args.cpu, args.cert_dir)
        return 0
    # The driver's alone: each server (six a round) would spend a fifth of a second importing what it brings.
    from bench.harness import stop_on_sigterm

    stop_on_sigterm()
    args.reviews = max(1, min(args.reviews, 100_000))
    args.rounds = max(1, min(args.rounds, 10))
    cores = sorted(os.sched_getaffinity(0))
    args.server_cpu = args.server_cpu if args.server_cpu is not None else cores[0]
    driver = [c for c in cores if c != args.server_cpu] or cores
    if driver[0] == args.server_cpu:
        print("warning: one core only: the driver shares the server's core", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="kflare-bench-") as tmp:
        cert_dir: Path | None = None
        verify: Any = True
        if not args.plain:
            from app.tls import self_signed

            cert, key = self_signed(["127.0.0.1"])
            cert_dir = Path(tmp)
            (cert_dir / "tls.crt").write_bytes(cert)
            (cert_dir / "tls.key").write_bytes(key)
            verify = ssl.create_default_context(cadata=cert.decode())
        print(
            f"{args.reviews} AdmissionReviews of DNSRecords per target (1/2 invalid,"
            f" {'bare objects' if args.bare else 'objects as the API server sends them'}),"
            f" {args.concurrency} keep-alive connections, {'HTTP' if args.plain else 'HTTPS'};"
            f" server on core {args.server_cpu},"
            f" driver on core {driver[0]}; best of {args.rounds} rounds (least server CPU per review)"
        )
        print(
            f"{'target':<20} {'reviews/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'server CPU us/review':>21}"
            f" {'1-core capacity/s':>18}"
        )
        rounds: dict[str, list[Figures]] = {target: [] for target in TARGETS}
        compared: dict[str, list[Figures]] = {kind: [] for kind in KINDS}
        memory: dict[str, float] = {}
        for n in range(args.rounds):  # interleaved, so that a noisy neighbour does not hit one target only
            # The round's servers start together, on every core (this process's own, which they inherit, is
            # widened while they start): each pins itself to the server's core once it has imported what it serves.
            os.sched_setaffinity(0, set(cores))
            targets = [Server(target, args, cert_dir) for target in TARGETS]
            kinds = [Server("webhook", args, cert_dir, kind) for kind in KINDS]
            hostile = Server(HOSTILE_TARGET, args, cert_dir) if n == args.rounds - 1 and args.hostile > 0 else None
            started = [*targets, *kinds, *([hostile] if hostile else [])]
            try:
                for server in started:
                    server.wait_listening(verify)
                os.sched_setaffinity(0, set(driver[:1]))
                for server in targets:
                    rounds[server.target].append(measure(server, args, verify))
                # Expression checking: the webhook answering a rule kind whose expression it parses, beside the
                # same webhook answering DNSRecords (no expression), measured the same way in the same run.
                for server in kinds:
                    compared[server.kind].append(measure(server, args, verify))
                if hostile is not None and cert_dir is not None:
                    memory = measure_hostile(hostile, args, verify)
            finally:
                for server in started:
                    server.stop()
        results = [min(runs, key=lambda f: f.cpu_per_review) for runs in rounds.values()]
        for figures in results:
            print(
                f"{figures.target:<20} {figures.rate:>10.0f} {figures.percentile(0.50):>8.2f}"
                f" {figures.percentile(0.99):>8.2f} {figures.cpu_per_review * 1e6:>21.0f}"
                f" {1 / figures.cpu_per_review:>18.0f}"
            )
        base, bare = results[0], results[1]
        for figures in results[1:]:
            # Each round ran the targets one after the other: the ratio within a round is the least disturbed by
            # the machine's mood, which moves the baseline alone by a third from one round to the next.
            paired = statistics.median(
                mine.cpu_per_review / theirs.cpu_per_review
                for mine, theirs in zip(rounds[figures.target], rounds[base.target], strict=True)
            )
            print(
                f"{figures.target}: {figures.cpu_per_review / base.cpu_per_review:.2f}x the baseline's server CPU"
                f" per review (median of the {args.rounds} rounds' own ratios: {paired:.2f}x),"
                f" {figures.rate / base.rate:.0%} of its rate,"
                f" p50 {statistics.median(figures.latencies) / statistics.median(base.latencies):.1f}x;"
                f" {figures.denied} of {figures.reviews} denied as expected"
            )
        own = {figures.target: (figures.cpu_per_review - bare.cpu_per_review) * 1e6 for figures in results}
        layers, webhook, metered = own["baseline"], own["webhook"], own["webhook + metrics"]
        print(
            "above the bare ASGI endpoint, server CPU us per review:"
            f" FastAPI's layers (the baseline) {layers:.0f}, the webhook {webhook:.0f}, with metrics {metered:.0f}"
        )
        print(f"\nexpression checking: {args.reviews} AdmissionReviews per kind (1/2 invalid), the webhook app")
        print(
            f"{'target':<28} {'reviews/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'server CPU us/review':>21}"
            f" {'1-core capacity/s':>18}"
        )
        plain_kind, rule_kind = (min(runs, key=lambda f: f.cpu_per_review) for runs in compared.values())
        for figures in (plain_kind, rule_kind):
            name = figures.target if figures is rule_kind else "webhook, DNSRecord"
            print(
                f"{name:<28} {figures.rate:>10.0f} {figures.percentile(0.50):>8.2f}"
                f" {figures.percentile(0.99):>8.2f} {figures.cpu_per_review * 1e6:>21.0f}"
                f" {1 / figures.cpu_per_review:>18.0f}"
            )
        cost = rule_kind.cpu_per_review / plain_kind.cpu_per_review
        print(
            f"WAFCustomRule (expression checked) beside DNSRecord: {cost:.1f}x the server CPU per review,"
            f" {rule_kind.rate / plain_kind.rate:.0%} of its rate,"
            f" p99 {rule_kind.percentile(0.99) / plain_kind.percentile(0.99):.1f}x;"
            f" {rule_kind.denied} of {rule_kind.reviews} denied as expected"
        )
        if memory:
            print(
                f"\n{HOSTILE_TARGET}, RSS in MiB: {memory['started']:.0f} started,"
                f" {memory['valid']:.0f} after {args.hostile} valid reviews (baseline),"
                f" {memory['hostile']:.0f} after {args.hostile} hostile requests"
                f" ({memory['hostile'] - memory['valid']:+.0f} over the baseline),"
                f" {memory['idle']:.0f} after {args.idle:g} s idle"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
