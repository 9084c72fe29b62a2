"""ListenerSets on the class's Gateways: which a Gateway takes (its `allowedListeners`), their listeners merged after
the Gateway's own in precedence order (a later listener loses a conflict on its port, the earlier keeps serving), and
each ListenerSet's conditions. Routes attach to them in `attach`."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from reconcilers.gateway import shapes
from reconcilers.gateway.gatewayapi.client_certificates import NO_CERTIFICATES, Certificates
from reconcilers.gateway.gatewayapi.status import ServedGateway, ServedListener, listener
from reconcilers.gateway.ir.status import ListenerSetStatus
from reconcilers.gateway.shapes import Condition, Gateway, ObjectKey, condition


def _allows_listener_set(gateway: Gateway, namespace: str, labels: Mapping[str, str]) -> bool:
    """The Gateway's allowedListeners, `None` (no ListenerSet) when unset."""
    allowed = gateway["spec"].get("allowedListeners", {}).get("namespaces", {})
    origin, selector = allowed.get("from", "None"), allowed.get("selector", {})
    return shapes.namespace_admitted(origin, selector, namespace, shapes.ns(gateway), labels)


@dataclass
class ServedListenerSet:
    """A ListenerSet naming a Gateway of the class: whether the Gateway takes it, and its listeners (merged into the
    Gateway's after the Gateway's own and those of older ListenerSets)."""

    listener_set: shapes.ListenerSet
    gateway: ObjectKey
    listeners: list[ServedListener]
    conditions: list[Condition]
    refused: bool = False
    """The Gateway does not take it (not allowed there, or not accepted): none of its listeners is merged."""

    # Cached: a ServedListenerSet is final once `listener_sets` returns, and every route naming it asks for these.
    @functools.cached_property
    def accepted(self) -> bool:
        return not self.refused and any(item.accepted for item in self.listeners)

    @functools.cached_property
    def attachable_listeners(self) -> list[ServedListener]:
        """The listeners routes naming this ListenerSet attach to."""
        return [item for item in self.listeners if item.accepted or item.attach_only] if not self.refused else []

    def status(self) -> ListenerSetStatus:
        return {"conditions": self.conditions, "listeners": [item.status() for item in self.listeners]}


def listener_sets(
    parent: ServedGateway,
    sets: list[shapes.ListenerSet],
    labels_of: Mapping[str, Mapping[str, str]],
    certificates: Certificates = NO_CERTIFICATES,
) -> list[ServedListenerSet]:
    """The ListenerSets naming `parent`, in precedence order (oldest first, then namespace/name), each with its
    conditions and listeners. A listener loses to an earlier one on its port: the Gateway's own listeners first,
    then those of the older ListenerSets (ProtocolConflict, HostnameConflict); the winner keeps serving."""
    gateway = parent.gateway
    where = f"Gateway {shapes.ns(gateway)}/{shapes.name(gateway)}"
    programmed = next((c for c in parent.conditions if c["type"] == "Programmed"), None)
    established = [item for item in parent.listeners if item.accepted or item.attach_only]
    out: list[ServedListenerSet] = []
    for listener_set in sorted(sets, key=shapes.age_key):
        observed = shapes.generation(listener_set)
        namespace = shapes.ns(listener_set)
        refusal: tuple[str, str] | None = None
        if not _allows_listener_set(gateway, namespace, labels_of.get(namespace, {})):
            refusal = ("NotAllowed", f"{where} does not allow ListenerSets from namespace {namespace}")
        elif not parent.usable:
            refusal = ("ParentNotAccepted", f"{where} is not accepted")
        if refusal is not None:
            conditions = [
                condition("Accepted", False, *refusal, observed),
                condition("Programmed", False, *refusal, observed),
            ]
            out.append(ServedListenerSet(listener_set, shapes.key(gateway), [], conditions, refused=True))
            continue
        items = [listener(gateway, spec, certificates, listener_set) for spec in listener_set["spec"]["listeners"]]
        for item in items:
            conflict = _conflict(item, established)
            if conflict is not None:
                _conflicted(item, *conflict, observed)
            elif item.accepted or item.attach_only:
                established.append(item)
        invalid = [item.name for item in items if not item.accepted]
        if len(invalid) == len(items):
            message = f"no listener can be served: {', '.join(invalid)}"
            conditions = [
                condition("Accepted", False, "ListenersNotValid", message, observed),
                condition("Programmed", False, "ListenersNotValid", message, observed),
            ]
        else:
            note = f"listeners not served: {', '.join(invalid)}" if invalid else ""
            conditions = [condition("Accepted", True, "Accepted", note, observed)]
            if programmed is None or programmed["status"] == "True":
                conditions.append(condition("Programmed", True, "Programmed", "", observed))
            else:
                message = f"{where} is not programmed: {programmed['message']}"
                conditions.append(condition("Programmed", False, "ParentNotProgrammed", message, observed))
        out.append(ServedListenerSet(listener_set, shapes.key(gateway), items, conditions))
    return out


def _conflict(item: ServedListener, established: list[ServedListener]) -> tuple[str, str] | None:
    """Why `item` loses to a listener established before it on its port (None: it does not): another protocol, or
    the same protocol and hostname."""
    port = item.spec["port"]
    for other in established:
        if other.spec["port"] != port:
            continue
        where = _declared_by(other)
        if other.spec["protocol"] != item.spec["protocol"]:
            return "ProtocolConflict", f"port {port} is {other.spec['protocol']} (listener {other.name} of {where})"
    for other in established:
        if other.spec["port"] == port and other.hostname == item.hostname:
            where = _declared_by(other)
            hostname = item.hostname or "(none)"
            return "HostnameConflict", f"listener {other.name} of {where} has port {port} and hostname {hostname}"
    return None


def _declared_by(item: ServedListener) -> str:
    kind = "Gateway" if item.listener_set is None else "ListenerSet"
    return f"{kind} {shapes.ns(item.owner)}/{shapes.name(item.owner)}"


def _conflicted(item: ServedListener, reason: str, message: str, observed: int) -> None:
    item.accepted = item.attach_only = False
    item.conditions = [
        c
        if c["type"] not in ("Accepted", "Programmed", "Conflicted")
        else condition(c["type"], c["type"] == "Conflicted", reason, message, observed)
        for c in item.conditions
    ]
