"""The cache keeps neither managed fields nor `kubectl apply`'s last-applied copy, and kflare's writes, computed
against the cache, leave both as the API server holds them."""

from __future__ import annotations

import copy
from unittest.mock import ANY

from app.api.constants import FINALIZER, Reason
from app.kube.informer import LAST_APPLIED
from reconcilers.lifecycle import CREATE_INTENT_ANNOTATION
from tests.unit.reconcilers.harness import Cloudflare, MemoryKube, Runtime, emulator_state
from tests.unit.reconcilers.test_crash_points import KINDS, NS, SECRETS, ZONE_ID, parents, record_resource

MANAGED = [{"manager": "kubectl-client-side-apply", "operation": "Update", "fieldsV1": {"f:spec": {}}}]


async def test_writes_against_the_stripped_cache_keep_what_the_server_holds() -> None:
    record = record_resource({"team": "dns"})
    record["metadata"]["annotations"][LAST_APPLIED] = '{"kind": "DNSRecord", "spec": {"name": "www"}}'
    record["metadata"]["managedFields"] = copy.deepcopy(MANAGED)
    cloudflare = Cloudflare(emulator_state([{"id": ZONE_ID, "name": "example.com"}]))
    kube = MemoryKube()
    try:
        for obj in [*parents("DNSRecord"), record]:
            kube.add(obj)
        runtime = Runtime(kube, cloudflare, KINDS, SECRETS)
        await runtime.settle()

        stored = kube.get("DNSRecord", "www", NS)
        assert stored is not None
        # The intent, the finalizer and the status were written, and nothing the writes did not name was touched.
        assert stored["status"]["conditions"][0]["reason"] == Reason.SYNCED
        assert stored["status"]["cloudflareMetadata"]["recordID"]
        assert CREATE_INTENT_ANNOTATION in stored["metadata"]["annotations"]
        assert FINALIZER in stored["metadata"]["finalizers"]
        assert stored["metadata"]["annotations"][LAST_APPLIED] == record["metadata"]["annotations"][LAST_APPLIED]
        assert stored["metadata"]["managedFields"] == MANAGED

        cached = runtime.informers["DNSRecord"].get("www", NS)
        assert cached is not None
        assert "managedFields" not in cached["metadata"]
        assert cached["metadata"]["annotations"] == {"team": "dns", CREATE_INTENT_ANNOTATION: ANY}
        assert cached["status"] == stored["status"]
    finally:
        await cloudflare.aclose()
