"""A CloudflareAccount without `spec.accountID`: the controller as its own process, the real API server, the
emulator. The one account its token reaches is used; a token that reaches two says so, and never shows itself."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client

from app.controlplane import ControlPlane
from tests.fixtures.controller import ControllerProcess, Kflare
from tests.fixtures.emulator import EmulatorProcess
from tests.helpers import eventually
from tests.integration.test_first_slice import kubectl
from tests.kinds import cf

pytestmark = pytest.mark.integration

SECOND_ACCOUNT = "b" * 32


async def account_without_id(kflare: Kflare, token: str) -> None:
    await kflare.token_secret(token)
    await kflare.apply(
        {
            "kind": "CloudflareAccount",
            "metadata": {"name": kflare.account},
            "spec": {"tokenSecretRef": {"name": "cf-token", "namespace": kflare.namespace}},
        }
    )


async def events_of(kflare: Kflare, name: str) -> list[Any]:
    """The Events about the account (cluster-scoped: recorded in `default`) and the test's resources."""
    api = client.EventsV1Api(kflare.api)
    found = []
    for namespace in ("default", kflare.namespace):
        for event in (await api.list_namespaced_event(namespace)).items:
            if namespace == kflare.namespace or event.regarding.name == name:
                found.append(event)
    return found


async def test_the_one_account_the_token_reaches_is_used(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess, control_plane: ControlPlane
) -> None:
    fresh_emulator.seed({"accounts": [{"id": SECOND_ACCOUNT, "name": "second"}]})
    narrow = fresh_emulator.add_token(["*"], accounts=[fresh_emulator.account_id])
    await account_without_id(kflare, narrow["value"])

    account = await kflare.ready("CloudflareAccount", kflare.account, reason="Validated")
    assert account["status"]["accountID"] == fresh_emulator.account_id
    assert "accountID" not in account["spec"]
    listed = kubectl(control_plane, "get", "cloudflareaccounts.kflare.dev", kflare.account, "--no-headers")
    assert fresh_emulator.account_id in listed.split(), listed

    await kflare.make_zone("zone", "detected.example")
    zone = await kflare.ready("Zone", "zone", reason="Synced")
    zone_id = zone["status"]["cloudflareMetadata"]["zoneID"]
    assert [z["account"]["id"] for z in cf(fresh_emulator, "GET", "/zones")] == [fresh_emulator.account_id]
    await kflare.make_record("www", "zone", name="www.detected.example", type="A", content="192.0.2.1")
    record = await kflare.ready("DNSRecord", "www", reason="Synced")
    held = cf(fresh_emulator, "GET", f"/zones/{zone_id}/dns_records", params={"name": "www.detected.example"})
    assert [r["id"] for r in held] == [record["status"]["cloudflareMetadata"]["recordID"]]

    # Read once: drift checks of the account (every 2 s here) and its dependants' reconciles list no accounts.
    listings = len(fresh_emulator.calls(method="GET", path=r"/accounts$"))
    reads = len(fresh_emulator.calls(method="GET", path=rf"/accounts/{fresh_emulator.account_id}$"))

    async def drift_checked_twice() -> bool:
        now = len(fresh_emulator.calls(method="GET", path=rf"/accounts/{fresh_emulator.account_id}$"))
        return now >= reads + 2

    await eventually(drift_checked_twice, timeout=30, what="two drift checks of the account")
    assert len(fresh_emulator.calls(method="GET", path=r"/accounts$")) == listings == 1


async def test_a_token_that_reaches_two_accounts_says_so_without_showing_itself(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    fresh_emulator.seed({"accounts": [{"id": SECOND_ACCOUNT, "name": "second"}]})
    token = fresh_emulator.token  # the starting token reaches every account
    await account_without_id(kflare, token)
    await kflare.make_zone("zone", "undecided.example")

    account = await kflare.ready("CloudflareAccount", kflare.account, status="False", reason="AccountNotDetected")
    message = account["status"]["conditions"][0]["message"]
    assert "the token reaches 2 accounts" in message
    assert fresh_emulator.account_id in message
    assert SECOND_ACCOUNT in message
    assert "set spec.accountID" in message
    zone = await kflare.ready("Zone", "zone", status="False", reason="AccountNotReady", timeout=40)
    assert cf(fresh_emulator, "GET", "/zones") == []

    async def warned() -> list[Any]:
        return [e for e in await events_of(kflare, kflare.account) if e.reason == "AccountNotDetected"]

    notes = [e.note for e in await eventually(warned, what="an AccountNotDetected Event")]
    shown = json.dumps([account, zone, notes, [e.note for e in await events_of(kflare, kflare.account)]])
    assert token not in shown

    # Naming the account later: the spec wins, and what waited converges.
    await kflare.patch("CloudflareAccount", kflare.account, {"spec": {"accountID": SECOND_ACCOUNT}})
    account = await kflare.ready("CloudflareAccount", kflare.account, reason="Validated")
    assert account["status"]["accountID"] == SECOND_ACCOUNT
    await kflare.ready("Zone", "zone", reason="Synced", timeout=90)
    assert [z["account"]["id"] for z in cf(fresh_emulator, "GET", "/zones")] == [SECOND_ACCOUNT]
