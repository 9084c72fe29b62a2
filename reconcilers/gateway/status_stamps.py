"""The statuses the class writes, each condition keeping its lastTransitionTime while its status holds; in a status
list shared with other controllers (a route's parents, a policy's ancestors) only this controller's entries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconcilers.gateway import raw
from reconcilers.gateway.kinds import CONTROLLER_NAME


def merge_conditions(
    old: Sequence[Mapping[str, object]], new: Sequence[Mapping[str, object]], now: str
) -> list[dict[str, object]]:
    """The new conditions, keeping each one's lastTransitionTime while its status stays the same."""
    before = {c.get("type"): c for c in old or []}
    out = []
    for cond in new:
        prior = before.get(cond["type"])
        since = prior.get("lastTransitionTime") if prior and prior.get("status") == cond["status"] else None
        out.append({**cond, "lastTransitionTime": since or now})
    return out


def _entries(value: object) -> list[Mapping[str, object]]:
    """The objects of a status list as read (conditions, listeners, parents): what is not one is no entry."""
    return [entry for entry in raw.items(value) if isinstance(entry, Mapping)]


def stamp(status: Mapping[str, object], old: Mapping[str, object], now: str) -> dict[str, object]:
    out = dict(status)
    out["conditions"] = merge_conditions(_entries(old.get("conditions")), _entries(status.get("conditions")), now)
    if "listeners" in status:
        old_listeners = {entry.get("name"): entry for entry in _entries(old.get("listeners"))}
        out["listeners"] = [
            {
                **entry,
                "conditions": merge_conditions(
                    _entries(raw.at(old_listeners.get(entry["name"]), "conditions")), _entries(entry["conditions"]), now
                ),
            }
            for entry in _entries(status["listeners"])
        ]
    return out


def stamped(
    current: Sequence[Mapping[str, object]],
    ours: Sequence[Mapping[str, object]],
    ref: str,
    now: str,
    names: frozenset[str] = frozenset({CONTROLLER_NAME}),
) -> list[dict[str, object]] | None:
    """A status list shared with other controllers (a route's parents, a policy's ancestors) with this controller's
    entries (those of the controllerNames it answers to, `names`) replaced by `ours` (keyed by `ref`; each condition
    keeps its transition time while its status holds), or None when ours are already what it holds."""
    theirs = [e for e in current if e.get("controllerName") not in names]
    mine_before = [e for e in current if e.get("controllerName") in names]
    stamped = []
    for entry in ours:
        parent = raw.mapping(entry[ref])
        prior = next((e for e in mine_before if _same_parent(raw.mapping(e.get(ref)), parent)), {})
        stamped.append(
            {
                **entry,
                "conditions": merge_conditions(_entries(prior.get("conditions")), _entries(entry["conditions"]), now),
            }
        )
    return None if stamped == mine_before else [*map(dict, theirs), *stamped]


def _same_parent(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    keys = ("group", "kind", "namespace", "name", "sectionName", "port")
    return all(a.get(k) == b.get(k) for k in keys)
