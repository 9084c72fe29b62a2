"""ManagedTransform is one per Cloudflare zone across namespaces: Zones of two namespaces may name the same domain,
and the ManagedTransform of the second namespace reports AlreadyConfigured without writing the zone's document,
until the first one is gone."""

from __future__ import annotations

import copy
from typing import Any

from app.kube.index import Ref
from tests.unit.reconcilers.harness import Cloudflare, KubeSecrets, MemoryKube, Runtime, emulator_state, mark_deleted
from tests.unit.reconcilers.test_crash_points import HEADERS, KINDS, NS, ZONE_ID, parents

OTHER = "other-team"


def transform(namespace: str, created: str, **spec: Any) -> dict[str, Any]:
    return {
        "kind": "ManagedTransform",
        "metadata": {"name": "headers", "namespace": namespace, "creationTimestamp": created},
        "spec": {"zoneRef": {"name": "zone"}, **spec},
    }


def switched_on(document: dict[str, Any]) -> set[str]:
    switches = [*document["managed_request_headers"], *document["managed_response_headers"]]
    return {t["id"] for t in switches if t["enabled"]}


async def test_the_second_namespace_reports_already_configured_and_writes_nothing() -> None:
    kube = MemoryKube()
    for obj in parents("ManagedTransform"):
        kube.add(obj)
        if obj["kind"] == "Zone":  # the same Cloudflare zone, adopted by a Zone of another namespace
            other = copy.deepcopy(obj)
            other["metadata"] = {**other["metadata"], "namespace": OTHER, "uid": "uid-other-zone"}
            kube.add(other)
    first = transform(NS, "2026-01-01T00:00:00Z", managedResponseHeaders=[{"id": "add_security_headers"}])
    second = transform(OTHER, "2026-01-02T00:00:00Z", managedRequestHeaders=[{"id": "remove_visitor_ip_headers"}])
    second["metadata"]["uid"] = "uid-other-headers"
    kube.add(first)
    kube.add(second)
    cloudflare = Cloudflare(emulator_state([{"id": ZONE_ID, "name": "example.com"}]))
    try:
        runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
        # The later one is looked at first: the older one, not yet there, still goes first.
        await runtime.reconcile("ManagedTransform", "headers", OTHER)
        await runtime.reconcile("ManagedTransform", "headers", NS)
        await runtime.reconcile("ManagedTransform", "headers", OTHER)
        while_first = switched_on(await cloudflare.get(HEADERS))
        waiting = kube.get("ManagedTransform", "headers", OTHER)
        assert waiting is not None
        (ready,) = waiting["status"]["conditions"]
        assert (ready["status"], ready["reason"]) == ("False", "AlreadyConfigured")
        # Who configures it is not told to another namespace.
        assert (
            ready["message"]
            == f"a ManagedTransform in another namespace already configures zone example.com ({ZONE_ID})"
        )

        # Once the first is deleted (its transforms turned off), the second configures the zone.
        mark_deleted(kube, "ManagedTransform", "headers", NS)
        await runtime.reconcile("ManagedTransform", "headers", NS)
        assert kube.get("ManagedTransform", "headers", NS) is None
        await runtime.reconcile("ManagedTransform", "headers", OTHER)
        after = switched_on(await cloudflare.get(HEADERS))
    finally:
        await cloudflare.aclose()
    assert while_first == {"add_security_headers"}, "the second namespace's switch was not written"
    assert after == {"remove_visitor_ip_headers"}
    configured = kube.get("ManagedTransform", "headers", OTHER)
    assert configured is not None
    assert configured["status"]["conditions"][0]["reason"] == "Synced"


async def test_the_next_one_is_woken_and_goes_on_before_the_watch_reports_the_first_gone() -> None:
    kube = MemoryKube()
    for obj in parents("ManagedTransform"):
        kube.add(obj)
    kube.add(transform(NS, "2026-01-01T00:00:00Z", managedResponseHeaders=[{"id": "add_security_headers"}]))
    second = transform(NS, "2026-01-02T00:00:00Z", managedRequestHeaders=[{"id": "remove_visitor_ip_headers"}])
    second["metadata"].update(name="later", uid="uid-later")
    kube.add(second)
    cloudflare = Cloudflare(emulator_state([{"id": ZONE_ID, "name": "example.com"}]))
    try:
        runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
        await runtime.reconcile("ManagedTransform", "headers", NS)
        await runtime.reconcile("ManagedTransform", "later", NS)
        waiting = kube.get("ManagedTransform", "later", NS)
        assert waiting is not None
        assert waiting["status"]["conditions"][0]["reason"] == "AlreadyConfigured"
        mark_deleted(kube, "ManagedTransform", "headers", NS)
        del runtime.enqueued[:]
        await runtime.reconcile("ManagedTransform", "headers", NS)
        assert kube.get("ManagedTransform", "headers", NS) is None
        assert Ref("ManagedTransform", NS, "later") in runtime.enqueued, "woken through the index"
        # Its reconcile comes before the watch reports the first one deleted: the cache still holds it, done.
        await runtime.reconcilers["ManagedTransform"].reconcile((NS, "later"))
        after = switched_on(await cloudflare.get(HEADERS))
    finally:
        await cloudflare.aclose()
    assert after == {"remove_visitor_ip_headers"}
    configured = kube.get("ManagedTransform", "later", NS)
    assert configured is not None
    assert configured["status"]["conditions"][0]["reason"] == "Synced"
