"""An installation that grants kflare Secrets in some namespaces only (the chart's `rbac.namespaces`, the controller's
`--granted-namespaces`): a resource that needs a Secret elsewhere says so, as `NamespaceNotGranted`, before anything
is made in Cloudflare that would need it, and no watch of a Secret there is even tried."""

from __future__ import annotations

from typing import Any

from app.kube.referenced import ReferencedObjects
from reconcilers.gateway.planes import PlanePolicy, choose
from tests.unit.reconcilers.harness import Cloudflare, KubeSecrets, MemoryKube, Runtime, emulator_state
from tests.unit.reconcilers.test_crash_points import KINDS, NS, parents, tunnel_resource
from tests.unit.reconcilers.test_tenancy import condition

ELSEWHERE = "elsewhere"


async def test_a_tunnel_whose_token_secret_kflare_may_not_write_is_refused_before_a_tunnel_is_made() -> None:
    kube = MemoryKube()
    for obj in parents("Tunnel"):
        kube.add(obj)
    theirs = tunnel_resource({})
    theirs["metadata"]["namespace"] = ELSEWHERE
    kube.add(theirs)
    kube.add(tunnel_resource({}))
    cloudflare = Cloudflare(emulator_state([]))
    try:
        runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube, readable=frozenset({NS})))
        await runtime.reconcile("Tunnel", "web", ELSEWHERE)
        refused = condition(kube, "Tunnel", "web", ELSEWHERE)
        assert (refused["status"], refused["reason"]) == ("False", "NamespaceNotGranted")
        assert f"Secret {ELSEWHERE}/web-token" in refused["message"]
        assert "rbac.namespaces" in refused["message"]
        assert cloudflare.writes() == 0, "a tunnel was made whose token could not be written"

        await runtime.reconcile("Tunnel", "web", NS)  # the control: in a granted namespace it is made
        assert condition(kube, "Tunnel", "web", NS)["reason"] == "Synced"
        assert cloudflare.writes() == 1
    finally:
        await cloudflare.aclose()


async def test_an_account_whose_token_is_in_a_namespace_not_granted_says_so() -> None:
    kube = MemoryKube()
    account, token = parents("Zone")
    account.pop("status", None)
    kube.add(account)
    kube.add(token)
    cloudflare = Cloudflare(emulator_state([]))
    try:
        runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube, readable=frozenset({ELSEWHERE})))
        await runtime.reconcile("CloudflareAccount", "acct", "")
        refused = condition(kube, "CloudflareAccount", "acct", "")
        assert (refused["status"], refused["reason"]) == ("False", "NamespaceNotGranted"), refused
        assert cloudflare.emulator.calls.select() == []
    finally:
        await cloudflare.aclose()


def test_no_watch_is_started_for_an_object_in_a_namespace_not_granted() -> None:
    changed: list[Any] = []
    secrets = ReferencedObjects(None, changed.append, readable=frozenset({NS}))  # type: ignore[arg-type]
    secrets.reference("a Tunnel", [(ELSEWHERE, "token")])
    assert secrets.watched == set()
    assert secrets.get((ELSEWHERE, "token")) is None
    assert not secrets.may_read(ELSEWHERE)
    assert secrets.may_read(NS)


def test_a_gateway_asking_for_its_own_plane_in_a_namespace_not_granted_is_told_why() -> None:
    gateway = {
        "metadata": {"name": "edge", "namespace": ELSEWHERE, "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "gatewayClassName": "cf",
            "infrastructure": {"parametersRef": {"group": "kflare.dev", "kind": "GatewayParameters", "name": "p"}},
        },
    }
    parameters = {"metadata": {"name": "p", "namespace": ELSEWHERE}, "spec": {"accountRef": {"name": "acct"}}}
    granted = choose([gateway], [parameters], {"cf"}, PlanePolicy(3, None, frozenset({NS})))
    (why,) = granted.values()
    assert isinstance(why, str)
    assert f"runs no data planes in namespace {ELSEWHERE}" in why
    allowed = choose([gateway], [parameters], {"cf"}, PlanePolicy(3, None, frozenset({NS, ELSEWHERE})))
    assert not isinstance(next(iter(allowed.values())), str)
