"""Managed transforms through the official SDK: what a plan offers, switching by ID, conflicts, turning all off."""

from __future__ import annotations

from typing import Any

import cloudflare
import pytest
from cloudflare.types.managed_transforms import ManagedTransformListResponse

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorProcess


def enabled(document: Any) -> set[str]:
    return {t.id for t in [*document.managed_request_headers, *document.managed_response_headers] if t.enabled}


def test_free_zone_offers_six_and_switches_by_id(cf: cloudflare.Cloudflare, zone: Any) -> None:
    listed = cf.managed_transforms.list(zone_id=zone.id)
    assert isinstance(listed, ManagedTransformListResponse)
    conforms(listed)
    assert len(listed.managed_request_headers) + len(listed.managed_response_headers) == 6
    assert enabled(listed) == set()

    edited = cf.managed_transforms.edit(
        zone_id=zone.id,
        managed_request_headers=[{"id": "add_visitor_location_headers", "enabled": True}],
        managed_response_headers=[{"id": "add_security_headers", "enabled": True}],
    )
    conforms(edited)
    assert enabled(edited) == {"add_visitor_location_headers", "add_security_headers"}
    # Unlisted transforms keep their state.
    again = cf.managed_transforms.edit(
        zone_id=zone.id,
        managed_request_headers=[{"id": "remove_visitor_ip_headers", "enabled": True}],
        managed_response_headers=[],
    )
    assert enabled(again) == {"add_visitor_location_headers", "add_security_headers", "remove_visitor_ip_headers"}

    cf.managed_transforms.delete(zone_id=zone.id)
    assert enabled(cf.managed_transforms.list(zone_id=zone.id)) == set()


def test_refusals_and_conflicts(cf: cloudflare.Cloudflare, zone: Any, fresh_emulator: EmulatorProcess) -> None:
    with pytest.raises(cloudflare.BadRequestError):
        cf.managed_transforms.edit(
            zone_id=zone.id,
            managed_request_headers=[{"id": "add_true_client_ip_headers", "enabled": True}],
            managed_response_headers=[],
        )
    with pytest.raises(cloudflare.BadRequestError):
        cf.managed_transforms.edit(
            zone_id=zone.id,
            managed_request_headers=[{"id": "add_security_headers", "enabled": True}],
            managed_response_headers=[],
        )
    fresh_emulator.seed({"zones": [{"name": "big.example", "plan": "enterprise"}]})
    big = next(iter(cf.zones.list(name="big.example")))
    on = cf.managed_transforms.edit(
        zone_id=big.id,
        managed_request_headers=[{"id": "remove_visitor_ip_headers", "enabled": True}],
        managed_response_headers=[],
    )
    true_client = next(t for t in on.managed_request_headers if t.id == "add_true_client_ip_headers")
    assert (true_client.has_conflict, true_client.conflicts_with) == (True, ["remove_visitor_ip_headers"])
    with pytest.raises(cloudflare.BadRequestError):
        cf.managed_transforms.edit(
            zone_id=big.id,
            managed_request_headers=[{"id": "add_true_client_ip_headers", "enabled": True}],
            managed_response_headers=[],
        )


def test_dump_seeds_back(cf: cloudflare.Cloudflare, zone: Any, fresh_emulator: EmulatorProcess) -> None:
    cf.managed_transforms.edit(
        zone_id=zone.id,
        managed_request_headers=[],
        managed_response_headers=[{"id": "add_security_headers", "enabled": True}],
    )
    dump = fresh_emulator.state_dump()
    assert dump["managed_headers"] == [{"zone_id": zone.id, "enabled": ["add_security_headers"]}]
    fresh_emulator.reset()
    fresh_emulator.seed(dump)
    assert fresh_emulator.state_dump() == dump
