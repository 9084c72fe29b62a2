"""WorkerScript, WorkerRoute, KVNamespace, R2Bucket and D1Database against a real API server, the emulator and the
controller process (drift checks every 2 s): a Worker bound to every kind of storage and a Secret, uploads only when
what is uploaded changes, drift, pause, deletion in any order, and secret values kept out of everything kflare writes.
(The adoption and deletion matrices of these kinds are in tests/unit/reconcilers/test_lifecycle_matrices.py.)"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.fixtures.controller import ControllerProcess, Kflare
from tests.fixtures.emulator import EmulatorProcess
from tests.helpers import eventually
from tests.kinds import cf, r2_buckets, upload_worker, worker_code, workers

pytestmark = pytest.mark.integration

SECRET_VALUE = "s3cr3t-value-that-must-never-leak"
ROTATED_VALUE = "rotated-s3cr3t-value-never-leaks"
CODE_V1 = "export default { async fetch(req, env) { return new Response('v1'); } };"
CODE_V2 = "export default { async fetch(req, env) { return new Response('v2'); } };"


def uploads(emulator: EmulatorProcess, name: str, since: float | None = None) -> list[dict[str, Any]]:
    return [
        c
        for c in emulator.calls(method="PUT", path=f"/workers/scripts/{name}$", since=since)
        if c["status"] is not None and 200 <= c["status"] < 300  # None: still in flight
    ]


def listings(emulator: EmulatorProcess, since: float, path: str = "/workers/scripts$") -> list[dict[str, Any]]:
    return emulator.calls(method="GET", path=path, since=since)


async def make_stack(kflare: Kflare, *, worker: str = "api", domain: str = "example.com") -> str:
    """Account, zone, a Secret and a ConfigMap, KV, R2, D1, a Worker bound to all, and a route; returns the zone ID."""
    zone_id = await kflare.ready_zone(domain)
    await kflare.core.create_namespaced_secret(
        kflare.namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="api-secrets"),
            data={"api-key": base64.b64encode(SECRET_VALUE.encode()).decode()},
        ),
    )
    await kflare.core.create_namespaced_config_map(
        kflare.namespace,
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="api-code"), data={"index.js": CODE_V1}),
    )
    account = {"name": kflare.account}
    await kflare.apply(
        {"kind": "KVNamespace", "metadata": {"name": "cache"}, "spec": {"accountRef": account, "title": "api-cache"}}
    )
    await kflare.apply(
        {
            "kind": "R2Bucket",
            "metadata": {"name": "assets"},
            "spec": {"accountRef": account, "name": "api-assets", "locationHint": "weur"},
        }
    )
    await kflare.apply(
        {"kind": "D1Database", "metadata": {"name": "db"}, "spec": {"accountRef": account, "name": "api-db"}}
    )
    await kflare.apply(
        {
            "kind": "WorkerScript",
            "metadata": {"name": "api"},
            "spec": {
                "accountRef": account,
                "name": worker,
                "scriptConfigMapRef": {"name": "api-code", "key": "index.js"},
                "compatibilityDate": "2024-09-23",
                "bindings": [
                    {"name": "GREETING", "plainText": "hello"},
                    {"name": "API_KEY", "secretKeyRef": {"name": "api-secrets", "key": "api-key"}},
                    {"name": "CACHE", "kvNamespaceRef": {"name": "cache"}},
                    {"name": "ASSETS", "r2BucketRef": {"name": "assets"}},
                    {"name": "DB", "d1DatabaseRef": {"name": "db"}},
                ],
            },
        }
    )
    await kflare.apply(
        {
            "kind": "WorkerRoute",
            "metadata": {"name": "api-route"},
            "spec": {"zoneRef": {"name": "zone"}, "pattern": f"api.{domain}/*", "workerScriptRef": {"name": "api"}},
        }
    )
    for kind, name in [
        ("KVNamespace", "cache"),
        ("R2Bucket", "assets"),
        ("D1Database", "db"),
        ("WorkerScript", "api"),
        ("WorkerRoute", "api-route"),
    ]:
        await kflare.ready(kind, name, reason="Synced")
    return zone_id


async def idle_round_uploads_nothing(emulator: EmulatorProcess, name: str, path: str = "/workers/scripts$") -> None:
    """Two drift rounds (each lists the account's Workers, or `path`) pass without an upload."""
    since = time.time()
    await eventually(
        lambda: _at_least(lambda: len(listings(emulator, since, path)), 2), timeout=15, what="two drift rounds"
    )
    assert uploads(emulator, name, since) == []


async def _at_least(count: Any, n: int) -> bool:
    return bool(count() >= n)


async def test_worker_with_every_binding(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await make_stack(kflare)
    account_id = fresh_emulator.account_id
    worker = await kflare.get("WorkerScript", "api")
    status = worker["status"]
    assert len(status["appliedHash"]) == 64
    assert status["cloudflareMetadata"]["modifiedOn"] == workers(fresh_emulator, account_id)["api"]["modified_on"]
    assert "'v1'" in worker_code(fresh_emulator, account_id, "api")
    assert len(uploads(fresh_emulator, "api")) == 1, "uploaded once"

    settings = cf(fresh_emulator, "GET", f"/accounts/{account_id}/workers/scripts/api/settings")
    bound = {b["name"]: b for b in settings["bindings"]}
    kv = await kflare.get("KVNamespace", "cache")
    d1 = await kflare.get("D1Database", "db")
    assert bound["CACHE"]["namespace_id"] == kv["status"]["cloudflareMetadata"]["namespaceID"]
    assert bound["ASSETS"]["bucket_name"] == "api-assets"
    assert bound["DB"]["id"] == d1["status"]["cloudflareMetadata"]["databaseID"]
    assert bound["GREETING"]["text"] == "hello"
    assert bound["API_KEY"]["type"] == "secret_text"
    assert "text" not in bound["API_KEY"]
    route = await kflare.get("WorkerRoute", "api-route")
    meta = route["status"]["cloudflareMetadata"]
    assert meta["zoneID"] == zone_id
    assert meta["script"] == "api"
    bucket = await kflare.get("R2Bucket", "assets")
    assert bucket["status"]["cloudflareMetadata"]["location"] == "WEUR"

    await idle_round_uploads_nothing(fresh_emulator, "api")

    # A rotated Secret is uploaded once, an edited ConfigMap once; then nothing.
    since = time.time()
    await kflare.core.patch_namespaced_secret(
        "api-secrets", kflare.namespace, {"data": {"api-key": base64.b64encode(ROTATED_VALUE.encode()).decode()}}
    )
    await eventually(lambda: _at_least(lambda: len(uploads(fresh_emulator, "api", since)), 1), what="the re-upload")
    await idle_round_uploads_nothing(fresh_emulator, "api")
    assert len(uploads(fresh_emulator, "api", since)) == 1

    since = time.time()
    await kflare.core.patch_namespaced_config_map("api-code", kflare.namespace, {"data": {"index.js": CODE_V2}})
    await eventually(lambda: _at_least(lambda: len(uploads(fresh_emulator, "api", since)), 1), what="the re-upload")
    await idle_round_uploads_nothing(fresh_emulator, "api")
    assert len(uploads(fresh_emulator, "api", since)) == 1
    assert "'v2'" in worker_code(fresh_emulator, account_id, "api")
    after = await kflare.ready("WorkerScript", "api", reason="Synced")
    assert after["status"]["appliedHash"] != status["appliedHash"]

    # The secret values reached Cloudflare and nothing else kflare wrote: objects, Events, the log.
    state = json.dumps(fresh_emulator.state_dump())
    assert ROTATED_VALUE in state, "the value is bound in Cloudflare"
    written = [
        json.dumps(await kflare.get(kind, name))
        for kind, name in [("WorkerScript", "api"), ("WorkerRoute", "api-route"), ("KVNamespace", "cache")]
    ]
    events = await client.EventsV1Api(kflare.api).list_namespaced_event(kflare.namespace)
    written += [json.dumps(kflare.api.sanitize_for_serialization(e)) for e in events.items]
    written.append(controller.log())
    for text in written:
        assert SECRET_VALUE not in text
        assert ROTATED_VALUE not in text


async def test_drift_is_corrected(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await make_stack(kflare)
    account_id = fresh_emulator.account_id
    routes = f"/zones/{zone_id}/workers/routes"

    # A Worker changed outside kflare (its modified_on moves) is uploaded again.
    upload_worker(
        fresh_emulator, account_id, "api", "export default { fetch() { return new Response('dashboard'); } };"
    )

    async def restored() -> bool:
        return "'v1'" in worker_code(fresh_emulator, account_id, "api")

    await eventually(restored, what="the Worker uploaded again")

    # A route pointed elsewhere (an exclusion route now) is corrected in place.
    (route,) = cf(fresh_emulator, "GET", routes)
    cf(fresh_emulator, "PUT", f"{routes}/{route['id']}", json={"pattern": route["pattern"]})

    async def route_restored() -> bool:
        return bool(cf(fresh_emulator, "GET", f"{routes}/{route['id']}").get("script") == "api")

    await eventually(route_restored, what="the route's Worker restored")

    # A renamed KV namespace gets its title back, same ID.
    kv_id = (await kflare.get("KVNamespace", "cache"))["status"]["cloudflareMetadata"]["namespaceID"]
    cf(fresh_emulator, "PUT", f"/accounts/{account_id}/storage/kv/namespaces/{kv_id}", json={"title": "renamed"})

    async def title_restored() -> bool:
        found = cf(fresh_emulator, "GET", f"/accounts/{account_id}/storage/kv/namespaces/{kv_id}")
        return bool(found["title"] == "api-cache")

    await eventually(title_restored, what="the KV title restored")

    # A Worker deleted outside kflare takes its routes with it: both come back.
    cf(fresh_emulator, "DELETE", f"/accounts/{account_id}/workers/scripts/api")

    async def both_back() -> bool:
        found = cf(fresh_emulator, "GET", routes)
        return "api" in workers(fresh_emulator, account_id) and [r["script"] for r in found] == ["api"]

    await eventually(both_back, what="the Worker and its route recreated")
    await kflare.ready("WorkerRoute", "api-route", reason="Synced")


async def test_renaming_a_kv_namespace_keeps_it(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await kflare.token_secret()
    await kflare.make_account()
    await kflare.apply(
        {
            "kind": "KVNamespace",
            "metadata": {"name": "kv"},
            "spec": {"accountRef": {"name": kflare.account}, "title": "one"},
        }
    )
    before = await kflare.ready("KVNamespace", "kv")
    kv_id = before["status"]["cloudflareMetadata"]["namespaceID"]
    await kflare.patch("KVNamespace", "kv", {"spec": {"title": "two"}})
    after = await kflare.ready("KVNamespace", "kv")
    assert after["status"]["cloudflareMetadata"]["namespaceID"] == kv_id
    base = f"/accounts/{fresh_emulator.account_id}/storage/kv/namespaces"
    assert [n["title"] for n in cf(fresh_emulator, "GET", base)] == ["two"]


async def test_pause(controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess) -> None:
    await make_stack(kflare)
    await kflare.patch("WorkerScript", "api", {"metadata": {"annotations": {"kflare.dev/paused": "true"}}})
    await kflare.ready("WorkerScript", "api", reason="Paused")
    since = time.time()
    await kflare.core.patch_namespaced_config_map("api-code", kflare.namespace, {"data": {"index.js": CODE_V2}})
    await kflare.patch("WorkerScript", "api", {"spec": {"compatibilityDate": "2024-10-01"}})
    await kflare.ready("WorkerScript", "api", reason="Paused")
    # A paused Worker makes no call at all: time is told by the KV namespace's drift rounds.
    await idle_round_uploads_nothing(fresh_emulator, "api", path="/storage/kv/namespaces$")
    assert listings(fresh_emulator, since) == [], "no call for the paused Worker"
    await kflare.patch("WorkerScript", "api", {"metadata": {"annotations": {"kflare.dev/paused": None}}})
    await kflare.ready("WorkerScript", "api", reason="Synced")
    assert len(uploads(fresh_emulator, "api", since)) == 1
    assert "'v2'" in worker_code(fresh_emulator, fresh_emulator.account_id, "api")


async def test_storage_deleted_first_waits_for_its_worker(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await make_stack(kflare)
    account_id = fresh_emulator.account_id
    kv_id = (await kflare.get("KVNamespace", "cache"))["status"]["cloudflareMetadata"]["namespaceID"]
    for kind, name in [("KVNamespace", "cache"), ("R2Bucket", "assets"), ("D1Database", "db"), ("Zone", "zone")]:
        await kflare.delete(kind, name)
    kv = await kflare.ready("KVNamespace", "cache", reason="InUse", status="False")
    message = kv["status"]["conditions"][0]["message"]
    assert f"WorkerScript {kflare.namespace}/api" in message
    await kflare.ready("R2Bucket", "assets", reason="InUse", status="False")
    await kflare.ready("D1Database", "db", reason="InUse", status="False")
    zone = await kflare.ready("Zone", "zone", reason="InUse", status="False")
    assert "WorkerRoute" in zone["status"]["conditions"][0]["message"]
    assert cf(fresh_emulator, "GET", f"/accounts/{account_id}/storage/kv/namespaces/{kv_id}")["id"] == kv_id

    # The account waits for everything; the Worker goes (its route stays till deleted), then the storage.
    await kflare.delete("CloudflareAccount", kflare.account)
    await kflare.delete("WorkerScript", "api")
    await kflare.gone("WorkerScript", "api")
    await kflare.delete("WorkerRoute", "api-route")
    for kind, name in [
        ("WorkerRoute", "api-route"),
        ("KVNamespace", "cache"),
        ("R2Bucket", "assets"),
        ("D1Database", "db"),
        ("Zone", "zone"),
        ("CloudflareAccount", kflare.account),
    ]:
        await kflare.gone(kind, name)
    assert workers(fresh_emulator, account_id) == {}
    assert cf(fresh_emulator, "GET", f"/accounts/{account_id}/storage/kv/namespaces") == []
    assert cf(fresh_emulator, "GET", f"/accounts/{account_id}/r2/buckets")["buckets"] == []
    assert cf(fresh_emulator, "GET", f"/accounts/{account_id}/d1/database") == []


async def test_a_bucket_with_objects_is_not_deleted(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await kflare.token_secret()
    await kflare.make_account()
    await kflare.apply(
        {
            "kind": "R2Bucket",
            "metadata": {"name": "b"},
            "spec": {"accountRef": {"name": kflare.account}, "name": "eu-data", "jurisdiction": "eu"},
        }
    )
    ready = await kflare.ready("R2Bucket", "b")
    assert ready["status"]["cloudflareMetadata"]["jurisdiction"] == "eu"
    fresh_emulator.put_r2_object("eu-data", "report.csv", "a,b", jurisdiction="eu")
    await kflare.delete("R2Bucket", "b")
    waiting = await kflare.ready("R2Bucket", "b", reason="BucketNotEmpty", status="False")
    assert "never deletes objects" in waiting["status"]["conditions"][0]["message"]
    await kflare.patch("R2Bucket", "b", {"metadata": {"annotations": {"kflare.dev/deletion-policy": "retain"}}})
    await kflare.gone("R2Bucket", "b")
    assert fresh_emulator.r2_objects("eu-data") == ["report.csv"]
    assert [b["name"] for b in r2_buckets(fresh_emulator, "eu")] == ["eu-data"]


async def test_routes_outside_the_zone_and_in_conflict(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone("example.com")
    since = time.time()
    await kflare.apply(
        {
            "kind": "WorkerRoute",
            "metadata": {"name": "outside"},
            "spec": {"zoneRef": {"name": "zone"}, "pattern": "example.org/*"},
        }
    )
    await kflare.ready("WorkerRoute", "outside", reason="PatternOutsideZone", status="False")
    assert fresh_emulator.calls(path="/workers/routes", since=since) == [], "no call"

    spec = {"zoneRef": {"name": "zone"}, "pattern": "static.example.com/*"}
    await kflare.apply({"kind": "WorkerRoute", "metadata": {"name": "first"}, "spec": spec})
    await kflare.ready("WorkerRoute", "first")
    await kflare.apply(
        {
            "kind": "WorkerRoute",
            "metadata": {"name": "second", "annotations": {"kflare.dev/adoption-policy": "adopt"}},
            "spec": spec,
        }
    )
    await kflare.ready("WorkerRoute", "second", reason="PatternConflict", status="False")
    assert len(cf(fresh_emulator, "GET", f"/zones/{zone_id}/workers/routes")) == 1


async def test_bound_objects_must_exist_and_share_the_account(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await kflare.token_secret()
    await kflare.make_account()
    spec = {
        "accountRef": {"name": kflare.account},
        "name": "w",
        "script": CODE_V1,
        "bindings": [{"name": "CACHE", "kvNamespaceRef": {"name": "missing"}}],
    }
    await kflare.apply({"kind": "WorkerScript", "metadata": {"name": "w"}, "spec": spec})
    waiting = await kflare.ready("WorkerScript", "w", reason="KVNamespaceNotFound", status="False")
    assert f"KVNamespace {kflare.namespace}/missing" in waiting["status"]["conditions"][0]["message"]
    await kflare.apply(
        {
            "kind": "KVNamespace",
            "metadata": {"name": "missing"},
            "spec": {"accountRef": {"name": "other-account"}, "title": "t"},
        }
    )
    await kflare.ready("WorkerScript", "w", reason="AccountMismatch", status="False")
    assert uploads(fresh_emulator, "w") == []


async def test_d1_quota_is_reported_with_cloudflares_message(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    base = f"/accounts/{fresh_emulator.account_id}/d1/database"
    for index in range(10):
        cf(fresh_emulator, "POST", base, json={"name": f"other-{index}"})
    await kflare.token_secret()
    await kflare.make_account()
    await kflare.apply(
        {
            "kind": "D1Database",
            "metadata": {"name": "db"},
            "spec": {"accountRef": {"name": kflare.account}, "name": "one-too-many"},
        }
    )
    refused = await kflare.ready("D1Database", "db", reason="TerminalError", status="False")
    assert "System limit reached: databases per account (10)" in refused["status"]["conditions"][0]["message"]
