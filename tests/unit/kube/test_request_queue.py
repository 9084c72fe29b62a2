"""A burst of writes waits its turn in the client, IN_FLIGHT at a time; a Lease renewal does not wait behind it."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import respx

from app.kube.client import CONFIGMAPS, IN_FLIGHT, LEASES, KubeClient


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
