"""ManagedTransform from `kubectl apply` to the zone's managed headers: listed transforms switched, the others left as
they are, one ManagedTransform per zone, and deletion turning the zone's transforms off."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.controller import ControllerProcess, Kflare
from tests.fixtures.emulator import EmulatorProcess
from tests.helpers import eventually
from tests.kinds import cf

pytestmark = pytest.mark.integration


def enabled(emulator: EmulatorProcess, zone_id: str) -> set[str]:
    document = cf(emulator, "GET", f"/zones/{zone_id}/managed_headers")
    return {
        t["id"] for t in (*document["managed_request_headers"], *document["managed_response_headers"]) if t["enabled"]
    }


def transform(name: str, **spec: Any) -> dict[str, Any]:
    return {"kind": "ManagedTransform", "metadata": {"name": name}, "spec": {"zoneRef": {"name": "zone"}, **spec}}


async def test_listed_transforms_switch_unlisted_keep_their_state_and_deletion_turns_all_off(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone("headers.example")
    on = [{"id": "add_security_headers"}, {"id": "remove_x-powered-by_header", "enabled": True}]
    await kflare.apply(transform("headers", managedResponseHeaders=on))
    resource = await kflare.ready("ManagedTransform", "headers")
    assert resource["status"]["cloudflareMetadata"]["zoneID"] == zone_id
    assert enabled(fresh_emulator, zone_id) == {"add_security_headers", "remove_x-powered-by_header"}
    # Turned on outside kflare, unlisted: kept. Listed and switched outside kflare: corrected at the next reconcile.
    switches = {"managed_request_headers": [{"id": "add_visitor_location_headers", "enabled": True}],
                "managed_response_headers": [{"id": "add_security_headers", "enabled": False}]}  # fmt: skip
    cf(fresh_emulator, "PATCH", f"/zones/{zone_id}/managed_headers", json=switches)
    await kflare.patch("ManagedTransform", "headers", {"metadata": {"annotations": {"kflare.dev/reconcile-at": "1"}}})

    async def corrected() -> bool:
        return enabled(fresh_emulator, zone_id) == {
            "add_security_headers",
            "remove_x-powered-by_header",
            "add_visitor_location_headers",
        }

    await eventually(corrected, timeout=20, what="the listed transform to be turned on again, the other kept")
    # A second one for the same zone waits until the first is gone.
    await kflare.apply(transform("second", managedRequestHeaders=[{"id": "remove_visitor_ip_headers"}]))
    await kflare.ready("ManagedTransform", "second", reason="AlreadyConfigured", status="False")
    assert "remove_visitor_ip_headers" not in enabled(fresh_emulator, zone_id)
    await kflare.delete("ManagedTransform", "headers")
    await kflare.gone("ManagedTransform", "headers")
    second = await kflare.ready("ManagedTransform", "second")
    assert second["status"]["cloudflareMetadata"]["enabled"] == ["remove_visitor_ip_headers"], (
        "the first one's deletion turned every transform off; the second then turned its own on"
    )
