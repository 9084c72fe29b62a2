"""The decision: allow or deny one admission request for one kflare kind. Pure: no I/O, no clock, no globals.

Denied:
- on CREATE and on an UPDATE that changes the spec: every schema violation and cross-field rule of the kind's
  model (`app.api.validation.validate_object`), each with the path of its field;
- on UPDATE: every change to an immutable field (`immutable_violations`), naming the old and the new value;
- a deletion or adoption policy annotation set to a value kflare does not know (on CREATE and on any UPDATE that
  sets or changes it);
- a claim label (`app.api.registry.CLAIM_LABELS`) or one of kflare's own annotations (`KFLARE_ANNOTATIONS`: the
  adopted mark, the create intent) set or changed by anyone but kflare's controller, as the API server
  authenticated the request's sender (`userInfo`; a field manager is the client's own word): kflare takes the object
  a claim names for the resource's own, so a manifest carrying one would overwrite, and at deletion delete, whatever
  Cloudflare object it names, another team's or installation's included, and a forged intent makes an existing
  object read as one the resource created. Removing one is allowed (kflare then finds its object by key again);
- a request this webhook should never have been sent (another kind) or that lacks what it needs to decide
  (`object`, `oldObject` on UPDATE).

Never denied: DELETE, CONNECT and operations Kubernetes may add later, requests on a subresource (`status`), and
updates that leave the spec as it was (status, labels, annotations, finalizers), so an object stored before a rule
existed can always be finalised and deleted.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from pydantic import JsonValue

from app.api import GROUP, VERSION, FieldError, ResourceClass, immutable_violations
from app.api.constants import (
    ADOPTION_POLICIES,
    ADOPTION_POLICY_ANNOTATION,
    DELETION_POLICY_ANNOTATION,
    KFLARE_ANNOTATIONS,
    DeletionPolicy,
)
from app.api.registry import CLAIM_LABELS
from app.api.validation import MISSING, object_errors, spec_value
from webhooks.review import MAX_DEPTH, AdmissionRequest, ResponseStatus, too_deep

MAX_ERRORS: Final = 20
"""Reasons listed in one denial; the rest are counted."""
MAX_ERROR_LENGTH: Final = 400
MAX_VALUE_LENGTH: Final = 80

INVALID: Final = 422
BAD_REQUEST: Final = 400
INTERNAL: Final = 500


@dataclass(frozen=True)
class Decision:
    allowed: bool
    errors: tuple[FieldError, ...] = ()
    code: int = 200
    reason: str = ""
    """`Invalid` (422: the object breaks a rule) or `BadRequest` (400: the request itself is wrong)."""
    more: int = 0
    """Errors found beyond `errors`, counted and not kept."""

    @functools.cached_property  # the denial's status and its log line both show it
    def message(self) -> str:
        """`<path>: <reason>; <path>: <reason>`, what the API server shows after `... denied the request: `."""
        shown = [_clip(str(error), MAX_ERROR_LENGTH) for error in self.errors[:MAX_ERRORS]]
        hidden = len(self.errors) - len(shown) + self.more
        if hidden > 0:
            shown.append(f"and {hidden} more")
        return "; ".join(shown)

    @property
    def status(self) -> ResponseStatus | None:
        if self.allowed:
            return None
        return ResponseStatus(code=self.code, reason=self.reason, message=self.message)


ALLOW: Final = Decision(allowed=True)


def deny(errors: Iterable[FieldError], *, code: int = INVALID) -> Decision:
    """Refuse for `errors`; the first MAX_ERRORS different ones are kept, the rest counted."""
    kept: dict[FieldError, None] = {}
    more = 0
    for error in errors:
        if error in kept:
            continue
        if len(kept) < MAX_ERRORS:
            kept[error] = None
        else:
            more += 1
    reason = {INVALID: "Invalid", BAD_REQUEST: "BadRequest"}.get(code, "InternalError")
    return Decision(allowed=False, errors=tuple(kept), code=code, reason=reason, more=more)


def _verdict(errors: Iterable[FieldError]) -> Decision:
    found = iter(errors)
    first = next(found, None)
    if first is None:
        return ALLOW  # most reviews: no denial built only to be dropped
    return deny(itertools.chain([first], found))


def bad_request(path: str, message: str) -> Decision:
    return deny([FieldError(path, message)], code=BAD_REQUEST)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _show(value: object) -> str:
    if value is MISSING:
        return "unset"
    return _clip(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str), MAX_VALUE_LENGTH)


def explain_immutable(model: ResourceClass, old: Mapping[str, object], new: Mapping[str, object]) -> list[FieldError]:
    """`immutable_violations`, each message saying what the value was and what the update makes it."""
    out: list[FieldError] = []
    for error in immutable_violations(model, old, new):
        dotted = error.path.removeprefix("spec.")
        was, now = spec_value(old.get("spec"), dotted), spec_value(new.get("spec"), dotted)
        message = (
            f"{error.message}, it cannot change from {_show(was)} to {_show(now)}"
            f" (delete the {model.info.kind} and create it again instead)"
        )
        out.append(FieldError(error.path, message))
    return out


def _wrong_kind(model: ResourceClass, request: AdmissionRequest) -> Decision | None:
    kind = request.kind
    if (kind.group, kind.version, kind.kind) == (GROUP, VERSION, model.info.kind):
        return None
    return bad_request(
        "request.kind",
        f"this webhook validates {model.info.kind} ({GROUP}/{VERSION}), not {kind}:"
        f" point the webhook configuration's rule for it at /validate/<its plural>",
    )


def _metadata(obj: object, field: str) -> Mapping[str, JsonValue]:
    """The object's labels or annotations, empty where the object holds none (or something else)."""
    # dict, not Mapping: what JSON parses to, and an ABC's isinstance costs ten times as much on this hot path.
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    found = metadata.get(field) if isinstance(metadata, dict) else None
    return found if isinstance(found, dict) else {}


POLICIES: Final = {DELETION_POLICY_ANNOTATION: tuple(DeletionPolicy), ADOPTION_POLICY_ANNOTATION: ADOPTION_POLICIES}


def policy_errors(new: Mapping[str, object], old: object) -> list[FieldError]:
    """A deletion or adoption policy this request sets to a value kflare does not know: read as absent, a typo of
    `retain` would let the next deletion delete the Cloudflare object."""
    after = _metadata(new, "annotations")
    if POLICIES.keys().isdisjoint(after):
        return []
    before = _metadata(old, "annotations")
    return [
        FieldError(
            f"metadata.annotations[{key}]",
            f"must be {' or '.join(allowed)}, not {json.dumps(after[key])}",
        )
        for key, allowed in POLICIES.items()
        if key in after and after[key] != before.get(key) and after[key] not in allowed
    ]


_CLAIM_LABELS: Final = tuple(sorted(CLAIM_LABELS))
_KFLARE_ANNOTATIONS: Final = tuple(sorted(KFLARE_ANNOTATIONS))


def claim_errors(
    request: AdmissionRequest, new: Mapping[str, object], old: object, kflare: frozenset[str]
) -> list[FieldError]:
    """Claim labels and kflare's own annotations that this request sets or changes, unless it comes from kflare
    itself: the user the API server authenticated is one of `kflare`'s names (never what the client says of itself,
    such as its field manager)."""
    labels, annotations = _metadata(new, "labels"), _metadata(new, "annotations")
    if CLAIM_LABELS.isdisjoint(labels) and KFLARE_ANNOTATIONS.isdisjoint(annotations):
        return []
    if request.username and request.username in kflare:
        return []
    before_labels, before_annotations = _metadata(old, "labels"), _metadata(old, "annotations")
    errors = [
        FieldError(
            f"metadata.labels[{label}]",
            f"only kflare sets this label, when it claims a Cloudflare object for the resource; remove it (to take"
            f" over an existing object, annotate the resource {ADOPTION_POLICY_ANNOTATION}: adopt)",
        )
        for label in _CLAIM_LABELS
        if label in labels and labels[label] != before_labels.get(label)
    ]
    errors += [
        FieldError(
            f"metadata.annotations[{annotation}]",
            "only kflare sets this annotation, as its record of how the resource came to own its Cloudflare object;"
            f" remove it (to take over an existing object, annotate the resource {ADOPTION_POLICY_ANNOTATION}: adopt)",
        )
        for annotation in _KFLARE_ANNOTATIONS
        if annotation in annotations and annotations[annotation] != before_annotations.get(annotation)
    ]
    return errors


def decide(model: ResourceClass, request: AdmissionRequest, kflare: frozenset[str] = frozenset()) -> Decision:
    """Allow or deny `request` for objects of `model`; `kflare` are the names the API server knows kflare's
    controller by (its ServiceAccount's username)."""
    operation = request.operation.upper()
    if operation not in ("CREATE", "UPDATE"):
        return ALLOW  # DELETE is never blocked; CONNECT and anything new is not ours to judge
    if request.sub_resource:
        return ALLOW  # status (and any other subresource) carries no spec change
    wrong = _wrong_kind(model, request)
    if wrong is not None:
        return wrong
    new = request.object
    if new is None:
        return bad_request("request.object", f"required on {operation}")
    if not isinstance(new, dict):
        return bad_request("request.object", "must be a JSON object")
    deep = too_deep(new) if request.cut else None
    if deep is not None:  # the rest of the object is checked as well: the cut value reads as a string
        return deny(
            itertools.chain([FieldError(deep, f"nested more than {MAX_DEPTH} levels deep")], object_errors(model, new))
        )
    if operation == "CREATE":
        metadata = [*claim_errors(request, new, None, kflare), *policy_errors(new, None)]
        return _verdict(itertools.chain(metadata, object_errors(model, new)))
    old = request.old_object
    if old is None:
        return bad_request("request.oldObject", "required on UPDATE")
    if not isinstance(old, dict):
        return bad_request("request.oldObject", "must be a JSON object")
    metadata = [*claim_errors(request, new, old, kflare), *policy_errors(new, old)]
    if old.get("spec") == new.get("spec"):
        return _verdict(metadata)  # status-only or metadata-only: only a claim or a policy is refused
    return _verdict(itertools.chain(metadata, object_errors(model, new), explain_immutable(model, old, new)))
