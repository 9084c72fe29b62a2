"""DNS records through the official SDK: every verb, several types, filters, pages, errors and Free-plan limits."""

from __future__ import annotations

from typing import Any

import cloudflare
import pytest
from cloudflare.types.dns import record_response as rr

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorProcess


def codes(exc: cloudflare.APIStatusError) -> list[int]:
    return [e.code for e in exc.errors if e.code is not None]


def chain(exc: cloudflare.APIStatusError) -> list[int]:
    body: Any = exc.body
    return [link["code"] for e in body["errors"] for link in e.get("error_chain", [])]


def test_create_normalises(cf: cloudflare.Cloudflare, zone: Any) -> None:
    a = cf.dns.records.create(zone_id=zone.id, type="A", name="WWW", content="192.0.2.1", ttl=1)
    assert isinstance(a, rr.ARecord)
    conforms(a)
    assert a.name == "www.example.com"
    assert (a.proxied, a.proxiable, a.ttl, a.comment, a.tags) == (False, True, 1, None, [])
    assert a.created_on == a.modified_on
    assert a.comment_modified_on is None

    apex = cf.dns.records.create(zone_id=zone.id, type="AAAA", name="@", content="2001:0db8:0000::0001", ttl=300)
    assert isinstance(apex, rr.AAAARecord)
    assert (apex.name, apex.content) == ("example.com", "2001:db8::1")

    cname = cf.dns.records.create(
        zone_id=zone.id, type="CNAME", name="app.example.com.", content="Target.Example.NET.", ttl=120, proxied=True
    )
    assert isinstance(cname, rr.CNAMERecord)
    conforms(cname)
    assert (cname.name, cname.content, cname.ttl, cname.proxied) == ("app.example.com", "target.example.net", 1, True)
    assert cname.settings is not None
    assert cname.settings.flatten_cname is False

    txt = cf.dns.records.create(zone_id=zone.id, type="TXT", name="_x", content='"v=spf1 -all"', ttl=1, comment="hi")
    assert isinstance(txt, rr.TXTRecord)
    assert (txt.content, txt.proxiable, txt.comment) == ('"v=spf1 -all"', False, "hi")
    assert txt.comment_modified_on is not None

    # A name outside the zone is taken as relative to it, as Cloudflare does.
    foreign = cf.dns.records.create(zone_id=zone.id, type="A", name="www.other.org", content="192.0.2.9", ttl=1)
    assert foreign.name == "www.other.org.example.com"


def test_data_records_and_priority(cf: cloudflare.Cloudflare, zone: Any) -> None:
    mx = cf.dns.records.create(zone_id=zone.id, type="MX", name="@", content="mail.example.com", priority=10, ttl=1)
    assert isinstance(mx, rr.MXRecord)
    conforms(mx)
    assert (mx.priority, mx.content) == (10, "mail.example.com")

    srv = cf.dns.records.create(
        zone_id=zone.id,
        type="SRV",
        name="_sip._tcp",
        ttl=3600,
        data={"priority": 10, "weight": 60, "port": 5060, "target": "SIP.example.com"},
    )
    assert isinstance(srv, rr.SRVRecord)
    conforms(srv)
    assert srv.name == "_sip._tcp.example.com"
    assert srv.content == "10 60 5060 sip.example.com"
    assert srv.data is not None
    assert (srv.data.priority, srv.data.weight, srv.data.port, srv.data.target) == (10, 60, 5060, "sip.example.com")

    caa = cf.dns.records.create(
        zone_id=zone.id, type="CAA", name="@", ttl=1, data={"flags": 0, "tag": "issue", "value": "letsencrypt.org"}
    )
    assert isinstance(caa, rr.CAARecord)
    conforms(caa)
    assert caa.content == '0 issue "letsencrypt.org"'

    # Content alone is read back into data.
    wild = cf.dns.records.create(zone_id=zone.id, type="CAA", name="@", ttl=1, content='0 issuewild ";"')
    assert isinstance(wild, rr.CAARecord)
    assert wild.data is not None
    assert (wild.data.tag, wild.data.value) == ("issuewild", ";")

    uri = cf.dns.records.create(
        zone_id=zone.id,
        type="URI",
        name="_ftp._tcp",
        ttl=1,
        priority=5,
        data={"weight": 1, "target": "ftp://x.example"},
    )
    assert isinstance(uri, rr.URIRecord)
    assert (uri.priority, uri.content) == (5, '1 "ftp://x.example"')


def test_get_update_edit_delete(cf: cloudflare.Cloudflare, zone: Any) -> None:
    created = cf.dns.records.create(
        zone_id=zone.id, type="A", name="api", content="192.0.2.1", ttl=300, proxied=True, comment="first"
    )
    fetched = cf.dns.records.get(dns_record_id=created.id, zone_id=zone.id)
    assert fetched == created

    # PATCH changes only what is sent.
    edited = cf.dns.records.edit(
        dns_record_id=created.id,
        zone_id=zone.id,
        type="A",
        name="api",
        ttl=300,
        content="192.0.2.2",
    )
    assert isinstance(edited, rr.ARecord)
    assert (edited.content, edited.proxied, edited.comment) == ("192.0.2.2", True, "first")
    assert edited.comment_modified_on == created.comment_modified_on
    assert edited.created_on == created.created_on

    # PUT resets what is not sent.
    replaced = cf.dns.records.update(
        dns_record_id=created.id,
        zone_id=zone.id,
        type="A",
        name="api",
        content="192.0.2.3",
        ttl=600,
    )
    assert isinstance(replaced, rr.ARecord)
    assert (replaced.content, replaced.proxied, replaced.ttl, replaced.comment) == ("192.0.2.3", False, 600, None)
    assert replaced.comment_modified_on is None

    deleted = cf.dns.records.delete(dns_record_id=created.id, zone_id=zone.id)
    assert deleted is not None
    assert deleted.id == created.id
    with pytest.raises(cloudflare.NotFoundError) as gone:
        cf.dns.records.get(dns_record_id=created.id, zone_id=zone.id)
    assert codes(gone.value) == [81044]


def test_list_filters(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.seed(
        {
            "zones": [
                {
                    "name": "example.org",
                    "plan": "pro",
                    "dns_records": [
                        {
                            "type": "A",
                            "name": "www",
                            "content": "192.0.2.1",
                            "comment": "Web frontend",
                            "tags": ["team:web"],
                        },
                        {
                            "type": "A",
                            "name": "api",
                            "content": "192.0.2.2",
                            "proxied": True,
                            "tags": ["team:api", "tier:gold"],
                        },
                        {"type": "AAAA", "name": "www", "content": "2001:db8::1"},
                        {"type": "TXT", "name": "@", "content": "hello world", "comment": "note"},
                        {"type": "MX", "name": "@", "content": "mx.example.org", "priority": 10},
                    ],
                }
            ]
        }
    )
    zone_id = next(iter(cf.zones.list(name="example.org"))).id

    def names(**filters: Any) -> list[str]:
        return sorted(f"{r.type} {r.name}" for r in cf.dns.records.list(zone_id=zone_id, **filters))

    assert len(names()) == 5
    assert names(type="A") == ["A api.example.org", "A www.example.org"]
    assert names(name={"exact": "WWW.example.org"}) == ["A www.example.org", "AAAA www.example.org"]
    assert names(name={"startswith": "api."}) == ["A api.example.org"]
    assert names(name={"endswith": ".example.org"}) == [
        "A api.example.org",
        "A www.example.org",
        "AAAA www.example.org",
    ]
    assert names(content={"contains": "192.0.2"}) == ["A api.example.org", "A www.example.org"]
    assert names(content={"exact": "HELLO world"}) == ["TXT example.org"]
    assert names(comment={"present": "yes"}) == ["A www.example.org", "TXT example.org"]
    assert names(comment={"absent": "yes"}) == ["A api.example.org", "AAAA www.example.org", "MX example.org"]
    assert names(comment={"contains": "front"}) == ["A www.example.org"]
    assert names(tag={"present": "team"}) == ["A api.example.org", "A www.example.org"]
    assert names(tag={"exact": "team:web"}) == ["A www.example.org"]
    assert names(tag={"absent": "tier"}) == [
        "A www.example.org",
        "AAAA www.example.org",
        "MX example.org",
        "TXT example.org",
    ]
    assert names(proxied=True) == ["A api.example.org"]
    assert names(type="TXT", proxied=True, match="any") == ["A api.example.org", "TXT example.org"]
    assert names(tag={"exact": "team:web", "contains": "tier:go"}, tag_match="any") == [
        "A api.example.org",
        "A www.example.org",
    ]
    in_order = [r.type for r in cf.dns.records.list(zone_id=zone_id, order="type", direction="desc")]
    assert in_order == sorted(in_order, reverse=True)


def test_list_pages(cf: cloudflare.Cloudflare, zone: Any, fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.seed(
        {
            "dns_records": [
                {"zone_id": zone.id, "type": "A", "name": f"h{i}", "content": f"192.0.2.{i}"} for i in range(7)
            ]
        }
    )
    page = cf.dns.records.list(zone_id=zone.id, per_page=3, page=3)
    assert [r.name for r in page.result] == ["h6.example.com"]
    raw = cf.dns.records.with_raw_response.list(zone_id=zone.id, per_page=3).http_response.json()
    assert raw["result_info"] == {"page": 1, "per_page": 3, "count": 3, "total_count": 7, "total_pages": 3}
    fresh_emulator.clear_calls()
    every = [r.name for r in cf.dns.records.list(zone_id=zone.id, per_page=3)]
    assert every == [f"h{i}.example.com" for i in range(7)]
    assert len(fresh_emulator.calls(path=r"/dns_records$")) == 4
    for record in cf.dns.records.list(zone_id=zone.id):
        conforms(record)


def test_duplicates_and_cname_rules(cf: cloudflare.Cloudflare, zone: Any) -> None:
    cf.dns.records.create(zone_id=zone.id, type="A", name="www", content="192.0.2.1", ttl=1)
    with pytest.raises(cloudflare.BadRequestError) as identical:
        cf.dns.records.create(zone_id=zone.id, type="A", name="www.example.com", content="192.0.2.1", ttl=300)
    assert codes(identical.value) == [81058]
    cf.dns.records.create(zone_id=zone.id, type="A", name="www", content="192.0.2.2", ttl=1)  # a second address is fine

    with pytest.raises(cloudflare.BadRequestError) as cname_on_a:
        cf.dns.records.create(zone_id=zone.id, type="CNAME", name="www", content="elsewhere.example", ttl=1)
    assert codes(cname_on_a.value) == [81053]
    cf.dns.records.create(zone_id=zone.id, type="CNAME", name="app", content="elsewhere.example", ttl=1)
    with pytest.raises(cloudflare.BadRequestError) as a_on_cname:
        cf.dns.records.create(zone_id=zone.id, type="AAAA", name="app", content="2001:db8::1", ttl=1)
    assert codes(a_on_cname.value) == [81054]
    with pytest.raises(cloudflare.BadRequestError) as second_cname:
        cf.dns.records.create(zone_id=zone.id, type="CNAME", name="app", content="other.example", ttl=1)
    assert codes(second_cname.value) == [81053]

    # Updating into a clash is refused too.
    ip = cf.dns.records.create(zone_id=zone.id, type="A", name="ip", content="192.0.2.7", ttl=1)
    with pytest.raises(cloudflare.BadRequestError):
        cf.dns.records.edit(
            dns_record_id=ip.id,
            zone_id=zone.id,
            type="A",
            name="www",
            ttl=1,
            content="192.0.2.1",
        )


def test_validation_errors(cf: cloudflare.Cloudflare, zone: Any) -> None:
    with pytest.raises(cloudflare.BadRequestError) as bad_ipv4:
        cf.dns.records.create(zone_id=zone.id, type="A", name="x", content="2001:db8::1", ttl=1)
    assert codes(bad_ipv4.value) == [9005]
    with pytest.raises(cloudflare.BadRequestError) as bad_ipv6:
        cf.dns.records.create(zone_id=zone.id, type="AAAA", name="x", content="192.0.2.1", ttl=1)
    assert codes(bad_ipv6.value) == [9006]
    with pytest.raises(cloudflare.BadRequestError) as cname_to_ip:
        cf.dns.records.create(zone_id=zone.id, type="CNAME", name="x", content="192.0.2.1", ttl=1)
    assert (codes(cname_to_ip.value), chain(cname_to_ip.value)) == ([1004], [9007])
    with pytest.raises(cloudflare.BadRequestError) as ttl:
        cf.dns.records.create(zone_id=zone.id, type="A", name="x", content="192.0.2.1", ttl=30)
    assert chain(ttl.value) == [9021]
    with pytest.raises(cloudflare.BadRequestError) as not_proxiable:
        cf.dns.records.create(zone_id=zone.id, type="TXT", name="x", content="t", ttl=1, proxied=True)
    assert chain(not_proxiable.value) == [9041]
    with pytest.raises(cloudflare.BadRequestError) as no_priority:
        cf.dns.records.create(zone_id=zone.id, type="MX", name="@", content="mx.example.com", ttl=1)
    assert chain(no_priority.value) == [9101]
    with pytest.raises(cloudflare.BadRequestError) as srv_missing:
        cf.dns.records.create(zone_id=zone.id, type="SRV", name="_a._tcp", ttl=1, data={"priority": 1, "weight": 1})
    assert chain(srv_missing.value) == [9101]
    with pytest.raises(cloudflare.BadRequestError) as bad_name:
        cf.dns.records.create(zone_id=zone.id, type="A", name="bad name!", content="192.0.2.1", ttl=1)
    assert chain(bad_name.value) == [9000]
    with pytest.raises(cloudflare.BadRequestError) as bad_type:
        cf.dns.records.create(zone_id=zone.id, type="SPF", name="x", content="v=spf1", ttl=1)
    assert codes(bad_type.value) == [1004]


def test_free_plan_limits(cf: cloudflare.Cloudflare, zone: Any, fresh_emulator: EmulatorProcess) -> None:
    with pytest.raises(cloudflare.BadRequestError) as long_comment:
        cf.dns.records.create(zone_id=zone.id, type="A", name="x", content="192.0.2.1", ttl=1, comment="c" * 101)
    assert chain(long_comment.value) == [9313]
    assert cf.dns.records.create(zone_id=zone.id, type="A", name="x", content="192.0.2.1", ttl=1, comment="c" * 100)
    with pytest.raises(cloudflare.BadRequestError) as tags:
        cf.dns.records.create(zone_id=zone.id, type="A", name="y", content="192.0.2.1", ttl=1, tags=["owner:kflare"])
    assert chain(tags.value) == [9300]
    assert "exceeding the quota of 0" in tags.value.body["errors"][0]["error_chain"][0]["message"]

    fresh_emulator.seed(
        {"dns_records": [{"zone_id": zone.id, "type": "TXT", "name": f"q{i}", "content": "x"} for i in range(199)]}
    )
    with pytest.raises(cloudflare.BadRequestError) as quota:
        cf.dns.records.create(zone_id=zone.id, type="A", name="one-too-many", content="192.0.2.1", ttl=1)
    assert codes(quota.value) == [81045]


def test_paid_plan_allows_tags_and_long_comments(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.seed({"zones": [{"name": "paid.example", "plan": "pro"}]})
    zone_id = next(iter(cf.zones.list(name="paid.example"))).id
    record = cf.dns.records.create(
        zone_id=zone_id, type="A", name="t", content="192.0.2.1", ttl=1, comment="c" * 500, tags=["owner:kflare"]
    )
    assert isinstance(record, rr.ARecord)
    assert record.tags == ["owner:kflare"]
    assert record.tags_modified_on is not None


def test_permissions(fresh_emulator: EmulatorProcess, zone: Any) -> None:
    fresh_emulator.seed({"zones": [{"name": "other.example"}]})
    other = next(z for z in fresh_emulator.client().zones.list() if z.name == "other.example")

    reader = fresh_emulator.client(fresh_emulator.add_token(["zone:read", "dns:read"])["value"])
    assert list(reader.dns.records.list(zone_id=zone.id)) == []
    with pytest.raises(cloudflare.PermissionDeniedError) as read_only:
        reader.dns.records.create(zone_id=zone.id, type="A", name="x", content="192.0.2.1", ttl=1)
    assert codes(read_only.value) == [10000]

    scoped = fresh_emulator.client(fresh_emulator.add_token(["dns:edit"], zones=[zone.id])["value"])
    assert scoped.dns.records.create(zone_id=zone.id, type="A", name="x", content="192.0.2.1", ttl=1)
    with pytest.raises(cloudflare.PermissionDeniedError) as out_of_scope:
        scoped.dns.records.list(zone_id=other.id)
    assert codes(out_of_scope.value) == [10000]
    with pytest.raises(cloudflare.PermissionDeniedError):
        scoped.dns.records.list(zone_id="d" * 32)  # a restricted token cannot tell missing from forbidden

    with pytest.raises(cloudflare.NotFoundError) as unknown_zone:
        fresh_emulator.client().dns.records.list(zone_id="d" * 32)
    assert codes(unknown_zone.value) == [1001]


def test_seeded_records_are_adoptable(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    record_id = "e" * 32
    fresh_emulator.seed(
        {
            "zones": [
                {
                    "name": "adopt.example",
                    "dns_records": [
                        {
                            "id": record_id,
                            "type": "CNAME",
                            "name": "www",
                            "content": "origin.example.net",
                            "proxied": True,
                            "created_on": "2023-01-02T03:04:05.000000Z",
                        }
                    ],
                }
            ]
        }
    )
    zone_id = next(iter(cf.zones.list(name="adopt.example"))).id
    found = list(cf.dns.records.list(zone_id=zone_id, type="CNAME", name={"exact": "www.adopt.example"}))
    assert [r.id for r in found] == [record_id]
    assert found[0].created_on.year == 2023


def test_patch_keeps_or_rereads_data(cf: cloudflare.Cloudflare, zone: Any) -> None:
    srv = cf.dns.records.create(
        zone_id=zone.id,
        type="SRV",
        name="_ldap._tcp",
        ttl=300,
        data={"priority": 1, "weight": 2, "port": 389, "target": "ldap.example.com"},
    )
    same_data = cf.dns.records.edit(dns_record_id=srv.id, zone_id=zone.id, type="SRV", name="_ldap._tcp", ttl=600)
    assert isinstance(same_data, rr.SRVRecord)
    assert (same_data.ttl, same_data.content) == (600, "1 2 389 ldap.example.com")
    reread = cf.dns.records.edit(
        dns_record_id=srv.id,
        zone_id=zone.id,
        type="SRV",
        name="_ldap._tcp",
        ttl=600,
        content="5 6 636 ldaps.example.com",
    )
    assert isinstance(reread, rr.SRVRecord)
    assert reread.data is not None
    assert (reread.data.port, reread.data.target) == (636, "ldaps.example.com")


def test_patch_changes_type(cf: cloudflare.Cloudflare, zone: Any) -> None:
    cname = cf.dns.records.create(zone_id=zone.id, type="CNAME", name="svc", content="origin.example.net", ttl=1)
    address = cf.dns.records.edit(
        dns_record_id=cname.id, zone_id=zone.id, type="A", name="svc", ttl=1, content="192.0.2.10"
    )
    assert isinstance(address, rr.ARecord)
    assert address.id == cname.id
    assert address.settings is not None
    assert address.settings.model_dump(exclude_none=True) == {}
