"""The DNS batch endpoint: Cloudflare's fixed order and all-or-nothing behaviour."""

from __future__ import annotations

from typing import Any

import cloudflare
import pytest
from cloudflare.types.dns import RecordBatchResponse

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorProcess


def _records(cf: cloudflare.Cloudflare, zone_id: str) -> list[tuple[str, str, str]]:
    return sorted((r.type, r.name, r.content or "") for r in cf.dns.records.list(zone_id=zone_id))


def test_order_is_deletes_patches_puts_posts(cf: cloudflare.Cloudflare, zone: Any) -> None:
    old = cf.dns.records.create(zone_id=zone.id, type="A", name="www", content="192.0.2.1", ttl=1)
    patched = cf.dns.records.create(zone_id=zone.id, type="A", name="api", content="192.0.2.2", ttl=1, comment="keep")
    put = cf.dns.records.create(zone_id=zone.id, type="TXT", name="note", content="old", ttl=1, comment="drop")

    # The post re-creates exactly the record the delete removes: it only works because deletes run first.
    result = cf.dns.records.batch(
        zone_id=zone.id,
        posts=[{"type": "A", "name": "www", "content": "192.0.2.1", "ttl": 1}],
        puts=[{"id": put.id, "type": "TXT", "name": "note", "content": "new", "ttl": 1}],
        patches=[{"id": patched.id, "content": "192.0.2.20"}],
        deletes=[{"id": old.id}],
    )
    assert isinstance(result, RecordBatchResponse)
    conforms(result)
    assert [r.id for r in result.deletes or []] == [old.id]
    assert [(r.content, r.comment) for r in result.patches or []] == [("192.0.2.20", "keep")]
    assert [(r.content, r.comment) for r in result.puts or []] == [("new", None)]
    assert [r.name for r in result.posts or []] == ["www.example.com"]
    assert (result.posts or [])[0].id != old.id
    assert _records(cf, zone.id) == [
        ("A", "api.example.com", "192.0.2.20"),
        ("A", "www.example.com", "192.0.2.1"),
        ("TXT", "note.example.com", "new"),
    ]


def test_all_or_nothing(cf: cloudflare.Cloudflare, zone: Any, fresh_emulator: EmulatorProcess) -> None:
    keep = cf.dns.records.create(zone_id=zone.id, type="A", name="keep", content="192.0.2.1", ttl=1)
    before = _records(cf, zone.id)
    with pytest.raises(cloudflare.BadRequestError) as failed:
        cf.dns.records.batch(
            zone_id=zone.id,
            deletes=[{"id": keep.id}],
            posts=[
                {"type": "A", "name": "new", "content": "192.0.2.2", "ttl": 1},
                {"type": "A", "name": "broken", "content": "not an address", "ttl": 1},
            ],
        )
    assert [e.code for e in failed.value.errors] == [9005]
    assert _records(cf, zone.id) == before

    with pytest.raises(cloudflare.NotFoundError) as missing:
        cf.dns.records.batch(zone_id=zone.id, deletes=[{"id": "f" * 32}])
    assert [e.code for e in missing.value.errors] == [81044]

    with pytest.raises(cloudflare.BadRequestError) as duplicate_in_batch:
        cf.dns.records.batch(
            zone_id=zone.id,
            posts=[{"type": "TXT", "name": "t", "content": "same", "ttl": 1}] * 2,
        )
    assert [e.code for e in duplicate_in_batch.value.errors] == [81058]
    assert _records(cf, zone.id) == before


def test_free_plan_operation_cap(cf: cloudflare.Cloudflare, zone: Any) -> None:
    posts: Any = [{"type": "TXT", "name": f"n{i}", "content": "x", "ttl": 1} for i in range(201)]
    with pytest.raises(cloudflare.BadRequestError) as too_many:
        cf.dns.records.batch(zone_id=zone.id, posts=posts)
    assert [e.code for e in too_many.value.errors] == [1004]
    assert cf.dns.records.batch(zone_id=zone.id, posts=posts[:200]) is not None
    assert len(list(cf.dns.records.list(zone_id=zone.id, per_page=500))) == 200
