"""Zones through the official SDK: create, get, list with filters and pages, edit, delete, and refusals."""

from __future__ import annotations

from typing import Any

import cloudflare
import pytest
from cloudflare.types.zones import Zone

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorProcess

OTHER_ACCOUNT = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"


def test_create_get_edit_delete(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    created = cf.zones.create(name="Example.COM.", account={"id": fresh_emulator.account_id})
    assert isinstance(created, Zone)
    conforms(created)
    assert created.name == "example.com"
    assert created.status == "pending"
    assert created.account.id == fresh_emulator.account_id
    assert created.plan.legacy_id == "free"
    assert len(created.name_servers) == 2
    assert created.paused is False

    fetched = cf.zones.get(zone_id=created.id)
    assert fetched is not None
    assert fetched.id == created.id

    paused = cf.zones.edit(zone_id=created.id, paused=True)
    assert paused is not None
    assert paused.paused is True
    assert paused.modified_on >= created.modified_on

    deleted = cf.zones.delete(zone_id=created.id)
    assert deleted is not None
    assert deleted.id == created.id
    with pytest.raises(cloudflare.NotFoundError) as gone:
        cf.zones.get(zone_id=created.id)
    assert [e.code for e in gone.value.errors] == [1001]


def test_activation_through_admin(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    created = cf.zones.create(name="pending.example", account={"id": fresh_emulator.account_id})
    fresh_emulator.activate_zone(created.id)
    zone = cf.zones.get(zone_id=created.id)
    assert zone is not None
    assert zone.status == "active"
    assert zone.activated_on is not None


def test_duplicate_name_in_account(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.seed({"accounts": [{"id": OTHER_ACCOUNT, "name": "other"}]})
    cf.zones.create(name="example.com", account={"id": fresh_emulator.account_id})
    with pytest.raises(cloudflare.BadRequestError) as duplicate:
        cf.zones.create(name="example.com", account={"id": fresh_emulator.account_id})
    assert [(e.code, e.message) for e in duplicate.value.errors] == [(1061, "example.com already exists")]
    # Another account may hold the same name (as a pending zone of its own).
    assert cf.zones.create(name="example.com", account={"id": OTHER_ACCOUNT}).account.id == OTHER_ACCOUNT


def test_invalid_requests(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    with pytest.raises(cloudflare.BadRequestError) as not_a_domain:
        cf.zones.create(name="localhost", account={"id": fresh_emulator.account_id})
    assert [e.code for e in not_a_domain.value.errors] == [1049]
    zone = cf.zones.create(name="example.com", account={"id": fresh_emulator.account_id})
    with pytest.raises(cloudflare.BadRequestError):
        cf.zones.edit(zone_id=zone.id, vanity_name_servers=["ns1.example.com"])
    with pytest.raises(cloudflare.BadRequestError) as malformed:
        cf.zones.get(zone_id="example.com")
    assert [e.code for e in malformed.value.errors] == [7003, 7000]
    with pytest.raises(cloudflare.NotFoundError):
        cf.zones.get(zone_id="c" * 32)


def _seed_zones(emulator: EmulatorProcess, count: int, **fields: Any) -> None:
    emulator.seed({"zones": [{"name": f"zone{i:02}.example", **fields} for i in range(count)]})


def test_list_pages_and_filters(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    _seed_zones(fresh_emulator, 12)
    fresh_emulator.seed(
        {
            "accounts": [{"id": OTHER_ACCOUNT, "name": "other"}],
            "zones": [
                {"name": "pending.example", "status": "pending", "account_id": fresh_emulator.account_id},
                {"name": "elsewhere.example", "account_id": OTHER_ACCOUNT},
            ],
        }
    )
    first = cf.zones.list(per_page=5)
    assert len(first.result) == 5
    assert first.result_info is not None
    assert (first.result_info.page, first.result_info.per_page) == (1, 5)
    raw = cf.zones.with_raw_response.list(per_page=5, page=3).http_response.json()
    assert raw["result_info"] == {"page": 3, "per_page": 5, "count": 4, "total_count": 14, "total_pages": 3}
    assert cf.zones.list(per_page=5, page=9).result == []  # past the end: empty, not an error

    every = [z.name for z in cf.zones.list(per_page=5)]
    assert len(every) == 14
    assert every == sorted(every)
    for zone in cf.zones.list(per_page=50):
        conforms(zone)

    assert [z.name for z in cf.zones.list(name="zone03.example")] == ["zone03.example"]
    assert [z.name for z in cf.zones.list(name="starts_with:zone1")] == ["zone10.example", "zone11.example"]
    assert [z.name for z in cf.zones.list(status="pending")] == ["pending.example"]
    assert [z.name for z in cf.zones.list(account={"id": OTHER_ACCOUNT})] == ["elsewhere.example"]
    assert [z.name for z in cf.zones.list(account={"name": "other"})] == ["elsewhere.example"]
    either = cf.zones.list(name="zone00.example", status="pending", match="any")
    assert sorted(z.name for z in either) == ["pending.example", "zone00.example"]
    assert cf.zones.list(per_page=5, direction="desc").result[0].name == "zone11.example"


def test_permissions(fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.seed(
        {
            "accounts": [{"id": OTHER_ACCOUNT, "name": "other"}],
            "zones": [
                {"name": "mine.example", "account_id": fresh_emulator.account_id},
                {"name": "also-mine.example", "account_id": fresh_emulator.account_id},
                {"name": "theirs.example", "account_id": OTHER_ACCOUNT},
            ],
        }
    )
    reader = fresh_emulator.client(
        fresh_emulator.add_token(["zone:read"], owner="account", account_id=fresh_emulator.account_id)["value"]
    )
    assert sorted(z.name for z in reader.zones.list()) == ["also-mine.example", "mine.example"]
    with pytest.raises(cloudflare.PermissionDeniedError) as denied:
        reader.zones.create(name="new.example", account={"id": fresh_emulator.account_id})
    assert [e.code for e in denied.value.errors] == [9109]
    theirs = next(z for z in fresh_emulator.client().zones.list() if z.name == "theirs.example")
    with pytest.raises(cloudflare.PermissionDeniedError):
        reader.zones.get(zone_id=theirs.id)

    one_zone = fresh_emulator.client(fresh_emulator.add_token(["zone:edit"], zones=["mine.example"])["value"])
    assert [z.name for z in one_zone.zones.list()] == ["mine.example"]

    dns_only = fresh_emulator.client(fresh_emulator.add_token(["dns:edit"])["value"])
    with pytest.raises(cloudflare.PermissionDeniedError) as no_zone_read:
        dns_only.zones.list()
    assert [e.code for e in no_zone_read.value.errors] == [9109]
