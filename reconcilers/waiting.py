"""Waiting on parents and credentials: the error that says what is missing, and whether a parent can serve."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from app.api.constants import Reason
from app.api.meta import ObjectMeta, Status
from app.api.refs import Target
from app.kube.client import JSON
from reconcilers.context import Caches
from reconcilers.writer import waits_for_a_parent

RETRY_PARENT = 60.0  # how soon to look again when a parent or credential is missing (the Go controller's minute)


class Stored(Protocol):
    """What every kind's resource has, read where the kind is not known."""

    @property
    def metadata(self) -> ObjectMeta: ...

    @property
    def status(self) -> Status: ...


class NotReady(Exception):
    """A parent or credential is missing or not ready; the resource waits with this reason."""

    def __init__(
        self, reason: str, message: str, *, requeue_after: float | None = None, parent_gone: bool = False
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.requeue_after = requeue_after
        self.parent_gone = parent_gone


def can_serve(raw: JSON) -> bool:
    """Whether a parent can serve its children: Ready, or not Ready only because its last look at Cloudflare failed
    for a passing reason (a 5xx, a timeout, a 429). Children then keep going, and keep their state: a parent's
    transient error never cascades into status writes and Events on everything below it."""
    for condition in (raw.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True" or condition.get("reason") == Reason.API_ERROR)
    return False


RECORDED: dict[str, str] = {}
"""By kind, the field of `status.cloudflareMetadata` that says its Cloudflare object exists, for its children to use
(its ID, or what it records where the ID is more than a status field): each reconciler's declaration fills it
(`ManagedKind.serves_once`)."""


@dataclass(frozen=True)
class Parent:
    """A parent a reference names, as cached, and how the child names it in messages."""

    kind: str
    shown: str
    raw: JSON

    def serving(self, *, deleting_serves: bool = True, unready: str = "is not Ready") -> str:
        """What the parent records of its Cloudflare object (`RECORDED`) when it can serve its children (`can_serve`;
        one being deleted still serves when `deleting_serves`: it waits for them to clean up); else NotReady
        `<Kind>NotReady` saying "<Kind> <shown> is not Ready" (or what `unready` says instead)."""
        recorded = ((self.raw.get("status") or {}).get("cloudflareMetadata") or {}).get(RECORDED[self.kind])
        deleting = deleting_serves and bool(self.raw["metadata"].get("deletionTimestamp"))
        if not (can_serve(self.raw) or deleting) or not recorded:
            raise NotReady(f"{self.kind}NotReady", f"{self.kind} {self.shown} {unready}")
        return str(recorded)


def parent_found(caches: Caches, target: Target, *, shown: str = "", gone: bool = True) -> Parent:
    """The parent a reference names (`Reference.targets`: its kind, namespace and name), as cached; else NotReady
    `<Kind>NotFound` saying "<Kind> <shown> not found" (`shown`: how the child names it, its name by default).
    `gone`: the child being deleted may go without it (the parent and its Cloudflare object are gone)."""
    kind, namespace, name = target
    raw = caches.cached(kind, name, namespace or None)
    if raw is None:
        raise NotReady(f"{kind}NotFound", f"{kind} {shown or name} not found", parent_gone=gone)
    return Parent(kind, shown or name, raw)


WAIT_GRACE = 10.0
"""Seconds a new resource may wait for its parent before it says so in its status (see
`new_and_waiting_for_a_parent`)."""


def new_and_waiting_for_a_parent(obj: Stored, reason: str, now: dt.datetime | None = None) -> float | None:
    """Seconds to hold back the status of a resource that has none yet and waits for its parent (a DNSRecord applied
    with its Zone): in a bulk apply the parent is Ready within seconds, and writing the wait first would cost one
    status write per object for nothing. None: write it now (the resource has a status, or has waited long enough,
    or waits for something else)."""
    created = obj.metadata.creation_timestamp
    if not waits_for_a_parent(reason) or created is None or obj.status.condition() is not None:
        return None
    if created.tzinfo is None:
        created = created.replace(tzinfo=dt.UTC)
    age = ((now or dt.datetime.now(dt.UTC)) - created).total_seconds()
    return WAIT_GRACE - age if 0 <= age < WAIT_GRACE else None
