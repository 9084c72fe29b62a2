"""The models read the Go controller's manifests unchanged and give reconcilers typed access."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.api import (
    API_VERSION,
    KINDS,
    CloudflareAccount,
    DNSRecord,
    UnknownKind,
    Zone,
    kind_for,
    parse,
    validate_object,
    wire_name,
)
from app.api.meta import Status
from tests.unit.api.samples import ALL, RECORD_SRV, RECORD_TUNNEL, ZONE, load


@pytest.mark.parametrize("name", sorted(ALL))
def test_go_samples_are_valid(name: str) -> None:
    obj = load(ALL[name])
    assert validate_object(obj["kind"], obj) == []


@pytest.mark.parametrize("name", sorted(ALL))
def test_go_samples_round_trip(name: str) -> None:
    """What the models write back is what they read, plus the CRD's defaults."""
    obj = load(ALL[name])
    model = parse(obj)
    wire = model.to_wire()
    assert wire["apiVersion"] == API_VERSION
    assert wire["kind"] == obj["kind"]
    expected = dict(obj["spec"])
    if obj["kind"] == "CloudflareAccount":
        expected["tokenSecretRef"] = {"key": "CF_API_TOKEN", **expected["tokenSecretRef"]}
    if obj["kind"] == "Zone":
        expected.setdefault("type", "full")
    if obj["kind"] == "WorkerScript":
        expected.setdefault("format", "module")
    if obj["kind"] == "R2Bucket":
        expected.setdefault("jurisdiction", "default")
    assert wire["spec"] == expected
    assert wire["status"] == {"conditions": []}


def test_typed_access() -> None:
    zone = Zone.model_validate(load(ZONE))
    assert zone.spec.name == "example.com"
    assert zone.spec.account_ref.name == "my-account"
    assert zone.spec.type == "full"
    assert zone.spec.plan is None
    assert zone.key == "my-namespace/example-com"
    assert zone.metadata.annotations["kflare.dev/deletion-policy"] == "retain"
    assert not zone.status.ready
    assert Zone.spec_model().__name__ == "ZoneSpec"
    assert Zone.status_model().__name__ == "ZoneStatus"

    record = DNSRecord.model_validate(load(RECORD_SRV))
    assert record.spec.data == {"priority": 10, "weight": 5, "port": 5060, "target": "sip.example.com"}
    assert record.spec.effective_ttl == 1
    assert record.spec.effective_proxied is False
    tunnel = DNSRecord.model_validate(load(RECORD_TUNNEL))
    assert tunnel.spec.tunnel_ref is not None
    assert tunnel.spec.tunnel_ref.name == "my-tunnel"


def test_cluster_scoped_account() -> None:
    account = parse(load(ALL["account"]))
    assert isinstance(account, CloudflareAccount)
    assert account.key == "my-account"
    assert account.spec.account_id == "0123456789abcdef0123456789abcdef"
    assert account.spec.token_secret_ref.key == "CF_API_TOKEN"
    assert CloudflareAccount.info.scope == "Cluster"


def test_python_names_are_accepted_too() -> None:
    record = DNSRecord.model_validate(
        {
            "metadata": {"name": "a", "namespace": "n"},
            "spec": {"zone_ref": {"name": "z"}, "name": "a.example.com", "type": "A", "content": "192.0.2.1"},
        }
    )
    assert record.spec.zone_ref.name == "z"
    assert record.kind == "DNSRecord"
    assert record.to_wire()["spec"]["zoneRef"] == {"name": "z"}


def test_status_and_metadata_from_the_api_server() -> None:
    obj = load(ZONE)
    obj["metadata"].update(
        uid="9b2c",
        generation=3,
        resourceVersion="812",
        creationTimestamp="2026-10-26T10:00:00Z",
        deletionTimestamp="2026-10-26T11:00:00Z",
        finalizers=["kflare.dev/finalizer"],
        labels=None,
        managedFields=[{"manager": "kubectl"}],
    )
    obj["status"] = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Synced",
                "message": "zone is active",
                "observedGeneration": 3,
                "lastTransitionTime": "2026-10-26T10:05:00Z",
            }
        ],
        "cloudflareMetadata": {
            "zoneID": "023e105f4ecef8ad9ca31a8372d0c353",
            "nameServers": ["ns1.example.net", "ns2.example.net"],
            "status": "deactivated",
            "plan": "free",
        },
    }
    zone = Zone.model_validate(obj)
    assert zone.metadata.generation == 3
    assert zone.metadata.resource_version == "812"
    assert zone.metadata.deleting
    assert zone.metadata.labels == {}
    assert zone.status.ready
    assert zone.status.cloudflare_metadata is not None
    assert zone.status.cloudflare_metadata.zone_id == "023e105f4ecef8ad9ca31a8372d0c353"
    assert zone.status.to_wire() == obj["status"]


def test_set_condition_follows_the_conventions() -> None:
    status = Status()
    t0 = datetime(2026, 10, 26, 10, 0, 0, 123456, tzinfo=UTC)
    assert status.set_condition("False", "ZoneNotReady", "waiting", observed_generation=1, now=t0)
    assert status.conditions[0].last_transition_time == t0.replace(microsecond=0)
    assert not status.set_condition("False", "ZoneNotReady", "waiting", observed_generation=1, now=t0)
    # Same status, another reason: the transition time stays.
    assert status.set_condition("False", "APIError", "boom", observed_generation=1, now=t0 + timedelta(minutes=1))
    assert status.conditions[0].last_transition_time == t0.replace(microsecond=0)
    # Status flips: the transition time moves.
    t2 = t0 + timedelta(minutes=2)
    assert status.set_condition("True", "Synced", observed_generation=2, now=t2)
    assert len(status.conditions) == 1
    assert status.ready
    wire = status.to_wire()["conditions"][0]
    assert wire == {
        "type": "Ready",
        "status": "True",
        "reason": "Synced",
        "message": "",
        "observedGeneration": 2,
        "lastTransitionTime": "2026-10-26T10:02:00Z",
    }


def test_kind_lookup() -> None:
    for name in ("DNSRecord", "dnsrecords", "dnsrecord", "cfrecord", "DNSRECORDS"):
        assert kind_for(name) is DNSRecord
    assert kind_for("cfaccount") is CloudflareAccount
    assert kind_for("zones") is Zone
    with pytest.raises(UnknownKind, match="not a kflare kind"):
        kind_for("deployments")


def test_registry_is_consistent() -> None:
    kinds = [model.info.kind for model in KINDS]
    assert kinds[:3] == ["CloudflareAccount", "Zone", "DNSRecord"]
    assert {"Tunnel", "TunnelConfiguration"} <= set(kinds)
    names = [name for model in KINDS for name in model.info.names()]
    assert len(names) == len(set(names)), "a name is used by two kinds"
    for model in KINDS:
        assert model.info.plural == model.info.plural.lower()
        assert model.info.categories == ("kflare",)
        assert model.__doc__


@pytest.mark.parametrize(
    ("python", "wire"),
    [
        ("account_id", "accountID"),
        ("token_secret_ref", "tokenSecretRef"),
        ("kv_namespace_id", "kvNamespaceID"),
        ("no_tls_verify", "noTLSVerify"),
        ("edge_ttl", "edgeTTL"),
        ("target_url", "targetURL"),
        ("http2_origin", "http2Origin"),
        ("ttl", "ttl"),
        ("r2_bucket_ref", "r2BucketRef"),
    ],
)
def test_wire_names(python: str, wire: str) -> None:
    assert wire_name(python) == wire


def _record_errors(**spec: object) -> list[str]:
    base: dict[str, object] = {"zoneRef": {"name": "z"}, "name": "www.example.com", "type": "A", "content": "192.0.2.1"}
    obj = {"apiVersion": API_VERSION, "kind": "DNSRecord", "spec": {**base, **spec}}
    return [str(error) for error in validate_object("DNSRecord", obj)]


@pytest.mark.parametrize(
    ("content", "valid"),
    [
        ("0.0.0.1", True),
        ("255.255.255.255", True),
        ("192.0.2.10", True),
        ("192.0.2.010", False),  # a leading zero reads as octal in some tools: refused
        ("256.0.2.1", False),
        ("192.0.2", False),
        ("192.0.2.1.5", False),
        ("192.0.2.\u0661", False),  # an Arabic-Indic digit
        ("2001:db8::1", False),
    ],
)
def test_an_a_record_takes_an_ipv4_address_only(content: str, valid: bool) -> None:
    errors = _record_errors(content=content)
    assert errors == ([] if valid else ["spec.content: an A record's content must be an IPv4 address"])


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("www.example.com", None),
        ("www.example.com.", None),
        ("@", None),
        ("_dmarc.example.com", None),
        ("x" * 63 + ".example.com", None),
        ("x" * 64 + ".example.com", "is at most 63 characters"),
        ("www..example.com", "empty label"),
        (".example.com", "empty label"),
        ("www.example.com..", "empty label"),
        ("www example.com", "white space"),
        ("www\u3000example.com", "white space"),  # an ideographic space
    ],
)
def test_a_record_name_is_a_dns_name(name: str, problem: str | None) -> None:
    errors = _record_errors(name=name)
    if problem is None:
        assert errors == []
    else:
        (error,) = errors
        assert error.startswith("spec.name: ")
        assert problem in error
