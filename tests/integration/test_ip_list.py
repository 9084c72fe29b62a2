"""IPList from `kubectl apply` to the account's custom list: items replaced through Cloudflare's asynchronous bulk
operations, rules that name the list written once it exists, and the list deleted only once no rule uses it."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.fixtures.controller import ControllerProcess, Kflare
from tests.fixtures.emulator import EmulatorProcess
from tests.helpers import eventually
from tests.kinds import cf

pytestmark = pytest.mark.integration


def ip_list(kflare: Kflare, items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "IPList",
        "metadata": {"name": "office"},
        "spec": {"accountRef": {"name": kflare.account}, "name": "office", "items": items},
    }


def rule() -> dict[str, Any]:
    return {
        "kind": "WAFCustomRule",
        "metadata": {"name": "outsiders"},
        "spec": {"zoneRef": {"name": "zone"}, "expression": "not ip.src in $office", "action": "managed_challenge"},
    }


def held_items(emulator: EmulatorProcess, list_id: str) -> list[tuple[str, str | None]]:
    path = f"/accounts/{emulator.account_id}/rules/lists/{list_id}/items"
    return [(item["ip"], item.get("comment")) for item in cf(emulator, "GET", path, params={"per_page": 500})]


async def test_items_are_replaced_through_a_polled_bulk_operation(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    fresh_emulator.set_options(list_operation_polls=2)  # Cloudflare answers "running" twice before completing
    await kflare.token_secret()
    await kflare.make_account()
    items = [{"ip": "192.0.2.0/24", "comment": "office"}, {"ip": "2001:DB8:1::/48"}]
    await kflare.apply(ip_list(kflare, items))
    resource = await kflare.ready("IPList", "office")
    list_id = resource["status"]["cloudflareMetadata"]["listID"]
    assert held_items(fresh_emulator, list_id) == [("192.0.2.0/24", "office"), ("2001:db8:1::/48", None)]
    since = time.time()
    await kflare.patch("IPList", "office", {"spec": {"items": [{"ip": "198.51.100.7"}]}})
    await kflare.ready("IPList", "office")
    assert held_items(fresh_emulator, list_id) == [("198.51.100.7", None)]
    polls = fresh_emulator.calls(since=since, method="GET", path="/bulk_operations/")
    assert len(polls) == 3, "polled until the operation completed: twice running, then completed"
    # Changed outside kflare: replaced again at the next check.
    cf(fresh_emulator, "POST", f"/accounts/{fresh_emulator.account_id}/rules/lists/{list_id}/items",
       json=[{"ip": "203.0.113.9"}])  # fmt: skip

    async def corrected() -> bool:
        return held_items(fresh_emulator, list_id) == [("198.51.100.7", None)]

    await eventually(corrected, timeout=30, what="the list's items to be put back")


async def test_a_rule_waits_for_its_list_and_the_list_for_its_rule(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone("lists.example")
    await kflare.apply(rule())
    await kflare.ready("WAFCustomRule", "outsiders", reason="ListNotFound", status="False")
    await kflare.apply(ip_list(kflare, [{"ip": "192.0.2.0/24"}]))
    await kflare.ready("IPList", "office")
    await kflare.ready("WAFCustomRule", "outsiders", timeout=20)
    ruleset = cf(fresh_emulator, "GET", f"/zones/{zone_id}/rulesets/phases/http_request_firewall_custom/entrypoint")
    assert [r["expression"] for r in ruleset["rules"]] == ["not ip.src in $office"]
    # Deleting the list first: it waits for the rule that uses it, then goes.
    await kflare.delete("IPList", "office")
    await kflare.ready("IPList", "office", reason="ListInUse", status="False")
    lists = cf(fresh_emulator, "GET", f"/accounts/{fresh_emulator.account_id}/rules/lists")
    assert [found["name"] for found in lists] == ["office"]
    await kflare.delete("WAFCustomRule", "outsiders")
    await kflare.gone("WAFCustomRule", "outsiders")
    await kflare.gone("IPList", "office", timeout=20)
    assert cf(fresh_emulator, "GET", f"/accounts/{fresh_emulator.account_id}/rules/lists") == []


async def test_a_list_a_foreign_rule_uses_is_kept_with_list_in_use(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone("foreign-lists.example")
    await kflare.apply(ip_list(kflare, [{"ip": "192.0.2.0/24"}]))
    await kflare.ready("IPList", "office")
    body = {
        "name": "default",
        "kind": "zone",
        "phase": "http_request_firewall_custom",
        "rules": [{"ref": "by-hand", "action": "block", "expression": "ip.src in $office"}],
    }
    cf(fresh_emulator, "POST", f"/zones/{zone_id}/rulesets", json=body)
    await kflare.delete("IPList", "office")
    await kflare.ready("IPList", "office", reason="ListInUse", status="False")
    assert [f["name"] for f in cf(fresh_emulator, "GET", f"/accounts/{fresh_emulator.account_id}/rules/lists")] == [
        "office"
    ]
