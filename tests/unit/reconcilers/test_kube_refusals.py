"""A write the cluster refuses kflare (RBAC, or an admission plugin such as OwnerReferencesPermissionEnforcement) is
reported in the resource's Ready condition, not only logged, and what kflare did in Cloudflare stays in status."""

from __future__ import annotations

from typing import Any

from app.kube.client import JSON, KubeError, ResourceType
from tests.unit.reconcilers.harness import Cloudflare, KubeSecrets, MemoryKube, Runtime
from tests.unit.reconcilers.test_crash_points import CASES, KINDS, NS, parents, state_of, tunnel_resource

REFUSAL = (
    'secrets "web-token" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you '
    "can't set finalizers on"
)


class RefusingKube(MemoryKube):
    async def create(self, rt: ResourceType, body: JSON, namespace: str | None = None) -> JSON:
        if rt.kind == "Secret":
            raise KubeError(403, "Forbidden", REFUSAL)
        return await super().create(rt, body, namespace)


async def test_a_refused_token_secret_is_reported_in_the_tunnels_ready_condition() -> None:
    kube = RefusingKube()
    for obj in parents("Tunnel"):
        kube.add(obj)
    kube.add(tunnel_resource({}))
    cloudflare = Cloudflare(state_of(CASES["tunnel-created"]))
    try:
        runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
        outcome: Any = await runtime.reconcile("Tunnel", "web", NS)
        again: Any = await runtime.reconcile("Tunnel", "web", NS)
        tunnels = await cloudflare.get(CASES["tunnel-created"].count_path, is_deleted="false")
    finally:
        await cloudflare.aclose()
    stored = kube.get("Tunnel", "web", NS)
    assert stored is not None
    (ready,) = stored["status"]["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "APIError")
    assert ready["message"] == f"Kubernetes refused kflare: {REFUSAL}"
    assert outcome.retry
    assert again.retry
    assert stored["status"]["cloudflareMetadata"]["tunnelID"] == tunnels[0]["id"]
    assert len(tunnels) == 1  # the second reconcile found the tunnel it made
