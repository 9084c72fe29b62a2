"""A crash at any Kubernetes write of a reconcile, before or after the API server applied it, loses nothing: an
adopted object stays adopted (and so is kept on deletion), a created one stays created (and is deleted with its
resource), and Cloudflare never holds a duplicate. Every write point of every path is tried, for each kind."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from app.api.constants import ADOPTED_ANNOTATION, ADOPTION_POLICY_ANNOTATION
from reconcilers.registry import KINDS
from reconcilers.tunnel_configuration import says_something
from tests.unit.reconcilers.harness import (
    ACCOUNT_ID,
    TOKEN,
    Cloudflare,
    Crash,
    KubeSecrets,
    MemoryKube,
    MemorySecrets,
    Runtime,
    emulator_state,
    mark_deleted,
    ready,
)

pytestmark = pytest.mark.heavy

ZONE_ID = "e" * 32
NS = "team"
TUNNEL_ID = "0f0f0f0f-1111-4222-8333-444455556666"
PROTECTED = {"name": "token", "finalizers": ["kflare.dev/token-protection"]}
SECRETS = MemorySecrets(
    {(NS, "token"): {"metadata": PROTECTED, "data": {"CF_API_TOKEN": base64.b64encode(TOKEN.encode()).decode()}}}
)
ACCOUNT = {
    "kind": "CloudflareAccount",
    "metadata": {"name": "acct"},
    "spec": {"accountID": ACCOUNT_ID, "tokenSecretRef": {"name": "token", "namespace": NS}},
}
ZONE_SPEC = {"name": "example.com", "accountRef": {"name": "acct"}}


@dataclass(frozen=True)
class Case:
    """One kind's resource, what Cloudflare holds at the start, and how to count the resource's objects there."""

    kind: str
    resource: dict[str, Any]
    zones: list[dict[str, Any]]
    existing: bool  # Cloudflare already holds the object (adoption), else kflare creates it
    count_path: str
    count_params: dict[str, str]
    tunnels: tuple[dict[str, Any], ...] = ()
    count: Callable[[Cloudflare], Awaitable[int]] | None = None
    """How many of the resource's objects Cloudflare holds, when a listing's length does not say."""

    async def held(self, cloudflare: Cloudflare) -> int:
        if self.count is not None:
            return await self.count(cloudflare)
        return len(await held_of(cloudflare, self))


def zone_resource(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": "Zone",
        "metadata": {"name": "zone", "namespace": NS, "annotations": annotations},
        "spec": ZONE_SPEC,
    }


def record_resource(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": "DNSRecord",
        "metadata": {"name": "www", "namespace": NS, "annotations": annotations},
        "spec": {"zoneRef": {"name": "zone"}, "name": "www", "type": "A", "content": "192.0.2.1"},
    }


def rule_resource(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": "WAFCustomRule",
        "metadata": {"name": "www", "namespace": NS, "annotations": annotations},
        "spec": {"zoneRef": {"name": "zone"}, "expression": 'http.host eq "www.example.com"', "action": "block"},
    }


def transform_resource(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": "ManagedTransform",
        "metadata": {"name": "headers", "namespace": NS, "annotations": annotations},
        "spec": {"zoneRef": {"name": "zone"}, "managedResponseHeaders": [{"id": "add_security_headers"}]},
    }


def list_resource(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": "IPList",
        "metadata": {"name": "office", "namespace": NS, "annotations": annotations},
        "spec": {"accountRef": {"name": "acct"}, "name": "office", "items": [{"ip": "192.0.2.0/24"}]},
    }


ADOPT = {ADOPTION_POLICY_ANNOTATION: "adopt"}
LISTS = f"/accounts/{ACCOUNT_ID}/rules/lists"
HEADERS = f"/zones/{ZONE_ID}/managed_headers"
FOREIGN_RULE = {"ref": "theirs", "action": "block", "expression": 'http.host eq "other.example.com"'}
CUSTOM = f"/zones/{ZONE_ID}/rulesets/phases/http_request_firewall_custom/entrypoint"
WWW = {"type": "A", "name": "www", "content": "192.0.2.1"}
RECORDS = f"/zones/{ZONE_ID}/dns_records"
CASES = {
    "zone-adopted": Case("Zone", zone_resource(ADOPT), [{"name": "example.com"}], True, "/zones", {}),
    "zone-created": Case("Zone", zone_resource({}), [], False, "/zones", {}),
    "record-adopted": Case(
        "DNSRecord", record_resource(ADOPT), [{"id": ZONE_ID, "name": "example.com", "dns_records": [WWW]}], True,
        RECORDS, {"type": "A"},
    ),
    "record-created": Case(
        "DNSRecord", record_resource({}), [{"id": ZONE_ID, "name": "example.com"}], False, RECORDS, {"type": "A"}
    ),
    # Rules are never adopted (their ref marks them as kflare's), so only creation has crash points of its own.
    "rule-created": Case(
        "WAFCustomRule", rule_resource({}),
        [{"id": ZONE_ID, "name": "example.com", "rulesets": [{"phase": "http_request_firewall_custom",
                                                              "rules": [FOREIGN_RULE]}]}],
        False, CUSTOM, {},
    ),
    "transform-adopted": Case(
        "ManagedTransform", transform_resource(ADOPT),
        [{"id": ZONE_ID, "name": "example.com",
          "managed_headers": [{"enabled": ["add_visitor_location_headers"]}]}],
        True, HEADERS, {},
    ),
    "transform-created": Case(
        "ManagedTransform", transform_resource({}), [{"id": ZONE_ID, "name": "example.com"}], False, HEADERS, {}
    ),
    "list-adopted": Case("IPList", list_resource(ADOPT), [], True, LISTS, {}),
    "list-created": Case("IPList", list_resource({}), [], False, LISTS, {}),
}  # fmt: skip
TUNNELS = f"/accounts/{ACCOUNT_ID}/cfd_tunnel"
CONFIGURATION = f"{TUNNELS}/{TUNNEL_ID}/configurations"
OLD_CONFIG = {"ingress": [{"hostname": "app.example.com", "service": "http://old:80"}, {"service": "http_status:404"}]}


def tunnel_resource(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": "Tunnel",
        "metadata": {"name": "web", "namespace": NS, "annotations": annotations},
        "spec": {"name": "web", "accountRef": {"name": "acct"}, "credentialsSecretRef": {"name": "web-token"}},
    }


def config_resource(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": "TunnelConfiguration",
        "metadata": {"name": "web", "namespace": NS, "annotations": annotations},
        "spec": {"tunnelRef": {"name": "web"}, "ingress": [{"hostname": "app.example.com", "service": "http://w:80"}]},
    }


async def configured(cloudflare: Cloudflare) -> int:
    return 1 if says_something((await cloudflare.get(CONFIGURATION))["config"]) else 0


LIVE = {"is_deleted": "false", "name": "web"}
CASES.update({
    "tunnel-adopted": Case("Tunnel", tunnel_resource(ADOPT), [], True, TUNNELS, LIVE, ({"name": "web"},)),
    "tunnel-created": Case("Tunnel", tunnel_resource({}), [], False, TUNNELS, LIVE),
    "config-adopted": Case(
        "TunnelConfiguration", config_resource(ADOPT), [], True, CONFIGURATION, {},
        ({"id": TUNNEL_ID, "name": "web", "configuration": {"version": 1, "config": OLD_CONFIG}},), configured,
    ),
    "config-created": Case(
        "TunnelConfiguration", config_resource({}), [], False, CONFIGURATION, {},
        ({"id": TUNNEL_ID, "name": "web"},), configured,
    ),
})  # fmt: skip


async def held_of(cloudflare: Cloudflare, case: Case) -> list[Any]:
    """The resource's objects in Cloudflare (for a rule: the rules of its entry point but the foreign one)."""
    held = await cloudflare.get(case.count_path, **case.count_params)
    if isinstance(held, dict) and "managed_request_headers" in held:
        switches = [*held["managed_request_headers"], *held["managed_response_headers"]]
        return [held] if any(t["enabled"] for t in switches) else []
    if isinstance(held, dict):
        return [rule for rule in held["rules"] if rule["ref"] != FOREIGN_RULE["ref"]]
    return list(held)


def parents(kind: str) -> list[dict[str, Any]]:
    """A Ready account (and for records a Ready zone) for a resource of `kind`."""
    account = ready(ACCOUNT, accountName="harness")
    token = {"kind": "Secret", **SECRETS.secrets[(NS, "token")], "metadata": {**PROTECTED, "namespace": NS}}
    if kind in ("Zone", "Tunnel"):
        return [account, token]
    if kind == "TunnelConfiguration":
        tunnel = {
            **tunnel_resource({}),
            "metadata": {"name": "web", "namespace": NS, "finalizers": ["kflare.dev/finalizer"]},
        }
        return [account, token, ready(tunnel, cloudflareMetadata={"tunnelID": TUNNEL_ID})]
    zone = {
        "kind": "Zone",
        "metadata": {"name": "zone", "namespace": NS, "finalizers": ["kflare.dev/finalizer"]},
        "spec": ZONE_SPEC,
    }
    return [account, token, ready(zone, cloudflareMetadata={"zoneID": ZONE_ID})]


def state_of(case: Case) -> dict[str, Any]:
    state = emulator_state(case.zones)
    state["tunnels"] = [{**tunnel, "account_id": ACCOUNT_ID} for tunnel in case.tunnels]
    return state


def crash_points() -> Iterator[tuple[int, bool]]:
    for write in range(1, 8):
        yield write, False
        yield write, True


async def converge(kube: MemoryKube, cloudflare: Cloudflare, case: Case) -> Runtime:
    """Reconcile until nothing changes any more, as the restarted controller would."""
    runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
    name = case.resource["metadata"]["name"]
    for _ in range(4):
        await runtime.reconcile(case.kind, name, NS)
    return runtime


@pytest.mark.parametrize("case_name", list(CASES))
async def test_a_crash_at_any_write_keeps_what_was_claimed_and_how(case_name: str) -> None:
    case = CASES[case_name]
    tried = 0
    for crash_at, after_apply in crash_points():
        kube = MemoryKube()
        for obj in parents(case.kind):
            kube.add(obj)
        kube.add(case.resource)
        state = state_of(case)
        if case.kind == "IPList" and case.existing:
            state["lists"] = [{"name": "office", "account_id": ACCOUNT_ID, "description": "by hand"}]
        cloudflare = Cloudflare(state)
        try:
            kube.crash_at, kube.crash_after_apply = crash_at, after_apply
            first = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
            name = case.resource["metadata"]["name"]
            try:
                for _ in range(4):
                    await first.reconcile(case.kind, name, NS)
            except Crash:
                tried += 1
            else:
                continue  # the reconcile needed fewer writes than this crash point
            kube.crash_at = None
            await converge(kube, cloudflare, case)

            stored = kube.get(case.kind, name, NS)
            assert stored is not None
            where = f"crash at write {crash_at} ({'after' if after_apply else 'before'} it applied)"
            assert stored["status"]["conditions"][0]["status"] == "True", where
            annotations = stored["metadata"].get("annotations") or {}
            assert (annotations.get(ADOPTED_ANNOTATION) == "true") is case.existing, f"{where}: {annotations}"
            held = await case.held(cloudflare)
            assert held == 1, f"{where}: Cloudflare holds {held}"

            # Deleting the resource keeps an adopted object and deletes a created one.
            mark_deleted(kube, case.kind, name, NS)
            runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
            await runtime.reconcile(case.kind, name, NS)
            assert kube.get(case.kind, name, NS) is None, where
            held = await case.held(cloudflare)
            assert held == (1 if case.existing else 0), f"{where}: after deletion Cloudflare holds {held}"
        finally:
            await cloudflare.aclose()
    assert tried >= 4, "the crash points did not reach into the claim"


async def test_a_spec_changed_while_the_controller_was_down_recovers_the_record_it_created() -> None:
    """Killed after Cloudflare created the record, before its ID was recorded; the content is edited before the
    restart: the restarted controller must take its own record (and correct it), not create a second one beside it."""
    case = CASES["record-created"]
    kube = MemoryKube()
    for obj in parents(case.kind):
        kube.add(obj)
    kube.add(case.resource)
    cloudflare = Cloudflare(emulator_state(case.zones))
    try:
        kube.crash_at, kube.crash_after_apply = 2, False  # the finalizer with the intent, then the status
        with pytest.raises(Crash):
            await Runtime(kube, cloudflare, KINDS, SECRETS).reconcile(case.kind, "www", NS)
        assert len(await cloudflare.get(case.count_path, **case.count_params)) == 1
        kube.crash_at = None
        kube.objects[(case.kind, NS, "www")]["spec"]["content"] = "198.51.100.7"
        await converge(kube, cloudflare, case)
        held = await cloudflare.get(case.count_path, **case.count_params)
        assert [r["content"] for r in held] == ["198.51.100.7"]
    finally:
        await cloudflare.aclose()


async def cloudflare_call(cloudflare: Cloudflare, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """A change made in Cloudflare outside kflare (the dashboard, another tool)."""
    reply = await cloudflare.http.request(method, path, json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert reply.json()["success"], reply.text
    return reply.json()["result"]


async def test_an_adopted_record_deleted_outside_is_recreated_as_its_own_even_when_killed_before_the_status() -> None:
    """An adopted record deleted in Cloudflare is created again (adopt-or-create). Killed after that create, before
    the status records the new ID: the restarted controller takes the new record as its own (it replaces the recorded
    one, so the intent is live), creates no second one, and the adoption's mark is gone, so deleting the resource
    deletes the record it created."""
    resource = record_resource({ADOPTION_POLICY_ANNOTATION: "adopt-or-create"})
    kube, case = MemoryKube(), CASES["record-adopted"]
    for obj in [*parents("DNSRecord"), resource]:
        kube.add(obj)
    cloudflare = Cloudflare(emulator_state(case.zones))
    try:
        await converge(kube, cloudflare, case)
        stored = kube.get("DNSRecord", "www", NS)
        assert stored is not None
        assert stored["metadata"]["annotations"][ADOPTED_ANNOTATION] == "true"
        (adopted,) = await cloudflare.get(RECORDS)
        await cloudflare_call(cloudflare, "DELETE", f"{RECORDS}/{adopted['id']}")

        kube.writes, kube.crash_at, kube.crash_after_apply = 0, 2, False  # the intent, then the status
        with pytest.raises(Crash):
            await Runtime(kube, cloudflare, KINDS, SECRETS).reconcile("DNSRecord", "www", NS)
        (created,) = await cloudflare.get(RECORDS)
        assert created["id"] != adopted["id"]
        kube.crash_at = None
        await converge(kube, cloudflare, case)

        assert [r["id"] for r in await cloudflare.get(RECORDS)] == [created["id"]]
        stored = kube.get("DNSRecord", "www", NS)
        assert stored is not None
        assert stored["status"]["cloudflareMetadata"]["recordID"] == created["id"]
        assert ADOPTED_ANNOTATION not in stored["metadata"]["annotations"]
        mark_deleted(kube, "DNSRecord", "www", NS)
        await Runtime(kube, cloudflare, KINDS, SECRETS).reconcile("DNSRecord", "www", NS)
        assert await cloudflare.get(RECORDS) == []
    finally:
        await cloudflare.aclose()


async def test_a_spent_intent_never_makes_someone_elses_record_its_own() -> None:
    """The intent stays on a resource once its ID is in status (removing it would cost a write). When the record is
    then deleted in Cloudflare and someone else creates one like it, that one is not taken as this resource's own:
    the resource says `AlreadyExists` and the record survives the resource's deletion."""
    kube, case = MemoryKube(), CASES["record-created"]
    for obj in [*parents("DNSRecord"), case.resource]:
        kube.add(obj)
    cloudflare = Cloudflare(emulator_state(case.zones))
    try:
        await converge(kube, cloudflare, case)
        (created,) = await cloudflare.get(RECORDS)
        await cloudflare_call(cloudflare, "DELETE", f"{RECORDS}/{created['id']}")
        theirs = await cloudflare_call(cloudflare, "POST", RECORDS, {**WWW, "name": "www.example.com", "ttl": 1})

        await converge(kube, cloudflare, case)
        stored = kube.get("DNSRecord", "www", NS)
        assert stored is not None
        assert [(c["status"], c["reason"]) for c in stored["status"]["conditions"]] == [("False", "AlreadyExists")]
        mark_deleted(kube, "DNSRecord", "www", NS)
        await Runtime(kube, cloudflare, KINDS, SECRETS).reconcile("DNSRecord", "www", NS)
        assert [r["id"] for r in await cloudflare.get(RECORDS)] == [theirs["id"]]
    finally:
        await cloudflare.aclose()
