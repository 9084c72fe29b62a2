"""CloudflareAccount, Zone and DNSRecord from `kubectl apply` to Cloudflare: the controller as its own process,
the real API server, the emulator."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from app.controlplane import ControlPlane
from tests.fixtures.controller import ControllerProcess, Kflare, controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.helpers import eventually
from tests.kinds import cf

pytestmark = pytest.mark.integration

WRITES = r"^(POST|PUT|PATCH|DELETE)$"


def records(emulator: EmulatorProcess, zone_id: str, **filters: str) -> list[dict[str, Any]]:
    return list(cf(emulator, "GET", f"/zones/{zone_id}/dns_records", params={"per_page": 5000, **filters}))


def writes(emulator: EmulatorProcess, since: float | None = None) -> list[dict[str, Any]]:
    return [c for c in emulator.calls(since=since) if c["method"] in ("POST", "PUT", "PATCH", "DELETE")]


def kubectl(plane: ControlPlane, *args: str) -> str:
    # A fresh discovery cache: one made before the CRDs were installed would not know the `kflare` category.
    cache = plane.workdir / f"kubectl-cache-{time.monotonic_ns()}"
    done = subprocess.run(
        [str(plane.binary("kubectl")), "--kubeconfig", str(plane.kubeconfig_path), "--cache-dir", str(cache), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


async def test_happy_path_from_apply_to_cloudflare(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess, control_plane: ControlPlane
) -> None:
    zone_id = await kflare.ready_zone("example.com")
    account = await kflare.ready("CloudflareAccount", kflare.account, reason="Validated")
    assert account["status"]["accountName"] == "kflare tests"
    zone = await kflare.get("Zone", "zone")
    assert zone["status"]["cloudflareMetadata"]["nameServers"]
    assert [z["name"] for z in cf(fresh_emulator, "GET", "/zones")] == ["example.com"]

    await kflare.make_record("www", "zone", name="www.example.com", type="A", content="192.0.2.1", proxied=True)
    await kflare.make_record("mx1", "zone", name="example.com", type="MX", content="mx1.example.net", priority=10)
    await kflare.make_record("mx2", "zone", name="example.com", type="MX", content="mx2.example.net", priority=20)
    await kflare.make_record(
        "srv",
        "zone",
        name="_sip._tcp.example.com",
        type="SRV",
        data={"priority": 1, "weight": 5, "port": 5060, "target": "sip.example.com"},
    )
    ready = [await kflare.ready("DNSRecord", name, reason="Synced") for name in ("www", "mx1", "mx2", "srv")]
    ids = {r["id"] for r in records(fresh_emulator, zone_id)}
    for record in ready:
        # The status is the record of what it created: no claim label, which would cost a write per record.
        assert record["status"]["cloudflareMetadata"]["recordID"] in ids
        assert "kflare.dev/record-id" not in (record["metadata"].get("labels") or {})
    held = {(r["type"], r["name"], r.get("content"), r.get("priority")) for r in records(fresh_emulator, zone_id)}
    assert ("A", "www.example.com", "192.0.2.1", None) in held
    assert ("MX", "example.com", "mx1.example.net", 10) in held
    assert ("MX", "example.com", "mx2.example.net", 20) in held
    srv = records(fresh_emulator, zone_id, type="SRV")[0]
    assert srv["data"]["port"] == 5060

    listing = kubectl(control_plane, "get", "kflare", "-A")
    assert "READY" in listing
    assert "REASON" in listing
    www_row = next(line for line in listing.splitlines() if "dnsrecord.kflare.dev/www " in line)
    assert "True" in www_row
    assert "Synced" in www_row
    described = kubectl(control_plane, "describe", "dnsrecord", "www", "-n", kflare.namespace)
    assert "Synced" in described
    # Its status says it came up; an Event for that too would be a third write per object in a bulk apply.
    assert re.search(r"^Events:\s+<none>", described, re.M), described

    # Every line a reconcile logs is JSON naming the resource.
    lines = [json.loads(line) for line in controller.log().splitlines() if line.startswith("{")]
    reconcile_lines = [line for line in lines if line["logger"] == "kflare.reconcile"]
    assert reconcile_lines
    for line in reconcile_lines:
        assert line["kind"] in ("CloudflareAccount", "Zone", "DNSRecord")
        assert line["name"]
        assert line["kind"] == "CloudflareAccount" or line["namespace"] == kflare.namespace
    assert fresh_emulator.token not in controller.log()


async def test_idle_reconcile_writes_nothing(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone("idle.example")
    await kflare.make_record("txt", "zone", name="idle.example", type="TXT", content="hello", ttl=300)
    await kflare.ready("DNSRecord", "txt")
    before = records(fresh_emulator, zone_id)[0]["modified_on"]
    since = time.time()
    # A metadata-only change triggers a reconcile; drift checks run every 2 s meanwhile.
    await kflare.patch("DNSRecord", "txt", {"metadata": {"annotations": {"example.com/touched": "1"}}})

    async def reads_happened() -> bool:
        return len(fresh_emulator.calls(since=since)) >= 2

    await eventually(reads_happened, timeout=20, what="reconciles and drift checks to read Cloudflare")
    assert writes(fresh_emulator, since) == []
    assert records(fresh_emulator, zone_id)[0]["modified_on"] == before


async def test_drift_in_cloudflare_is_corrected(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone("drift.example")
    await kflare.make_record("www", "zone", name="www.drift.example", type="A", content="192.0.2.7", ttl=120)
    record = await kflare.ready("DNSRecord", "www")
    record_id = record["status"]["cloudflareMetadata"]["recordID"]
    cf(
        fresh_emulator,
        "PATCH",
        f"/zones/{zone_id}/dns_records/{record_id}",
        json={"content": "198.51.100.9", "ttl": 60},
    )

    async def corrected() -> bool:
        current = cf(fresh_emulator, "GET", f"/zones/{zone_id}/dns_records/{record_id}")
        return bool(current["content"] == "192.0.2.7" and current["ttl"] == 120)

    await eventually(corrected, timeout=20, what="drift to be corrected")
    # A drift round reads the zone's records in one listing; it does not GET records one by one.
    for i in range(5):
        await kflare.make_record(f"more{i}", "zone", name=f"m{i}.drift.example", type="TXT", content="x")
        await kflare.ready("DNSRecord", f"more{i}")
    since = time.time()

    async def rounds() -> list[dict[str, Any]]:
        calls = fresh_emulator.calls(since=since, path="/dns_records")
        listings = [i for i, c in enumerate(calls) if c["method"] == "GET" and c["path"].endswith("/dns_records")]
        return calls[: listings[2] + 1] if len(listings) >= 3 else []

    # Everything up to the third listing: two whole rounds and whatever went before the first.
    calls = await eventually(rounds, timeout=30, what="three drift rounds listing the zone")
    assert {(c["method"], c["path"]) for c in calls} == {("GET", f"/client/v4/zones/{zone_id}/dns_records")}, (
        "a drift round reads the zone's records in one listing; it neither GETs records one by one nor writes"
    )


async def test_record_deleted_in_cloudflare_is_recreated(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone("gone.example")
    await kflare.make_record("www", "zone", name="www.gone.example", type="AAAA", content="2001:db8::1")
    record = await kflare.ready("DNSRecord", "www")
    cf(fresh_emulator, "DELETE", f"/zones/{zone_id}/dns_records/{record['status']['cloudflareMetadata']['recordID']}")

    async def recreated() -> bool:
        return [r["content"] for r in records(fresh_emulator, zone_id, type="AAAA")] == ["2001:db8::1"]

    await eventually(recreated, timeout=20, what="the record to be recreated")


async def test_pause_and_unpause(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone("pause.example")
    await kflare.make_record("www", "zone", name="www.pause.example", type="A", content="192.0.2.1")
    await kflare.ready("DNSRecord", "www")
    await kflare.patch("DNSRecord", "www", {"metadata": {"annotations": {"kflare.dev/paused": "true"}}})
    await kflare.ready("DNSRecord", "www", reason="Paused")  # Ready keeps its status
    since = time.time()
    await kflare.patch("DNSRecord", "www", {"spec": {"content": "192.0.2.2"}})
    await kflare.ready("DNSRecord", "www", reason="Paused")
    await kflare.delete("DNSRecord", "www")
    held = await kflare.ready("DNSRecord", "www", reason="Paused")
    assert held["metadata"]["deletionTimestamp"]
    assert [c for c in fresh_emulator.calls(since=since) if "/dns_records" in c["path"]] == []
    assert records(fresh_emulator, zone_id)[0]["content"] == "192.0.2.1"

    await kflare.patch("DNSRecord", "www", {"metadata": {"annotations": {"kflare.dev/paused": None}}})
    await kflare.gone("DNSRecord", "www")
    assert records(fresh_emulator, zone_id) == []


async def test_token_rotation_is_revalidated_at_once(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await kflare.ready_zone("rotate.example")
    secret = await kflare.core.read_namespaced_secret("cf-token", kflare.namespace)
    assert "kflare.dev/token-protection" in secret.metadata.finalizers

    def token_patch(token: str) -> dict[str, Any]:
        return {"data": {"CF_API_TOKEN": base64.b64encode(token.encode()).decode()}}

    await kflare.core.patch_namespaced_secret("cf-token", kflare.namespace, token_patch("not-a-valid-token"))
    account = await kflare.ready("CloudflareAccount", kflare.account, reason="InvalidToken", status="False")
    assert "not-a-valid-token" not in str(account)
    limited = fresh_emulator.add_token(["*"], name="rotated")
    await kflare.core.patch_namespaced_secret("cf-token", kflare.namespace, token_patch(limited["value"]))
    await kflare.ready("CloudflareAccount", kflare.account, reason="Validated")
    log = controller.log()
    assert "not-a-valid-token" not in log
    assert limited["value"] not in log


async def test_cloudflare_faults_map_to_reasons(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone("faults.example")
    # Every way a record reaches Cloudflare: one at a time or in a batch.
    fault = fresh_emulator.fault(r"^POST /client/v4/zones/\w+/dns_records(/batch)?$", "status", status=503)
    await kflare.make_record("flaky", "zone", name="flaky.faults.example", type="A", content="192.0.2.1")
    await kflare.ready("DNSRecord", "flaky", reason="APIError", status="False")
    assert [f["fired"] > 0 for f in fresh_emulator.faults() if f["id"] == fault] == [True], "the 503 was answered"
    assert records(fresh_emulator, zone_id) == []
    fresh_emulator.delete_fault(fault)
    await kflare.ready("DNSRecord", "flaky", reason="Synced")  # retried with back-off until the fault ran out

    # The model accepts a TTL of 30 s (paid plans allow it); Cloudflare refuses it on a Free zone, whose TTLs
    # start at 60 s. Only Cloudflare can say no here.
    since = time.time()
    await kflare.make_record("bad", "zone", name="bad.faults.example", type="A", content="192.0.2.2", ttl=30)
    bad = await kflare.ready("DNSRecord", "bad", reason="TerminalError", status="False")
    assert "9021" in bad["status"]["conditions"][0]["message"], "Cloudflare's refusal (invalid TTL) is in the status"
    refused_at = time.time()
    refusals = [c for c in fresh_emulator.calls(since=since, method="POST") if c["status"] == 400]
    assert len(refusals) >= 1, "Cloudflare was asked, and refused"

    # Not retried: while the controller goes on creating another record and drift rounds pass, Cloudflare is not
    # asked again for the refused one (a retry with back-off would be, within milliseconds).
    await kflare.make_record("after", "zone", name="after.faults.example", type="A", content="192.0.2.3")
    await kflare.ready("DNSRecord", "after", reason="Synced")

    async def two_rounds() -> bool:
        listings = fresh_emulator.calls(since=refused_at, method="GET", path=r"/dns_records$")
        return len(listings) >= 2

    await eventually(two_rounds, timeout=20, what="two drift rounds after the refusal")
    assert [c for c in fresh_emulator.calls(since=refused_at) if c["status"] == 400] == []
    held = sorted(r["name"] for r in records(fresh_emulator, zone_id))
    assert held == ["after.faults.example", "flaky.faults.example"]
    assert (await kflare.get("DNSRecord", "bad"))["status"]["conditions"][0]["reason"] == "TerminalError"


async def test_deleting_everything_at_once_cleans_up_in_any_order(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone("all.example")
    for i in range(5):
        await kflare.make_record(f"r{i}", "zone", name=f"r{i}.all.example", type="A", content=f"192.0.2.{i + 1}")
    for i in range(5):
        await kflare.ready("DNSRecord", f"r{i}")
    # As a namespace deletion would: parents first, all at once.
    await kflare.delete("CloudflareAccount", kflare.account)
    await kflare.delete("Zone", "zone")
    zone = await kflare.ready("Zone", "zone", reason="InUse", status="False")
    assert "DNSRecord" in zone["status"]["conditions"][0]["message"]
    for i in range(5):
        await kflare.delete("DNSRecord", f"r{i}")
    for i in range(5):
        await kflare.gone("DNSRecord", f"r{i}")
    await kflare.gone("Zone", "zone")
    await kflare.gone("CloudflareAccount", kflare.account)
    assert cf(fresh_emulator, "GET", "/zones") == []
    secret = await kflare.core.read_namespaced_secret("cf-token", kflare.namespace)
    assert not secret.metadata.finalizers
    del zone_id


async def test_leader_failover(
    control_plane: ControlPlane, fresh_emulator: EmulatorProcess, kflare_crds: None, kflare: Kflare, tmp_path: Path
) -> None:
    # A short lease: what is tested is the handover, not its default timing (`make e2e` times that in pods).
    lease = [
        f"--lease-name=failover-{kflare.namespace}",
        "--leader-elect=true",
        "--lease-duration=4s",
        "--renew-deadline=3s",
        "--retry-period=1s",
    ]
    with (
        controller_process(control_plane, fresh_emulator, tmp_path, *lease) as first,
        controller_process(control_plane, fresh_emulator, tmp_path, *lease) as second,
    ):
        await kflare.ready_zone("failover.example")
        coordination = client.CoordinationV1Api(kflare.api)
        holder = (await coordination.read_namespaced_lease(f"failover-{kflare.namespace}", "kflare-system")).spec
        leader, standby = (first, second) if "became leader" in first.log() else (second, first)
        assert "became leader" not in standby.log()
        leader.kill()
        await kflare.make_record("after", "zone", name="after.failover.example", type="A", content="192.0.2.1")
        await kflare.ready("DNSRecord", "after", timeout=40)
        assert "became leader" in standby.log()
        new_holder = (await coordination.read_namespaced_lease(f"failover-{kflare.namespace}", "kflare-system")).spec
        assert new_holder.holder_identity != holder.holder_identity
        await kflare.cleanup()


async def test_a_reconcile_that_hangs_is_cut_by_the_reconcile_timeout(
    control_plane: ControlPlane, fresh_emulator: EmulatorProcess, kflare_crds: None, kflare: Kflare, tmp_path: Path
) -> None:
    with controller_process(control_plane, fresh_emulator, tmp_path, "--reconcile-timeout=2s"):
        await kflare.ready_zone("hang.example")
        fault = fresh_emulator.fault(r"^POST /client/v4/zones/\w+/dns_records$", "hang")
        await kflare.make_record("slow", "zone", name="slow.hang.example", type="A", content="192.0.2.1")
        record = await kflare.ready("DNSRecord", "slow", reason="APIError", status="False")
        assert "did not finish within 2s" in record["status"]["conditions"][0]["message"]
        fresh_emulator.delete_fault(fault)
        await kflare.ready("DNSRecord", "slow", timeout=40)  # retried with back-off once Cloudflare answers
        zone_id = (await kflare.get("Zone", "zone"))["status"]["cloudflareMetadata"]["zoneID"]
        assert [r["name"] for r in records(fresh_emulator, zone_id)] == ["slow.hang.example"]
        await kflare.cleanup()


async def test_zone_plan_upgrade_applies_and_a_pending_downgrade_counts_as_applied(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone("plan.example")
    await kflare.patch("Zone", "zone", {"spec": {"plan": "pro"}})
    zone = await kflare.ready("Zone", "zone")
    assert zone["status"]["cloudflareMetadata"]["plan"] == "pro"
    assert cf(fresh_emulator, "GET", f"/zones/{zone_id}")["plan"]["legacy_id"] == "pro"

    await kflare.patch("Zone", "zone", {"spec": {"plan": "free"}})
    zone = await kflare.ready("Zone", "zone")
    assert zone["status"]["cloudflareMetadata"]["plan"] == "pro"
    assert zone["status"]["cloudflareMetadata"]["pendingPlan"] == "free"
    since = time.time()
    await kflare.patch("Zone", "zone", {"metadata": {"annotations": {"example.com/touched": "1"}}})

    async def checked() -> bool:
        # Read again, alone or in the account's listing of zones (a drift round every 2 s takes a fresh one).
        return bool(fresh_emulator.calls(since=since, path=rf"/zones(/{zone_id})?$"))

    await eventually(checked, timeout=20, what="the zone to be read again")
    assert fresh_emulator.calls(since=since, path="subscription") == [], "a pending plan is not bought again"


@pytest.mark.parametrize(
    ("parent", "route"),
    [("CloudflareAccount", r"^GET /client/v4/accounts/\w+$"), ("Zone", r"^GET /client/v4/zones(/\w+)?$")],
    ids=["account", "zone"],
)
async def test_a_parents_transient_error_does_not_cascade(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess, parent: str, route: str
) -> None:
    """The parent's reads answer 503 for several drift rounds: the parent reports APIError, but nothing below it
    is written to (no status write, no Event), and it comes back by itself once Cloudflare does."""
    await kflare.ready_zone("cascade.example")
    for i in range(5):
        await kflare.make_record(f"r{i}", "zone", name=f"r{i}.cascade.example", type="A", content=f"192.0.2.{i + 1}")
    children = ["Zone", "DNSRecord"] if parent == "CloudflareAccount" else ["DNSRecord"]
    names = {"Zone": ["zone"], "DNSRecord": [f"r{i}" for i in range(5)]}
    for kind in children:
        for name in names[kind]:
            await kflare.ready(kind, name)
    before = {(k, n): (await kflare.get(k, n))["metadata"]["resourceVersion"] for k in children for n in names[k]}
    parent_name = kflare.account if parent == "CloudflareAccount" else "zone"
    earlier = {e.metadata.uid for e in (await kflare.core.list_namespaced_event(kflare.namespace)).items}

    fault = fresh_emulator.fault(route, "status", status=503)
    await kflare.ready(parent, parent_name, reason="APIError", status="False")

    async def three_failures() -> bool:
        return sum(c["status"] == 503 for c in fresh_emulator.calls(path=route.split(" ", 1)[1])) >= 3

    await eventually(three_failures, timeout=30, what="three failed reads of the parent (drift every 2 s)")
    fresh_emulator.delete_fault(fault)
    await kflare.ready(parent, parent_name, timeout=40)

    after = {(k, n): (await kflare.get(k, n))["metadata"]["resourceVersion"] for k in children for n in names[k]}
    assert after == before, "a child was written to during its parent's outage"
    events = await kflare.core.list_namespaced_event(kflare.namespace)
    warned = [
        (e.involved_object.kind, e.involved_object.name, e.reason)
        for e in events.items
        if e.metadata.uid not in earlier and e.type == "Warning" and e.involved_object.kind in children
    ]
    assert warned == [], "a child got a Warning for its parent's outage"
