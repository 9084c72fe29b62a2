"""The data plane's configuration as last computed by the leader, which the xDS listener pushes to Envoy.

The store holds the resources as JSON by type key and name; the listener encodes them and tells a change from the
resources themselves (content hashes), so two leaders that compute the same resources send Envoy the same versions
and a failover sends nothing new. `watch` is how the listener hears of a new snapshot: a push, not a poll.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from reconcilers.gateway import envoy
from reconcilers.gateway.envoy import EnvoyJSON

log = logging.getLogger(__name__)


MAX_REFUSING: Final = 64
"""Refusals held at once, over every data plane: each Envoy of each plane holds at most one per type, and a plane
that comes and goes cannot make the set grow without bound."""
MAX_MESSAGE: Final = 1024
"""Characters of Envoy's message kept."""


@dataclass
class SnapshotStore:
    """Holds the resources by type key and name; `serving` says whether this process may answer (the leader)."""

    serving: Callable[[], bool] = lambda: True
    resources: dict[str, dict[str, EnvoyJSON]] | None = None
    """The shared data plane's."""
    planes: dict[str, dict[str, dict[str, EnvoyJSON]]] = field(default_factory=dict)
    """Each Gateway's own data plane's, by the cluster name its Envoy says (`planes.Plane.cluster`)."""
    generation: int = 0
    refusals: list[tuple[str, str]] = field(default_factory=list)
    """(type key, Envoy's message) of the last configurations a data plane refused, newest last (a few kept)."""
    refusing: dict[tuple[str, str, str], tuple[str, str]] = field(default_factory=dict)
    """(plane, node, type key) -> (version refused, Envoy's message): what each Envoy of each data plane ("" the
    shared one) refuses now, until it takes a later configuration or its stream ends; at most MAX_REFUSING, the
    oldest dropped first."""
    on_change: Callable[[], None] = lambda: None
    """Called when `refusing` changes (the Gateways' Programmed condition reports it)."""
    watchers: list[Callable[[], None]] = field(default_factory=list)
    """Called after each new snapshot and when the snapshot is forgotten. They may run on another thread's loop
    than the publisher's, so they only schedule work (`loop.call_soon_threadsafe`)."""

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` on every change from now on; the function returned stops that."""
        self.watchers.append(callback)

        def unwatch() -> None:
            if callback in self.watchers:
                self.watchers.remove(callback)

        return unwatch

    def _changed(self) -> None:
        for callback in list(self.watchers):
            try:
                callback()
            except Exception:  # one broken watcher must not keep the others, or the publisher, from the snapshot
                log.exception("an xDS snapshot watcher failed")

    def refused(self, type_key: str, message: str, node: str = "", version: str = "", plane: str = "") -> None:
        self.refusals = [*self.refusals[-9:], (type_key, message[:MAX_MESSAGE])]
        key, held = (plane, node, type_key), (version, message[:MAX_MESSAGE])
        if self.refusing.get(key) != held:
            self.refusing.pop(key, None)
            self.refusing[key] = held
            while len(self.refusing) > MAX_REFUSING:
                del self.refusing[next(iter(self.refusing))]
            self.on_change()

    def accepted(self, type_key: str, node: str, version: str, plane: str = "") -> None:
        """Envoy `node` of `plane` holds `version` of `type_key`: whatever it refused before is behind it."""
        held = self.refusing.get((plane, node, type_key))
        if held is not None and held[0] != version:
            del self.refusing[(plane, node, type_key)]
            self.on_change()

    def forget(self, plane: str, node: str) -> None:
        """Envoy `node`'s stream ended: what it refused is no longer said of its plane (it may come back, and say
        it again; another replica of the plane holds its own)."""
        gone = [key for key in self.refusing if key[:2] == (plane, node)]
        for key in gone:
            del self.refusing[key]
        if gone:
            self.on_change()

    def refusal(self, plane: str = "") -> str | None:
        """What `plane` ("" the shared data plane) refuses now, said for a status message; None when it refuses
        nothing. Another plane's refusals are not its Gateways' business."""
        mine = {(n, t): held for (p, n, t), held in self.refusing.items() if p == plane}
        if not mine:
            return None
        (node, type_key), (_, message) = min(mine.items())
        nodes = sorted({n for n, _ in mine})
        where = f"Envoy {node}" + (f" and {len(nodes) - 1} more" if len(nodes) > 1 else "")
        return f"{where} refused its {type_key} configuration: {message}; it keeps serving the last one it accepted"

    def publish(
        self, resources: dict[str, list[EnvoyJSON]], planes: Mapping[str, dict[str, list[EnvoyJSON]]] | None = None
    ) -> bool:
        """Replace the snapshot (the shared plane's, and each Gateway's own plane's); True when anything changed."""
        new = _by_name(resources)
        new_planes = {cluster: _by_name(r) for cluster, r in (planes or {}).items()}
        if new == self.resources and new_planes == self.planes:
            return False
        self.resources, self.planes = new, new_planes
        self.generation += 1
        self._changed()
        return True

    def snapshot(self, plane: str = "") -> dict[str, dict[str, EnvoyJSON]] | None:
        """The resources of `plane` ("" the shared one); None when there is no snapshot or no such plane."""
        if self.resources is None:
            return None
        return self.planes.get(plane) if plane else self.resources

    def clear(self) -> None:
        """Forget the snapshot (leadership lost): serving it could undo a newer leader's changes."""
        self.resources, self.planes = None, {}
        self._changed()

    def size(self) -> int:
        """Bytes of the whole snapshot as JSON (what a cold Envoy fetches)."""
        if self.resources is None:
            return 0
        return len(json.dumps(self.resources, separators=(",", ":")))


def _by_name(resources: Mapping[str, list[EnvoyJSON]]) -> dict[str, dict[str, EnvoyJSON]]:
    return {
        key: {str(r.get("name") or r.get("cluster_name")): r for r in resources.get(key, [])} for key in envoy.TYPES
    }
