"""The shared lifecycle of every kind through `kflare run` against the API server: one case of each matrix per kind,
so that what the in-process matrices (tests/unit/reconcilers/test_lifecycle_matrices.py) leave out stays covered:
the CRDs' schemas taking each Sample's manifest, the watches, the flags reaching the kinds, the HTTP to Cloudflare.

One controller serves every case, started with `--default-deletion-policy=retain`; each case deletes what it made
(the `kflare` fixture). Each case has a Cloudflare account of its own too, so that no listing the controller kept
from an earlier case (one serves for up to a minute) can hide the object a case makes outside kflare."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from app.controlplane import ControlPlane
from tests.fixtures.controller import ControllerProcess, Kflare, controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.kinds import SAMPLES

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def retaining_controller(
    control_plane: ControlPlane,
    emulator: EmulatorProcess,
    kflare_crds: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    workdir = tmp_path_factory.mktemp("lifecycle")
    with controller_process(control_plane, emulator, workdir, "--default-deletion-policy=retain") as proc:
        yield proc


@pytest.mark.parametrize("kind", sorted(SAMPLES))
async def test_an_existing_object_is_adopted_then_its_deletion_follows_the_policies(
    retaining_controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess, kind: str
) -> None:
    """The adoption row `adopt-or-create` with the object there; then a deletion row. A kind that adopts says
    `deletion-policy: delete` (adopted, explicit delete: deleted whatever the default); a rule kind, whose object
    is its own, says nothing (created, no policy: the default, retain here, keeps it)."""
    sample = SAMPLES[kind]
    seeded = fresh_emulator.seed({"accounts": [{"id": uuid.uuid4().hex, "name": f"lifecycle {kind}"}]})
    kflare.account_id = seeded["accounts"][0]["id"]
    ctx = await sample.parents(kflare, kind.lower())
    existing_id = sample.make_existing(fresh_emulator, ctx)
    annotations = {"kflare.dev/adoption-policy": "adopt-or-create"}
    if sample.adoptable:
        annotations["kflare.dev/deletion-policy"] = "delete"
    await sample.apply(kflare, ctx, annotations)

    resource = await kflare.ready(kind, sample.name, reason="Synced")
    held = sample.held(fresh_emulator, ctx)
    assert len(held) == 1, held
    assert sample.matches_spec(held[0], ctx), held[0]
    assert held[0]["id"] == existing_id, "the object there was taken, not a second one made"
    assert (resource["metadata"].get("annotations", {}).get("kflare.dev/adopted") == "true") is sample.adoptable

    await kflare.delete(kind, sample.name)
    await kflare.gone(kind, sample.name)
    kept = not sample.adoptable
    assert bool(sample.held(fresh_emulator, ctx)) is kept, sample.held(fresh_emulator, ctx)
