"""The dependency index answers who uses whom, as references change."""

from __future__ import annotations

from app.kube.index import DependencyIndex, Ref

ZONE = Ref("Zone", "ns", "z")
ACCOUNT = Ref("CloudflareAccount", "", "a")


def test_children_follow_references() -> None:
    index = DependencyIndex()
    r1, r2 = Ref("DNSRecord", "ns", "r1"), Ref("DNSRecord", "ns", "r2")
    index.set_parents(r1, [ZONE])
    index.set_parents(r2, [ZONE])
    index.set_parents(ZONE, [ACCOUNT])
    assert index.children(ZONE) == [r1, r2]
    assert index.children(ACCOUNT) == [ZONE]
    assert index.children(ZONE, kind="Zone") == []


def test_a_changed_reference_reports_the_parent_it_left() -> None:
    index = DependencyIndex()
    other = Ref("Zone", "ns", "other")
    record = Ref("DNSRecord", "ns", "r")
    index.set_parents(record, [ZONE])
    assert index.set_parents(record, [other]) == {ZONE}
    assert index.children(ZONE) == []
    assert index.remove(record) == {other}
    assert index.children(other) == []
    assert str(record) == "DNSRecord ns/r"
    assert str(ACCOUNT) == "CloudflareAccount a"
