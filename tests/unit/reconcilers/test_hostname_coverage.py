"""A TunnelConfiguration says when requests for one of its hostnames cannot reach the tunnel: no Zone of the tunnel's
account contains it and no DNSRecord of its namespace names it. Read from the caches' indexes at the end of every
reconcile, so what covers a hostname and what does not is pinned here."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.unit.reconcilers.harness import EmulatorServer, MemoryKflare, emulator_state


@pytest.fixture(scope="module")
def served() -> Iterator[EmulatorServer]:
    with EmulatorServer(emulator_state([])) as server:
        yield server


@pytest.fixture
async def kflare(served: EmulatorServer) -> AsyncIterator[MemoryKflare]:
    served.reset()
    world = MemoryKflare(served)
    try:
        yield world
    finally:
        await world.aclose()


async def configuration(kflare: MemoryKflare, *hosts: str) -> dict[str, Any]:
    """A Ready tunnel of the account and its configuration routing `hosts`, settled: Ready of the configuration."""
    name = f"c{len(kflare.kube.objects)}"
    spec = {"accountRef": {"name": kflare.account}, "name": name, "credentialsSecretRef": {"name": f"{name}-token"}}
    await kflare.apply({"kind": "Tunnel", "metadata": {"name": name}, "spec": spec})
    await kflare.ready("Tunnel", name)
    ingress = [{"hostname": host, "service": "http://web.default.svc:80"} for host in hosts]
    config = {"tunnelRef": {"name": name}, "ingress": ingress}
    await kflare.apply({"kind": "TunnelConfiguration", "metadata": {"name": name}, "spec": config})
    await kflare.runtime.settle()
    obj = kflare.kube.get("TunnelConfiguration", name, kflare.namespace)
    assert obj is not None
    (ready,) = obj["status"]["conditions"]
    return dict(ready)


async def test_a_zone_of_the_account_covers_its_names_and_their_wildcards(kflare: MemoryKflare) -> None:
    await kflare.ready_zone("covered.example")
    ready = await configuration(kflare, "app.covered.example", "*.deep.covered.example", "covered.example")
    assert (ready["status"], ready["reason"]) == ("True", "Synced"), ready


async def test_a_name_no_zone_contains_is_said_and_a_record_of_the_namespace_covers_it(kflare: MemoryKflare) -> None:
    await kflare.ready_zone("covered.example")
    ready = await configuration(kflare, "app.covered.example", "app.elsewhere.example", "notcovered.example")
    assert ready["reason"] == "HostnameNotCovered", ready
    assert "app.elsewhere.example" in ready["message"], ready
    assert "notcovered.example" in ready["message"], ready
    assert "app.covered.example" not in ready["message"], "a name the account's zone contains was said uncovered"

    record = {
        "zoneRef": {"name": "zone"},
        "name": "App.Elsewhere.Example.",
        "type": "CNAME",
        "content": "x.example.net",
    }
    await kflare.apply({"kind": "DNSRecord", "metadata": {"name": "record"}, "spec": record})
    ready = await configuration(kflare, "app.elsewhere.example")
    assert (ready["status"], ready["reason"]) == ("True", "Synced"), "a DNSRecord naming the host did not cover it"


async def test_a_record_of_another_namespace_or_a_zone_of_another_account_covers_nothing(
    kflare: MemoryKflare,
) -> None:
    await kflare.ready_zone("covered.example")
    record = {"zoneRef": {"name": "zone"}, "name": "app.elsewhere.example", "type": "CNAME", "content": "x.example.net"}
    kflare.kube.add(
        {
            "apiVersion": "kflare.dev/v1alpha1",
            "kind": "DNSRecord",
            "metadata": {"name": "theirs", "namespace": "other", "uid": "u-theirs"},
            "spec": record,
        }
    )
    ready = await configuration(kflare, "app.elsewhere.example")
    assert ready["reason"] == "HostnameNotCovered", ready

    other_account = {"name": "elsewhere.example", "accountRef": {"name": "another-account"}}
    zone = {"apiVersion": "kflare.dev/v1alpha1", "kind": "Zone", "metadata": {"name": "theirs", "uid": "u-zone"}}
    kflare.kube.add({**zone, "metadata": {**zone["metadata"], "namespace": kflare.namespace}, "spec": other_account})
    ready = await configuration(kflare, "app.elsewhere.example")
    assert ready["reason"] == "HostnameNotCovered", "a Zone of another account was taken to cover the host"
