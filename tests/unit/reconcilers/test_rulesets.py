"""The ruleset engine in one process against the emulator: rules kept in priority order with foreign rules left in
their place, rule-level writes only, idle reconciles that leave the version alone, drift corrected, foreign rules
never touched, and a managed ruleset deployed once per zone."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.api import CloudflareAccount, Zone
from app.api.rules import RULE_KINDS
from app.api.rules.common import PHASE_CUSTOM, PHASE_MANAGED
from reconcilers.registry import reconciler_of
from reconcilers.rulesets import moves, ref_for
from tests.unit.reconcilers.harness import (
    ACCOUNT_ID,
    TOKEN,
    Cloudflare,
    MemoryKube,
    MemorySecrets,
    Runtime,
    emulator_state,
    mark_deleted,
    ready,
)

pytestmark = pytest.mark.heavy

ZONE_ID = "e" * 32
NS = "team"
KINDS = [reconciler_of(model) for model in (CloudflareAccount, Zone, *RULE_KINDS)]
SECRETS = MemorySecrets(
    {
        (NS, "token"): {
            "metadata": {"name": "token"},
            "data": {"CF_API_TOKEN": base64.b64encode(TOKEN.encode()).decode()},
        }
    }
)
ACCOUNT = {
    "kind": "CloudflareAccount",
    "metadata": {"name": "acct"},
    "spec": {"accountID": ACCOUNT_ID, "tokenSecretRef": {"name": "token", "namespace": NS}},
}
ZONE = {
    "kind": "Zone",
    "metadata": {"name": "zone", "namespace": NS, "finalizers": ["kflare.dev/finalizer"]},
    "spec": {"name": "example.com", "accountRef": {"name": "acct"}},
}
FOREIGN = {"ref": "someone-else", "action": "block", "expression": 'http.host eq "foreign.example.com"'}
CUSTOM = f"/zones/{ZONE_ID}/rulesets/phases/{PHASE_CUSTOM}/entrypoint"
MANAGED = f"/zones/{ZONE_ID}/rulesets/phases/{PHASE_MANAGED}/entrypoint"
FREE_MANAGED = "77454fe2d30c4220b5701f6fdfb893ba"


def waf(name: str, priority: int, expression: str | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "kind": "WAFCustomRule",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "zoneRef": {"name": "zone"},
            "expression": expression or f'http.request.uri.path eq "/{name}"',
            "action": "block",
            "priority": priority,
            **spec,
        },
    }


def managed(name: str) -> dict[str, Any]:
    return {
        "kind": "ManagedRuleset",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"zoneRef": {"name": "zone"}, "rulesetID": FREE_MANAGED},
    }


class World:
    def __init__(self, rulesets: list[dict[str, Any]]) -> None:
        self.kube = MemoryKube()
        self.kube.add(ready(ACCOUNT, accountName="harness"))
        self.kube.add(ready(ZONE, cloudflareMetadata={"zoneID": ZONE_ID}))
        self.cloudflare = Cloudflare(emulator_state([{"id": ZONE_ID, "name": "example.com", "rulesets": rulesets}]))
        self.runtime = Runtime(self.kube, self.cloudflare, KINDS, SECRETS)

    async def calls(self) -> list[dict[str, Any]]:
        reply = await self.cloudflare.http.get("http://emulator/__emulator/calls")
        calls: list[dict[str, Any]] = reply.json()["calls"]
        return calls

    async def reconcile(self, kind: str, name: str) -> dict[str, Any]:
        await self.runtime.reconcile(kind, name, NS)
        stored = self.kube.get(kind, name, NS)
        assert stored is not None
        return stored

    async def converge(self, *objs: dict[str, Any]) -> None:
        for obj in objs:
            self.kube.add(obj)
        for _ in range(2):
            for obj in objs:
                stored = await self.reconcile(obj["kind"], obj["metadata"]["name"])
                assert stored["status"]["conditions"][0]["reason"] == "Synced", stored["status"]

    async def entrypoint(self, path: str = CUSTOM) -> dict[str, Any]:
        result: dict[str, Any] = await self.cloudflare.get(path)
        return result


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = World([{"phase": PHASE_CUSTOM, "rules": [FOREIGN]}])
    yield w
    await w.cloudflare.aclose()


def refs(ruleset: dict[str, Any]) -> list[str]:
    return [rule["ref"] for rule in ruleset["rules"]]


def ours(name: str, kind: str = "WAFCustomRule") -> str:
    return ref_for(kind, NS, name)


async def test_rules_go_in_priority_order_and_a_foreign_rule_keeps_its_place(world: World) -> None:
    await world.converge(waf("c", 30))
    await world.converge(waf("a", 10))
    assert refs(await world.entrypoint()) == ["someone-else", ours("a"), ours("c")]
    # The foreign rule moved by hand between a and c stays there when b joins in between.
    ruleset = await world.entrypoint()
    foreign = ruleset["rules"][0]
    await world.cloudflare.http.patch(
        f"/zones/{ZONE_ID}/rulesets/{ruleset['id']}/rules/{foreign['id']}",
        json={"position": {"after": ruleset["rules"][1]["id"]}},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    await world.converge(waf("b", 20))
    after = await world.entrypoint()
    assert refs(after) == [ours("a"), ours("b"), "someone-else", ours("c")]
    assert next(r for r in after["rules"] if r["ref"] == "someone-else")["version"] == foreign["version"]
    # A change of b's spec is written to b, which keeps its place; so does the foreign rule.
    world.kube.objects[("WAFCustomRule", NS, "b")]["spec"]["action"] = "managed_challenge"
    await world.reconcile("WAFCustomRule", "b")
    updated = await world.entrypoint()
    assert next(r for r in updated["rules"] if r["ref"] == ours("b"))["action"] == "managed_challenge"
    assert refs(updated) == refs(after)
    assert next(r for r in updated["rules"] if r["ref"] == "someone-else")["version"] == foreign["version"]


async def test_a_priority_change_moves_the_rule_and_only_moves_it(world: World) -> None:
    objs = [waf("a", 10), waf("b", 20), waf("c", 30)]
    await world.converge(*objs)
    before = await world.entrypoint()
    foreign_before = next(r for r in before["rules"] if r["ref"] == "someone-else")
    world.kube.objects[("WAFCustomRule", NS, "a")]["spec"]["priority"] = 40
    await world.converge()
    await world.reconcile("WAFCustomRule", "a")
    after = await world.entrypoint()
    assert [r for r in refs(after) if r != "someone-else"] == [ours("b"), ours("c"), ours("a")]
    assert next(r for r in after["rules"] if r["ref"] == "someone-else") == foreign_before
    moved = {r["ref"]: r["version"] for r in after["rules"]}
    assert moved == {r["ref"]: r["version"] for r in before["rules"]}, "a move changes no rule's definition"


async def test_an_idle_reconcile_writes_nothing_and_the_version_stays(world: World) -> None:
    await world.converge(waf("a", 10), waf("b", 20))
    version = (await world.entrypoint())["version"]
    calls = len(await world.calls())
    for name in ("a", "b"):
        await world.reconcile("WAFCustomRule", name)
    writes = [c for c in (await world.calls())[calls:] if c["method"] != "GET"]
    assert writes == []
    assert (await world.entrypoint())["version"] == version


async def test_a_rule_edited_in_cloudflare_is_corrected_and_the_foreign_rule_is_not(world: World) -> None:
    await world.converge(waf("a", 10))
    ruleset = await world.entrypoint()
    mine = next(r for r in ruleset["rules"] if r["ref"] == ours("a"))
    foreign = next(r for r in ruleset["rules"] if r["ref"] == "someone-else")
    await world.cloudflare.http.patch(
        f"/zones/{ZONE_ID}/rulesets/{ruleset['id']}/rules/{mine['id']}",
        json={**{k: mine[k] for k in ("ref", "expression", "description")}, "action": "managed_challenge"},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    world.runtime.reconcilers["WAFCustomRule"].of.engine.rulesets.open_round(f"rules:{ZONE_ID}:{PHASE_CUSTOM}")
    await world.reconcile("WAFCustomRule", "a")
    after = await world.entrypoint()
    assert next(r for r in after["rules"] if r["ref"] == ours("a"))["action"] == "block"
    assert next(r for r in after["rules"] if r["ref"] == "someone-else") == foreign


async def test_deleting_rules_leaves_the_foreign_rule_and_the_entry_point(world: World) -> None:
    await world.converge(waf("a", 10), waf("b", 20))
    foreign = next(r for r in (await world.entrypoint())["rules"] if r["ref"] == "someone-else")
    for name in ("a", "b"):
        mark_deleted(world.kube, "WAFCustomRule", name, NS)
        await world.runtime.reconcile("WAFCustomRule", name, NS)
        assert world.kube.get("WAFCustomRule", name, NS) is None
    assert (await world.entrypoint())["rules"] == [foreign]


async def test_a_missing_entry_point_is_created_empty_then_the_rule_added() -> None:
    world = World([])
    try:
        await world.converge(waf("a", 10))
        writes = [(c["method"], c["path"]) for c in await world.calls() if c["method"] != "GET"]
        assert [method for method, _ in writes] == ["POST", "POST"]
        assert writes[0][1].endswith("/rulesets")
        assert writes[1][1].endswith("/rules")
        assert refs(await world.entrypoint()) == [ours("a")]
    finally:
        await world.cloudflare.aclose()


async def test_a_rebuilt_cluster_finds_its_rule_by_ref(world: World) -> None:
    await world.converge(waf("a", 10))
    stored = world.kube.objects[("WAFCustomRule", NS, "a")]
    stored["metadata"] = {k: v for k, v in stored["metadata"].items() if k not in ("labels", "annotations")}
    stored.pop("status")
    world.runtime = Runtime(world.kube, world.cloudflare, KINDS, SECRETS)
    stored = await world.reconcile("WAFCustomRule", "a")
    assert stored["status"]["conditions"][0]["reason"] == "Synced"
    assert "kflare.dev/adopted" not in (stored["metadata"].get("annotations") or {})
    assert refs(await world.entrypoint()).count(ours("a")) == 1


async def test_a_managed_ruleset_deploys_once_and_hands_back_the_default_when_deleted() -> None:
    world = World([])
    try:
        await world.converge(managed("free"))
        held = await world.entrypoint(MANAGED)
        assert [r["action_parameters"]["id"] for r in held["rules"]] == [FREE_MANAGED]
        world.kube.add(managed("again"))
        second = await world.reconcile("ManagedRuleset", "again")
        assert second["status"]["conditions"][0]["reason"] == "RulesetConflict"
        world.kube.objects[("ManagedRuleset", NS, "free")]["spec"]["enabled"] = False
        await world.reconcile("ManagedRuleset", "free")
        disabled = await world.entrypoint(MANAGED)
        assert [(r["action_parameters"]["id"], r["enabled"]) for r in disabled["rules"]] == [(FREE_MANAGED, False)]
        # The one in conflict holds no rule: deleting it changes nothing; deleting the last one hands the zone back.
        mark_deleted(world.kube, "ManagedRuleset", "again", NS)
        await world.runtime.reconcile("ManagedRuleset", "again", NS)
        assert await world.entrypoint(MANAGED) == disabled
        mark_deleted(world.kube, "ManagedRuleset", "free", NS)
        await world.runtime.reconcile("ManagedRuleset", "free", NS)
        reply = await world.cloudflare.http.get(MANAGED, headers={"Authorization": f"Bearer {TOKEN}"})
        assert reply.status_code == 404, "no entry point: Cloudflare's default applies again"
    finally:
        await world.cloudflare.aclose()


async def test_a_managed_ruleset_a_foreign_rule_deploys_is_a_conflict() -> None:
    foreign = {"ref": "theirs", "action": "execute", "expression": "true", "action_parameters": {"id": FREE_MANAGED}}
    world = World([{"phase": PHASE_MANAGED, "rules": [foreign]}])
    try:
        world.kube.add(managed("free"))
        stored = await world.reconcile("ManagedRuleset", "free")
        assert stored["status"]["conditions"][0]["reason"] == "RulesetConflict"
        assert refs(await world.entrypoint(MANAGED)) == ["theirs"]
    finally:
        await world.cloudflare.aclose()


def test_moves_are_the_fewest_and_only_of_kflares_rules() -> None:
    from app.cloudflare.models import RulesetRule

    def rule(ref: str) -> RulesetRule:
        return RulesetRule(id=f"id-{ref}", ref=ref)

    keys = {r: (i, "", r) for i, r in enumerate("abcde")}
    rules = [rule("x"), rule("e"), rule("a"), rule("y"), rule("b"), rule("c"), rule("d")]
    planned = moves(rules, keys)
    assert planned == [("id-e", {"after": "id-d"})]
    assert moves([rule("b"), rule("a")], keys) in ([("id-a", {"before": "id-b"})], [("id-b", {"after": "id-a"})])
    assert moves([rule("a"), rule("x"), rule("b")], keys) == []


async def test_a_rule_placed_next_to_a_neighbour_deleted_outside_kflare_is_placed_again(world: World) -> None:
    await world.converge(waf("a", 10))
    ruleset = await world.entrypoint()
    neighbour = next(r for r in ruleset["rules"] if r["ref"] == ours("a"))
    await world.cloudflare.http.delete(
        f"/zones/{ZONE_ID}/rulesets/{ruleset['id']}/rules/{neighbour['id']}",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    await world.converge(waf("b", 20))  # placed after a, which the shared copy still shows
    assert ours("b") in refs(await world.entrypoint())


@pytest.mark.parametrize(("status", "outcome"), [(503, {"retry": True}), (429, {"requeue_after": 1.0, "failed": True})])
async def test_cloudflare_failing_while_a_rule_connects_is_an_api_error_retried(
    world: World, status: int, outcome: dict[str, Any]
) -> None:
    """A rule reads its zone's entry point before anything else: that read failing is reported on the resource
    (Ready=False APIError) and retried, like any Cloudflare failure, not left as a crashed reconcile."""
    fault = {"route": "rulesets/phases", "kind": "status", "status": status, "retry_after": 1, "count": 1}
    await world.cloudflare.http.post("http://emulator/__emulator/faults", json=fault)
    world.kube.add(waf("a", 10))
    result = await world.runtime.reconcile("WAFCustomRule", "a", NS)
    for name, value in outcome.items():
        assert getattr(result, name) == value
    stored = world.kube.get("WAFCustomRule", "a", NS)
    assert stored is not None
    (ready_condition,) = stored["status"]["conditions"]
    assert (ready_condition["status"], ready_condition["reason"]) == ("False", "APIError")
    await world.converge(waf("a", 10))
