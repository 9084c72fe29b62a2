"""A RedirectRule through the rules engine against the emulator: its status and query string setting, given inside
`fromValue` as Cloudflare nests them or beside it as kflare v0.2 did, make the same Cloudflare rule, so moving a
manifest from one form to the other writes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.api.rules.common import PHASE_REDIRECT
from tests.unit.reconcilers.test_rulesets import NS, ZONE_ID, World, ours

REDIRECT = f"/zones/{ZONE_ID}/rulesets/phases/{PHASE_REDIRECT}/entrypoint"
TARGET = {"targetURL": {"value": "https://example.com/"}}


def redirect(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "kind": "RedirectRule",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"zoneRef": {"name": "zone"}, "expression": f'http.request.uri.path eq "/{name}"', **spec},
    }


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = World([])
    yield w
    await w.cloudflare.aclose()


async def test_both_forms_make_the_same_cloudflare_rule(world: World) -> None:
    await world.converge(
        redirect("beside", fromValue=TARGET, statusCode=302, preserveQueryString=True),
        redirect("nested", fromValue={**TARGET, "statusCode": 302, "preserveQueryString": True}),
        redirect("defaults", fromValue=TARGET),
    )
    held = {rule["ref"]: rule["action_parameters"] for rule in (await world.entrypoint(REDIRECT))["rules"]}
    target = {"value": "https://example.com/"}
    told = {"from_value": {"target_url": target, "status_code": 302, "preserve_query_string": True}}
    assert held == {
        ours("beside", "RedirectRule"): told,
        ours("nested", "RedirectRule"): told,
        ours("defaults", "RedirectRule"): {
            "from_value": {"target_url": target, "status_code": 301, "preserve_query_string": False}
        },
    }


async def test_moving_a_manifest_to_cloudflares_nesting_writes_nothing(world: World) -> None:
    await world.converge(redirect("moved", fromValue=TARGET, statusCode=307, preserveQueryString=True))
    version = (await world.entrypoint(REDIRECT))["version"]
    calls = len(await world.calls())
    moved = redirect("moved", fromValue={**TARGET, "statusCode": 307, "preserveQueryString": True})
    world.kube.objects[("RedirectRule", NS, "moved")]["spec"] = moved["spec"]
    stored = await world.reconcile("RedirectRule", "moved")
    assert stored["status"]["conditions"][0]["reason"] == "Synced"
    assert [c for c in (await world.calls())[calls:] if c["method"] != "GET"] == []
    assert (await world.entrypoint(REDIRECT))["version"] == version
