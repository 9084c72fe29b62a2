"""One owner per Cloudflare object, and accounts that say who may use them and who may adopt through them: the
lifecycle's side of tenancy, on the in-memory harness (the real kinds, the emulator in process). The same attacks
run through the real API server, RBAC and the webhook in tests/integration/test_tenancy.py."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.api.claim import claim_name
from app.api.constants import ADOPTION_POLICY_ANNOTATION, DELETION_POLICY_ANNOTATION
from app.api.tenancy import ZoneIndex
from app.kube.index import DependencyIndex
from reconcilers.context import Caches
from reconcilers.tenancy import DOMAIN_INDEX, managing_zone
from tests.unit.reconcilers.harness import (
    ACCOUNT_ID,
    TOKEN,
    Cloudflare,
    KubeSecrets,
    MemoryKube,
    Runtime,
    emulator_state,
    mark_deleted,
    ready,
)
from tests.unit.reconcilers.test_crash_points import KINDS, NS, TUNNEL_ID, ZONE_ID, config_resource, parents

THEIRS = "team-b"
EXISTING = [{"id": ZONE_ID, "name": "example.com"}]


def zone(namespace: str, name: str = "zone", uid: str | None = None, **annotations: str) -> dict[str, Any]:
    return {
        "kind": "Zone",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{namespace}-{name}",
            "annotations": annotations,
        },
        "spec": {"name": "example.com", "accountRef": {"name": "acct"}},
    }


def with_policies(kube: MemoryKube, **spec: Any) -> None:
    account = kube.objects[("CloudflareAccount", "", "acct")]
    account["spec"].update(spec)


def condition(kube: MemoryKube, kind: str, name: str, namespace: str) -> dict[str, Any]:
    obj = kube.get(kind, name, namespace)
    assert obj is not None, f"{kind} {namespace}/{name} is gone"
    (ready,) = obj["status"]["conditions"]
    return dict(ready)


@pytest.fixture
async def world() -> AsyncIterator[tuple[MemoryKube, Cloudflare]]:
    kube = MemoryKube()
    for obj in parents("Zone"):
        kube.add(obj)
    cloudflare = Cloudflare(emulator_state(copy.deepcopy(EXISTING)))
    try:
        yield kube, cloudflare
    finally:
        await cloudflare.aclose()


def selecting(*namespaces: str) -> dict[str, Any]:
    expression = {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}
    return {"from": "Selector", "selector": {"matchExpressions": [expression]}}


async def test_a_zone_another_namespace_manages_is_never_adopted_nor_deleted_and_its_owner_is_not_named(
    world: tuple[MemoryKube, Cloudflare],
) -> None:
    kube, cloudflare = world
    kube.add(zone(NS, **{ADOPTION_POLICY_ANNOTATION: "adopt"}))
    runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
    await runtime.reconcile("Zone", "zone", NS)
    assert condition(kube, "Zone", "zone", NS)["reason"] == "Synced"

    kube.add(zone(THEIRS, **{ADOPTION_POLICY_ANNOTATION: "adopt", DELETION_POLICY_ANNOTATION: "delete"}))
    writes = cloudflare.writes()
    await runtime.reconcile("Zone", "zone", THEIRS)
    refused = condition(kube, "Zone", "zone", THEIRS)
    assert (refused["status"], refused["reason"]) == ("False", "ClaimedElsewhere")
    assert "a Zone in another namespace" in refused["message"]
    assert NS not in refused["message"].replace("namespace", "")
    taken = kube.get("Zone", "zone", THEIRS)
    assert taken is not None
    assert "kflare.dev/zone-id" not in (taken["metadata"].get("labels") or {})

    kube.delete("Zone", "zone", THEIRS)  # it never held a finalizer: nothing of Cloudflare's was its own
    assert kube.get("Zone", "zone", THEIRS) is None
    assert cloudflare.writes() == writes, "the attacker's Zone wrote to Cloudflare"
    assert [z["id"] for z in await cloudflare.get("/zones")] == [ZONE_ID]


async def test_an_adoption_takes_a_claim_that_decides_between_two_adopters_and_goes_with_its_owner(
    world: tuple[MemoryKube, Cloudflare],
) -> None:
    kube, cloudflare = world
    kube.add(zone(NS, **{ADOPTION_POLICY_ANNOTATION: "adopt"}))
    kube.add(zone(THEIRS, **{ADOPTION_POLICY_ANNOTATION: "adopt"}))
    runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
    # The second adopter's reconcile runs before the first's status is seen anywhere but the claim.
    await runtime.reconcile("Zone", "zone", NS)
    first = kube.get("Zone", "zone", NS)
    assert first is not None
    del first["status"]  # as if its status write had been lost in a crash: only the claim records the owner
    kube.objects[("Zone", NS, "zone")]["status"] = {}
    kube.objects[("Zone", NS, "zone")]["metadata"]["labels"] = {}
    await runtime.reconcile("Zone", "zone", THEIRS)
    assert condition(kube, "Zone", "zone", THEIRS)["reason"] == "ClaimedElsewhere"

    claim = kube.get("CloudflareClaim", claim_name("Zone", ACCOUNT_ID, ZONE_ID))
    assert claim is not None
    assert claim["spec"]["owner"] == {"kind": "Zone", "namespace": NS, "name": "zone", "uid": f"uid-{NS}-zone"}

    # The owner lets go (deleted; an adopted zone is kept): the claim goes, and the other may adopt.
    mark_deleted(kube, "Zone", "zone", NS)
    await runtime.reconcile("Zone", "zone", NS)
    assert kube.get("Zone", "zone", NS) is None
    assert kube.get("CloudflareClaim", claim_name("Zone", ACCOUNT_ID, ZONE_ID)) is None
    await runtime.reconcile("Zone", "zone", THEIRS)
    assert condition(kube, "Zone", "zone", THEIRS)["reason"] == "Synced"
    claim = kube.get("CloudflareClaim", claim_name("Zone", ACCOUNT_ID, ZONE_ID))
    assert claim is not None
    assert claim["spec"]["owner"]["namespace"] == THEIRS
    assert [z["id"] for z in await cloudflare.get("/zones")] == [ZONE_ID]


async def test_a_claim_whose_owner_is_gone_is_replaced_by_the_next_adopter(
    world: tuple[MemoryKube, Cloudflare],
) -> None:
    kube, cloudflare = world
    name = claim_name("Zone", ACCOUNT_ID, ZONE_ID)
    owner = {"kind": "Zone", "namespace": NS, "name": "zone", "uid": "uid-deleted-long-ago"}
    spec = {"kind": "Zone", "accountID": ACCOUNT_ID, "objectID": ZONE_ID, "owner": owner}
    kube.add({"kind": "CloudflareClaim", "metadata": {"name": name}, "spec": spec})
    kube.add(zone(THEIRS, **{ADOPTION_POLICY_ANNOTATION: "adopt"}))
    runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
    await runtime.reconcile("Zone", "zone", THEIRS)
    assert condition(kube, "Zone", "zone", THEIRS)["reason"] == "Synced"
    claim = kube.get("CloudflareClaim", name)
    assert claim is not None
    assert claim["spec"]["owner"]["namespace"] == THEIRS


async def test_an_account_serves_only_the_namespaces_it_allows_and_no_call_is_made_for_the_others(
    world: tuple[MemoryKube, Cloudflare],
) -> None:
    kube, cloudflare = world
    with_policies(kube, allowedNamespaces=selecting(NS))
    mine = zone(NS, name="mine")
    mine["spec"]["name"] = "mine.example"
    kube.add(mine)
    theirs = zone(THEIRS, name="theirs")
    theirs["spec"]["name"] = "theirs.example"
    kube.add(theirs)
    runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
    calls = len(cloudflare.emulator.calls.select())
    await runtime.reconcile("Zone", "theirs", THEIRS)
    refused = condition(kube, "Zone", "theirs", THEIRS)
    assert (refused["status"], refused["reason"]) == ("False", "AccountNotPermitted")
    assert len(cloudflare.emulator.calls.select()) == calls, "a namespace the account refuses reached Cloudflare"
    await runtime.reconcile("Zone", "mine", NS)
    assert condition(kube, "Zone", "mine", NS)["reason"] == "Synced"
    assert sorted(z["name"] for z in await cloudflare.get("/zones")) == ["example.com", "mine.example"]


@pytest.mark.parametrize(
    ("policies", "adopts"),
    [
        ({}, True),  # the Go controller's manifests: any namespace may adopt (--default-account-namespaces All)
        ({"allowedNamespaces": {"from": "All"}}, False),  # a policy for use only: adoption is granted on its own
        ({"allowedNamespaces": {"from": "All"}, "adoptionNamespaces": selecting(THEIRS)}, True),
        ({"adoptionNamespaces": selecting("someone-else")}, False),
        ({"allowedNamespaces": selecting("someone-else"), "adoptionNamespaces": {"from": "All"}}, False),
    ],
)
async def test_adoption_needs_the_accounts_adoption_policy(
    world: tuple[MemoryKube, Cloudflare], policies: dict[str, Any], adopts: bool
) -> None:
    kube, cloudflare = world
    with_policies(kube, **policies)
    kube.add(zone(THEIRS, **{ADOPTION_POLICY_ANNOTATION: "adopt"}))
    runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
    writes = cloudflare.writes()
    await runtime.reconcile("Zone", "zone", THEIRS)
    ready = condition(kube, "Zone", "zone", THEIRS)
    if adopts:
        assert ready["reason"] == "Synced"
        return
    assert ready["reason"] in ("AdoptionNotPermitted", "AccountNotPermitted")
    assert ready["status"] == "False"
    assert cloudflare.writes() == writes
    adopted = kube.get("Zone", "zone", THEIRS)
    assert adopted is not None
    assert "kflare.dev/adopted" not in (adopted["metadata"].get("annotations") or {})
    assert kube.get("CloudflareClaim", claim_name("Zone", ACCOUNT_ID, ZONE_ID)) is None


def record(namespace: str, name: str, zone_namespace: str | None = None) -> dict[str, Any]:
    ref: dict[str, str] = {"name": "zone"} if zone_namespace is None else {"name": "zone", "namespace": zone_namespace}
    return {
        "kind": "DNSRecord",
        "metadata": {"name": name.split(".")[0], "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": {"zoneRef": ref, "name": name, "type": "A", "content": "192.0.2.1"},
    }


@pytest.mark.parametrize(
    ("grants", "published"),
    [
        (None, False),  # no grant: a record naming another namespace's Zone publishes nothing
        ([{"namespaces": selecting(THEIRS), "hostnames": ["*.b.example.com"]}], True),
        ([{"namespaces": selecting(THEIRS), "hostnames": ["api.example.com"]}], False),  # not that name
        ([{"namespaces": selecting("someone-else")}], False),  # not that namespace
        ([{"namespaces": {"from": "All"}}], True),
    ],
)
async def test_a_record_in_another_namespaces_zone_needs_the_zones_grant(
    grants: list[dict[str, Any]] | None, published: bool
) -> None:
    kube = MemoryKube()
    for obj in parents("DNSRecord"):
        if obj["kind"] == "Zone" and grants is not None:
            obj["spec"]["hostnameGrants"] = grants
        kube.add(obj)
    kube.add(record(THEIRS, "www.b.example.com", zone_namespace=NS))
    cloudflare = Cloudflare(emulator_state(copy.deepcopy(EXISTING)))
    try:
        runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
        await runtime.reconcile("DNSRecord", "www", THEIRS)
        ready = condition(kube, "DNSRecord", "www", THEIRS)
        names = [r["name"] for r in await cloudflare.get(f"/zones/{ZONE_ID}/dns_records")]
    finally:
        await cloudflare.aclose()
    if published:
        assert ready["reason"] == "Synced"
        assert names == ["www.b.example.com"]
    else:
        assert (ready["status"], ready["reason"]) == ("False", "HostnameNotGranted")
        assert "www.b.example.com" in ready["message"]
        assert names == []


@pytest.mark.parametrize("granted", [False, True])
async def test_a_tunnel_route_for_a_name_in_another_namespaces_zone_needs_its_grant(granted: bool) -> None:
    """Pointing another team's host name at one's own tunnel would take its traffic once DNS points there."""
    kube = MemoryKube()
    for obj in parents("TunnelConfiguration"):
        kube.add(obj)
    owner = {
        "kind": "Zone",
        "metadata": {"name": "zone", "namespace": THEIRS, "finalizers": ["kflare.dev/finalizer"]},
        "spec": {"name": "example.com", "accountRef": {"name": "acct"}},
    }
    if granted:
        owner["spec"]["hostnameGrants"] = [{"namespaces": selecting(NS), "hostnames": ["app.example.com"]}]
    kube.add(ready(owner, cloudflareMetadata={"zoneID": ZONE_ID}))
    kube.add(config_resource({}))
    state = emulator_state(copy.deepcopy(EXISTING))
    state["tunnels"] = [{"id": TUNNEL_ID, "name": "web", "account_id": ACCOUNT_ID}]
    cloudflare = Cloudflare(state)
    try:
        runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
        writes = cloudflare.writes()
        await runtime.reconcile("TunnelConfiguration", "web", NS)
        outcome = condition(kube, "TunnelConfiguration", "web", NS)
        wrote = cloudflare.writes() - writes
    finally:
        await cloudflare.aclose()
    if granted:
        assert outcome["reason"] == "Synced"
        return
    assert (outcome["status"], outcome["reason"]) == ("False", "HostnameNotGranted")
    assert THEIRS not in outcome["message"]
    assert wrote == 0


def their_kv(namespace_id: str) -> dict[str, Any]:
    """Another namespace's KVNamespace, Ready with the ID of its namespace in Cloudflare."""
    data = {
        "kind": "KVNamespace",
        "metadata": {"name": "data", "namespace": THEIRS, "finalizers": ["kflare.dev/finalizer"]},
        "spec": {"title": "their-data", "accountRef": {"name": "acct"}},
    }
    return ready(data, cloudflareMetadata={"namespaceID": namespace_id})


async def test_a_worker_binding_by_raw_id_to_another_namespaces_kv_namespace_is_refused() -> None:
    kube = MemoryKube()
    for obj in parents("WorkerScript"):
        kube.add(obj)
    kube.add(their_kv("f" * 32))
    worker = {
        "kind": "WorkerScript",
        "metadata": {"name": "thief", "namespace": NS},
        "spec": {
            "name": "thief",
            "accountRef": {"name": "acct"},
            "script": "export default { fetch() { return new Response('x') } }",
            "format": "module",
            "bindings": [{"name": "LOOT", "kvNamespaceID": "f" * 32}],
        },
    }
    kube.add(worker)
    cloudflare = Cloudflare(emulator_state([]))
    try:
        runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
        await runtime.reconcile("WorkerScript", "thief", NS)
        refused = condition(kube, "WorkerScript", "thief", NS)
        uploads = cloudflare.writes()
    finally:
        await cloudflare.aclose()
    assert (refused["status"], refused["reason"]) == ("False", "ClaimedElsewhere")
    assert "binding LOOT" in refused["message"]
    assert THEIRS not in refused["message"]
    assert uploads == 0


async def test_two_resources_recording_one_object_from_before_claims_get_one_owner_and_neither_deletes_it_for_the_other(
    world: tuple[MemoryKube, Cloudflare],
) -> None:
    """Before claims, two namespaces' Zones of one domain could both hold it: the first reconcile after the upgrade
    takes the claim, the other stops writing, and its deletion leaves the zone alone."""
    kube, cloudflare = world
    for namespace in (NS, THEIRS):
        both = zone(namespace, **{DELETION_POLICY_ANNOTATION: "delete"})
        both["metadata"]["finalizers"] = ["kflare.dev/finalizer"]
        kube.add(ready(both, cloudflareMetadata={"zoneID": ZONE_ID}))
    runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
    await runtime.reconcile("Zone", "zone", NS)
    assert condition(kube, "Zone", "zone", NS)["reason"] == "Synced"
    writes = cloudflare.writes()
    await runtime.reconcile("Zone", "zone", THEIRS)
    assert condition(kube, "Zone", "zone", THEIRS)["reason"] == "ClaimedElsewhere"
    claim = kube.get("CloudflareClaim", claim_name("Zone", ACCOUNT_ID, ZONE_ID))
    assert claim is not None
    assert claim["spec"]["owner"]["namespace"] == NS

    mark_deleted(kube, "Zone", "zone", THEIRS)
    await runtime.reconcile("Zone", "zone", THEIRS)
    assert kube.get("Zone", "zone", THEIRS) is None
    assert cloudflare.writes() == writes, "the loser wrote to, or deleted, the owner's zone"
    assert [z["id"] for z in await cloudflare.get("/zones")] == [ZONE_ID]
    await runtime.reconcile("Zone", "zone", NS)
    assert condition(kube, "Zone", "zone", NS)["reason"] == "Synced"


async def test_a_teams_own_account_serves_its_namespace_and_no_other(world: tuple[MemoryKube, Cloudflare]) -> None:
    kube, cloudflare = world
    kube.add(
        {
            "kind": "Account",
            "metadata": {"name": "team", "namespace": NS},
            "spec": {"accountID": ACCOUNT_ID, "tokenSecretRef": {"name": "token"}},
        }
    )
    own = zone(NS, name="own")
    own["spec"] = {"name": "own.example", "accountRef": {"name": "team", "kind": "Account"}}
    kube.add(own)
    borrowed = zone(THEIRS, name="borrowed")
    borrowed["spec"] = {"name": "borrowed.example", "accountRef": {"name": "team", "kind": "Account"}}
    kube.add(borrowed)
    runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
    await runtime.reconcile("Account", "team", NS)
    assert condition(kube, "Account", "team", NS)["reason"] == "Validated"
    await runtime.reconcile("Zone", "own", NS)
    assert condition(kube, "Zone", "own", NS)["reason"] == "Synced"
    calls = len(cloudflare.emulator.calls.select())
    await runtime.reconcile("Zone", "borrowed", THEIRS)
    refused = condition(kube, "Zone", "borrowed", THEIRS)
    # Another namespace's Account is not even looked for: the reference names one of the resource's own namespace.
    assert (refused["status"], refused["reason"]) == ("False", "AccountNotFound")
    assert len(cloudflare.emulator.calls.select()) == calls
    assert sorted(z["name"] for z in await cloudflare.get("/zones")) == ["example.com", "own.example"]


async def test_a_worker_binds_another_namespaces_kv_namespace_only_while_a_grant_there_allows_it() -> None:
    kube = MemoryKube()
    for obj in parents("WorkerScript"):
        kube.add(obj)
    cloudflare = Cloudflare(emulator_state([]))
    try:
        reply = await cloudflare.http.post(
            f"/accounts/{ACCOUNT_ID}/storage/kv/namespaces",
            json={"title": "their-data"},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        kv_id = reply.json()["result"]["id"]
        kube.add(their_kv(kv_id))
        kube.add(
            {
                "kind": "WorkerScript",
                "metadata": {"name": "reader", "namespace": NS, "uid": "uid-reader"},
                "spec": {
                    "name": "reader",
                    "accountRef": {"name": "acct"},
                    "script": "export default { fetch() { return new Response('x') } }",
                    "format": "module",
                    "bindings": [{"name": "DATA", "kvNamespaceRef": {"name": "data", "namespace": THEIRS}}],
                },
            }
        )
        runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
        settings = f"/accounts/{ACCOUNT_ID}/workers/scripts/reader/settings"

        await runtime.reconcile("WorkerScript", "reader", NS)
        refused = condition(kube, "WorkerScript", "reader", NS)
        assert (refused["status"], refused["reason"]) == ("False", "ReferenceNotPermitted")
        assert cloudflare.writes() == 1, "only the KV namespace the test made: no upload"

        grant = {
            "kind": "Grant",
            "metadata": {"name": "readers", "namespace": THEIRS},
            "spec": {
                "from": [{"kind": "WorkerScript", "namespace": NS}],
                "to": [{"kind": "KVNamespace", "name": "data"}],
            },
        }
        kube.add(grant)
        await runtime.reconcile("WorkerScript", "reader", NS)
        assert condition(kube, "WorkerScript", "reader", NS)["reason"] == "Synced"
        bound = (await cloudflare.get(settings))["bindings"]
        assert [(b["name"], b.get("namespace_id")) for b in bound] == [("DATA", kv_id)]

        # The grant taken back: the Worker loses the binding at once, and says why.
        kube.delete("Grant", "readers", THEIRS)
        await runtime.reconcile("WorkerScript", "reader", NS)
        revoked = condition(kube, "WorkerScript", "reader", NS)
        assert (revoked["status"], revoked["reason"]) == ("False", "ReferenceNotPermitted")
        assert (await cloudflare.get(settings))["bindings"] == []
    finally:
        await cloudflare.aclose()


def test_of_two_zones_holding_one_domain_the_oldest_owns_its_names_for_the_controller_the_class_and_admission() -> None:
    """Two accounts may each hold a zone of one domain. Which Zone's namespace owns its names must not depend on the
    order a cache lists them in, nor differ between the controller, the Gateway class and the webhook."""

    def held(namespace: str, created: str, zone_id: str | None) -> dict[str, Any]:
        meta = {"name": "zone", "namespace": namespace, "creationTimestamp": created}
        status = {"cloudflareMetadata": {"zoneID": zone_id}} if zone_id else {}
        return {"metadata": meta, "spec": {"name": "example.com"}, "status": status}

    older, newer, unheld = (
        held("team-b", "2026-01-01T00:00:00Z", "b" * 32),
        held("team-a", "2026-02-01T00:00:00Z", "a" * 32),
        held("team-c", "2025-01-01T00:00:00Z", None),  # refused or waiting: it manages nothing
    )

    class Zones:
        def __init__(self, listed: list[dict[str, Any]]) -> None:
            self.listed = listed

        def by_index(self, index: str, key: str) -> list[dict[str, Any]]:
            assert index == DOMAIN_INDEX
            return self.listed if key == "example.com" else []

    for listed in ([newer, unheld, older], [older, newer, unheld]):
        zones = Zones(listed)
        ctx = Caches(lambda _, z=zones: z, DependencyIndex())  # type: ignore[misc]
        assert managing_zone(ctx, "www.example.com") is older
        assert managing_zone(ctx, "*.api.example.com") is older
        assert ZoneIndex(listed).managing("www.example.com") is older
    assert managing_zone(Caches(lambda _: None, DependencyIndex()), "www.example.com") is None
