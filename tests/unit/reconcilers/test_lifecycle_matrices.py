"""The shared lifecycle, for every kind that creates Cloudflare objects: the adoption matrix (policy x whether
the object exists) and the deletion matrix (created or adopted x the resource's policy x the default policy).

Every kind's real reconciler runs in process over a Kubernetes API held in memory, against the emulator (the
reconcilers reach it through httpx's ASGI transport, the Samples' synchronous calls on a loopback port: see
tests/unit/reconcilers/harness.py); the Samples of tests/kinds drive it as they drive `kflare run` in
tests/integration/test_lifecycle_matrices.py, which keeps one case of each kind against the real API server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from app.api.registry import KINDS
from app.kube.controller import Outcome
from reconcilers import registry
from tests.kinds import SAMPLES
from tests.unit.reconcilers.harness import SETTLE_PASSES, EmulatorServer, MemoryKflare, emulator_state

pytestmark = pytest.mark.heavy


def test_every_kind_that_creates_has_a_sample() -> None:
    creating = {kind.model.info.kind for kind in registry.KINDS if kind.creates}
    assert creating >= {model.info.kind for model in KINDS} - {"CloudflareAccount", "Account"}
    assert creating <= set(SAMPLES), f"kinds without a lifecycle sample: {sorted(creating - set(SAMPLES))}"
    reconciled = {kind.model.info.kind for kind in registry.KINDS if kind.creates}
    assert reconciled <= set(SAMPLES), f"kinds without a lifecycle sample: {sorted(reconciled - set(SAMPLES))}"


@pytest.fixture(scope="module")
def served() -> Iterator[EmulatorServer]:
    with EmulatorServer(emulator_state([])) as server:
        yield server


@pytest.fixture
def default() -> str:
    """The default deletion policy (`--default-deletion-policy`); the deletion matrix's rows set their own."""
    return "delete"


@pytest.fixture
async def kflare(served: EmulatorServer, default: str) -> AsyncIterator[MemoryKflare]:
    """A fresh world per case: the emulator back to its starting state, an empty Kubernetes API, and the kinds built
    with the case's default deletion policy, as `kflare run` builds them."""
    served.reset()
    world = MemoryKflare(served, default_deletion_policy=default)
    try:
        yield world
    finally:
        await world.aclose()


ADOPTION = [
    (None, True, "AlreadyExists", False),
    (None, False, "Synced", False),
    ("adopt", True, "Synced", True),
    ("adopt", False, "AdoptionTargetNotFound", False),
    ("adopt-or-create", True, "Synced", True),
    ("adopt-or-create", False, "Synced", False),
]
OWNED_BY_KEY = [(policy, exists, "Synced", False) for policy, exists, _, _ in ADOPTION]
"""A kind whose key marks kflare's own objects (a rule's ref): what exists is the resource's own, whatever the
policy; it is never adopted, and nothing is refused."""


def adoption_rows() -> list[tuple[str, str | None, bool, str, bool]]:
    return [(kind, *row) for kind in sorted(SAMPLES) for row in (ADOPTION if SAMPLES[kind].adoptable else OWNED_BY_KEY)]


@pytest.mark.parametrize(("kind", "policy", "exists", "reason", "adopted"), adoption_rows())
async def test_adoption_matrix(
    kflare: MemoryKflare,
    served: EmulatorServer,
    kind: str,
    policy: str | None,
    exists: bool,
    reason: str,
    adopted: bool,
) -> None:
    sample = SAMPLES[kind]
    ctx = await sample.parents(kflare, "adopt")
    existing_id = sample.make_existing(served, ctx) if exists else None
    before = sample.held(served, ctx)
    annotations = {"kflare.dev/adoption-policy": policy} if policy else {}
    await sample.apply(kflare, ctx, annotations)
    resource = await kflare.ready(kind, sample.name, reason=reason, status="True" if reason == "Synced" else "False")
    held = sample.held(served, ctx)
    if reason in ("AlreadyExists", "AdoptionTargetNotFound"):
        assert held == before, "nothing in Cloudflare was touched"
        return
    assert len(held) == 1, held
    assert sample.matches_spec(held[0], ctx), held[0]
    assert (held[0]["id"] == existing_id) is (adopted if sample.adoptable else exists)
    assert (resource["metadata"].get("annotations", {}).get("kflare.dev/adopted") == "true") is adopted


DELETION = [
    (False, None, "delete", False),
    (False, "retain", "delete", True),
    (False, None, "retain", True),
    (False, "delete", "retain", False),
    (True, None, "delete", True),
    (True, "delete", "delete", False),
]


def deletion_rows() -> list[tuple[str, bool, str | None, str, bool]]:
    """Every row for kinds that adopt; the rows of created objects for the others (they adopt nothing)."""
    return [(kind, *row) for kind in sorted(SAMPLES) for row in DELETION if SAMPLES[kind].adoptable or not row[0]]


@pytest.mark.parametrize(("kind", "adopted", "policy", "default", "kept"), deletion_rows())
async def test_deletion_matrix(
    kflare: MemoryKflare,
    served: EmulatorServer,
    kind: str,
    adopted: bool,
    policy: str | None,
    default: str,
    kept: bool,
) -> None:
    sample = SAMPLES[kind]
    ctx = await sample.parents(kflare, "delete")
    if adopted:
        sample.make_existing(served, ctx)
    annotations = {"kflare.dev/adoption-policy": "adopt"} if adopted else {}
    if policy:
        annotations["kflare.dev/deletion-policy"] = policy
    await sample.apply(kflare, ctx, annotations)
    await kflare.ready(kind, sample.name)
    await kflare.delete(kind, sample.name)
    await kflare.gone(kind, sample.name)
    assert bool(sample.held(served, ctx)) is kept


async def test_a_world_that_never_settles_fails_the_case(kflare: MemoryKflare, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reconciler that writes on every pass would make `ready` and `gone` wait for ever: the harness says so."""
    await kflare.token_secret()
    await kflare.make_account()
    account = kflare.runtime.reconcilers["CloudflareAccount"]
    reconcile, passes = account.reconcile, []

    async def restless(key: tuple[str, str]) -> Outcome:
        outcome = await reconcile(key)
        passes.append(key)
        patch = {"metadata": {"annotations": {"example.com/pass": str(len(passes))}}}
        await kflare.kube.patch(account.resource_type(), key[1], patch, key[0] or None)
        return outcome

    monkeypatch.setattr(account, "reconcile", restless)
    with pytest.raises(AssertionError, match=r"still writing.*CloudflareAccount acct-matrix"):
        await kflare.ready("CloudflareAccount", kflare.account)
    assert len(passes) == SETTLE_PASSES
