"""Tenancy at admission: what the controller would refuse for the namespace (an account that does not let it in,
adoption it may not do, names another namespace's Zone does not grant) is refused by `kubectl apply` with the field
and the reason, decided on the objects the cluster holds; what it cannot decide there (objects not there yet, a
cluster it cannot read) is left to the controller."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from app.api.tenancy import ALL_NAMESPACES, NO_NAMESPACES, NamespacePolicy
from tests.unit.webhooks.reviews import model_named, request, sample
from webhooks import create_app

NAMESPACE = "my-namespace"
"""The namespace every review of `reviews.request` comes from."""
KFLARE_USER = "system:serviceaccount:kflare-system:kflare"
ONLY_TEAM_A = {"from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}}
ADOPT = "kflare.dev/adoption-policy"


@dataclass
class FakeCluster:
    """The cluster's objects as the webhook reads them, by (kind, namespace, name)."""

    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    default_account_namespaces: NamespacePolicy = field(default_factory=lambda: ALL_NAMESPACES)
    fails: bool = False
    reads: int = 0

    def add(self, kind: str, namespace: str, name: str, spec: dict[str, Any], **status: Any) -> None:
        obj: dict[str, Any] = {"metadata": {"name": name, "namespace": namespace or None}, "spec": spec}
        if status:
            obj["status"] = {"cloudflareMetadata": status}
        self.objects[(kind, namespace, name)] = obj

    async def get(self, kind: str, name: str, namespace: str | None) -> Mapping[str, Any] | None:
        self.reads += 1
        if self.fails:
            await asyncio.sleep(3600)  # a cluster that does not answer: the webhook's own deadline ends the wait
        return self.objects.get((kind, namespace or "", name))

    async def list(self, kind: str, namespace: str | None) -> list[Mapping[str, Any]]:
        self.reads += 1
        return [o for (k, ns, _), o in self.objects.items() if k == kind and namespace in (None, ns)]

    async def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.labels.get(namespace, {})


def account(cluster: FakeCluster, name: str = "demo-account", **spec: Any) -> None:
    cluster.add("CloudflareAccount", "", name, {"accountID": "0" * 32, "tokenSecretRef": {"name": "t"}, **spec})


async def answer(
    cluster: FakeCluster, kind: str, obj: dict[str, Any], old: dict[str, Any] | None = None, *, user: str = "someone"
) -> dict[str, Any]:
    app = create_app(cluster=cluster, kflare=lambda: frozenset({KFLARE_USER}))
    body = request("UPDATE" if old is not None else "CREATE", obj, old, kind=kind)
    body["userInfo"]["username"] = user
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}
    plural = model_named(kind).info.plural
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://webhook") as http:
        reply = await http.post(f"/validate/{plural}", json=review)
    response: dict[str, Any] = reply.json()["response"]
    return response


def denial(response: dict[str, Any]) -> str:
    assert response["allowed"] is False, response
    message: str = response["status"]["message"]
    return message


def zone(**annotations: str) -> dict[str, Any]:
    obj = sample("Zone")
    obj["metadata"]["annotations"] = annotations
    return obj


# ---- accounts: who may use them ------------------------------------------------------------------------------------


async def test_an_account_that_does_not_let_the_namespace_in_is_refused_at_spec_account_ref() -> None:
    cluster = FakeCluster()
    account(cluster, allowedNamespaces=ONLY_TEAM_A)
    message = denial(await answer(cluster, "Zone", zone()))
    assert message.startswith(
        f"spec.accountRef: CloudflareAccount demo-account does not let namespace {NAMESPACE} use it"
    ), message
    assert "team-a" not in message, "the refusal says which namespaces the account lets in"


async def test_a_namespace_the_accounts_selector_selects_by_label_is_let_in() -> None:
    cluster = FakeCluster(labels={NAMESPACE: {"tier": "platform"}})
    account(cluster, allowedNamespaces={"from": "Selector", "selector": {"matchLabels": {"tier": "platform"}}})
    assert (await answer(cluster, "Zone", zone()))["allowed"] is True
    cluster.labels[NAMESPACE] = {"tier": "apps"}
    denial(await answer(cluster, "Zone", zone()))


async def test_an_account_that_says_nothing_follows_the_controllers_default() -> None:
    cluster = FakeCluster()
    account(cluster)
    assert (await answer(cluster, "Zone", zone()))["allowed"] is True
    cluster.default_account_namespaces = NO_NAMESPACES
    assert "does not let namespace" in denial(await answer(cluster, "Zone", zone()))


async def test_an_account_not_there_yet_and_a_teams_own_account_are_left_to_the_controller() -> None:
    cluster = FakeCluster(default_account_namespaces=NO_NAMESPACES)
    assert (await answer(cluster, "Zone", zone()))["allowed"] is True  # a GitOps sync may apply it next
    own = zone()
    own["spec"]["accountRef"] = {"name": "demo-account", "kind": "Account"}
    account(cluster)
    assert (await answer(cluster, "Zone", own))["allowed"] is True


async def test_an_update_that_keeps_the_account_is_allowed_after_the_policy_tightened() -> None:
    """A resource made while the account let its namespace in still takes other changes (and its finalizer's
    removal): the controller reports it, and deleting it must not need the account's leave."""
    cluster = FakeCluster()
    account(cluster, allowedNamespaces=ONLY_TEAM_A)
    old = zone()
    new = copy.deepcopy(old)
    new["spec"]["type"] = "partial"
    assert (await answer(cluster, "Zone", new, old))["allowed"] is True


async def test_kflares_own_writes_are_never_refused_for_tenancy() -> None:
    cluster = FakeCluster()
    account(cluster, allowedNamespaces=ONLY_TEAM_A)
    assert (await answer(cluster, "Zone", zone(), user=KFLARE_USER))["allowed"] is True
    assert cluster.reads == 0


async def test_a_cluster_that_cannot_be_read_in_time_leaves_the_decision_to_the_controller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("webhooks.access.ACCESS_TIMEOUT", 0.05)  # the bound's length is not what is tested
    cluster = FakeCluster(fails=True)
    account(cluster, allowedNamespaces=ONLY_TEAM_A)
    response = await answer(cluster, "Zone", zone())
    assert response["allowed"] is True


# ---- adoption -------------------------------------------------------------------------------------------------------


async def test_adopting_where_the_account_does_not_let_the_namespace_adopt_is_refused() -> None:
    cluster = FakeCluster()
    account(cluster, allowedNamespaces={"from": "All"})  # who may adopt is unset: nobody
    message = denial(await answer(cluster, "Zone", zone(**{ADOPT: "adopt"})))
    assert message.startswith(f"metadata.annotations[{ADOPT}]: CloudflareAccount demo-account does not let"), message
    assert "spec.adoptionNamespaces" in message
    assert (await answer(cluster, "Zone", zone()))["allowed"] is True, "the same Zone without adoption is refused"


async def test_adopt_or_create_where_adoption_is_not_permitted_is_allowed_with_a_warning() -> None:
    cluster = FakeCluster()
    account(cluster, allowedNamespaces={"from": "All"})
    response = await answer(cluster, "Zone", zone(**{ADOPT: "adopt-or-create"}))
    assert response["allowed"] is True
    assert [w.split(":")[0] for w in response["warnings"]] == [f"metadata.annotations[{ADOPT}]"]


async def test_adopting_a_record_goes_by_its_zones_account() -> None:
    cluster = FakeCluster()
    account(cluster, allowedNamespaces={"from": "All"}, adoptionNamespaces=ONLY_TEAM_A)
    cluster.add("Zone", NAMESPACE, "example-com", {"name": "example.com", "accountRef": {"name": "demo-account"}})
    record = sample("DNSRecord")
    record["metadata"]["annotations"] = {ADOPT: "adopt"}
    assert "does not let namespace my-namespace adopt" in denial(await answer(cluster, "DNSRecord", record))
    cluster.labels[NAMESPACE] = {}
    account(cluster, allowedNamespaces={"from": "All"}, adoptionNamespaces={"from": "All"})
    assert (await answer(cluster, "DNSRecord", record))["allowed"] is True


# ---- another namespace's Zone --------------------------------------------------------------------------------------


def record_in_team_a(name: str) -> dict[str, Any]:
    return sample("DNSRecord", zoneRef={"name": "shared", "namespace": "team-a"}, name=name)


def team_a_zone(cluster: FakeCluster, grants: list[dict[str, Any]] | None = None) -> None:
    spec: dict[str, Any] = {"name": "example.com", "accountRef": {"name": "demo-account"}}
    if grants is not None:
        spec["hostnameGrants"] = grants
    cluster.add("Zone", "team-a", "shared", spec, zoneID="a" * 32)


async def test_a_record_in_another_namespaces_zone_needs_the_names_grant() -> None:
    cluster = FakeCluster()
    team_a_zone(cluster)
    message = denial(await answer(cluster, "DNSRecord", record_in_team_a("www")))
    assert message == (
        f"spec.name: Zone team-a/shared grants namespace {NAMESPACE} no name www.example.com (its spec.hostnameGrants)"
    )
    mine = {"from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}}
    team_a_zone(cluster, [{"namespaces": mine, "hostnames": ["*.mine.example.com"]}])
    assert (await answer(cluster, "DNSRecord", record_in_team_a("api.mine.example.com")))["allowed"] is True
    assert (await answer(cluster, "DNSRecord", record_in_team_a("api.mine")))["allowed"] is True, "relative name"
    denial(await answer(cluster, "DNSRecord", record_in_team_a("mine.example.com")))  # the wildcard's own name
    denial(await answer(cluster, "DNSRecord", record_in_team_a("www.example.com")))


async def test_a_record_in_a_zone_not_there_yet_is_left_to_the_controller() -> None:
    assert (await answer(FakeCluster(), "DNSRecord", record_in_team_a("www")))["allowed"] is True


def ingress(*hostnames: str) -> dict[str, Any]:
    rules = [{"hostname": h, "service": "http://web.web.svc.cluster.local:80"} for h in hostnames]
    return sample("TunnelConfiguration", ingress=rules)


async def test_a_tunnel_hostname_in_another_namespaces_zone_needs_its_grant() -> None:
    cluster = FakeCluster()
    team_a_zone(cluster)
    cluster.add("Zone", NAMESPACE, "mine", {"name": "mine.example.net"}, zoneID="b" * 32)
    message = denial(await answer(cluster, "TunnelConfiguration", ingress("app.mine.example.net", "*.example.com")))
    refused = "spec.ingress[1].hostname: *.example.com is in zone example.com, which a Zone in another namespace"
    assert message.startswith(refused), message
    assert "team-a" not in message
    assert (await answer(cluster, "TunnelConfiguration", ingress("app.mine.example.net")))["allowed"] is True


async def test_a_zone_that_holds_no_cloudflare_zone_grants_nothing_and_refuses_nothing() -> None:
    """A Zone refused (a second Zone of a domain, or one still waiting) manages no names: refusing on its word would
    let anyone block a domain by declaring it."""
    cluster = FakeCluster()
    cluster.add("Zone", "team-a", "shared", {"name": "example.com"})
    assert (await answer(cluster, "TunnelConfiguration", ingress("app.example.com")))["allowed"] is True


async def test_a_tunnel_configuration_keeps_names_it_had_when_the_zone_came_later() -> None:
    cluster = FakeCluster()
    team_a_zone(cluster)
    old = ingress("app.example.com")
    new = ingress("app.example.com", "other.example.org")
    assert (await answer(cluster, "TunnelConfiguration", new, old))["allowed"] is True
    denial(await answer(cluster, "TunnelConfiguration", ingress("app.example.com", "www.example.com"), old))


# ---- bindings across namespaces -------------------------------------------------------------------------------------


def worker_binding_team_a() -> dict[str, Any]:
    binding = {"name": "CACHE", "kvNamespaceRef": {"name": "cache", "namespace": "team-a"}}
    return sample("WorkerScript", bindings=[binding])


async def test_a_binding_no_grant_allows_is_allowed_with_a_warning_and_a_grant_silences_it() -> None:
    """The Grant may come later (another team applies it): the Worker waits, and the user is told why now."""
    cluster = FakeCluster()
    response = await answer(cluster, "WorkerScript", worker_binding_team_a())
    assert response["allowed"] is True
    assert response["warnings"] == [
        f"spec.bindings[0].kvNamespaceRef: no Grant in namespace team-a lets WorkerScripts of namespace {NAMESPACE}"
        " reference KVNamespace cache: the Worker waits until one does"
    ]
    cluster.add(
        "Grant",
        "team-a",
        "to-mine",
        {"from": [{"kind": "WorkerScript", "namespace": NAMESPACE}], "to": [{"kind": "KVNamespace"}]},
    )
    response = await answer(cluster, "WorkerScript", worker_binding_team_a())
    assert response["allowed"] is True
    assert "warnings" not in response


def test_the_checked_references_are_found_in_the_models() -> None:
    """Which references admission checks is read from each kind's model (the types of its fields), not listed by
    kind: every kind naming a CloudflareAccount has its use checked, a Zone of another namespace its grants, a
    binding into another namespace its Grant."""
    from app.api.registry import KINDS
    from webhooks.access import Links

    links = {model.info.kind: Links.of(model) for model in KINDS}
    naming_accounts = {kind for kind, found in links.items() if found.accounts}
    assert naming_accounts == {
        "Zone", "KVNamespace", "R2Bucket", "D1Database", "WorkerScript", "Tunnel", "IPList"
    }  # fmt: skip
    assert {kind for kind, found in links.items() if found.foreign_zones} == {"DNSRecord"}
    assert links["WorkerScript"].bindings == {
        "bindings": {"kvNamespaceRef": "KVNamespace", "r2BucketRef": "R2Bucket", "d1DatabaseRef": "D1Database"}
    }
    zoned = {kind for kind, found in links.items() if found.zones}
    assert {"DNSRecord", "WorkerRoute", "ManagedTransform", "WAFCustomRule", "CacheRule"} <= zoned
