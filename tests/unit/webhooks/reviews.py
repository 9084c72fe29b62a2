"""AdmissionReviews as the API server sends them, built from the API samples."""

from __future__ import annotations

import copy
import functools
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from app.api import GROUP, KINDS, VERSION, ResourceClass
from app.api.docs import examples_by_kind
from tests.unit.api import samples


@functools.cache
def _examples() -> dict[str, list[str]]:
    return examples_by_kind()


def _first_example(kind: str) -> str:
    return _examples()[kind][0]


class _Samples(Mapping[str, str]):
    """Every kind, each read from `examples/` when first asked for rather than all of them at collection (reading
    them takes half a second, in every pytest worker)."""

    def __getitem__(self, kind: str) -> str:
        if kind not in {model.info.kind for model in KINDS}:
            raise KeyError(kind)
        return _first_example(kind)

    def __iter__(self) -> Iterator[str]:
        return iter([model.info.kind for model in KINDS])

    def __len__(self) -> int:
        return len(KINDS)


SAMPLES: Mapping[str, str] = _Samples()
"""A valid manifest of every kind: the first of its samples in `examples/`."""


def sample(kind: str, **spec: Any) -> dict[str, Any]:
    """The sample manifest of `kind` with `spec` changes (None removes a field), sharing nothing with the changes:
    a caller may edit it in place without editing what it passed."""
    obj = samples.load(SAMPLES[kind])
    for key, value in spec.items():
        if value is None:
            obj["spec"].pop(key, None)
        else:
            obj["spec"][key] = copy.deepcopy(value)
    return obj


def changed(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"].update(spec)
    return out


def model_named(kind: str) -> ResourceClass:
    return next(m for m in KINDS if m.info.kind == kind)


def request(
    operation: str,
    obj: Any = None,
    old: Any = None,
    *,
    kind: str = "DNSRecord",
    group: str = GROUP,
    version: str = VERSION,
    sub_resource: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    plural = model_named(kind).info.plural if kind in SAMPLES else kind.lower() + "s"
    out: dict[str, Any] = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": plural},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "name": (obj or old or {}).get("metadata", {}).get("name", "") if isinstance(obj or old, dict) else "",
        "namespace": "my-namespace",
        "operation": operation,
        "userInfo": {"username": "someone", "groups": ["system:authenticated"]},
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{operation.title()}Options"},
        "dryRun": False,
    }
    if obj is not None:
        out["object"] = obj
    if old is not None:
        out["oldObject"] = old
    if sub_resource:
        out["subResource"] = sub_resource
    return out


def review(operation: str, obj: Any = None, old: Any = None, **kwargs: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request(operation, obj, old, **kwargs),
    }
