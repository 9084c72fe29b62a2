"""Rulesets through the official SDK: phase entry points, rules one at a time with positions, refs, versions, the
managed phase's default and the Free plan's limits."""

from __future__ import annotations

from typing import Any

import cloudflare
import pytest
from cloudflare.types.rulesets import PhaseUpdateResponse

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorProcess

CUSTOM = "http_request_firewall_custom"
FREE_MANAGED = "77454fe2d30c4220b5701f6fdfb893ba"


def codes(exc: cloudflare.APIStatusError) -> list[int]:
    return [e.code for e in exc.errors]


def checked(answer: object) -> Any:
    """A ruleset write's answer (a plain dict in the SDK), checked against the SDK's ruleset model."""
    return conforms(answer, PhaseUpdateResponse)


def block(expression: str, **fields: Any) -> dict[str, Any]:
    return {"action": "block", "expression": expression, **fields}


def test_entrypoint_is_404_until_written(cf: cloudflare.Cloudflare, zone: Any) -> None:
    with pytest.raises(cloudflare.NotFoundError) as missing:
        cf.rulesets.phases.get(ruleset_phase=CUSTOM, zone_id=zone.id)
    assert [(e.code, e.message) for e in missing.value.errors] == [
        (10003, f"could not find entrypoint ruleset in the {CUSTOM} phase")
    ]
    written = checked(
        cf.rulesets.phases.update(
            ruleset_phase=CUSTOM, zone_id=zone.id, rules=[block('http.host eq "a.example.com"', ref="mine")]
        )
    )
    written = checked(written)
    assert (written.phase, written.kind, written.version) == (CUSTOM, "zone", "1")
    assert [(r.ref, r.expression) for r in written.rules] == [("mine", 'http.host eq "a.example.com"')]
    fetched = cf.rulesets.phases.get(ruleset_phase=CUSTOM, zone_id=zone.id)
    conforms(fetched)
    assert fetched.id == written.id


def test_rules_one_at_a_time_with_positions(cf: cloudflare.Cloudflare, zone: Any) -> None:
    base = checked(
        cf.rulesets.phases.update(ruleset_phase=CUSTOM, zone_id=zone.id, rules=[block("ip.src eq 192.0.2.1")])
    )
    foreign = base.rules[0].id
    assert base.rules[0].ref == foreign, "ref defaults to the rule's ID"

    first = checked(
        cf.rulesets.rules.create(
            ruleset_id=base.id,
            zone_id=zone.id,
            action="block",
            expression="ip.src eq 192.0.2.2",
            ref="a",
            position={"before": ""},
        )
    )
    assert [r.ref for r in first.rules] == ["a", foreign]
    after = checked(
        cf.rulesets.rules.create(
            ruleset_id=base.id,
            zone_id=zone.id,
            action="block",
            expression="ip.src eq 192.0.2.3",
            ref="b",
            position={"after": foreign},
        )
    )
    assert [r.ref for r in after.rules] == ["a", foreign, "b"]
    indexed = checked(
        cf.rulesets.rules.create(
            ruleset_id=base.id,
            zone_id=zone.id,
            action="managed_challenge",
            expression="ip.src eq 192.0.2.4",
            ref="c",
            position={"index": 2},
        )
    )
    assert [r.ref for r in indexed.rules] == ["a", "c", foreign, "b"]
    assert indexed.version == "4"

    rule_b = next(r for r in indexed.rules if r.ref == "b")
    moved = checked(
        cf.rulesets.rules.edit(rule_id=rule_b.id or "", ruleset_id=base.id, zone_id=zone.id, position={"index": 1})
    )
    assert [r.ref for r in moved.rules] == ["b", "a", "c", foreign]
    moved_b = next(r for r in moved.rules if r.ref == "b")
    assert moved_b.version == rule_b.version, "moving a rule does not change its version"

    edited = checked(
        cf.rulesets.rules.edit(
            rule_id=rule_b.id or "",
            ruleset_id=base.id,
            zone_id=zone.id,
            action="block",
            expression="ip.src eq 198.51.100.1",
            ref="b",
        )
    )
    edited_b = next(r for r in edited.rules if r.ref == "b")
    assert (edited_b.expression, edited_b.version) == ("ip.src eq 198.51.100.1", "2")
    assert [r.ref for r in edited.rules] == ["b", "a", "c", foreign], "an edit without position stays in place"

    deleted = checked(cf.rulesets.rules.delete(rule_id=rule_b.id or "", ruleset_id=base.id, zone_id=zone.id))
    assert [r.ref for r in deleted.rules] == ["a", "c", foreign]


def test_refs_are_unique_and_whole_puts_keep_ids_by_ref(cf: cloudflare.Cloudflare, zone: Any) -> None:
    ruleset = checked(
        cf.rulesets.phases.update(
            ruleset_phase=CUSTOM, zone_id=zone.id, rules=[block("ip.src eq 192.0.2.1", ref="one")]
        )
    )
    with pytest.raises(cloudflare.BadRequestError) as duplicate:
        cf.rulesets.rules.create(
            ruleset_id=ruleset.id, zone_id=zone.id, action="block", expression="ip.src eq 192.0.2.2", ref="one"
        )
    assert codes(duplicate.value) == [20021]
    again = checked(
        cf.rulesets.phases.update(
            ruleset_phase=CUSTOM,
            zone_id=zone.id,
            rules=[block("ip.src eq 192.0.2.9", ref="two"), block("ip.src eq 192.0.2.1", ref="one")],
        )
    )
    assert [r.ref for r in again.rules] == ["two", "one"]
    assert next(r for r in again.rules if r.ref == "one").id == ruleset.rules[0].id


def test_versions(cf: cloudflare.Cloudflare, zone: Any) -> None:
    first = checked(
        cf.rulesets.phases.update(ruleset_phase=CUSTOM, zone_id=zone.id, rules=[block("ip.src eq 192.0.2.1")])
    )
    cf.rulesets.rules.create(ruleset_id=first.id, zone_id=zone.id, action="block", expression="ip.src eq 192.0.2.2")
    listed = list(cf.rulesets.versions.list(ruleset_id=first.id, zone_id=zone.id))
    assert [v.version for v in listed] == ["2", "1"]
    for version in listed:
        conforms(version)
    old = cf.rulesets.versions.get(ruleset_version="1", ruleset_id=first.id, zone_id=zone.id)
    conforms(old)
    assert len(old.rules) == 1
    via_phase = list(cf.rulesets.phases.versions.list(ruleset_phase=CUSTOM, zone_id=zone.id))
    assert [v.version for v in via_phase] == ["2", "1"]


def test_create_list_get_update_delete(cf: cloudflare.Cloudflare, zone: Any) -> None:
    created = checked(
        cf.rulesets.create(
            kind="zone",
            name="redirects",
            phase="http_request_dynamic_redirect",
            zone_id=zone.id,
            rules=[
                {
                    "action": "redirect",
                    "expression": 'http.request.uri.path eq "/old"',
                    "action_parameters": {
                        "from_value": {"target_url": {"value": "https://example.com/new"}, "status_code": 301}
                    },
                }
            ],
        )
    )
    with pytest.raises(cloudflare.BadRequestError) as second:
        cf.rulesets.create(kind="zone", name="again", phase="http_request_dynamic_redirect", zone_id=zone.id, rules=[])
    assert codes(second.value) == [20217]
    assert second.value.errors[0].source is not None
    assert second.value.errors[0].source.pointer == "/kind"

    listed = list(cf.rulesets.list(zone_id=zone.id))
    for item in listed:
        conforms(item)
    assert {(r.kind, r.phase) for r in listed} == {
        ("zone", "http_request_dynamic_redirect"),
        ("managed", "http_request_firewall_managed"),
    }
    assert next(r for r in listed if r.kind == "managed").id == FREE_MANAGED

    updated = checked(cf.rulesets.update(ruleset_id=created.id, zone_id=zone.id, rules=[], description="none left"))
    assert (updated.rules, updated.description, updated.version) == ([], "none left", "2")
    cf.rulesets.delete(ruleset_id=created.id, zone_id=zone.id)
    with pytest.raises(cloudflare.NotFoundError):
        cf.rulesets.get(ruleset_id=created.id, zone_id=zone.id)


def test_managed_phase_default_and_deployments(cf: cloudflare.Cloudflare, zone: Any) -> None:
    managed = "http_request_firewall_managed"
    with pytest.raises(cloudflare.NotFoundError):
        cf.rulesets.phases.get(ruleset_phase=managed, zone_id=zone.id)
    assert cf.rulesets.get(ruleset_id=FREE_MANAGED, zone_id=zone.id).kind == "managed"
    execute = {"action": "execute", "expression": "true", "action_parameters": {"id": FREE_MANAGED}}
    deployed = checked(cf.rulesets.phases.update(ruleset_phase=managed, zone_id=zone.id, rules=[execute]))
    assert deployed.rules[0].action_parameters.version == "latest"  # type: ignore[union-attr]
    with pytest.raises(cloudflare.BadRequestError):
        cf.rulesets.phases.update(ruleset_phase=managed, zone_id=zone.id, rules=[execute, execute])
    paid_only = {
        "action": "execute",
        "expression": "true",
        "action_parameters": {"id": "efb7b8c949ac4650a09736fc376e9aee"},
    }
    with pytest.raises(cloudflare.BadRequestError):
        cf.rulesets.phases.update(ruleset_phase=managed, zone_id=zone.id, rules=[paid_only])
    with pytest.raises(cloudflare.BadRequestError):
        cf.rulesets.update(ruleset_id=FREE_MANAGED, zone_id=zone.id, rules=[])
    # Deleting the entry point hands the zone back to Cloudflare's default.
    cf.rulesets.delete(ruleset_id=deployed.id, zone_id=zone.id)
    with pytest.raises(cloudflare.NotFoundError):
        cf.rulesets.phases.get(ruleset_phase=managed, zone_id=zone.id)


def test_free_plan_limits(cf: cloudflare.Cloudflare, zone: Any, fresh_emulator: EmulatorProcess) -> None:
    five = [block(f"ip.src eq 192.0.2.{i}") for i in range(5)]
    cf.rulesets.phases.update(ruleset_phase=CUSTOM, zone_id=zone.id, rules=five)
    with pytest.raises(cloudflare.BadRequestError) as sixth:
        cf.rulesets.phases.update(ruleset_phase=CUSTOM, zone_id=zone.id, rules=[*five, block("ip.src eq 192.0.2.9")])
    assert codes(sixth.value) == [20216]
    with pytest.raises(cloudflare.BadRequestError) as regex:
        cf.rulesets.phases.update(ruleset_phase=CUSTOM, zone_id=zone.id, rules=[block('http.host matches "^a"')])
    assert codes(regex.value) == [20021]
    with pytest.raises(cloudflare.BadRequestError):
        cf.rulesets.phases.update(
            ruleset_phase=CUSTOM, zone_id=zone.id, rules=[{"action": "log", "expression": "true"}]
        )

    # The three transform phases share ten rules.
    rewrite = {
        "action": "rewrite",
        "expression": "true",
        "action_parameters": {"headers": {"X-A": {"operation": "remove"}}},
    }
    cf.rulesets.phases.update(ruleset_phase="http_request_late_transform", zone_id=zone.id, rules=[rewrite] * 6)
    with pytest.raises(cloudflare.BadRequestError) as shared:
        cf.rulesets.phases.update(ruleset_phase="http_response_headers_transform", zone_id=zone.id, rules=[rewrite] * 5)
    assert codes(shared.value) == [20216]

    free_limit = {
        "action": "block",
        "expression": 'http.request.uri.path eq "/login"',
        "ratelimit": {
            "characteristics": ["cf.colo.id", "ip.src"],
            "period": 10,
            "requests_per_period": 5,
            "mitigation_timeout": 10,
        },
    }
    cf.rulesets.phases.update(ruleset_phase="http_ratelimit", zone_id=zone.id, rules=[free_limit])
    longer = {**free_limit, "ratelimit": {**free_limit["ratelimit"], "period": 60}}
    with pytest.raises(cloudflare.BadRequestError):
        cf.rulesets.phases.update(ruleset_phase="http_ratelimit", zone_id=zone.id, rules=[longer])
    with pytest.raises(cloudflare.BadRequestError):
        cf.rulesets.phases.update(ruleset_phase="http_ratelimit", zone_id=zone.id, rules=[free_limit, free_limit])

    fresh_emulator.seed({"zones": [{"name": "pro.example", "plan": "pro"}]})
    pro = next(iter(cf.zones.list(name="pro.example")))
    regex_ok = checked(
        cf.rulesets.phases.update(ruleset_phase=CUSTOM, zone_id=pro.id, rules=[block('http.host matches "^a"')])
    )
    assert len(regex_ok.rules) == 1


def test_dry_run_keeps_nothing(cf: cloudflare.Cloudflare, zone: Any) -> None:
    answer = cf.rulesets.phases.with_raw_response.update(
        ruleset_phase=CUSTOM, zone_id=zone.id, rules=[block("ip.src eq 192.0.2.1")], extra_query={"dry_run": "true"}
    )
    assert answer.http_response.json()["result"] is None
    with pytest.raises(cloudflare.NotFoundError):
        cf.rulesets.phases.get(ruleset_phase=CUSTOM, zone_id=zone.id)


def test_dump_seeds_back(cf: cloudflare.Cloudflare, zone: Any, fresh_emulator: EmulatorProcess) -> None:
    ruleset = checked(
        cf.rulesets.phases.update(ruleset_phase=CUSTOM, zone_id=zone.id, rules=[block("ip.src eq 192.0.2.1")])
    )
    cf.rulesets.rules.create(ruleset_id=ruleset.id, zone_id=zone.id, action="block", expression="ip.src eq 192.0.2.2")
    dump = fresh_emulator.state_dump()
    fresh_emulator.reset()
    fresh_emulator.seed(dump)
    assert fresh_emulator.state_dump() == dump


def test_a_cache_rule_varies_by_header_in_cloudflares_shape(cf: cloudflare.Cloudflare, zone: Any) -> None:
    phase = "http_request_cache_settings"
    vary = {
        "default": {"action": "passthrough"},
        "headers": {
            "accept-language": {"action": "normalize", "languages": ["en", "de"]},
            "accept": {"action": "normalize", "media_types": ["image/webp", "image/avif"]},
            "x-device": {"action": "bypass"},
        },
    }
    rule = {"action": "set_cache_settings", "expression": "true", "action_parameters": {"cache": True, "vary": vary}}
    written = checked(cf.rulesets.phases.update(ruleset_phase=phase, zone_id=zone.id, rules=[rule]))
    held = written.rules[0].action_parameters
    assert held.vary.default.action == "passthrough"
    assert held.vary.headers["accept-language"].languages == ["en", "de"]
    assert held.vary.headers["accept"].media_types == ["image/webp", "image/avif"]

    for wrong in (
        {"headers": {"accept": {"action": "bypass"}}},  # no default
        {"default": {"action": "sometimes"}},
        {"default": {"action": "bypass"}, "headers": {"Accept": {"action": "bypass"}}},
        {"default": {"action": "bypass"}, "headers": {"accept": {"action": "normalize", "languages": ["en"]}}},
    ):
        with pytest.raises(cloudflare.BadRequestError):
            cf.rulesets.rules.create(
                ruleset_id=written.id,
                zone_id=zone.id,
                action="set_cache_settings",
                expression="true",
                action_parameters={"cache": True, "vary": wrong},  # type: ignore[typeddict-item]
            )


def test_a_redirect_keeps_its_status_and_query_string_inside_from_value(cf: cloudflare.Cloudflare, zone: Any) -> None:
    phase = "http_request_dynamic_redirect"
    from_value = {"target_url": {"value": "https://example.com/"}, "status_code": 308, "preserve_query_string": True}
    rule = {"action": "redirect", "expression": "true", "action_parameters": {"from_value": from_value}}
    written = checked(cf.rulesets.phases.update(ruleset_phase=phase, zone_id=zone.id, rules=[rule]))
    held = cf.rulesets.phases.get(ruleset_phase=phase, zone_id=zone.id).rules[0].action_parameters.from_value
    assert (held.target_url.value, held.status_code, held.preserve_query_string) == ("https://example.com/", 308, True)

    for wrong, pointer in (
        ({**from_value, "status_code": 200}, "/action_parameters/from_value/status_code"),
        ({**from_value, "preserve_query_string": "yes"}, "/action_parameters/from_value/preserve_query_string"),
        ({"status_code": 301}, "/action_parameters/from_value/target_url"),
    ):
        with pytest.raises(cloudflare.BadRequestError) as refused:
            cf.rulesets.rules.create(
                ruleset_id=written.id,
                zone_id=zone.id,
                action="redirect",
                expression="true",
                action_parameters={"from_value": wrong},  # type: ignore[typeddict-item]
            )
        assert codes(refused.value) == [20021]
        assert refused.value.errors[0].source is not None
        assert refused.value.errors[0].source.pointer == pointer
