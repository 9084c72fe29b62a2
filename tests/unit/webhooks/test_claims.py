"""Claim labels are kflare's record of which Cloudflare object a resource holds: only kflare's own writes may set
them. A manifest carrying one (copied from another cluster, or written to take an object over) would otherwise make
kflare overwrite the object it names, and delete it with the resource."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.api import DNSRecord
from app.api.registry import CLAIM_LABELS
from app.kube.identity import FIELD_MANAGER
from reconcilers.registry import KINDS as MANAGED_KINDS
from tests.unit.webhooks.reviews import SAMPLES, model_named, request, sample
from webhooks.review import AdmissionRequest
from webhooks.validate import Decision, decide

RECORD_ID_LABEL = DNSRecord.info.claim_label
WHY = "only kflare sets this label, when it claims a Cloudflare object for the resource"


KFLARE_USER = "system:serviceaccount:kflare-system:kflare"


def check(
    operation: str,
    obj: Any,
    old: Any = None,
    *,
    kind: str = "DNSRecord",
    manager: str | None = None,
    user: str = "system:serviceaccount:team-a:ci",
) -> Decision:
    body = request(operation, obj, old, kind=kind)
    if manager is not None:
        body["options"]["fieldManager"] = manager
    body["userInfo"] = {"username": user, "groups": ["system:serviceaccounts", "system:authenticated"]}
    return decide(model_named(kind), AdmissionRequest.model_validate(body), frozenset({KFLARE_USER}))


def labelled(kind: str, labels: dict[str, str]) -> dict[str, Any]:
    obj = sample(kind)
    obj["metadata"]["labels"] = labels
    return obj


def test_every_kinds_claim_label_is_protected() -> None:
    assert {kind.claim_label for kind in MANAGED_KINDS if kind.creates} <= CLAIM_LABELS


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_a_new_resource_carrying_a_claim_is_refused_naming_the_label(kind: str) -> None:
    decision = check("CREATE", labelled(kind, {RECORD_ID_LABEL: "0123abcd", "team": "a"}), kind=kind)
    assert not decision.allowed
    assert decision.message.startswith(f"metadata.labels[{RECORD_ID_LABEL}]: {WHY}")
    assert "kflare.dev/adoption-policy: adopt" in decision.message


def test_kubectl_apply_adding_or_changing_a_claim_is_refused_even_without_a_spec_change() -> None:
    old = labelled("DNSRecord", {RECORD_ID_LABEL: "mine"})
    new = copy.deepcopy(old)
    new["metadata"]["labels"][RECORD_ID_LABEL] = "someone-elses"
    decision = check("UPDATE", new, old, manager="kubectl-client-side-apply")
    assert not decision.allowed
    assert decision.message.startswith(f"metadata.labels[{RECORD_ID_LABEL}]: {WHY}")
    unlabelled = labelled("DNSRecord", {})
    assert not check("UPDATE", old, unlabelled).allowed


def test_kflares_own_claims_and_unchanged_or_removed_claims_pass() -> None:
    claimed = labelled("DNSRecord", {RECORD_ID_LABEL: "mine"})
    assert check("CREATE", claimed, user=KFLARE_USER).allowed
    assert check("UPDATE", claimed, labelled("DNSRecord", {}), user=KFLARE_USER).allowed
    relabelled = labelled("DNSRecord", {RECORD_ID_LABEL: "mine", "team": "b"})
    assert check("UPDATE", relabelled, claimed).allowed  # the claim as it was: another label changes
    assert check("UPDATE", labelled("DNSRecord", {}), claimed).allowed  # forgetting takes nothing over


def test_a_tenant_naming_kflares_field_manager_is_refused_all_the_same() -> None:
    """The field manager is the client's own word: only the user the API server authenticated counts."""
    claimed = labelled("DNSRecord", {RECORD_ID_LABEL: "someone-elses"})
    decision = check("CREATE", claimed, manager=FIELD_MANAGER)
    assert not decision.allowed
    assert decision.message.startswith(f"metadata.labels[{RECORD_ID_LABEL}]: {WHY}")
    assert not check("UPDATE", claimed, labelled("DNSRecord", {}), manager=FIELD_MANAGER).allowed


@pytest.mark.parametrize("annotation", ["kflare.dev/create-intent", "kflare.dev/adopted"])
def test_kflares_own_annotations_are_refused_from_anyone_else(annotation: str) -> None:
    """A forged intent would make an existing object read as one this resource created (taken without the adoption
    policy), a forged adopted mark would change its deletion policy."""
    obj = sample("Zone")
    obj["metadata"]["annotations"] = {annotation: '{"at": "2026-01-01T00:00:00Z"}'}
    decision = check("CREATE", obj, kind="Zone", manager=FIELD_MANAGER)
    assert not decision.allowed
    assert decision.message.startswith(f"metadata.annotations[{annotation}]: only kflare sets this annotation")
    assert check("CREATE", obj, kind="Zone", user=KFLARE_USER).allowed
    unchanged = copy.deepcopy(obj)
    unchanged["metadata"]["labels"] = {"team": "a"}
    assert check("UPDATE", unchanged, obj, kind="Zone").allowed  # kept as kflare wrote it
    assert check("UPDATE", sample("Zone"), obj, kind="Zone").allowed  # removed
