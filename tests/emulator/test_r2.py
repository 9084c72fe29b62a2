"""R2 buckets through the official SDK: names, location hints, jurisdictions, listing, and no deletion of objects."""

from __future__ import annotations

import cloudflare
import pytest
from cloudflare.types.r2 import Bucket, BucketListResponse

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorProcess


def codes(exc: cloudflare.APIStatusError) -> list[int]:
    return [e.code for e in exc.errors]


def test_create_get_list_delete(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    created = cf.r2.buckets.create(account_id=account, name="assets", location_hint="weur")
    assert isinstance(created, Bucket)
    conforms(created)
    assert (created.name, created.location, created.jurisdiction, created.storage_class) == (
        "assets",
        "weur",
        "default",
        "Standard",
    )
    assert created.creation_date

    fetched = cf.r2.buckets.get(bucket_name="assets", account_id=account)
    assert fetched == created
    listed = cf.r2.buckets.list(account_id=account)
    assert isinstance(listed, BucketListResponse)
    conforms(listed)
    assert [b.name for b in listed.buckets or []] == ["assets"]

    assert cf.r2.buckets.delete(bucket_name="assets", account_id=account) is not None
    with pytest.raises(cloudflare.NotFoundError) as gone:
        cf.r2.buckets.get(bucket_name="assets", account_id=account)
    assert codes(gone.value) == [10006]


@pytest.mark.parametrize(
    "name", ["ab", "Upper", "-starts-with-hyphen", "ends-with-hyphen-", "has_underscore", "a" * 64]
)
def test_name_rules(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess, name: str) -> None:
    with pytest.raises(cloudflare.BadRequestError) as refused:
        cf.r2.buckets.create(account_id=fresh_emulator.account_id, name=name)
    assert codes(refused.value) == [10005]


def test_duplicate_is_a_conflict(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    cf.r2.buckets.create(account_id=fresh_emulator.account_id, name="logs")
    with pytest.raises(cloudflare.ConflictError) as duplicate:
        cf.r2.buckets.create(account_id=fresh_emulator.account_id, name="logs")
    assert codes(duplicate.value) == [10004]


def test_jurisdictions_are_part_of_the_address(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    eu = cf.r2.buckets.create(account_id=account, name="data", cf_r2_jurisdiction="eu")
    assert eu.jurisdiction == "eu"
    fedramp = cf.r2.buckets.create(account_id=account, name="data", cf_r2_jurisdiction="fedramp")
    assert fedramp.jurisdiction == "fedramp"
    # Without the header the default jurisdiction is meant, where there is no such bucket.
    with pytest.raises(cloudflare.NotFoundError):
        cf.r2.buckets.get(bucket_name="data", account_id=account)
    assert cf.r2.buckets.list(account_id=account).buckets == []
    in_eu = cf.r2.buckets.list(account_id=account, cf_r2_jurisdiction="eu")
    assert [(b.name, b.jurisdiction) for b in in_eu.buckets or []] == [("data", "eu")]
    assert cf.r2.buckets.get(bucket_name="data", account_id=account, cf_r2_jurisdiction="eu").location == "weur"
    cf.r2.buckets.delete(bucket_name="data", account_id=account, cf_r2_jurisdiction="eu")
    assert cf.r2.buckets.get(bucket_name="data", account_id=account, cf_r2_jurisdiction="fedramp") is not None


def test_a_bucket_with_objects_refuses_to_go(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    cf.r2.buckets.create(account_id=account, name="media")
    fresh_emulator.put_r2_object("media", "cat.jpg", "meow")
    with pytest.raises(cloudflare.ConflictError) as not_empty:
        cf.r2.buckets.delete(bucket_name="media", account_id=account)
    assert codes(not_empty.value) == [10008]
    assert fresh_emulator.r2_objects("media") == ["cat.jpg"]
    assert cf.r2.buckets.get(bucket_name="media", account_id=account) is not None


def test_list_pages_with_a_cursor_and_filters(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    fresh_emulator.seed({"r2_buckets": [{"name": f"bucket-{i:02}"} for i in range(7)]})
    names: list[str] = []
    pages = 0
    cursor = ""
    while True:
        raw = cf.r2.buckets.with_raw_response.list(account_id=account, per_page=3, cursor=cursor)
        conforms(raw.parse())
        names += [b.name or "" for b in raw.parse().buckets or []]
        info = raw.http_response.json()["result_info"]
        assert info["per_page"] == 3
        pages += 1
        cursor = info["cursor"]
        if not cursor:
            break
    assert (names, pages) == ([f"bucket-{i:02}" for i in range(7)], 3)

    filtered = cf.r2.buckets.list(account_id=account, name_contains="-0", start_after="bucket-04")
    assert [b.name for b in filtered.buckets or []] == ["bucket-05", "bucket-06"]
    assert (cf.r2.buckets.list(account_id=account, direction="desc").buckets or [])[0].name == "bucket-06"


def test_dump_seeds_back(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    cf.r2.buckets.create(
        account_id=fresh_emulator.account_id, name="kept", location_hint="apac", cf_r2_jurisdiction="eu"
    )
    fresh_emulator.put_r2_object("kept", "a.txt", "a", jurisdiction="eu")
    dump = fresh_emulator.state_dump()
    fresh_emulator.reset()
    fresh_emulator.seed(dump)
    assert fresh_emulator.state_dump() == dump


def test_permissions(fresh_emulator: EmulatorProcess) -> None:
    reader = fresh_emulator.client(fresh_emulator.add_token(["workers_r2:read"])["value"])
    assert reader.r2.buckets.list(account_id=fresh_emulator.account_id).buckets == []
    with pytest.raises(cloudflare.PermissionDeniedError):
        reader.r2.buckets.create(account_id=fresh_emulator.account_id, name="nope")
