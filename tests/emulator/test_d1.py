"""D1 databases through the official SDK: create, list with pages, get, read replication, delete, Free quota."""

from __future__ import annotations

import cloudflare
import pytest
from cloudflare.types.d1 import D1

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorProcess


def codes(exc: cloudflare.APIStatusError) -> list[int]:
    return [e.code for e in exc.errors]


def test_create_get_change_delete(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    created = cf.d1.database.create(account_id=account, name="app-db", primary_location_hint="weur", jurisdiction="eu")
    assert isinstance(created, D1)
    conforms(created)
    assert created.uuid is not None
    assert (created.name, created.jurisdiction, created.num_tables) == ("app-db", "eu", 0)
    assert created.read_replication is not None
    assert created.read_replication.mode == "disabled"
    raw = cf.d1.database.with_raw_response.get(database_id=created.uuid, account_id=account).http_response.json()
    assert "primary_location_hint" not in raw["result"], "the hint is not returned once set"

    changed = cf.d1.database.edit(database_id=created.uuid, account_id=account, read_replication={"mode": "auto"})
    assert changed.read_replication is not None
    assert changed.read_replication.mode == "auto"
    assert cf.d1.database.get(database_id=created.uuid, account_id=account).name == "app-db"

    cf.d1.database.delete(database_id=created.uuid, account_id=account)
    with pytest.raises(cloudflare.NotFoundError):
        cf.d1.database.get(database_id=created.uuid, account_id=account)


def test_names_are_unique(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    cf.d1.database.create(account_id=fresh_emulator.account_id, name="same")
    with pytest.raises(cloudflare.BadRequestError) as duplicate:
        cf.d1.database.create(account_id=fresh_emulator.account_id, name="same")
    assert codes(duplicate.value) == [7502]


def test_free_plan_holds_ten(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.seed({"d1_databases": [{"name": f"db-{i}"} for i in range(10)]})
    with pytest.raises(cloudflare.BadRequestError) as quota:
        cf.d1.database.create(account_id=fresh_emulator.account_id, name="eleventh")
    assert [(e.code, e.message) for e in quota.value.errors] == [
        (7406, "System limit reached: databases per account (10)")
    ]
    first = next(iter(cf.d1.database.list(account_id=fresh_emulator.account_id)))
    assert first.uuid is not None
    cf.d1.database.delete(database_id=first.uuid, account_id=fresh_emulator.account_id)
    assert cf.d1.database.create(account_id=fresh_emulator.account_id, name="eleventh").name == "eleventh"


def test_list_pages_and_name_search(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    fresh_emulator.seed({"d1_databases": [{"name": f"db-{i}"} for i in range(10)]})
    first = cf.d1.database.list(account_id=account, per_page=10, page=1)
    assert first.result_info is not None
    assert (first.result_info.total_count, len(first.result)) == (10, 10)
    assert cf.d1.database.list(account_id=account, per_page=10, page=2).result == []
    for database in first.result:
        conforms(database)
    assert [d.name for d in cf.d1.database.list(account_id=account, name="db-7")] == ["db-7"]
    assert len(list(cf.d1.database.list(account_id=account, per_page=10))) == 10


def test_refusals(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    with pytest.raises(cloudflare.BadRequestError) as malformed:
        cf.d1.database.get(database_id="not-a-uuid", account_id=account)
    assert codes(malformed.value) == [7003, 7000]
    with pytest.raises(cloudflare.NotFoundError):
        cf.d1.database.get(database_id="00000000-0000-4000-8000-000000000000", account_id=account)
    with pytest.raises(cloudflare.BadRequestError):
        cf.d1.database.create(account_id=account, name="no spaces allowed")
    reader = fresh_emulator.client(fresh_emulator.add_token(["d1:read"])["value"])
    with pytest.raises(cloudflare.PermissionDeniedError):
        reader.d1.database.create(account_id=account, name="nope")


def test_dump_seeds_back(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    cf.d1.database.create(account_id=fresh_emulator.account_id, name="kept", primary_location_hint="apac")
    dump = fresh_emulator.state_dump()
    assert dump["d1_databases"][0]["primary_location_hint"] == "apac"
    fresh_emulator.reset()
    fresh_emulator.seed(dump)
    assert fresh_emulator.state_dump() == dump
