"""What the webhook refuses, each refusal with the path of the field at fault."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.api import FieldError, UnknownKind, immutable_violations, validate_object, validate_update
from tests.unit.api.samples import ACCOUNT, RECORD_A, RECORD_CAA, RECORD_SRV, RECORD_TUNNEL, ZONE, load


def with_spec(sample: str, **changes: Any) -> dict[str, Any]:
    obj = load(sample)
    for key, value in changes.items():
        if value is None:
            obj["spec"].pop(key, None)
        else:
            obj["spec"][key] = value
    return obj


def paths(errors: list[FieldError]) -> list[str]:
    return [e.path for e in errors]


def only_error(kind: str, obj: dict[str, Any]) -> FieldError:
    errors = validate_object(kind, obj)
    assert len(errors) == 1, errors
    return errors[0]


@pytest.mark.parametrize("ttl", [0, 2, 29, 86401, -1])
def test_ttl_must_be_automatic_or_in_range(ttl: int) -> None:
    error = only_error("DNSRecord", with_spec(RECORD_A, ttl=ttl))
    assert error.path == "spec.ttl"


@pytest.mark.parametrize("ttl", [1, 30, 60, 86400])
def test_ttl_accepted(ttl: int) -> None:
    assert validate_object("DNSRecord", with_spec(RECORD_A, ttl=ttl)) == []


def test_ttl_message_is_the_crd_one() -> None:
    error = only_error("DNSRecord", with_spec(RECORD_A, ttl=10))
    assert str(error) == "spec.ttl: ttl must be 1 (automatic) or between 30 and 86400"


@pytest.mark.parametrize("kind", ["TXT", "MX", "NS"])
def test_proxied_only_on_proxiable_types(kind: str) -> None:
    obj = with_spec(RECORD_A, type=kind, content="mail.example.com", proxied=True)
    error = only_error("DNSRecord", obj)
    assert error.path == "spec.proxied"
    assert "A, AAAA and CNAME" in error.message
    assert kind in error.message


def test_proxied_false_is_fine_anywhere() -> None:
    assert validate_object("DNSRecord", with_spec(RECORD_A, type="TXT", content="x", proxied=False)) == []


def test_priority_only_on_types_that_have_one() -> None:
    error = only_error("DNSRecord", with_spec(RECORD_A, priority=10))
    assert error.path == "spec.priority"
    assert "MX, SRV and URI" in error.message


@pytest.mark.parametrize("priority", [-1, 65536])
def test_priority_is_a_uint16(priority: int) -> None:
    obj = with_spec(RECORD_A, type="MX", content="mx.example.com", proxied=None, priority=priority)
    assert paths(validate_object("DNSRecord", obj)) == ["spec.priority"]


def test_data_is_refused_for_content_types() -> None:
    error = only_error("DNSRecord", with_spec(RECORD_A, data={"value": "x"}))
    assert error.path == "spec.data"
    assert "takes content, not data" in error.message


def test_content_and_data_are_exclusive() -> None:
    error = only_error("DNSRecord", with_spec(RECORD_CAA, content='0 issue "letsencrypt.org"'))
    assert error.path == "spec.data"
    assert "either content or data" in error.message


def test_data_types_accept_content_alone() -> None:
    obj = with_spec(RECORD_CAA, data=None, content='0 issue "letsencrypt.org"')
    assert validate_object("DNSRecord", obj) == []


def test_content_required() -> None:
    error = only_error("DNSRecord", with_spec(RECORD_A, content=None))
    assert error.path == "spec.content"
    assert only_error("DNSRecord", with_spec(RECORD_A, content="")).path == "spec.content"
    assert only_error("DNSRecord", with_spec(RECORD_SRV, data=None)).path == "spec.content"


@pytest.mark.parametrize(("kind", "content"), [("A", "2001:db8::1"), ("A", "300.1.1.1"), ("AAAA", "192.0.2.1")])
def test_address_records_need_an_address(kind: str, content: str) -> None:
    obj = with_spec(RECORD_A, type=kind, content=content)
    error = only_error("DNSRecord", obj)
    assert error.path == "spec.content"
    assert "IPv" in error.message


def test_tunnel_ref_needs_a_cname_without_content() -> None:
    obj = with_spec(RECORD_TUNNEL, type="A", content="192.0.2.1")
    assert sorted(paths(validate_object("DNSRecord", obj))) == ["spec.content", "spec.tunnelRef"]


def test_record_name_rules() -> None:
    long_label = "a" * 64 + ".example.com"
    assert paths(validate_object("DNSRecord", with_spec(RECORD_A, name=long_label))) == ["spec.name"]
    too_long = ".".join(["a" * 60] * 5)
    assert paths(validate_object("DNSRecord", with_spec(RECORD_A, name=too_long))) == ["spec.name"]
    for bad in ("", "a..example.com", "www example.com"):
        assert paths(validate_object("DNSRecord", with_spec(RECORD_A, name=bad))) == ["spec.name"], bad
    for good in ("@", "example.com.", "_dmarc.example.com", "*.example.com", "xn--bcher-kva.example"):
        assert validate_object("DNSRecord", with_spec(RECORD_A, name=good)) == [], good


def test_comment_rules() -> None:
    assert validate_object("DNSRecord", with_spec(RECORD_A, comment="x" * 500)) == []
    assert paths(validate_object("DNSRecord", with_spec(RECORD_A, comment="x" * 501))) == ["spec.comment"]
    error = only_error("DNSRecord", with_spec(RECORD_A, comment="two\nlines"))
    assert error.path == "spec.comment"
    assert "line breaks" in error.message


def test_tag_rules() -> None:
    obj = with_spec(RECORD_A, tags=["env:prod", "bad tag:x", "team:a", "ENV:prod", "name-only", "v:with spaces"])
    errors = validate_object("DNSRecord", obj)
    assert paths(errors) == ["spec.tags[1]", "spec.tags[3]"]
    assert "name:value" in errors[0].message
    assert "twice" in errors[1].message
    assert paths(validate_object("DNSRecord", with_spec(RECORD_A, tags=[f"t{i}:x" for i in range(21)]))) == [
        "spec.tags"
    ]


def test_type_enum() -> None:
    error = only_error("DNSRecord", with_spec(RECORD_A, type="SPF"))
    assert error.path == "spec.type"
    assert "'A'" in error.message


def test_zone_rules() -> None:
    assert paths(validate_object("Zone", with_spec(ZONE, name="not a domain"))) == ["spec.name"]
    assert paths(validate_object("Zone", with_spec(ZONE, name="localhost"))) == ["spec.name"]
    assert paths(validate_object("Zone", with_spec(ZONE, plan="platinum"))) == ["spec.plan"]
    assert paths(validate_object("Zone", with_spec(ZONE, type="secondary"))) == ["spec.type"]
    assert paths(validate_object("Zone", with_spec(ZONE, accountRef={}))) == ["spec.accountRef.name"]
    assert paths(validate_object("Zone", with_spec(ZONE, accountRef={"name": "Not_A_Name"}))) == [
        "spec.accountRef.name"
    ]
    assert paths(validate_object("Zone", with_spec(ZONE, accountRef=None))) == ["spec.accountRef"]


def test_account_rules() -> None:
    assert paths(validate_object("cfaccount", with_spec(ACCOUNT, accountID="<your-account-id>"))) == ["spec.accountID"]
    obj = with_spec(ACCOUNT, tokenSecretRef={"name": "cloudflare-token"})
    error = only_error("cfaccount", obj)
    assert error.path == "spec.tokenSecretRef.namespace"
    assert error.message == "required value"


def test_unknown_fields_are_reported_with_their_path() -> None:
    obj = with_spec(RECORD_A, proxy=True, zoneRef={"name": "example-com", "namespaces": "other"})
    obj["spec"]["data"] = None
    errors = validate_object("DNSRecord", obj)
    assert sorted(map(str, errors)) == [
        'spec.proxy: unknown field "proxy"',
        'spec.zoneRef.namespaces: unknown field "namespaces"',
    ]


def test_python_spelling_is_unknown_on_the_wire() -> None:
    obj = with_spec(RECORD_A, zoneRef=None, zone_ref={"name": "example-com"})
    assert [str(e) for e in validate_object("DNSRecord", obj)] == [
        'spec.zone_ref: unknown field "zone_ref" (did you mean "zoneRef"?)'
    ]


def test_free_form_data_is_not_checked_for_unknown_fields() -> None:
    obj = with_spec(RECORD_SRV, data={"priority": 1, "anything": {"nested": [1, 2]}})
    assert validate_object("DNSRecord", obj) == []


def test_identity_and_shape() -> None:
    obj = load(RECORD_A)
    obj["apiVersion"] = "kflare.dev/v1"
    obj["kind"] = "Zone"
    assert paths(validate_object("DNSRecord", obj)) == ["apiVersion", "kind"]
    assert [str(e) for e in validate_object("DNSRecord", {"metadata": {"name": "x"}})] == ["spec: required value"]
    assert paths(validate_object("DNSRecord", {"spec": "nope"})) == ["spec"]
    with pytest.raises(UnknownKind):
        validate_object("Widget", {"spec": {}})


def test_several_problems_are_all_reported() -> None:
    obj = with_spec(RECORD_A, type="TXT", proxied=True, priority=5, data={"x": 1})
    assert sorted(paths(validate_object("DNSRecord", obj))) == ["spec.data", "spec.priority", "spec.proxied"]


class TestImmutability:
    @pytest.mark.parametrize(
        ("sample", "kind", "field", "value"),
        [
            (ZONE, "Zone", "name", "example.org"),
            (ZONE, "Zone", "accountRef", {"name": "other-account"}),
            (RECORD_A, "DNSRecord", "zoneRef", {"name": "other-zone"}),
            (RECORD_A, "DNSRecord", "name", "api.example.com"),
            (RECORD_A, "DNSRecord", "type", "AAAA"),
        ],
    )
    def test_identity_fields_cannot_change(self, sample: str, kind: str, field: str, value: Any) -> None:
        old = load(sample)
        new = with_spec(sample, **{field: value})
        assert [str(e) for e in immutable_violations(kind, old, new)] == [f"spec.{field}: {field} is immutable"]

    @pytest.mark.parametrize(
        ("sample", "kind", "field", "value"),
        [
            (ZONE, "Zone", "plan", "pro"),
            (ZONE, "Zone", "type", "partial"),
            (RECORD_A, "DNSRecord", "content", "192.0.2.99"),
            (RECORD_A, "DNSRecord", "ttl", 300),
            (RECORD_A, "DNSRecord", "proxied", False),
            (ACCOUNT, "CloudflareAccount", "accountID", "fedcba9876543210fedcba9876543210"),
            (ACCOUNT, "CloudflareAccount", "tokenSecretRef", {"name": "new-token", "namespace": "kflare-system"}),
        ],
    )
    def test_other_fields_can_change(self, sample: str, kind: str, field: str, value: Any) -> None:
        assert immutable_violations(kind, load(sample), with_spec(sample, **{field: value})) == []

    def test_removing_a_required_immutable_field_is_a_change(self) -> None:
        old = load(RECORD_A)
        new = copy.deepcopy(old)
        del new["spec"]["zoneRef"]
        assert paths(immutable_violations("cfrecord", old, new)) == ["spec.zoneRef"]

    def test_validate_update_combines_both(self) -> None:
        old = load(RECORD_A)
        new = with_spec(RECORD_A, type="TXT")
        assert sorted(paths(validate_update("dnsrecords", old, new))) == ["spec.proxied", "spec.type"]
