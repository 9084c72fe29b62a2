"""DNS record comparison follows Cloudflare's defaults and normalisation, so nothing flaps."""

from __future__ import annotations

from typing import Any

import pytest

from app.api import DNSRecord
from app.cloudflare.models import DNSRecord as CloudflareRecord
from app.kube.index import DependencyIndex
from app.kube.informer import Informer
from reconcilers.context import Caches, Queue
from reconcilers.dns_record import DNSRecordKind, fqdn, normal_content
from reconcilers.holders import Owners
from reconcilers.managed_kind import indexes, resource_type
from reconcilers.writer import merge_patch


def record(**spec: Any) -> DNSRecord:
    body = {"zoneRef": {"name": "z"}, **spec}
    return DNSRecord.model_validate({"metadata": {"name": "r", "namespace": "n"}, "spec": body})


def observed(**fields: Any) -> CloudflareRecord:
    base = {"id": "1", "name": "www.example.com", "type": "A", "ttl": 1, "proxied": False}
    return CloudflareRecord.model_validate({**base, **fields})


def diff(spec: DNSRecord, seen: CloudflareRecord) -> dict[str, Any]:
    return DNSRecordKind.diff(DNSRecordKind.__new__(DNSRecordKind), None, spec, seen)


def test_unset_ttl_and_proxied_mean_cloudflares_defaults() -> None:
    assert diff(record(name="www.example.com", type="A", content="192.0.2.1"), observed(content="192.0.2.1")) == {}


def test_a_proxied_records_ttl_is_automatic_whatever_was_asked() -> None:
    spec = record(name="www.example.com", type="A", content="192.0.2.1", proxied=True, ttl=300)
    assert diff(spec, observed(content="192.0.2.1", proxied=True, ttl=1)) == {}


def test_each_difference_is_reported() -> None:
    spec = record(name="www.example.com", type="A", content="192.0.2.1", ttl=300, comment="c", tags=["b:1", "a:2"])
    changes = diff(spec, observed(content="192.0.2.9", ttl=60, comment=None, tags=["a:2"]))
    assert changes == {"content": "192.0.2.1", "ttl": 300, "comment": "c", "tags": ["a:2", "b:1"]}


def test_tags_compare_as_sets_and_priority_only_when_set() -> None:
    spec = record(name="example.com", type="MX", content="mx.example.net", tags=["b:1", "a:2"])
    assert diff(spec, observed(type="MX", content="MX.example.net.", priority=10, tags=["a:2", "b:1"])) == {}


def test_data_records_compare_the_given_keys_only() -> None:
    data = {"priority": 1, "weight": 5, "port": 5060, "target": "sip.example.com"}
    spec = record(name="_sip._tcp.example.com", type="SRV", data=data)
    seen = observed(type="SRV", content="5 5060 sip.example.com", data={**data, "target": "SIP.example.com."})
    assert diff(spec, seen) == {}
    assert diff(spec, observed(type="SRV", data={**data, "port": 5061})) == {"data": data}


@pytest.mark.parametrize(
    ("kind", "a", "b"),
    [
        ("AAAA", "2001:DB8:0::1", "2001:db8::1"),
        ("CNAME", "Target.Example.com.", "target.example.com"),
        ("TXT", '"hello"', "hello"),
    ],
)
def test_content_normalisation(kind: str, a: str, b: str) -> None:
    assert normal_content(kind, a) == normal_content(kind, b)


def test_names_are_fully_qualified_under_the_zone() -> None:
    assert fqdn("@", "example.com") == "example.com"
    assert fqdn("www", "example.com") == "www.example.com"
    assert fqdn("WWW.Example.com.", "example.com") == "www.example.com"


def test_merge_patch_writes_only_what_differs() -> None:
    old = {"a": 1, "b": {"c": 2, "d": 3}, "gone": True}
    new = {"a": 1, "b": {"c": 2, "d": 4}, "added": [1]}
    assert merge_patch(old, new) == {"b": {"d": 4}, "added": [1], "gone": None}
    assert merge_patch(new, new) == {}


def test_a_record_just_created_for_one_resource_is_claimed_for_the_others() -> None:
    """Two members of one record set created at once: neither may take the other's record for unclaimed."""

    kind = DNSRecordKind.__new__(DNSRecordKind)
    kind.caches = Caches(lambda _: None, DependencyIndex())  # the owner has not labelled its record yet
    kind.owners = Owners(kind.kind, kind.caches.informer_of, lambda record: record.id)
    kind.created_for = {"rec-1": "uid-a"}
    mine = DNSRecord.model_validate(
        {
            "metadata": {"name": "mx1", "uid": "uid-a"},
            "spec": {"zoneRef": {"name": "z"}, "name": "a", "type": "MX", "content": "m"},
        }
    )
    other = DNSRecord.model_validate(
        {
            "metadata": {"name": "mx2", "uid": "uid-b"},
            "spec": {"zoneRef": {"name": "z"}, "name": "a", "type": "MX", "content": "m"},
        }
    )
    assert kind._claimed_elsewhere("rec-1", other)
    assert not kind._claimed_elsewhere("rec-1", mine)


def test_a_zones_batch_waits_for_queued_records_and_not_for_those_backing_off() -> None:
    """A record that failed waits out its back-off (up to minutes): a batch held for it would hold every other
    record's edit of the zone, and under a slow Cloudflare cut their reconciles before the batch went."""
    informer = Informer(None, resource_type(DNSRecordKind))  # type: ignore[arg-type]
    for name, index in indexes(DNSRecordKind).items():
        informer.add_index(name, index)
    for name in ("queued", "backing-off", "done"):
        meta = {"generation": 1, "uid": f"uid-{name}", "name": name, "namespace": "ns"}
        ready = [{"type": "Ready", "status": "True", "observedGeneration": 1}] if name == "done" else []
        informer.put(
            {
                "metadata": meta,
                "spec": {"zoneRef": {"name": "z"}, "name": name, "type": "A", "content": "192.0.2.1"},
                "status": {"conditions": ready},
            }
        )

    kind = DNSRecordKind.__new__(DNSRecordKind)
    kind.caches = Caches(lambda _: informer, DependencyIndex())
    kind.queue = Queue(lambda _: None, lambda ref: ref.name != "backing-off")
    kind._zones = {"zone-id": ("ns", "z")}
    assert kind._waiting_in("zone-id") == {"uid-queued"}
