"""A CacheRule with `vary` through the rules engine against the emulator: written in Cloudflare's shape, and an
idle reconcile changes nothing (the held vary reads as in sync)."""

from __future__ import annotations

from typing import Any

from tests.unit.reconcilers.harness import Cloudflare, KubeSecrets, MemoryKube, Runtime, emulator_state
from tests.unit.reconcilers.test_crash_points import KINDS, NS, ZONE_ID, parents

ENTRYPOINT = f"/zones/{ZONE_ID}/rulesets/phases/http_request_cache_settings/entrypoint"
VARY = {
    "default": {"action": "normalize"},
    "headers": [{"name": "accept-language", "action": "normalize", "languages": ["en", "fr"]}],
}


async def test_vary_reaches_cloudflare_and_stays_in_sync() -> None:
    kube = MemoryKube()
    for obj in parents("CacheRule"):
        kube.add(obj)
    rule: dict[str, Any] = {
        "kind": "CacheRule",
        "metadata": {"name": "pages", "namespace": NS},
        "spec": {"zoneRef": {"name": "zone"}, "expression": 'http.host eq "www.example.com"', "cache": True},
    }
    rule["spec"]["vary"] = VARY
    kube.add(rule)
    cloudflare = Cloudflare(emulator_state([{"id": ZONE_ID, "name": "example.com"}]))
    try:
        runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
        await runtime.reconcile("CacheRule", "pages", NS)
        first = await cloudflare.get(ENTRYPOINT)
        await runtime.reconcile("CacheRule", "pages", NS)
        second = await cloudflare.get(ENTRYPOINT)
    finally:
        await cloudflare.aclose()
    (held,) = first["rules"]
    assert held["action_parameters"]["vary"] == {
        "default": {"action": "normalize"},
        "headers": {"accept-language": {"action": "normalize", "languages": ["en", "fr"]}},
    }
    assert second["version"] == first["version"], "an idle reconcile does not write"
    stored = kube.get("CacheRule", "pages", NS)
    assert stored is not None
    assert stored["status"]["conditions"][0]["reason"] == "Synced"
