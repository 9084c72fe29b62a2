"""A burst of writes waits its turn in the client, IN_FLIGHT at a time; a Lease renewal does not wait behind it, and
a write of another resource type waits for a turn in rotation, not behind the burst."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import respx

from app.kube.client import CONFIGMAPS, IN_FLIGHT, LEASES, KubeClient
from app.kube.turns import FairTurns


async def test_a_burst_goes_out_in_flight_at_a_time_and_a_lease_skips_the_queue() -> None:
    kube = KubeClient("https://kube.test", ssl.create_default_context())
    in_flight = most = 0
    release = asyncio.Event()
    lease_answered = asyncio.Event()

    async def answer(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, most
        if "/leases/" in request.url.path:
            lease_answered.set()
            return httpx.Response(200, json={"metadata": {"name": "kflare"}})
        in_flight += 1
        most = max(most, in_flight)
        await release.wait()
        in_flight -= 1
        return httpx.Response(200, json={})

    try:
        with respx.mock(base_url="https://kube.test") as mock:
            mock.route().mock(side_effect=answer)
            burst = [
                asyncio.create_task(kube.patch(CONFIGMAPS, f"c{i}", {"metadata": {}}, "ns"))
                for i in range(IN_FLIGHT * 4)
            ]
            renewal = asyncio.create_task(kube.get(LEASES, "kflare", "kflare-system"))
            await asyncio.wait_for(lease_answered.wait(), timeout=10)  # while the burst still holds every turn
            assert most == IN_FLIGHT
            release.set()
            await asyncio.wait_for(asyncio.gather(*burst, renewal), timeout=10)
    finally:
        await kube.close()
    assert most == IN_FLIGHT


async def test_a_backlog_of_one_resource_type_does_not_hold_up_another() -> None:
    """Records' writes queued before their Zone's: the Zone's goes out within a turn or two of being queued (the
    records keep theirs in order), not after the whole backlog."""
    turns = FairTurns(1)
    order: list[tuple[str, int]] = []

    async def request(flow: str, n: int) -> None:
        async with turns.turn(flow):
            order.append((flow, n))
            await asyncio.sleep(0)

    records = [asyncio.create_task(request("dnsrecords", n)) for n in range(50)]
    await asyncio.sleep(0)  # the records are queued first
    zone = asyncio.create_task(request("zones", 0))
    await asyncio.wait_for(asyncio.gather(*records, zone), timeout=10)
    assert order.index(("zones", 0)) <= 3
    assert [n for flow, n in order if flow == "dnsrecords"] == list(range(50))


async def test_a_request_cancelled_while_waiting_loses_no_turn() -> None:
    turns = FairTurns(1)
    holder_in, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with turns.turn("a"):
            holder_in.set()
            await release.wait()

    async def request(flow: str) -> str:
        async with turns.turn(flow):
            return flow

    holder = asyncio.create_task(hold())
    await holder_in.wait()
    gone = asyncio.create_task(request("a"))
    after = asyncio.create_task(request("b"))
    await asyncio.sleep(0)
    gone.cancel()
    release.set()
    assert await asyncio.wait_for(after, timeout=10) == "b"
    await holder
    assert turns.waiting == 0
    async with asyncio.timeout(10), turns.turn("c"):  # the turn came back: nothing leaked
        pass
