"""What the lifecycle writes to Kubernetes for one kind: metadata patches, status patches, the Ready condition with
its Event, and the finalizer's removal. Every write's result goes into the kind's cache at once, so the next
reconcile never reads an older copy than the one it wrote."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Literal

from app.api.base import GROUP, VERSION
from app.api.constants import FINALIZER, PAUSED_ANNOTATION, Reason
from app.api.meta import Status
from app.api.resource import ResourceClass
from app.kube.client import JSON, JSON_PATCH, MERGE_PATCH, KubeError, ResourceType
from app.kube.informer import Key
from app.logs import ContextLogger
from reconcilers.context import Context

log = logging.getLogger("kflare.reconcile")

ConditionStatus = Literal["True", "False", "Unknown"]


def merge_patch(old: Mapping[str, object], new: Mapping[str, object]) -> dict[str, object]:
    """The RFC 7386 merge patch that turns `old` into `new`."""
    patch: dict[str, object] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            inner = merge_patch(before, value)
            if inner:
                patch[key] = inner
        elif before != value or key not in old:
            patch[key] = value
    return patch


def logger_of(kind: str, key: Key) -> ContextLogger:
    """A logger whose every line names the resource."""
    return ContextLogger(log, {"kind": kind, "namespace": key[0] or None, "object_name": key[1]})


def waits_for_a_parent(reason: str | None) -> bool:
    """A reason that says the resource waits for another kflare object to be Ready (`ZoneNotReady`...)."""
    return reason is not None and reason.endswith("NotReady")


def worth_an_event(before: str | None, status: str, reason: str) -> bool:
    """Whether a change of Ready (from the reason `before`, None for a new resource) is one a user wants an Event
    for: a failure, a recovery from one, any change of a resource that was Ready, a pause. A new resource coming up
    (its first Ready, or its wait for a parent on the way) gets none: its status says so, `kubectl get` shows it,
    and in a bulk apply an Event each would be a third write per object to the API server. Adoption has its own
    Event (`Adopted`), written by the lifecycle."""
    coming_up = before is None or waits_for_a_parent(before)
    up = status == "True" and reason != Reason.PAUSED
    return not (coming_up and (up or waits_for_a_parent(reason)))


def key_of(raw: JSON) -> Key:
    meta = raw["metadata"]
    return meta.get("namespace") or "", meta["name"]


class ObjectWriter:
    """The writes of one kind's resources; `model` is the kind's model (its status model reads stored statuses)."""

    def __init__(self, ctx: Context, model: ResourceClass) -> None:
        self.ctx = ctx
        self.model = model
        info = model.info
        self.kind = info.kind
        self.resource_type = ResourceType(GROUP, VERSION, info.plural, info.kind, namespaced=info.namespaced)

    def logger(self, key: Key) -> ContextLogger:
        return logger_of(self.kind, key)

    def remember(self, obj: JSON) -> JSON:
        """Put our own write's result in the cache at once, so the next reconcile never reads an older copy."""
        informer = self.ctx.informer_of(self.kind)
        if informer is not None:
            meta = obj["metadata"]
            cached = informer.get(meta["name"], meta.get("namespace"))
            try:
                newer = cached is None or int(meta["resourceVersion"]) >= int(cached["metadata"]["resourceVersion"])
            except (KeyError, ValueError):
                newer = True
            if newer:
                obj.setdefault("kind", self.kind)
                obj.setdefault("apiVersion", self.resource_type.api_version)
                informer.put(obj)
        self.ctx.own_write(self.kind, obj)
        return obj

    async def patch_meta(
        self,
        raw: JSON,
        *,
        finalizers: list[str] | None = None,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
    ) -> JSON:
        """One merge patch of what differs; a finalizers change is guarded by the resourceVersion read."""
        meta = raw["metadata"]
        patch: dict[str, object] = {"resourceVersion": meta["resourceVersion"]} if finalizers is not None else {}
        if finalizers is not None:
            patch["finalizers"] = finalizers
        for field, wanted in (("labels", labels), ("annotations", annotations)):
            if wanted:
                current = meta.get(field) or {}
                changed = {k: v for k, v in wanted.items() if current.get(k) != v and (v is not None or k in current)}
                if changed:
                    patch[field] = changed
        if not patch or list(patch) == ["resourceVersion"]:
            return raw
        updated = await self.ctx.kube.patch(
            self.resource_type, meta["name"], {"metadata": patch}, meta.get("namespace"), content_type=MERGE_PATCH
        )
        return self.remember(updated)

    @staticmethod
    def with_finalizer(raw: JSON) -> list[str] | None:
        """The finalizers with kflare's added, or None when it is there already."""
        finalizers = list(raw["metadata"].get("finalizers") or [])
        return None if FINALIZER in finalizers else [*finalizers, FINALIZER]

    async def remove_finalizer(self, raw: JSON) -> None:
        """Drop kflare's finalizer, only if it is still where it was read (a JSON patch's test), and only it."""
        finalizers = list(raw["metadata"].get("finalizers") or [])
        if FINALIZER not in finalizers:
            return
        index = finalizers.index(FINALIZER)
        patch = [
            {"op": "test", "path": f"/metadata/finalizers/{index}", "value": FINALIZER},
            {"op": "remove", "path": f"/metadata/finalizers/{index}"},
        ]
        namespace, name = key_of(raw)
        try:
            answer = await self.ctx.kube.patch(
                self.resource_type, name, patch, namespace or None, content_type=JSON_PATCH
            )
        except KubeError as exc:
            if not exc.not_found:
                raise
        else:
            # Until the watch says it is gone, what reads the cache sees that kflare is done with it; but once the
            # watch has said so, the answer must not bring the deleted object back into the cache for good.
            informer = self.ctx.informer_of(self.kind)
            if informer is not None and informer.get(name, namespace or None) is not None:
                self.remember(answer)

    async def write_status(self, raw: JSON, status: JSON) -> JSON:
        patch = merge_patch(raw.get("status") or {}, status)
        if not patch:
            return raw
        meta = raw["metadata"]
        updated = await self.ctx.kube.patch(
            self.resource_type, meta["name"], {"status": patch}, meta.get("namespace"), subresource="status"
        )
        return self.remember(updated)

    async def set_ready(
        self, raw: JSON, status: ConditionStatus, reason: str, message: str, *, status_model: Status | None = None
    ) -> JSON:
        """Set Ready (on `status_model`, the status the reconcile built, or on the stored one) and write what
        changed; record an Event when Ready's status or reason changed."""
        current = self.model.status_model().model_validate(raw.get("status") or {})
        model = status_model if status_model is not None else current.model_copy(deep=True)
        before = current.condition()
        generation = raw["metadata"].get("generation")
        model.set_condition(status, reason, message, observed_generation=generation)
        if model != current:  # an idle reconcile changes nothing: no wire form to build, nothing to compare
            raw = await self.write_status(raw, model.to_wire())
        after = model.condition()
        assert after is not None
        if before is None or (before.status, before.reason) != (after.status, after.reason):
            if worth_an_event(before.reason if before is not None else None, status, reason):
                normal = status == "True" or reason == Reason.PAUSED
                await self.ctx.recorder.record(
                    raw, type_="Normal" if normal else "Warning", reason=reason, note=message
                )
            self.logger(key_of(raw)).info("Ready=%s %s: %s", status, reason, message)
        return raw

    async def set_paused(self, raw: JSON, *, deleting: bool) -> JSON:
        """Ready keeps its status and says Paused: no Cloudflare call is made while the annotation is set."""
        current = self.model.status_model().model_validate(raw.get("status") or {}).condition()
        status: ConditionStatus = current.status if current is not None else "Unknown"
        message = f"paused by the {PAUSED_ANNOTATION} annotation: no Cloudflare call is made"
        if deleting:
            message += "; deletion waits until the annotation is removed"
        return await self.set_ready(raw, status, Reason.PAUSED, message)
