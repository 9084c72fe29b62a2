"""Worker routes of a zone through the official SDK: patterns in the zone, exclusions, uniqueness, listing."""

from __future__ import annotations

from typing import Any

import cloudflare
import pytest
from cloudflare.types.workers import RouteCreateResponse

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorProcess


def codes(exc: cloudflare.APIStatusError) -> list[int]:
    return [e.code for e in exc.errors]


@pytest.fixture
def worker(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> str:
    cf.workers.scripts.update(
        script_name="edge",
        account_id=fresh_emulator.account_id,
        metadata={"main_module": "index.js"},
        files=[("index.js", b"export default {}", "application/javascript+module")],
    )
    return "edge"


def test_create_list_update_delete(cf: cloudflare.Cloudflare, zone: Any, worker: str) -> None:
    route = cf.workers.routes.create(zone_id=zone.id, pattern="example.com/api/*", script=worker)
    assert isinstance(route, RouteCreateResponse)
    conforms(route)
    assert (route.pattern, route.script) == ("example.com/api/*", worker)
    exclusion = cf.workers.routes.create(zone_id=zone.id, pattern="example.com/api/static/*")
    assert exclusion.script is None

    listed = list(cf.workers.routes.list(zone_id=zone.id))
    assert [(r.pattern, r.script) for r in listed] == [
        ("example.com/api/*", worker),
        ("example.com/api/static/*", None),
    ]
    for item in listed:
        conforms(item)
    fetched = cf.workers.routes.get(route_id=route.id, zone_id=zone.id)
    assert fetched.id == route.id

    moved = cf.workers.routes.update(route_id=route.id, zone_id=zone.id, pattern="*.example.com/*", script=worker)
    assert (moved.id, moved.pattern) == (route.id, "*.example.com/*")
    deleted = cf.workers.routes.delete(route_id=route.id, zone_id=zone.id)
    assert deleted.id == route.id
    with pytest.raises(cloudflare.NotFoundError) as gone:
        cf.workers.routes.get(route_id=route.id, zone_id=zone.id)
    assert codes(gone.value) == [10007]


def test_one_route_per_pattern(cf: cloudflare.Cloudflare, zone: Any, worker: str) -> None:
    cf.workers.routes.create(zone_id=zone.id, pattern="example.com/*", script=worker)
    with pytest.raises(cloudflare.ConflictError) as duplicate:
        cf.workers.routes.create(zone_id=zone.id, pattern="example.com/*")
    assert codes(duplicate.value) == [10020]
    other = cf.workers.routes.create(zone_id=zone.id, pattern="www.example.com/*")
    with pytest.raises(cloudflare.ConflictError):
        cf.workers.routes.update(route_id=other.id, zone_id=zone.id, pattern="example.com/*")


def test_patterns_outside_the_zone_and_unknown_scripts(cf: cloudflare.Cloudflare, zone: Any) -> None:
    for pattern in ("other.org/*", "https://example.com/*", "example.com:8080/*", "notexample.com/*"):
        with pytest.raises(cloudflare.BadRequestError) as outside:
            cf.workers.routes.create(zone_id=zone.id, pattern=pattern)
        assert codes(outside.value) == [10022], pattern
    with pytest.raises(cloudflare.NotFoundError) as unknown:
        cf.workers.routes.create(zone_id=zone.id, pattern="example.com/*", script="no-such-worker")
    assert codes(unknown.value) == [10007]


def test_the_script_listing_shows_routes_and_a_deleted_worker_takes_them(
    cf: cloudflare.Cloudflare, zone: Any, worker: str, fresh_emulator: EmulatorProcess
) -> None:
    route = cf.workers.routes.create(zone_id=zone.id, pattern="example.com/*", script=worker)
    exclusion = cf.workers.routes.create(zone_id=zone.id, pattern="example.com/health")
    script = next(iter(cf.workers.scripts.list(account_id=fresh_emulator.account_id)))
    assert [(r.id, r.pattern) for r in script.routes or []] == [(route.id, "example.com/*")]
    cf.workers.scripts.delete(script_name=worker, account_id=fresh_emulator.account_id)
    assert [r.id for r in cf.workers.routes.list(zone_id=zone.id)] == [exclusion.id]


def test_dump_seeds_back_and_permissions(
    cf: cloudflare.Cloudflare, zone: Any, worker: str, fresh_emulator: EmulatorProcess
) -> None:
    cf.workers.routes.create(zone_id=zone.id, pattern="example.com/*", script=worker)
    dump = fresh_emulator.state_dump()
    fresh_emulator.reset()
    fresh_emulator.seed(dump)
    assert fresh_emulator.state_dump() == dump

    reader = fresh_emulator.client(fresh_emulator.add_token(["workers_routes:read"])["value"])
    assert len(list(reader.workers.routes.list(zone_id=zone.id))) == 1
    with pytest.raises(cloudflare.PermissionDeniedError):
        reader.workers.routes.create(zone_id=zone.id, pattern="www.example.com/*")
