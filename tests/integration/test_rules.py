"""The rule kinds from `kubectl apply` to the zone's rulesets: the controller as its own process, the real API server
and the emulator. Every example converges; drift is corrected with one read of the entry point per (zone, phase) per
drift round; the CRDs refuse what Cloudflare would; a zone waits for its rules.

The ruleset engine itself (priority order beside rules made outside kflare, which are never touched; updates, moves
and deletions; a managed ruleset deployed once per zone) is shown in process, in tests/unit/reconcilers/
test_rulesets.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client.exceptions import ApiException

from reconcilers.rulesets import ref_for
from tests.fixtures.controller import ControllerProcess, Kflare
from tests.fixtures.emulator import EmulatorProcess
from tests.helpers import eventually
from tests.kinds import cf, cf_raw

pytestmark = pytest.mark.integration

CUSTOM = "http_request_firewall_custom"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "40-rules.yaml"
LIST_EXAMPLE = EXAMPLES.with_name("35-ip-list.yaml")


def entrypoint(emulator: EmulatorProcess, zone_id: str, phase: str) -> dict[str, Any] | None:
    reply = cf_raw(emulator, "GET", f"/zones/{zone_id}/rulesets/phases/{phase}/entrypoint")
    if reply.status_code == 404:
        return None
    result: dict[str, Any] = reply.json()["result"]
    return result


def seed_foreign(emulator: EmulatorProcess, zone_id: str, phase: str = CUSTOM) -> dict[str, Any]:
    """A rule made outside kflare, in an entry point made outside kflare."""
    rule = {"ref": "made-by-hand", "action": "block", "expression": 'http.host eq "hand.example"'}
    made = cf(
        emulator,
        "POST",
        f"/zones/{zone_id}/rulesets",
        json={"name": "default", "kind": "zone", "phase": phase, "rules": [rule]},
    )
    return dict(made["rules"][0])


def waf(name: str, priority: int, **spec: Any) -> dict[str, Any]:
    return {
        "kind": "WAFCustomRule",
        "metadata": {"name": name},
        "spec": {
            "zoneRef": {"name": "zone"},
            "expression": f'http.request.uri.path eq "/{name}"',
            "action": "block",
            "priority": priority,
            **spec,
        },
    }


async def test_every_example_rule_converges_in_a_free_zone(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone("rules.example")
    documents = [d for d in yaml.safe_load_all(EXAMPLES.read_text(encoding="utf-8")) if d]
    for document in documents:  # the WAF rule uses the list: it waits for it, applied last
        document["metadata"] = {"name": document["metadata"]["name"]}
        document["spec"]["zoneRef"] = {"name": "zone"}
        await kflare.apply(document)
    (office,) = yaml.safe_load_all(LIST_EXAMPLE.read_text(encoding="utf-8"))
    office["metadata"] = {"name": office["metadata"]["name"]}
    office["spec"]["accountRef"] = {"name": kflare.account}
    await kflare.apply(office)
    for document in documents:
        resource = await kflare.ready(document["kind"], document["metadata"]["name"], reason="Synced")
        meta = resource["status"]["cloudflareMetadata"]
        ref = ref_for(document["kind"], kflare.namespace, document["metadata"]["name"])
        assert meta["ref"] == ref
        assert meta["zoneID"] == zone_id
    redirect = next(d for d in documents if d["kind"] == "RedirectRule")
    ruleset = entrypoint(fresh_emulator, zone_id, "http_request_dynamic_redirect")
    assert ruleset is not None
    (rule,) = ruleset["rules"]
    assert rule["action_parameters"]["from_value"]["status_code"] == 301, "301 unless statusCode says otherwise"
    assert rule["action_parameters"]["from_value"]["preserve_query_string"] is True
    assert rule["expression"] == redirect["spec"]["expression"]


async def test_a_rule_edited_in_cloudflare_is_corrected_with_one_read_per_phase_per_round(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone("drift.example")
    seed_foreign(fresh_emulator, zone_id)
    for index, name in enumerate("abcd"):  # with the foreign rule, the 5 a Free zone allows
        await kflare.apply(waf(name, index))
    for name in "abcd":
        await kflare.ready("WAFCustomRule", name)
    await kflare.apply(
        {
            "kind": "OriginRule",
            "metadata": {"name": "port"},
            "spec": {"zoneRef": {"name": "zone"}, "expression": "true", "origin": {"port": 8443}},
        }
    )
    await kflare.ready("OriginRule", "port")
    ruleset = entrypoint(fresh_emulator, zone_id, CUSTOM)
    assert ruleset is not None
    mine = next(r for r in ruleset["rules"] if r["ref"] == ref_for("WAFCustomRule", kflare.namespace, "c"))
    edited = {k: mine[k] for k in ("ref", "expression", "description", "enabled")} | {"action": "js_challenge"}
    cf(fresh_emulator, "PATCH", f"/zones/{zone_id}/rulesets/{ruleset['id']}/rules/{mine['id']}", json=edited)

    async def corrected() -> bool:
        current = entrypoint(fresh_emulator, zone_id, CUSTOM) or {"rules": []}
        return any(r["id"] == mine["id"] and r["action"] == "block" for r in current["rules"])

    await eventually(corrected, timeout=20, what="the edited rule to be corrected")
    since = time.time()

    async def rounds() -> list[dict[str, Any]]:
        calls = fresh_emulator.calls(since=since, path="/rulesets")
        reads = [i for i, c in enumerate(calls) if c["path"].endswith(f"/phases/{CUSTOM}/entrypoint")]
        return calls[: reads[2] + 1] if len(reads) >= 3 else []

    calls = await eventually(rounds, timeout=30, what="three drift rounds reading the custom phase")
    paths = [(c["method"], c["path"].rsplit("/phases/", 1)[-1]) for c in calls]
    assert {method for method, _ in paths} == {"GET"}, "a drift round of rules in sync writes nothing"
    custom = [p for p in paths if p[1] == f"{CUSTOM}/entrypoint"]
    origin = [p for p in paths if p[1] == "http_request_origin/entrypoint"]
    assert len(custom) == 3, "one read of the custom phase per round for its four rules"
    assert len(origin) <= 4, "one read of the origin phase per round"


async def test_a_rate_limit_without_cf_colo_id_is_refused_by_the_api_server(kflare_crds: None, kflare: Kflare) -> None:
    manifest = {
        "kind": "RateLimitRule",
        "metadata": {"name": "no-colo"},
        "spec": {
            "zoneRef": {"name": "zone"},
            "expression": "true",
            "ratelimit": {"characteristics": ["ip.src"], "period": 10, "requestsPerPeriod": 5},
        },
    }
    with pytest.raises(ApiException) as refused:
        await kflare.apply(manifest)
    assert refused.value.status == 422
    assert "characteristics must include cf.colo.id" in str(refused.value.body)


REDIRECT = "http_request_dynamic_redirect"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def redirect(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "kind": "RedirectRule",
        "metadata": {"name": name},
        "spec": {"zoneRef": {"name": "zone"}, "expression": f'http.host eq "{name}.redirect.example"', **spec},
    }


async def test_a_redirect_nested_as_cloudflare_nests_it_is_stored_written_and_shown(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    """No webhook is registered here: the CRD alone keeps the nested fields, fills in no default beside them (which
    would differ from them), and refuses a setting given twice with two values."""
    zone_id = await kflare.ready_zone("redirect.example")
    target = {"targetURL": {"value": "https://example.com/"}}
    nested = {**target, "statusCode": 308, "preserveQueryString": True}
    stored = await kflare.apply(redirect("nested", fromValue=nested))
    assert stored["spec"]["fromValue"] == nested
    assert not {"statusCode", "preserveQueryString"} & set(stored["spec"])
    await kflare.apply(redirect("beside", fromValue=target, statusCode=302))
    await kflare.ready("RedirectRule", "nested", reason="Synced")
    await kflare.ready("RedirectRule", "beside", reason="Synced")
    ruleset = entrypoint(fresh_emulator, zone_id, REDIRECT)
    assert ruleset is not None
    held = {rule["ref"]: rule["action_parameters"]["from_value"] for rule in ruleset["rules"]}
    url = {"value": "https://example.com/"}
    assert held == {
        ref_for("RedirectRule", kflare.namespace, "nested"): {
            "target_url": url,
            "status_code": 308,
            "preserve_query_string": True,
        },
        ref_for("RedirectRule", kflare.namespace, "beside"): {
            "target_url": url,
            "status_code": 302,
            "preserve_query_string": False,
        },
    }

    table = await kflare.api.call_api(
        f"/apis/kflare.dev/v1alpha1/namespaces/{kflare.namespace}/redirectrules",
        "GET",
        header_params={"Accept": TABLE},
        response_types_map={200: "object"},
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
    )
    column = [c["name"] for c in table["columnDefinitions"]].index("Status Code")
    assert {row["cells"][0]: row["cells"][column] for row in table["rows"]} == {"nested": 308, "beside": 302}

    with pytest.raises(ApiException) as refused:
        await kflare.apply(redirect("twice", fromValue=nested, statusCode=301))
    assert refused.value.status == 422
    assert "spec.fromValue.statusCode" in str(refused.value.body)
    assert "fromValue.statusCode and statusCode differ: set it once, in fromValue" in str(refused.value.body)
    await kflare.apply(redirect("alike", fromValue=nested, statusCode=308, preserveQueryString=True))


async def test_a_zone_waits_for_its_rules(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await kflare.ready_zone("wait.example")
    await kflare.apply(waf("a", 1))
    await kflare.ready("WAFCustomRule", "a")
    await kflare.delete("Zone", "zone")
    await kflare.ready("Zone", "zone", reason="InUse", status="False")
    await kflare.delete("WAFCustomRule", "a")
    await kflare.gone("WAFCustomRule", "a")
    await kflare.gone("Zone", "zone")
