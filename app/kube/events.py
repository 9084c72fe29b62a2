"""`events.k8s.io/v1` Events about kflare resources, as `kubectl describe` shows them."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from dataclasses import dataclass
from typing import Literal

from app.kube.client import EVENTS, JSON, KubeClient, KubeError

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "kflare.dev/kflare"
MAX_NOTE = 1024  # the API server refuses longer notes


@dataclass
class EventRecorder:
    kube: KubeClient
    instance: str

    async def record(
        self, obj: JSON, *, type_: Literal["Normal", "Warning"], reason: str, note: str, action: str = "Reconcile"
    ) -> None:
        meta = obj["metadata"]
        # Cluster-scoped objects have their Events in `default`, as kubectl describe looks for them there.
        namespace = meta.get("namespace") or "default"
        now = dt.datetime.now(dt.UTC)
        event: JSON = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self.instance[:128],
            "action": action,
            "reason": reason,
            "note": note[:MAX_NOTE],
            "type": type_,
            "regarding": {
                "apiVersion": obj.get("apiVersion", ""),
                "kind": obj.get("kind", ""),
                "name": meta["name"],
                "namespace": meta.get("namespace") or "",
                "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion", ""),
            },
        }
        try:
            await self.kube.create(EVENTS, event, namespace)
        except (KubeError, OSError, TimeoutError) as exc:
            # An Event is a courtesy; failing to record one must not fail the reconcile.
            log.warning("recording an event failed: %r", exc)
