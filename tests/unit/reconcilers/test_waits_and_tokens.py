"""Record sets that hold others' records, waits that are looked at again, token values that cannot work."""

from __future__ import annotations

import base64
import copy

import pytest

from app.api.constants import Reason
from reconcilers.cloudflare_account import CloudflareAccountKind
from reconcilers.dns_record import DNSRecordKind
from reconcilers.zone import ZoneKind
from tests.unit.reconcilers.harness import TOKEN, Cloudflare, MemoryKube, MemorySecrets, Runtime, emulator_state
from tests.unit.reconcilers.test_crash_points import (
    ACCOUNT,
    KINDS,
    NS,
    PROTECTED,
    SECRETS,
    ZONE_ID,
    parents,
    record_resource,
)

RECORDS = f"/zones/{ZONE_ID}/dns_records"


def ready_condition(kube: MemoryKube, kind: str, name: str, namespace: str = NS) -> dict[str, str]:
    stored = kube.get(kind, name, namespace)
    assert stored is not None
    return dict(stored["status"]["conditions"][0])


def mx(name: str, content: str) -> dict[str, object]:
    resource = record_resource({})
    resource["metadata"]["name"] = name
    resource["spec"] = {"zoneRef": {"name": "zone"}, "name": "@", "type": "MX", "content": content, "priority": 10}
    return resource


async def test_a_record_set_member_with_new_content_is_created_beside_the_only_unmanaged_one() -> None:
    unmanaged = {"type": "MX", "name": "example.com", "content": "mx-theirs.example.net", "priority": 5}
    cloudflare = Cloudflare(emulator_state([{"id": ZONE_ID, "name": "example.com", "dns_records": [unmanaged]}]))
    kube = MemoryKube()
    try:
        for obj in [*parents("DNSRecord"), mx("ours", "mx-ours.example.net")]:
            kube.add(obj)
        runtime = Runtime(kube, cloudflare, KINDS, SECRETS)
        await runtime.reconcile("DNSRecord", "ours", NS)
        await runtime.reconcile("DNSRecord", "ours", NS)
        assert ready_condition(kube, "DNSRecord", "ours")["reason"] == Reason.SYNCED
        held = sorted(r["content"] for r in await cloudflare.get(RECORDS, type="MX"))
        assert held == ["mx-ours.example.net", "mx-theirs.example.net"]
    finally:
        await cloudflare.aclose()


async def test_already_exists_is_looked_at_again() -> None:
    """A wait that ends with no event of the resource's own (the record is claimed by its owner, or deleted in
    Cloudflare) must be noticed: the outcome asks for another look."""
    existing = {"type": "MX", "name": "example.com", "content": "mx.example.net", "priority": 10}
    cloudflare = Cloudflare(emulator_state([{"id": ZONE_ID, "name": "example.com", "dns_records": [existing]}]))
    kube = MemoryKube()
    try:
        for obj in [*parents("DNSRecord"), mx("mx", "mx.example.net")]:
            kube.add(obj)
        runtime = Runtime(kube, cloudflare, KINDS, SECRETS)
        outcome = await runtime.reconcile("DNSRecord", "mx", NS)
        assert ready_condition(kube, "DNSRecord", "mx")["reason"] == Reason.ALREADY_EXISTS
        assert outcome.requeue_after is not None

        # Deleted outside kflare: the next look creates it.
        record_id = (await cloudflare.get(RECORDS, type="MX"))[0]["id"]
        await cloudflare.http.delete(f"{RECORDS}/{record_id}", headers={"Authorization": f"Bearer {TOKEN}"})
        runtime = Runtime(kube, cloudflare, KINDS, SECRETS)
        await runtime.reconcile("DNSRecord", "mx", NS)
        await runtime.reconcile("DNSRecord", "mx", NS)
        assert ready_condition(kube, "DNSRecord", "mx")["reason"] == Reason.SYNCED
    finally:
        await cloudflare.aclose()


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (TOKEN[:10] + " " + TOKEN[10:], "white space at character 11"),
        (TOKEN + "é", "non-ASCII character"),
        (TOKEN[:5] + "\n" + TOKEN[5:], "line break at character 6"),
        ("Bearer " + TOKEN, "starts with 'Bearer '"),
        (TOKEN[:3] + "\x00" + TOKEN[3:], "control character at character 4"),
        ("\n", "is empty"),
    ],
)
async def test_a_token_value_that_cannot_work_is_explained_without_showing_it(value: str, said: str) -> None:
    cloudflare = Cloudflare(emulator_state([]))
    kube = MemoryKube()
    secrets = MemorySecrets(
        {(NS, "token"): {"metadata": PROTECTED, "data": {"CF_API_TOKEN": base64.b64encode(value.encode()).decode()}}}
    )
    try:
        kube.add(copy.deepcopy(ACCOUNT))
        runtime = Runtime(kube, cloudflare, [CloudflareAccountKind, ZoneKind, DNSRecordKind], secrets)
        outcome = await runtime.reconcile("CloudflareAccount", "acct", "")
        condition = ready_condition(kube, "CloudflareAccount", "acct", "")
        assert (condition["status"], condition["reason"]) == ("False", Reason.INVALID_TOKEN)
        assert said in condition["message"]
        assert TOKEN[:8] not in condition["message"]
        assert not outcome.retry  # nothing to retry until the Secret changes (its watch enqueues the account)
    finally:
        await cloudflare.aclose()


async def test_a_trailing_newline_from_a_file_is_tolerated() -> None:
    cloudflare = Cloudflare(emulator_state([]))
    kube = MemoryKube()
    encoded = base64.b64encode((TOKEN + "\n").encode()).decode()
    secrets = MemorySecrets({(NS, "token"): {"metadata": PROTECTED, "data": {"CF_API_TOKEN": encoded}}})
    try:
        kube.add(copy.deepcopy(ACCOUNT))
        runtime = Runtime(kube, cloudflare, KINDS, secrets)
        await runtime.reconcile("CloudflareAccount", "acct", "")
        condition = ready_condition(kube, "CloudflareAccount", "acct", "")
        assert (condition["status"], condition["reason"]) == ("True", Reason.VALIDATED)
    finally:
        await cloudflare.aclose()
