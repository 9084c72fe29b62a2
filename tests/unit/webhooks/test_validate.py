"""The decision for one admission request: what is denied, with which message, and what is always allowed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.api import KINDS, FieldError
from tests.unit.webhooks.reviews import SAMPLES, changed, model_named, request, sample
from webhooks.review import AdmissionRequest
from webhooks.validate import MAX_ERRORS, Decision, decide


def check(operation: str, obj: Any = None, old: Any = None, *, kind: str = "DNSRecord", **kw: Any) -> Decision:
    admission = AdmissionRequest.model_validate(request(operation, obj, old, kind=kind, **kw))
    return decide(model_named(kind if kind in SAMPLES else "DNSRecord"), admission)


def denied(decision: Decision, code: int = 422) -> str:
    assert not decision.allowed, "expected a denial"
    status = decision.status
    assert status is not None
    assert status.code == code
    assert status.reason == {422: "Invalid", 400: "BadRequest"}[code]
    assert status.message == decision.message
    return decision.message


def test_every_kind_has_a_sample() -> None:
    assert {m.info.kind for m in KINDS} == set(SAMPLES)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_a_valid_object_is_allowed(kind: str) -> None:
    decision = check("CREATE", sample(kind), kind=kind)
    assert decision.allowed
    assert decision.status is None


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_a_missing_spec_is_denied_for_every_kind(kind: str) -> None:
    obj = sample(kind)
    del obj["spec"]
    assert denied(check("CREATE", obj, kind=kind)) == "spec: required value"


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_an_unknown_field_is_denied_for_every_kind(kind: str) -> None:
    assert denied(check("CREATE", sample(kind, colour="blue"), kind=kind)) == 'spec.colour: unknown field "colour"'


class TestSchema:
    @pytest.mark.parametrize("ttl", [0, 2, 29, 86401])
    def test_ttl_outside_the_rule(self, ttl: int) -> None:
        message = denied(check("CREATE", sample("DNSRecord", ttl=ttl)))
        assert message.startswith("spec.ttl: ")
        assert "; " not in message

    def test_ttl_between_automatic_and_the_minimum(self) -> None:
        message = denied(check("CREATE", sample("DNSRecord", ttl=5)))
        assert message == "spec.ttl: ttl must be 1 (automatic) or between 30 and 86400"

    def test_wrong_type_and_missing_field(self) -> None:
        message = denied(check("CREATE", sample("DNSRecord", ttl="soon", zoneRef=None)))
        assert "spec.zoneRef: required value" in message
        assert "spec.ttl: " in message

    def test_enum(self) -> None:
        assert denied(check("CREATE", sample("DNSRecord", type="AXFR"))).startswith("spec.type: Input should be")

    def test_zone_domain_pattern(self) -> None:
        assert denied(check("CREATE", sample("Zone", name="not a domain"), kind="Zone")).startswith("spec.name: ")

    def test_account_id_format(self) -> None:
        message = denied(check("CREATE", sample("CloudflareAccount", accountID="xyz"), kind="CloudflareAccount"))
        assert message.startswith("spec.accountID: ")

    def test_nested_unknown_field_with_a_hint(self) -> None:
        message = denied(check("CREATE", sample("DNSRecord", zoneRef={"name": "z", "nmae": "y"})))
        assert message == 'spec.zoneRef.nmae: unknown field "nmae"'

    def test_wrong_object_kind(self) -> None:
        obj = sample("DNSRecord")
        obj["kind"] = "Zone"
        assert denied(check("CREATE", obj)) == "kind: must be DNSRecord, not 'Zone'"


class TestCrossFieldRules:
    def test_proxied_on_a_type_that_cannot_be(self) -> None:
        message = denied(check("CREATE", sample("DNSRecord", type="TXT", content="hello", proxied=True)))
        assert message == "spec.proxied: only A, AAAA and CNAME records can be proxied, not TXT"

    def test_priority_on_a_type_without_one(self) -> None:
        message = denied(check("CREATE", sample("DNSRecord", priority=10, proxied=None)))
        assert message == "spec.priority: only MX, SRV and URI records have a priority; remove it from this A record"

    def test_an_address_that_is_not_one(self) -> None:
        message = denied(check("CREATE", sample("DNSRecord", content="example.com")))
        assert message == "spec.content: an A record's content must be an IPv4 address"

    def test_a_redirect_nested_as_cloudflare_nests_it(self) -> None:
        target = {"targetURL": {"value": "https://example.com/"}}
        nested = sample("RedirectRule", fromValue={**target, "statusCode": 308, "preserveQueryString": True})
        assert check("CREATE", nested, kind="RedirectRule").allowed
        both = changed(nested, statusCode=308)
        assert check("CREATE", both, kind="RedirectRule").allowed, "the same value in both places is one value"
        differing = changed(nested, statusCode=302)
        assert denied(check("UPDATE", differing, nested, kind="RedirectRule")) == (
            "spec.fromValue.statusCode: 308 differs from spec.statusCode (302): set it once, in fromValue"
        )

    def test_every_problem_is_listed_once_separated_by_semicolons(self) -> None:
        obj = sample("DNSRecord", type="TXT", content="x", proxied=True, priority=5, extra=1)
        message = denied(check("CREATE", obj))
        assert message == "; ".join(
            [
                "spec.proxied: only A, AAAA and CNAME records can be proxied, not TXT",
                "spec.priority: only MX, SRV and URI records have a priority; remove it from this TXT record",
                'spec.extra: unknown field "extra"',
            ]
        )

    def test_a_long_list_is_cut_short(self) -> None:
        obj = sample("DNSRecord", **{f"field{i}": i for i in range(MAX_ERRORS + 7)})
        message = denied(check("CREATE", obj))
        assert message.endswith("; and 7 more")
        assert message.count("unknown field") == MAX_ERRORS


class TestImmutable:
    def test_changing_the_record_type(self) -> None:
        old = sample("DNSRecord")
        new = changed(old, type="TXT", content="hello", proxied=False)
        message = denied(check("UPDATE", new, old))
        assert message == (
            'spec.type: type is immutable, it cannot change from "A" to "TXT"'
            " (delete the DNSRecord and create it again instead)"
        )

    def test_changing_a_reference(self) -> None:
        old = sample("Zone")
        new = changed(old, accountRef={"name": "another-account"})
        message = denied(check("UPDATE", new, old, kind="Zone"))
        before = old["spec"]["accountRef"]["name"]
        assert message.startswith(
            f'spec.accountRef: accountRef is immutable, it cannot change from {{"name":"{before}"}}'
            ' to {"name":"another-account"}'
        )

    @pytest.mark.parametrize(
        ("kind", "field"), [(m.info.kind, f) for m in KINDS for f in m.info.immutable if "." not in f]
    )
    def test_every_immutable_field_of_every_kind(self, kind: str, field: str) -> None:
        old = sample(kind)
        value = old["spec"].setdefault(field, "eu")
        other = (
            {"name": "other"}
            if isinstance(value, dict)
            else "other.example.com"
            if field != "jurisdiction"
            else "fedramp"
        )
        new = changed(old, **{field: other})
        assert f"spec.{field}: {field} is immutable, it cannot change from " in denied(
            check("UPDATE", new, old, kind=kind)
        )

    def test_removing_an_immutable_field_says_unset(self) -> None:
        old = sample("DNSRecord")
        new = copy.deepcopy(old)
        del new["spec"]["name"]
        message = denied(check("UPDATE", new, old))
        assert "spec.name: required value" in message
        assert 'spec.name: name is immutable, it cannot change from "www.example.com" to unset' in message

    def test_immutable_and_schema_problems_together(self) -> None:
        old = sample("DNSRecord")
        new = changed(old, name="other.example.com", ttl=7)
        message = denied(check("UPDATE", new, old))
        assert message.startswith("spec.ttl: ttl must be 1 (automatic) or between 30 and 86400; spec.name: name is")

    def test_changing_a_mutable_field_is_allowed(self) -> None:
        old = sample("DNSRecord")
        assert check("UPDATE", changed(old, content="192.0.2.99", ttl=300), old).allowed


class TestNeverBlocked:
    def _invalid_stored(self) -> dict[str, Any]:
        # Stored before the rule existed, or written past a webhook that was down.
        return sample("DNSRecord", type="TXT", content="x", proxied=True, ttl=5)

    def test_status_only_update_of_an_invalid_object(self) -> None:
        old = self._invalid_stored()
        new = copy.deepcopy(old)
        new["status"] = {"conditions": [{"type": "Ready", "status": "False", "reason": "Invalid"}]}
        assert check("UPDATE", new, old).allowed

    def test_metadata_only_update_removing_the_finalizer(self) -> None:
        old = self._invalid_stored()
        old["metadata"]["finalizers"] = ["kflare.dev/finalizer"]
        old["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
        new = copy.deepcopy(old)
        new["metadata"]["finalizers"] = []
        new["metadata"]["labels"] = {"team": "a"}
        assert check("UPDATE", new, old).allowed

    def test_status_subresource(self) -> None:
        old = sample("DNSRecord")
        assert check("UPDATE", changed(old, type="TXT"), old, sub_resource="status").allowed

    @pytest.mark.parametrize("old", [None, {"spec": {"type": "TXT", "proxied": True}}, "junk"])
    def test_delete(self, old: Any) -> None:
        assert check("DELETE", None, old).allowed

    @pytest.mark.parametrize("operation", ["CONNECT", "PATCH", "SOMETHING_NEW", ""])
    def test_other_operations(self, operation: str) -> None:
        assert check(operation, "not even an object").allowed


class TestMalformedRequests:
    def test_another_kind(self) -> None:
        admission = AdmissionRequest.model_validate(request("CREATE", sample("Zone"), kind="Zone"))
        message = denied(decide(model_named("DNSRecord"), admission), 400)
        assert message.startswith("request.kind: this webhook validates DNSRecord (kflare.dev/v1alpha1), not Zone")

    @pytest.mark.parametrize(("group", "version"), [("kflare.dev", "v1"), ("apps", "v1alpha1"), ("", "v1alpha1")])
    def test_another_group_or_version(self, group: str, version: str) -> None:
        message = denied(check("CREATE", sample("DNSRecord"), group=group, version=version), 400)
        assert message.startswith("request.kind: this webhook validates DNSRecord (kflare.dev/v1alpha1), not ")

    @pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
    def test_missing_object(self, operation: str) -> None:
        message = denied(check(operation, None, sample("DNSRecord")), 400)
        assert message == f"request.object: required on {operation}"

    @pytest.mark.parametrize("obj", [[], "a string", 42, True])
    def test_object_that_is_not_an_object(self, obj: Any) -> None:
        assert denied(check("CREATE", obj), 400) == "request.object: must be a JSON object"

    def test_missing_old_object_on_update(self) -> None:
        assert denied(check("UPDATE", sample("DNSRecord")), 400) == "request.oldObject: required on UPDATE"

    def test_old_object_that_is_not_an_object(self) -> None:
        assert denied(check("UPDATE", sample("DNSRecord"), [1]), 400) == "request.oldObject: must be a JSON object"

    @pytest.mark.parametrize("spec", [[], "x", 1, None])
    def test_spec_that_is_not_an_object(self, spec: Any) -> None:
        obj = sample("DNSRecord")
        obj["spec"] = spec
        message = denied(check("CREATE", obj))
        assert message in ("spec: must be an object", "spec: required value")


def test_duplicate_errors_are_listed_once() -> None:
    from webhooks.validate import deny

    decision = deny([FieldError("spec.a", "x"), FieldError("spec.a", "x"), FieldError("spec.b", "y")])
    assert decision.message == "spec.a: x; spec.b: y"


def as_stored(obj: dict[str, Any], generation: int) -> dict[str, Any]:
    """`obj` as the API server sends it to a webhook: managed fields, the last applied configuration, a status."""
    out = copy.deepcopy(obj)
    fields = {"f:spec": {f"f:{key}": {} for key in out["spec"]}}
    out["metadata"].update(
        uid="0b5b7c1e-8f0e-4a55-9d0e-2f1f1f5e6a11",
        generation=generation,
        managedFields=[{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields}],
    )
    out["metadata"].setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = str(obj)
    out["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "Synced", "observedGeneration": 1}]}
    return out


def test_a_review_as_the_api_server_sends_it_is_decided_on_its_spec_and_metadata() -> None:
    stored = as_stored(sample("DNSRecord"), 1)
    assert check("CREATE", stored).allowed
    assert check("UPDATE", as_stored(changed(stored, ttl=300), 2), stored).allowed
    immutable = as_stored(changed(stored, type="AAAA", content="2001:db8::1"), 2)
    assert denied(check("UPDATE", immutable, stored)).startswith("spec.type: type is immutable")
    assert denied(check("CREATE", as_stored(sample("DNSRecord", ttl=5), 1))).startswith("spec.ttl: ")
    # What no decision reads is not even parsed: a review holds its object's spec and metadata, not the rest.
    parsed = AdmissionRequest.model_validate(request("CREATE", stored)).object
    assert set(parsed) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(parsed["metadata"]) <= {"name", "namespace", "labels", "annotations"}
