"""The rule kinds' models: the manifests of the examples pass, and what Cloudflare would refuse is refused with the
field's path."""

from __future__ import annotations

from typing import Any

import pytest

from app.api.crds import crd
from app.api.rules.security import RateLimitRule
from app.api.rules.transform import RedirectRule
from app.api.validation import validate_object
from tests.unit.api import samples


def manifest(kind: str, **spec: Any) -> dict[str, Any]:
    obj = samples.load(samples.RULES[kind])
    obj["spec"].update(spec)
    obj["spec"] = {k: v for k, v in obj["spec"].items() if v is not None}
    return obj


@pytest.mark.parametrize("kind", sorted(samples.RULES))
def test_the_examples_are_valid(kind: str) -> None:
    assert validate_object(kind, samples.load(samples.RULES[kind])) == []


def paths(kind: str, **spec: Any) -> list[str]:
    return [f"{e.path}: {e.message}" for e in validate_object(kind, manifest(kind, **spec))]


def test_rate_limits_count_per_data_center_and_block_long_enough() -> None:
    ratelimit = {"characteristics": ["ip.src"], "period": 60, "requestsPerPeriod": 5, "mitigationTimeout": 30}
    assert paths("RateLimitRule", ratelimit=ratelimit) == [
        "spec.ratelimit.characteristics: characteristics must include cf.colo.id",
        "spec.ratelimit.mitigationTimeout: mitigationTimeout must be 0 or at least the period",
    ]
    ratelimit = {**ratelimit, "characteristics": ["cf.colo.id", "ip.src"], "mitigationTimeout": 0}
    assert paths("RateLimitRule", ratelimit=ratelimit) == []
    rules = crd(RateLimitRule)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    characteristics = rules["properties"]["spec"]["properties"]["ratelimit"]["properties"]["characteristics"]
    assert characteristics["x-kubernetes-validations"][0]["rule"] == "'cf.colo.id' in self", "the API server refuses it"


def test_transform_rules_take_what_their_type_transforms() -> None:
    assert paths("TransformRule", type="requestHeaders", uri=None) == [
        "spec.headers: a requestHeaders rule needs headers"
    ]
    headers = [{"name": "X-A", "operation": "set", "value": "1"}]
    assert paths("TransformRule", type="requestHeaders", headers=headers) == [
        "spec.uri: a requestHeaders rule changes headers, not uri"
    ]
    added = [{"name": "X-A", "operation": "add", "value": "1"}]
    assert paths("TransformRule", type="requestHeaders", uri=None, headers=added) == [
        "spec.headers[0].operation: request headers are set or removed, not added"
    ]


def test_a_redirect_is_301_without_its_query_string_unless_told() -> None:
    obj = manifest("RedirectRule")
    obj["spec"]["fromValue"].pop("preserveQueryString")
    parsed = RedirectRule.model_validate(obj)
    assert parsed.spec.redirect_status_code == 301
    assert parsed.spec.redirect_preserves_query_string is False


TARGET = {"targetURL": {"value": "https://example.com/"}}


@pytest.mark.parametrize(
    "spec",
    [
        {"fromValue": {**TARGET, "statusCode": 302, "preserveQueryString": True}},
        {"fromValue": TARGET, "statusCode": 302, "preserveQueryString": True},
        {"fromValue": {**TARGET, "statusCode": 302}, "statusCode": 302, "preserveQueryString": True},
    ],
    ids=["in fromValue, as Cloudflare nests them", "beside fromValue, as kflare v0.2 did", "both, alike"],
)
def test_a_redirect_takes_its_status_and_query_string_in_from_value_or_beside_it(spec: dict[str, Any]) -> None:
    assert paths("RedirectRule", **spec) == []
    parsed = RedirectRule.model_validate(manifest("RedirectRule", **spec))
    assert (parsed.spec.redirect_status_code, parsed.spec.redirect_preserves_query_string) == (302, True)


def test_a_redirect_setting_given_in_both_places_differently_is_refused_at_its_path() -> None:
    spec = {
        "fromValue": {**TARGET, "statusCode": 302, "preserveQueryString": True},
        "statusCode": 301,
        "preserveQueryString": False,
    }
    assert paths("RedirectRule", **spec) == [
        "spec.fromValue.statusCode: 302 differs from spec.statusCode (301): set it once, in fromValue",
        "spec.fromValue.preserveQueryString: true differs from spec.preserveQueryString (false): set it once, in "
        "fromValue",
    ]


def test_the_redirect_crd_takes_both_places_and_refuses_them_differing() -> None:
    spec = crd(RedirectRule)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    nested = spec["properties"]["fromValue"]["properties"]
    assert nested["statusCode"]["enum"] == [301, 302, 303, 307, 308]
    assert nested["preserveQueryString"]["type"] == "boolean"
    for name in ("statusCode", "preserveQueryString"):
        # A default in either place would be filled in by the API server, and then differ from the other place.
        assert "default" not in nested[name]
        assert "default" not in spec["properties"][name]
    assert {r["fieldPath"]: r["rule"] for r in spec["x-kubernetes-validations"] if "fieldPath" in r} == {
        ".fromValue.statusCode": "!has(self.statusCode) || !has(self.fromValue.statusCode) || "
        "self.statusCode == self.fromValue.statusCode",
        ".fromValue.preserveQueryString": "!has(self.preserveQueryString) || !has(self.fromValue.preserveQueryString)"
        " || self.preserveQueryString == self.fromValue.preserveQueryString",
        ".zoneRef": "self.zoneRef == oldSelf.zoneRef",
    }
    columns = crd(RedirectRule)["spec"]["versions"][0]["additionalPrinterColumns"]
    assert columns[0]["jsonPath"] == ".spec['fromValue.statusCode','statusCode']", "either place shows"


def test_waf_parameters_go_with_their_action() -> None:
    assert paths("WAFCustomRule", action="skip") == [
        "spec.skip: a skip rule says what it skips: remainingCustomRules, phases or products"
    ]
    response = {"statusCode": 403, "content": "no"}
    assert paths("WAFCustomRule", action="managed_challenge", response=response) == [
        "spec.response: a custom response is only for the block action"
    ]


def test_ip_list_items_are_what_cloudflare_takes() -> None:
    items = [{"ip": "192.0.2.0/24"}, {"ip": "16.0.0.0/4"}, {"ip": "2001:db8::/128"}, {"ip": "192.0.2.0/24"}]
    problems = paths("IPList", items=items)
    assert problems == [
        "spec.items[1].ip: '16.0.0.0/4' is not a list entry: an IPv4 CIDR is /8 to /32",
        "spec.items[2].ip: '2001:db8::/128' is not a list entry: an IPv6 item is a CIDR from /12 to /64",
        "spec.items[3].ip: 192.0.2.0/24 is listed twice (items[0])",
    ]
