"""The shared lifecycle, for every kind that creates Cloudflare objects: the adoption matrix (policy x whether
the object exists) and the deletion matrix (created or adopted x the resource's policy x the default policy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.api.registry import KINDS
from app.controlplane import ControlPlane
from tests.fixtures.controller import ControllerProcess, Kflare, controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.kinds import SAMPLES

pytestmark = pytest.mark.integration


def test_every_kind_that_creates_has_a_sample() -> None:
    creating = {model.info.kind for model in KINDS} - {"CloudflareAccount"}
    assert creating <= set(SAMPLES), f"kinds without a lifecycle sample: {sorted(creating - set(SAMPLES))}"


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
    controller: ControllerProcess,
    kflare: Kflare,
    fresh_emulator: EmulatorProcess,
    kind: str,
    policy: str | None,
    exists: bool,
    reason: str,
    adopted: bool,
) -> None:
    sample = SAMPLES[kind]
    ctx = await sample.parents(kflare, "adopt")
    existing_id = sample.make_existing(fresh_emulator, ctx) if exists else None
    before = sample.held(fresh_emulator, ctx)
    annotations = {"kflare.dev/adoption-policy": policy} if policy else {}
    await sample.apply(kflare, ctx, annotations)
    resource = await kflare.ready(kind, sample.name, reason=reason, status="True" if reason == "Synced" else "False")
    held = sample.held(fresh_emulator, ctx)
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
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare_crds: None,
    kflare: Kflare,
    tmp_path: Path,
    kind: str,
    adopted: bool,
    policy: str | None,
    default: str,
    kept: bool,
) -> None:
    sample = SAMPLES[kind]
    with controller_process(control_plane, fresh_emulator, tmp_path, f"--default-deletion-policy={default}"):
        ctx = await sample.parents(kflare, "delete")
        if adopted:
            sample.make_existing(fresh_emulator, ctx)
        annotations = {"kflare.dev/adoption-policy": "adopt"} if adopted else {}
        if policy:
            annotations["kflare.dev/deletion-policy"] = policy
        await sample.apply(kflare, ctx, annotations)
        await kflare.ready(kind, sample.name)
        await kflare.delete(kind, sample.name)
        await kflare.gone(kind, sample.name)
        assert bool(sample.held(fresh_emulator, ctx)) is kept
        await kflare.cleanup()
