"""A deletion or adoption policy kflare does not know is refused at admission, naming the annotation: read as
absent, `kflare.dev/deletion-policy: keep` (meaning retain) would let the next deletion delete the Cloudflare
object."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.unit.webhooks.reviews import SAMPLES, model_named, request, sample
from webhooks.review import AdmissionRequest
from webhooks.validate import Decision, decide

DELETION, ADOPTION = "kflare.dev/deletion-policy", "kflare.dev/adoption-policy"


def check(operation: str, obj: Any, old: Any = None, *, kind: str = "DNSRecord") -> Decision:
    return decide(model_named(kind), AdmissionRequest.model_validate(request(operation, obj, old, kind=kind)))


def annotated(kind: str, annotations: dict[str, str]) -> dict[str, Any]:
    obj = sample(kind)
    obj["metadata"]["annotations"] = annotations
    return obj


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_an_unknown_deletion_policy_is_refused_naming_the_annotation(kind: str) -> None:
    decision = check("CREATE", annotated(kind, {DELETION: "keep"}), kind=kind)
    assert not decision.allowed
    assert decision.message == f'metadata.annotations[{DELETION}]: must be delete or retain, not "keep"'


def test_an_unknown_adoption_policy_is_refused_even_without_a_spec_change() -> None:
    old = annotated("DNSRecord", {})
    new = copy.deepcopy(old)
    new["metadata"]["annotations"][ADOPTION] = "adopt-and-create"
    decision = check("UPDATE", new, old)
    assert not decision.allowed
    assert decision.message == (
        f'metadata.annotations[{ADOPTION}]: must be adopt or adopt-or-create, not "adopt-and-create"'
    )


@pytest.mark.parametrize(
    "annotations", [{DELETION: "retain"}, {DELETION: "delete"}, {ADOPTION: "adopt"}, {ADOPTION: "adopt-or-create"}]
)
def test_known_policies_pass(annotations: dict[str, str]) -> None:
    assert check("CREATE", annotated("DNSRecord", annotations)).allowed
    assert check("UPDATE", annotated("DNSRecord", annotations), annotated("DNSRecord", {})).allowed


def test_an_object_stored_with_an_unknown_value_can_still_change_otherwise() -> None:
    """A value stored before the check existed is not refused again: the object can still be edited, paused and
    finalised."""
    old = annotated("DNSRecord", {DELETION: "keep"})
    new = copy.deepcopy(old)
    new["metadata"]["annotations"]["kflare.dev/paused"] = "true"
    assert check("UPDATE", new, old).allowed
