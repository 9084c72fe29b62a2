"""AdmissionReview (`admission.k8s.io/v1`): the request the API server sends, parsed strictly enough to trust its
frame and loosely enough to take whatever fields later Kubernetes versions add; and the response it expects."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, ClassVar, Final, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, JsonValue, SkipValidation, ValidationError, WithJsonSchema
from typing_extensions import TypedDict

ADMISSION_API_VERSION: Final = "admission.k8s.io/v1"
REVIEW_KIND: Final = "AdmissionReview"
MAX_UID = 256


class ReviewError(ValueError):
    """The body is no AdmissionReview this webhook can answer; `status_code` is the HTTP status to reply with."""

    def __init__(self, message: str, status_code: int = 400) -> None:
        super().__init__(message)
        self.status_code = status_code


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class GroupVersionKind(_Wire):
    group: str = ""
    version: str
    kind: str

    def __str__(self) -> str:
        return f"{self.kind} ({self.group}/{self.version})" if self.group else f"{self.kind} ({self.version})"


class GroupVersionResource(_Wire):
    group: str = ""
    version: str
    resource: str


Raw = Annotated[JsonValue, SkipValidation, WithJsonSchema({})]
"""A value of the review as the JSON parser made it: kept as it is, not walked a second time (what to make of it is the
decision's business), and any JSON value to the OpenAPI document."""


class _ObjectMeta(TypedDict, total=False):
    name: Raw
    namespace: Raw
    labels: Raw
    annotations: Raw


class _Object(TypedDict, total=False):
    """What a decision reads of an object, as the JSON it came as: its kind, the metadata above and its spec. The
    rest (`status`, and of the metadata `managedFields` and the rest) is skipped by the parser, never built: on an
    object as the API server sends it, that is a third of what parsing a review cost."""

    apiVersion: Raw
    kind: Raw
    metadata: _ObjectMeta  # metadata that is no JSON object: the whole object is kept as sent (`RawObject`)
    spec: Raw


RawObject = Annotated[_Object | Raw, Field(union_mode="left_to_right"), WithJsonSchema({})]
"""An object of a review: the JSON object reduced to `_Object`'s fields, or whatever other JSON value was sent (which
the decision refuses with a reason, rather than the parser with a parse error)."""


class AdmissionRequest(_Wire):
    """`request` of an AdmissionReview. `object` and `oldObject` stay JSON, reduced to what a decision reads: what to
    make of them (and of their absence) is the decision's business, so a bad one is refused with a reason rather than
    a parse error."""

    uid: str = Field(min_length=1, max_length=MAX_UID)
    kind: GroupVersionKind
    resource: GroupVersionResource | None = None
    sub_resource: str = Field("", alias="subResource")
    name: str = ""
    namespace: str = ""
    operation: str
    object: RawObject = None
    old_object: RawObject = Field(None, alias="oldObject")
    dry_run: bool | None = Field(None, alias="dryRun")
    options: Raw = None
    """The request's CreateOptions / UpdateOptions / PatchOptions as the client sent them (`fieldManager`)."""
    user_info: Raw = Field(None, alias="userInfo")
    """Who sent the request, as the API server authenticated them (`username`, `groups`): what a decision that
    depends on the sender trusts, unlike anything the client says of itself."""
    cut: ClassVar[bool] = False
    """Whether values nested past MAX_DEPTH were replaced by TOO_DEEP (only then is `too_deep` worth a walk): true
    of `_CutRequest`. A class attribute rather than a private one, which would cost every review a dict."""

    @property
    def username(self) -> str:
        name = self.user_info.get("username") if isinstance(self.user_info, dict) else None
        return name if isinstance(name, str) else ""

    @property
    def field_manager(self) -> str:
        manager = self.options.get("fieldManager") if isinstance(self.options, dict) else None
        return manager if isinstance(manager, str) else ""


class AdmissionReview(_Wire):
    api_version: Literal["admission.k8s.io/v1"] = Field(alias="apiVersion")
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


class _CutRequest(AdmissionRequest):
    cut: ClassVar[bool] = True


class _CutReview(AdmissionReview):
    """A review parsed from a body `cut_below` shortened."""

    request: _CutRequest


def _explain(exc: ValidationError) -> str:
    parts: list[str] = []
    for error in exc.errors(include_url=False, include_input=False)[:5]:
        where = ".".join(str(p) for p in error["loc"])
        if error["type"] == "literal_error" and where in ("apiVersion", "kind"):
            expected = ADMISSION_API_VERSION if where == "apiVersion" else REVIEW_KIND
            parts.append(f"{where}: must be {expected}")
        elif error["type"] == "missing":
            parts.append(f"{where}: required")
        else:
            parts.append(f"{where}: {error['msg']}" if where else error["msg"])
    return "; ".join(parts)


MAX_DEPTH: Final = 128
"""Levels of nesting parsed, the AdmissionReview's own included; the JSON parser refuses a little past that. The API
server takes objects nested far deeper into fields that keep unknown content (a DNSRecord's `data`), so a review of
one is still answered, with a denial naming the field, rather than refused as a whole."""
TOO_DEEP: Final = "\x00kflare: nested too deep"
"""What stands in for a value nested past MAX_DEPTH (no JSON text holds a NUL, so no object does)."""
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[{]+|[\]}]+', re.DOTALL)
"""A string (to its closing quote, escapes included), or a run of opening or of closing brackets."""


def cut_below(body: bytes, depth: int = MAX_DEPTH) -> bytes | None:
    """`body` with every array or object that opens `depth` levels down replaced by the string TOO_DEEP; None when
    nothing is that deep. Scans strings and runs of brackets, each one step, without recursion: a body of a million
    nested brackets is two runs, not two million steps of a loop holding the event loop for a second."""
    out: list[bytes] = []
    level, start, cutting = 0, 0, -1
    for match in _TOKENS.finditer(body):
        first = body[match.start()]
        if first == 0x22:
            continue
        count = match.end() - match.start()
        if first in (0x5B, 0x7B):
            if cutting < 0 and level <= depth < level + count:
                at = match.start() + depth - level
                out.append(body[start:at])
                out.append(json.dumps(TOO_DEEP).encode())
                cutting = depth
            level += count
        else:
            if cutting >= 0 and level - count <= cutting < level:
                start = match.start() + level - cutting
                cutting = -1
            level -= count
    if not out:
        return None
    out.append(body[start:])
    return b"".join(out)


def too_deep(value: object, path: str = "", shown: int = 3) -> str | None:
    """The path (its first `shown` steps) of the first value cut by `cut_below`, if any."""
    stack: list[tuple[object, str, int]] = [(value, path, 0)]
    while stack:
        node, where, steps = stack.pop()
        if node == TOO_DEEP:
            return where
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in children:
            step = f"[{key}]" if isinstance(key, int) else (f".{key}" if where else str(key))
            stack.append((child, where + step if steps < shown else where, steps + 1))
    return None


def parse_review(body: bytes, model: type[AdmissionReview] = AdmissionReview) -> AdmissionReview:
    """The AdmissionReview in `body` (JSON); `ReviewError` says what is wrong with anything else. Values nested past
    MAX_DEPTH are replaced by TOO_DEEP (see `too_deep`), and the request says it was `cut`."""
    if not body.strip():
        raise ReviewError("empty body: expected an admission.k8s.io/v1 AdmissionReview")
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        invalid = [e for e in exc.errors(include_url=False) if e["type"] == "json_invalid"]
        if invalid and "recursion limit" in str((invalid[0].get("ctx") or {}).get("error", "")):
            cut = cut_below(body)
            if cut is not None:
                return parse_review(cut, _CutReview)
        if invalid:
            why = str((invalid[0].get("ctx") or {}).get("error", ""))[:200]
            raise ReviewError(f"the body is not valid JSON: {why}" if why else "the body is not valid JSON") from None
        if any(e["type"] == "model_type" and not e["loc"] for e in exc.errors()):
            raise ReviewError("the body must be a JSON object: an admission.k8s.io/v1 AdmissionReview") from None
        raise ReviewError(f"not an admission.k8s.io/v1 AdmissionReview: {_explain(exc)}") from None


class StatusWire(TypedDict):
    code: int
    reason: str
    message: str
    status: str


class AdmissionResponse(TypedDict):
    uid: str
    allowed: bool
    status: NotRequired[StatusWire]
    warnings: NotRequired[list[str]]


class AdmissionReviewResponse(TypedDict):
    apiVersion: str
    kind: str
    response: AdmissionResponse


@dataclass(frozen=True, slots=True)
class ResponseStatus:
    """The `metav1.Status` of a denial: the API server returns it to the client, `code` as the HTTP status and
    `message` after `admission webhook "<name>" denied the request: `. Made here, never parsed: a dataclass."""

    code: int
    reason: str
    message: str
    status: str = "Failure"

    def wire(self) -> StatusWire:
        return {"code": self.code, "reason": self.reason, "message": self.message, "status": self.status}


def review_response(
    uid: str, allowed: bool, status: ResponseStatus | None = None, warnings: tuple[str, ...] = ()
) -> AdmissionReviewResponse:
    """The AdmissionReview answering request `uid`, as JSON."""
    response: AdmissionResponse = {"uid": uid, "allowed": allowed}
    if status is not None:
        response["status"] = status.wire()
    if warnings:
        response["warnings"] = list(warnings)
    return {"apiVersion": ADMISSION_API_VERSION, "kind": REVIEW_KIND, "response": response}
