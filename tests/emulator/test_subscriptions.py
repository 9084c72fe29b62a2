"""Zone plan subscriptions, through the official SDK."""

from __future__ import annotations

from typing import Any

import cloudflare
import pytest

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorProcess


def test_upgrade_applies_at_once_and_a_downgrade_waits_for_the_period_end(cf: cloudflare.Cloudflare, zone: Any) -> None:
    created = cf.zones.subscriptions.create(zone_id=zone.id, rate_plan={"id": "pro"}, frequency="monthly")
    conforms(created)
    assert created.rate_plan is not None
    assert created.rate_plan.id == "pro"
    assert cf.zones.get(zone_id=zone.id).plan.legacy_id == "pro"  # type: ignore[attr-defined,union-attr]

    cf.zones.subscriptions.update(zone_id=zone.id, rate_plan={"id": "free"}, frequency="monthly")
    read = cf.zones.subscriptions.get(zone_id=zone.id)
    assert read.rate_plan is not None
    assert read.rate_plan.id == "pro", "a downgrade is only scheduled"
    raw = cf.get(f"/zones/{zone.id}", cast_to=object)
    assert raw["result"]["plan_pending"]["legacy_id"] == "free"  # type: ignore[index]


def test_enterprise_and_unknown_plans_are_refused(cf: cloudflare.Cloudflare, zone: Any) -> None:
    for plan in ("enterprise", "platinum"):
        with pytest.raises(cloudflare.BadRequestError) as refused:
            cf.zones.subscriptions.create(zone_id=zone.id, rate_plan={"id": plan})  # type: ignore[typeddict-item]
        assert refused.value.status_code == 400


def test_a_read_only_token_cannot_change_the_plan(fresh_emulator: EmulatorProcess, zone: Any) -> None:
    reader = fresh_emulator.add_token(["zone:read"])
    sdk = fresh_emulator.client(token=reader["value"])
    assert sdk.zones.subscriptions.get(zone_id=zone.id).rate_plan is not None
    with pytest.raises(cloudflare.PermissionDeniedError):
        sdk.zones.subscriptions.update(zone_id=zone.id, rate_plan={"id": "pro"})
