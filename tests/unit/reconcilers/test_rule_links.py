"""Links between rules and what they name, through indexes: the lists a rule names come from the expression parser
(a `$` inside a string names nothing), an IPList's deletion waits for exactly the rules naming it, and the rules of
one Cloudflare zone are ordered together whichever namespace's Zone they reference."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.api.rules.common import PHASE_CUSTOM
from reconcilers.cloudflare_account import CloudflareAccountKind
from reconcilers.ip_list import IPListKind
from reconcilers.registry import KINDS as REGISTERED
from reconcilers.rulesets import RuleKind, list_names, ref_for
from reconcilers.zone import ZoneKind
from tests.unit.reconcilers.harness import ACCOUNT_ID, Cloudflare, MemoryKube, Runtime, emulator_state, ready
from tests.unit.reconcilers.test_rulesets import ACCOUNT, CUSTOM, NS, SECRETS, ZONE, ZONE_ID, waf

KINDS = [CloudflareAccountKind, ZoneKind, IPListKind, *(k for k in REGISTERED if issubclass(k, RuleKind))]
LISTS = f"/accounts/{ACCOUNT_ID}/rules/lists"
OFFICE = {
    "kind": "IPList",
    "metadata": {"name": "office", "namespace": NS},
    "spec": {"accountRef": {"name": "acct"}, "name": "office", "items": [{"ip": "192.0.2.0/24"}]},
}


class World:
    def __init__(self) -> None:
        self.kube = MemoryKube()
        self.kube.add(ready(ACCOUNT, accountName="harness"))
        self.kube.add(ready(ZONE, cloudflareMetadata={"zoneID": ZONE_ID}))
        self.cloudflare = Cloudflare(emulator_state([{"id": ZONE_ID, "name": "example.com"}]))
        self.runtime = Runtime(self.kube, self.cloudflare, KINDS, SECRETS)

    async def reconcile(self, kind: str, name: str, namespace: str = NS) -> dict[str, Any] | None:
        await self.runtime.reconcile(kind, name, namespace)
        return self.kube.get(kind, name, namespace)

    async def ready(self, kind: str, name: str, namespace: str = NS) -> None:
        for _ in range(2):
            stored = await self.reconcile(kind, name, namespace)
        assert stored is not None
        assert stored["status"]["conditions"][0]["reason"] == "Synced", stored["status"]


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = World()
    yield w
    await w.cloudflare.aclose()


def test_a_dollar_inside_a_string_names_no_list() -> None:
    expression = 'http.request.uri.path eq "/$admin" or ip.src in $office or ip.src in $cf.open_proxies'
    assert list_names(expression, PHASE_CUSTOM) == {"office"}, "Cloudflare's managed lists are no account's either"


async def test_a_lists_deletion_waits_for_exactly_the_rules_naming_it(world: World) -> None:
    world.kube.add(OFFICE)
    await world.ready("IPList", "office")
    world.kube.add(waf("uses", 10, "ip.src in $office"))
    world.kube.add(waf("mentions", 20, 'http.request.uri.path eq "/$office"'))
    await world.ready("WAFCustomRule", "uses")
    await world.ready("WAFCustomRule", "mentions")
    world.kube.delete("IPList", "office", NS)
    waiting = await world.reconcile("IPList", "office")
    assert waiting is not None
    (condition,) = waiting["status"]["conditions"]
    assert (condition["reason"], condition["message"]) == (
        "ListInUse",
        f"waiting for dependants to be deleted: WAFCustomRule {NS}/uses",
    )
    world.kube.delete("WAFCustomRule", "uses", NS)
    assert await world.reconcile("WAFCustomRule", "uses") is None
    assert await world.reconcile("IPList", "office") is None
    assert await world.cloudflare.get(LISTS) == []


async def test_a_rule_waiting_for_a_list_goes_on_once_it_exists(world: World) -> None:
    world.kube.add(waf("uses", 10, "ip.src in $office"))
    waiting = await world.reconcile("WAFCustomRule", "uses")
    assert waiting is not None
    assert waiting["status"]["conditions"][0]["reason"] == "ListNotFound"
    world.kube.add(OFFICE)
    await world.ready("IPList", "office")
    await world.ready("WAFCustomRule", "uses")


async def test_the_rules_of_one_cloudflare_zone_are_ordered_together_across_namespaces(world: World) -> None:
    other = copy.deepcopy(ZONE)
    other["metadata"]["namespace"] = "other-team"
    world.kube.add(ready(other, cloudflareMetadata={"zoneID": ZONE_ID}))
    world.runtime.sync("Zone")
    late = waf("late", 20)
    late["metadata"]["namespace"] = "other-team"
    world.kube.add(late)
    await world.ready("WAFCustomRule", "late", "other-team")
    world.kube.add(waf("early", 10))
    await world.ready("WAFCustomRule", "early")
    ruleset = await world.cloudflare.get(CUSTOM)
    assert [rule["ref"] for rule in ruleset["rules"]] == [
        ref_for("WAFCustomRule", NS, "early"),
        ref_for("WAFCustomRule", "other-team", "late"),
    ]
