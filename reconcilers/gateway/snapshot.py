"""The data plane's configuration as last computed by the leader, answered per xDS request.

Versions are content hashes of what one request is answered with, so two leaders that compute the same resources
answer with the same version (a failover sends Envoy nothing new), and a poll whose version is current costs a 304.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconcilers.gateway import envoy

JSON = dict[str, Any]


@dataclass(frozen=True)
class Answer:
    version: str
    resources: list[JSON]
    type_url: str


def _version(resources: list[JSON]) -> str:
    blob = json.dumps(resources, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass
class SnapshotStore:
    """Holds the resources by type key and name; `serving` says whether this process may answer (the leader)."""

    serving: Callable[[], bool] = lambda: True
    resources: dict[str, dict[str, JSON]] | None = None
    generation: int = 0
    refusals: list[tuple[str, str]] = field(default_factory=list)
    """(type key, Envoy's message) of the last configurations a data plane refused, newest last (a few kept)."""
    refusing: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    """(node, type key) -> (version refused, Envoy's message): what each Envoy refuses now, until it takes a later
    configuration."""
    on_change: Callable[[], None] = lambda: None
    """Called when `refusing` changes (the Gateways' Programmed condition reports it)."""

    def refused(self, type_key: str, message: str, node: str = "", version: str = "") -> None:
        self.refusals = [*self.refusals[-9:], (type_key, message)]
        if self.refusing.get((node, type_key)) != (version, message):
            self.refusing[(node, type_key)] = (version, message)
            self.on_change()

    def accepted(self, type_key: str, node: str, version: str) -> None:
        """Envoy `node` holds `version` of `type_key`: whatever it refused before is behind it."""
        held = self.refusing.get((node, type_key))
        if held is not None and held[0] != version:
            del self.refusing[(node, type_key)]
            self.on_change()

    def refusal(self) -> str | None:
        """What the data plane refuses now, said for a status message; None when it refuses nothing."""
        if not self.refusing:
            return None
        (node, type_key), (_, message) = min(self.refusing.items())
        nodes = sorted({n for n, _ in self.refusing})
        where = f"Envoy {node}" + (f" and {len(nodes) - 1} more" if len(nodes) > 1 else "")
        return f"{where} refused its {type_key} configuration: {message}; it keeps serving the last one it accepted"

    def publish(self, resources: dict[str, list[JSON]]) -> bool:
        """Replace the snapshot; True when anything changed."""
        new = {
            key: {str(r.get("name") or r.get("cluster_name")): r for r in resources.get(key, [])} for key in envoy.TYPES
        }
        if new == self.resources:
            return False
        self.resources = new
        self.generation += 1
        return True

    def clear(self) -> None:
        """Forget the snapshot (leadership lost): answering from it could undo a newer leader's changes."""
        self.resources = None

    def answer(self, type_key: str, names: list[str]) -> Answer | None:
        """The resources of one type (those named, for routes and endpoints), or None when there is nothing this
        process may answer with."""
        if self.resources is None or not self.serving() or type_key not in envoy.TYPES:
            return None
        held = self.resources[type_key]
        if type_key in ("routes", "endpoints") and names:
            chosen = [held[name] for name in sorted(set(names)) if name in held]
        else:
            chosen = [held[name] for name in sorted(held)]
        return Answer(_version(chosen), chosen, envoy.TYPES[type_key])

    def size(self) -> int:
        """Bytes of the whole snapshot as JSON (what a cold Envoy fetches)."""
        if self.resources is None:
            return 0
        return len(json.dumps(self.resources, separators=(",", ":")))
