"""The class and its Gateways: which GatewayClasses this controller serves and whether each is accepted, and each
Gateway's conditions and listeners (what a route may attach to)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reconcilers.gateway import shapes
from reconcilers.gateway.features import supported_features
from reconcilers.gateway.gatewayapi.client_certificates import (
    NO_CERTIFICATES,
    NO_VALIDATION,
    Certificates,
    FrontendValidation,
    certificate_problem,
    client_certificate,
    frontend_validation,
    insecure_fallback,
)
from reconcilers.gateway.gatewayapi.policies import ClientCertificate
from reconcilers.gateway.ir.status import ClassStatus, GatewayStatus, ListenerStatus
from reconcilers.gateway.kinds import (
    BUNDLE_VERSION,
    CLASS_CONFIG_KIND,
    GATEWAY_GROUP,
    PACKAGE_GROUP,
    TUNNEL_GROUP,
    TUNNEL_KIND,
    Classes,
)
from reconcilers.gateway.shapes import Condition, Gateway, GatewayClass, ObjectKey, condition

if TYPE_CHECKING:
    from reconcilers.gateway.gatewayapi.listener_sets import ServedListenerSet

HTTP_ROUTE, GRPC_ROUTE = "HTTPRoute", "GRPCRoute"
ROUTE_KINDS = (HTTP_ROUTE, GRPC_ROUTE)
SERVED_PROTOCOLS = ("HTTP", "HTTPS")


@dataclass(frozen=True)
class TunnelState:
    """What the class needs of the kflare Tunnel its parametersRef names."""

    ready: bool
    message: str = ""
    address: str | None = None
    """`<tunnel id>.cfargotunnel.com`, once the tunnel has an ID."""


TunnelLookup = Callable[[str, str], TunnelState | None]
"""(namespace, name) of a Tunnel -> its state, None when there is no such Tunnel."""


@dataclass(frozen=True)
class ServedClass:
    """An accepted GatewayClass of this controller, with the Tunnel it publishes through (None: no Tunnel)."""

    tunnel: TunnelState | None
    tunnel_key: ObjectKey | None


@dataclass
class ServedListener:
    """A listener of a Gateway, as routes see it when they attach."""

    gateway: Gateway
    spec: shapes.Listener
    accepted: bool
    kinds: tuple[str, ...]
    conditions: list[Condition]
    attached: int = 0
    attach_only: bool = False
    """Routes attach to it and are counted, but it serves nothing: its certificate references do not resolve (the
    spec counts such a listener's routes in attachedRoutes, and its Programmed is False)."""
    frontend: FrontendValidation = NO_VALIDATION
    """How an HTTPS listener checks its clients' certificates (its Gateway's `spec.tls.frontend`)."""
    listener_set: shapes.ListenerSet | None = None
    """The ListenerSet declaring it (None: the Gateway itself): its namespace is the listener's `Same`, and its
    ReferenceGrants are those from ListenerSets."""

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def owner(self) -> Gateway | shapes.ListenerSet:
        return self.gateway if self.listener_set is None else self.listener_set

    @property
    def hostname(self) -> str | None:
        return self.spec.get("hostname") or None

    def allows_namespace(self, namespace: str, labels: Mapping[str, str]) -> bool:
        allowed = self.spec.get("allowedRoutes", {}).get("namespaces", {})
        origin, selector = allowed.get("from", "Same"), allowed.get("selector", {})
        return shapes.namespace_admitted(origin, selector, namespace, shapes.ns(self.owner), labels)

    def status(self) -> ListenerStatus:
        return {
            "name": self.name,
            "supportedKinds": [{"group": GATEWAY_GROUP, "kind": k} for k in self.kinds],
            "attachedRoutes": self.attached,
            "conditions": self.conditions,
        }


@dataclass
class ServedGateway:
    """A Gateway of one of this controller's classes: its conditions, its listeners, and whether routes may attach
    to it (only when its class is accepted and its spec can be served)."""

    gateway: Gateway
    conditions: list[Condition]
    listeners: list[ServedListener]
    usable: bool
    tunnel_key: ObjectKey | None = None
    address: str | None = None
    plane: str = ""
    """The data plane serving it: "" the class's shared one, else its own plane's xDS cluster name."""
    client_certificate: ClientCertificate | None = None
    """What its data plane presents to backends it speaks TLS to (`spec.tls.backend.clientCertificateRef`)."""
    listener_sets: list[ServedListenerSet] = field(default_factory=list)
    """The ListenerSets naming it as their parent, in precedence order (`listener_sets.listener_sets`)."""

    # Cached: a ServedGateway is made once per translation, and every route attaching to it asks for these.
    @functools.cached_property
    def valid_listeners(self) -> list[ServedListener]:
        """Every listener it serves: its own, then its accepted ListenerSets' (what isolates a hostname, which
        schemes it serves, which certificates its plane presents)."""
        if not self.usable:
            return []
        merged = [*self.listeners, *(item for ls in self.listener_sets for item in ls.listeners)]
        return [listener for listener in merged if listener.accepted]

    @functools.cached_property
    def attachable_listeners(self) -> list[ServedListener]:
        """The listeners routes attach to: the served ones and those counted without serving."""
        return [item for item in self.listeners if item.accepted or item.attach_only] if self.usable else []

    def status(self) -> GatewayStatus:
        out: GatewayStatus = {
            "conditions": self.conditions,
            "listeners": [listener.status() for listener in self.listeners],
            "attachedListenerSets": sum(1 for ls in self.listener_sets if ls.accepted),
        }
        if self.address:
            out["addresses"] = [{"type": "Hostname", "value": self.address}]
        return out


def _minor(version: str | None) -> str | None:
    if not version:
        return None
    match = re.match(r"v?(\d+)\.(\d+)", version)
    return f"v{match.group(1)}.{match.group(2)}" if match else None


def class_status(
    cls: GatewayClass,
    tunnels: TunnelLookup,
    installed_bundle: str | None,
    installed_channel: str | None = None,
    classes: Classes | None = None,
    *,
    every_gateway_own_plane: bool = False,
) -> tuple[ClassStatus, ServedClass | None]:
    """A class's status, and what serving it takes when it is accepted."""
    classes = classes or Classes()
    observed = shapes.generation(cls)
    ref = cls["spec"].get("parametersRef")
    served: ServedClass | None = None
    derived = classes.tunnel(cls) if ref is not None and ref.get("kind") == CLASS_CONFIG_KIND else None
    if derived is not None:
        assert ref is not None
        # The package's shape: the Tunnel is the one kflare derives from the GatewayClassConfig (`package`).
        tunnel = tunnels(*derived)
        where = f"{CLASS_CONFIG_KIND} {ref['name']} (kflare's Tunnel {derived[0]}/{derived[1]})"
        if tunnel is None:
            message = f"{where}: not derived yet; the GatewayClassConfig's own status says why"
            accepted = condition("Accepted", False, "InvalidParameters", message, observed)
        else:
            accepted = condition("Accepted", True, "Accepted", where, observed)
            served = ServedClass(tunnel, derived)
    elif ref is None:
        accepted = condition(
            "Accepted",
            True,
            "Accepted",
            "no parametersRef: served by the data plane only, not through a Tunnel",
            observed,
        )
        served = ServedClass(None, None)
    elif ref["group"] != TUNNEL_GROUP or ref["kind"] != TUNNEL_KIND or not ref.get("namespace"):
        accepted = condition(
            "Accepted",
            False,
            "InvalidParameters",
            f"parametersRef must name a {TUNNEL_KIND}.{TUNNEL_GROUP} with its namespace"
            + (f", or a {CLASS_CONFIG_KIND}.{PACKAGE_GROUP}" if classes.package_namespace else ""),
            observed,
        )
    else:
        tunnel_key = (ref["namespace"], ref["name"])
        tunnel = tunnels(*tunnel_key)
        where = f"{TUNNEL_KIND} {tunnel_key[0]}/{tunnel_key[1]}"
        if tunnel is None:
            accepted = condition("Accepted", False, "InvalidParameters", f"{where} not found", observed)
        else:
            accepted = condition("Accepted", True, "Accepted", where, observed)
            served = ServedClass(tunnel, tunnel_key)
    wanted = _minor(BUNDLE_VERSION)
    if _minor(installed_bundle) == wanted:
        supported = condition("SupportedVersion", True, "SupportedVersion", f"Gateway API {installed_bundle}", observed)
    else:
        supported = condition(
            "SupportedVersion",
            False,
            "UnsupportedVersion",
            f"installed Gateway API bundle {installed_bundle or 'unknown'}; this controller wants {wanted}.x",
            observed,
        )
    return {
        "conditions": [accepted, supported],
        "supportedFeatures": supported_features(installed_channel, every_gateway_own_plane=every_gateway_own_plane),
    }, served


_NOT_SERVED = (
    "the certificate is served to clients reaching the data plane directly (its Service's HTTPS port); visitors through"
    " Cloudflare get the zone's certificate at its edge"
)


def listener(
    gateway: Gateway,
    spec: shapes.Listener,
    certificates: Certificates = NO_CERTIFICATES,
    listener_set: shapes.ListenerSet | None = None,
) -> ServedListener:
    """A listener of `gateway`, declared by the Gateway or by `listener_set`, and what it can serve."""
    observed = shapes.generation(gateway if listener_set is None else listener_set)
    protocol = spec["protocol"]
    conds: list[Condition] = []
    kinds: list[str] = []
    bad_kinds: list[str] = []
    allowed = spec.get("allowedRoutes", {}).get("kinds")
    if allowed is None:
        kinds = list(ROUTE_KINDS)
    else:
        for kind in allowed:
            group = kind.get("group", GATEWAY_GROUP)
            if group == GATEWAY_GROUP and kind["kind"] in ROUTE_KINDS:
                kinds.append(kind["kind"])
            else:
                bad_kinds.append(f"{kind['kind']}.{group}")
    accepted = True
    if protocol not in SERVED_PROTOCOLS:
        accepted = False
        kinds = []  # no route kind attaches to a protocol the class does not serve
        message = f"protocol {protocol}: a Cloudflare Tunnel carries HTTP only (HTTP or HTTPS listeners)"
        conds.append(condition("Accepted", False, "UnsupportedProtocol", message, observed))
    elif "tls" in spec and (protocol != "HTTPS" or spec["tls"].get("mode", "Terminate") != "Terminate"):
        accepted = False
        message = "tls: TLS ends at Cloudflare's edge; only an HTTPS listener terminating TLS is served"
        conds.append(condition("Accepted", False, "UnsupportedValue", message, observed))
    else:
        conds.append(condition("Accepted", True, "Accepted", _NOT_SERVED if "tls" in spec else "", observed))
    if listener_set is None:
        bad_certificate = certificate_problem(gateway, spec, certificates) if accepted else None
    else:
        bad_certificate = certificate_problem(listener_set, spec, certificates, "ListenerSet") if accepted else None
    frontend = NO_VALIDATION
    if accepted and protocol == "HTTPS":
        frontend = frontend_validation(gateway, spec["port"], certificates)
        if not frontend.usable and frontend.problem is not None:
            # No CA to check clients against: serving the listener would let in what it means to keep out.
            accepted = False
            message = f"no valid CA certificate to check clients against: {frontend.problem[1]}"
            conds[-1] = condition("Accepted", False, "NoValidCACertificate", message, observed)
    if bad_kinds:
        message = f"route kinds not supported: {', '.join(bad_kinds)} (supported: HTTPRoute, GRPCRoute)"
        conds.append(condition("ResolvedRefs", False, "InvalidRouteKinds", message, observed))
    elif bad_certificate is not None:
        accepted = False
        conds.append(condition("ResolvedRefs", False, *bad_certificate, observed))
    elif frontend.problem is not None:
        conds.append(condition("ResolvedRefs", False, *frontend.problem, observed))
    else:
        conds.append(condition("ResolvedRefs", True, "ResolvedRefs", "", observed))
    conds.append(condition("Conflicted", False, "NoConflicts", "", observed))
    programmed = accepted and bool(kinds)
    conds.append(condition("Programmed", programmed, "Programmed" if programmed else "Invalid", "", observed))
    attach_only = bad_certificate is not None and bool(kinds)
    return ServedListener(
        gateway,
        spec,
        accepted and bool(kinds),
        tuple(kinds),
        conds,
        attach_only=attach_only,
        frontend=frontend,
        listener_set=listener_set,
    )


def gateway_status(
    gateway: Gateway,
    class_name: str,
    served: ServedClass | None,
    certificates: Certificates = NO_CERTIFICATES,
    *,
    plane: str = "",
    refusal: str | None = None,
) -> ServedGateway:
    """A Gateway's conditions and listeners (attached routes are counted later, as routes attach). `plane`: the
    data plane of its own serving it ("" the shared one); `refusal`: why it cannot have the one it asks for."""
    observed = shapes.generation(gateway)
    listeners = [listener(gateway, spec, certificates) for spec in gateway["spec"].get("listeners", [])]
    if served is None:
        message = f"GatewayClass {class_name} is not accepted"
        conditions = [
            condition("Accepted", False, "Pending", message, observed),
            condition("Programmed", False, "Pending", message, observed),
        ]
        return ServedGateway(gateway, conditions, _refused(listeners), usable=False)
    if refusal is not None:
        conditions = [
            condition("Accepted", False, "InvalidParameters", refusal, observed),
            condition("Programmed", False, "Invalid", refusal, observed),
        ]
        return ServedGateway(gateway, conditions, _refused(listeners), usable=False)
    if any(address.get("value") for address in gateway["spec"].get("addresses", [])):
        # An address without a value asks the class to choose one: the Tunnel's is the one it has.
        message = "spec.addresses: the address of this class is its Tunnel's, it cannot be chosen"
        conditions = [
            condition("Accepted", False, "UnsupportedAddress", message, observed),
            condition("Programmed", False, "Invalid", message, observed),
        ]
        return ServedGateway(gateway, conditions, _refused(listeners), usable=False)
    _conflicts(listeners, observed)
    valid = [item for item in listeners if item.accepted]
    if valid and len(valid) == len(listeners):
        accepted = condition("Accepted", True, "Accepted", "", observed)
    else:
        invalid = ", ".join(item.name for item in listeners if not item.accepted)
        accepted = condition("Accepted", bool(valid), "ListenersNotValid", f"listeners not served: {invalid}", observed)
    tunnel = served.tunnel
    if not valid:
        programmed = condition("Programmed", False, "Invalid", "no listener can be served", observed)
    elif tunnel is not None and not tunnel.ready:
        programmed = condition("Programmed", False, "Pending", tunnel.message or "Tunnel not ready", observed)
    else:
        programmed = condition("Programmed", True, "Programmed", "", observed)
    conditions = [accepted, programmed]
    client = client_certificate(gateway, certificates)
    if isinstance(client, tuple):
        # The Gateway is still served; its TLS backends get no certificate, so those that ask for one refuse it.
        conditions.append(condition("ResolvedRefs", False, *client, observed))
    elif client is not None:
        conditions.append(condition("ResolvedRefs", True, "ResolvedRefs", "", observed))
    if insecure_fallback(gateway):
        message = "a client certificate validation lets in clients without a valid certificate (AllowInsecureFallback)"
        conditions.append(condition("InsecureFrontendValidationMode", True, "ConfigurationChanged", message, observed))
    return ServedGateway(
        gateway,
        conditions,
        listeners,
        usable=True,
        tunnel_key=served.tunnel_key,
        address=tunnel.address if tunnel is not None else None,
        plane=plane,
        client_certificate=client if isinstance(client, ClientCertificate) else None,
    )


def _conflicts(listeners: list[ServedListener], observed: int) -> None:
    """Listeners that cannot be told apart are Conflicted (and not served): on one port, HTTP beside HTTPS
    (ProtocolConflict), or two of one protocol with the same hostname (HostnameConflict)."""
    by_port: dict[int, list[ServedListener]] = {}
    for item in listeners:
        if item.spec["protocol"] in SERVED_PROTOCOLS:
            by_port.setdefault(item.spec["port"], []).append(item)
    for port, group in by_port.items():
        protocols = {item.spec["protocol"] for item in group}
        for item in group:
            same = [o for o in group if o is not item and o.hostname == item.hostname]
            if len(protocols) > 1:
                reason, message = (
                    "ProtocolConflict",
                    f"port {port} has listeners of protocols {', '.join(sorted(protocols))}",
                )
            elif same:
                reason = "HostnameConflict"
                message = f"listener {same[0].name} has the same port {port} and hostname {item.hostname or '(none)'}"
            else:
                continue
            item.accepted = item.attach_only = False
            item.conditions = [
                condition("Conflicted", True, reason, message, observed)
                if c["type"] == "Conflicted"
                else condition("Programmed", False, "Invalid", message, observed)
                if c["type"] == "Programmed"
                else c
                for c in item.conditions
            ]


def _refused(listeners: list[ServedListener]) -> list[ServedListener]:
    for item in listeners:
        item.accepted = item.attach_only = False
    return listeners
