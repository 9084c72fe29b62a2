"""Every kind of `app.api.registry.KINDS` has exactly one reconciler, found by its model, and each says where its
Cloudflare ID lives in a way its status model can hold."""

from __future__ import annotations

import pytest

from app.api.registry import CLAIM_LABELS
from app.api.registry import KINDS as MODELS
from app.kube.index import DependencyIndex
from app.kube.referenced import ReferencedObjects
from reconcilers.capabilities import RecordsIdElsewhere
from reconcilers.context import Caches, Context, Credentials
from reconcilers.managed_kind import ManagedKind, build
from reconcilers.registry import KINDS, reconciler_of
from reconcilers.waiting import RECORDED


def test_every_kind_has_one_reconciler_in_the_models_order() -> None:
    assert [reconciler.model for reconciler in KINDS] == list(MODELS)


@pytest.mark.parametrize("reconciler", KINDS, ids=lambda r: r.model.info.kind)
def test_a_kind_that_creates_knows_where_its_id_lives(reconciler: type[ManagedKind]) -> None:  # type: ignore[type-arg]
    if not reconciler.creates:
        return
    assert reconciler.claim_label in CLAIM_LABELS
    overrides = issubclass(reconciler, RecordsIdElsewhere)
    assert overrides or reconciler.status_id, "no status_id and no object_id of its own: the ID would never be read"
    if reconciler.status_id:
        metadata = reconciler.model.status_model().model_fields["cloudflare_metadata"].annotation
        fields = {
            name for arg in getattr(metadata, "__args__", (metadata,)) for name in getattr(arg, "model_fields", {})
        }
        assert reconciler.status_id in fields, f"status.cloudflareMetadata has no {reconciler.status_id}"


def test_a_reconciler_is_found_by_kind_name_or_model() -> None:
    assert reconciler_of("DNSRecord") is reconciler_of(MODELS[2]) is KINDS[2]
    with pytest.raises(LookupError):
        reconciler_of("Gateway")


def _context() -> Context:
    secrets = ReferencedObjects(None, lambda _: None)  # type: ignore[arg-type]
    return Context(None, None, secrets, DependencyIndex(), lambda token: None)  # type: ignore[arg-type,return-value]


def test_a_kind_receives_the_parts_it_names_and_not_the_manager() -> None:
    """Every kind is built from the manager's context by the names of its constructor's parameters; none keeps the
    whole context, and a Tunnel (which writes its token Secret) gets the Kubernetes client where a Zone does not."""
    ctx = _context()
    built = {reconciler.kind: build(reconciler, ctx) for reconciler in KINDS}
    assert not any(hasattr(kind, "ctx") for kind in built.values())
    assert all(kind.caches is ctx.caches and kind.credentials is ctx.credentials for kind in built.values())
    assert hasattr(built["Tunnel"], "kube")
    assert not hasattr(built["Zone"], "kube")
    assert getattr(built["DNSRecord"], "queue", None) is ctx.queue


def test_a_kind_asking_for_what_the_manager_lacks_fails_naming_it() -> None:
    class Greedy(reconciler_of("Zone")):  # type: ignore[misc,valid-type]
        def __init__(self, caches: Caches, credentials: Credentials, mailbox: object) -> None:
            super().__init__(caches, credentials)

    with pytest.raises(TypeError, match="asks for mailbox"):
        build(Greedy, _context())


@pytest.mark.parametrize("reconciler", KINDS, ids=lambda r: r.model.info.kind)
def test_what_children_wait_for_is_a_field_the_status_has(reconciler: type[ManagedKind]) -> None:  # type: ignore[type-arg]
    """A child waits on its parent until the parent records its Cloudflare object (`ManagedKind.parent`): the field
    read is one the parent's status can hold, for every kind that creates one."""
    if not reconciler.creates:
        return
    metadata = reconciler.model.status_model().model_fields["cloudflare_metadata"].annotation
    fields = {
        field.alias or name
        for arg in getattr(metadata, "__args__", (metadata,))
        for name, field in getattr(arg, "model_fields", {}).items()
    }
    assert RECORDED[reconciler.kind] in fields
