"""How much the kflare Cloudflare client costs on top of bare httpx.

Starts the emulator, then makes the same calls through bare `httpx.AsyncClient` and through `CloudflareClient`
(with its call budget off, and on but not binding), and prints calls per second and the client process's CPU time
per call for each, and the ratios to bare httpx. The emulator runs in its own process, so its CPU is not counted;
calls per second include its latency. A second table repeats the calls against an in-process transport that answers
at once, which isolates the client's own cost (envelope, models, budget, deadlines) from the server's.

    .venv/bin/python bench/cloudflare_client.py [--calls 2000] [--concurrency 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.cloudflare import BudgetConfig, CloudflareSession, HttpConfig
from bench.harness import stop_on_sigterm
from tests.fixtures.emulator import EmulatorProcess

Call = Callable[[], Awaitable[object]]


@dataclass
class Figure:
    variant: str
    endpoint: str
    calls: int
    seconds: float
    cpu: float

    @property
    def rate(self) -> float:
        return self.calls / self.seconds

    @property
    def cpu_per_call_us(self) -> float:
        return self.cpu / self.calls * 1e6


async def measure(variant: str, endpoint: str, call: Call, calls: int, concurrency: int) -> Figure:
    async def worker(share: int) -> None:
        for _ in range(share):
            await call()

    warmup = min(100, calls)
    await asyncio.gather(*(worker(warmup // concurrency) for _ in range(concurrency)))
    shares = [calls // concurrency + (1 if n < calls % concurrency else 0) for n in range(concurrency)]
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(share) for share in shares))
    return Figure(variant, endpoint, calls, time.perf_counter() - wall, time.process_time() - cpu)


VARIANTS = ("bare httpx", "kflare, budget off", "kflare, budget on (not binding)")
BUDGETS = {
    "kflare, budget off": BudgetConfig(enabled=False),
    "kflare, budget on (not binding)": BudgetConfig(limit=10**9, window=300.0, share=1.0),
}


def bare_calls(bare: httpx.AsyncClient, paths: dict[str, str]) -> dict[str, Call]:
    def make(path: str) -> Call:
        async def call() -> object:
            response = await bare.get(path)
            response.raise_for_status()
            return response.json()["result"]

        return call

    return {name: make(path) for name, path in paths.items()}


def kflare_calls(session: CloudflareSession, token: str, zone_id: str) -> dict[str, Call]:
    client = session.client(token)

    async def verify() -> object:
        return await client.verify_token()

    async def dns_list() -> object:
        return [record async for record in client.list_dns_records(zone_id)]

    return {"token verify": verify, "DNS list (20)": dns_list}


async def run_round(
    base_url: str,
    token: str,
    zone_id: str,
    calls: int,
    concurrency: int,
    transport: Callable[[], httpx.AsyncBaseTransport] | None,
) -> list[Figure]:
    """One measurement of every variant and endpoint."""
    figures = []
    paths = {"token verify": "/user/tokens/verify", "DNS list (20)": f"/zones/{zone_id}/dns_records"}
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(
        base_url=base_url, headers=headers, http2=True, timeout=60, transport=transport() if transport else None
    ) as bare:
        for endpoint, call in bare_calls(bare, paths).items():
            figures.append(await measure("bare httpx", endpoint, call, calls, concurrency))
    for variant, budget in BUDGETS.items():
        session = CloudflareSession(HttpConfig(base_url=base_url), budget, transport=transport() if transport else None)
        async with session:
            for endpoint, call in kflare_calls(session, token, zone_id).items():
                figures.append(await measure(variant, endpoint, call, calls, concurrency))
    return figures


def median(figures: list[Figure]) -> Figure:
    ordered = sorted(figures, key=lambda f: f.cpu_per_call_us)
    middle = ordered[len(ordered) // 2]
    rates = sorted(f.rate for f in figures)
    rate = rates[len(rates) // 2]
    return Figure(middle.variant, middle.endpoint, middle.calls, middle.calls / rate, middle.cpu)


async def bench(emu: EmulatorProcess, calls: int, concurrency: int, rounds: int) -> tuple[list[Figure], list[Figure]]:
    async with CloudflareSession(HttpConfig(base_url=emu.base_url)) as setup:
        client = setup.client(emu.token)
        zone = await client.create_zone("bench.example", emu.account_id)
        await client.batch_dns_records(
            zone.id,
            posts=[{"name": f"h{n}.bench.example", "type": "A", "content": "192.0.2.1", "ttl": 1} for n in range(20)],
        )
        records = (await client.request("GET", f"/zones/{zone.id}/dns_records")).result

    # The same calls against an in-process transport that answers at once: what the client alone costs.
    def canned() -> httpx.AsyncBaseTransport:
        verify = {"success": True, "errors": [], "messages": [], "result": {"id": "t", "status": "active"}}
        listing = {
            "success": True,
            "errors": [],
            "messages": [],
            "result": records,
            "result_info": {"page": 1, "per_page": 100, "count": 20, "total_count": 20, "total_pages": 1},
        }

        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, json=verify if request.url.path.endswith("/verify") else listing)

        return httpx.MockTransport(handler)

    results: dict[tuple[bool, str, str], list[Figure]] = {}
    for _ in range(rounds):
        for local in (False, True):
            base_url = "https://api.cloudflare.test/client/v4" if local else emu.base_url
            transport = canned if local else None
            for figure in await run_round(base_url, emu.token, zone.id, calls, concurrency, transport):
                results.setdefault((local, figure.variant, figure.endpoint), []).append(figure)
    over_network = [median(v) for (local, _, _), v in results.items() if not local]
    in_process = [median(v) for (local, _, _), v in results.items() if local]
    return over_network, in_process


def report(title: str, figures: list[Figure]) -> None:
    print(title)
    print(f"  {'variant':34} {'endpoint':15} {'calls/s':>9} {'CPU us/call':>12} {'CPU x bare':>11} {'rate x bare':>12}")
    bare = {f.endpoint: f for f in figures if f.variant == "bare httpx"}
    for f in sorted(figures, key=lambda f: (f.endpoint, VARIANTS.index(f.variant))):
        base = bare[f.endpoint]
        print(
            f"  {f.variant:34} {f.endpoint:15} {f.rate:9.0f} {f.cpu_per_call_us:12.0f} "
            f"{f.cpu_per_call_us / base.cpu_per_call_us:11.2f} {f.rate / base.rate:12.2f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="medians of this many interleaved runs")
    args = parser.parse_args()
    stop_on_sigterm()
    with EmulatorProcess(rate_limit=(10**9, 300.0)) as emu:
        over_network, in_process = asyncio.run(bench(emu, args.calls, args.concurrency, args.rounds))
    print(f"{args.calls} calls per line, {args.concurrency} concurrent callers, median of {args.rounds} rounds")
    report("Against the emulator (HTTP/1.1 on localhost, its own process):", over_network)
    report("Against an in-process transport that answers at once (the client's own cost):", in_process)
    return 0


if __name__ == "__main__":
    sys.exit(main())
