"""Every route's attachments to the class's Gateways, with the statuses its build decides (UnsupportedValue,
ResolvedRefs, PartiallyInvalid) and the hostnames it keeps once their owners are settled."""

from __future__ import annotations

from collections.abc import Mapping

from reconcilers.gateway import shapes
from reconcilers.gateway.gatewayapi.attach import Attachment, attach, settle_hostname_owners
from reconcilers.gateway.gatewayapi.backends import BackendContext, Resolver
from reconcilers.gateway.gatewayapi.builds import Build, built_route, follows_external_names, forget_built
from reconcilers.gateway.gatewayapi.listener_sets import ServedListenerSet
from reconcilers.gateway.gatewayapi.rules import DEFAULT_PORTS
from reconcilers.gateway.gatewayapi.status import GRPC_ROUTE, HTTP_ROUTE, ServedGateway
from reconcilers.gateway.gatewayapi.world import World
from reconcilers.gateway.kinds import GATEWAY_GROUP
from reconcilers.gateway.owners import Owners
from reconcilers.gateway.shapes import ObjectKey, condition


def attachments_of(
    world: World,
    gateways: Mapping[ObjectKey, ServedGateway],
    resolver: Resolver,
    listener_sets: Mapping[ObjectKey, ServedListenerSet],
    owners: Owners,
) -> list[Attachment]:
    """Every route's attachments to Gateways of the class (accepted or refused), each with the build of its Envoy
    routes and the hostnames it serves (those its namespace owns); `listener_sets`: each ListenerSet on a Gateway of
    the class, as that Gateway takes it."""
    labels_of = {shapes.name(n): shapes.labels(n) for n in world.namespaces}
    attachments: list[Attachment] = []
    for kind, routes in ((HTTP_ROUTE, world.http_routes), (GRPC_ROUTE, world.grpc_routes)):
        for route in routes:
            ours: list[Attachment] = []
            for parent in route["spec"].get("parentRefs", []):
                if parent.get("group", GATEWAY_GROUP) != GATEWAY_GROUP:
                    continue
                pkey = (parent.get("namespace") or shapes.ns(route), parent["name"])
                parent_kind = parent.get("kind", "Gateway")
                if parent_kind == "ListenerSet" and pkey in listener_sets:
                    # Only that ListenerSet's listeners, served by its Gateway.
                    listener_set = listener_sets[pkey]
                    attachment = Attachment(kind, route, parent, listener_set.gateway)
                    on = gateways[listener_set.gateway]
                    ours.append(attach(attachment, on, labels_of, world, owners, listener_set))
                elif parent_kind == "Gateway" and pkey in gateways:
                    # Else not a Gateway of this class: another controller's business.
                    ours.append(attach(Attachment(kind, route, parent, pkey), gateways[pkey], labels_of, world, owners))
            if not ours:
                continue
            observed = shapes.generation(route)
            # One build per backend context (the Gateways of one route may differ: whether their planes follow
            # ExternalName Services, the client certificate each presents to TLS backends), usually one.
            builds: dict[BackendContext, Build] = {}
            for attachment in ours:
                served = gateways.get(attachment.gateway)
                client = served.client_certificate if served is not None else None
                context = BackendContext(follows_external_names(world, attachment.gateway), client)
                if context not in builds:
                    builds[context] = built_route(kind, route, resolver, world.resolver_revision, context=context)
                attachment.build = build = builds[context]
                unsupported, result = build.unsupported, build.result
                if result.invalid and len(result.invalid) == result.rules:
                    unsupported = result.invalid[0]  # no rule left to serve: the route is refused
                if attachment.accepted and unsupported:
                    attachment.refuse("UnsupportedValue", unsupported)
                if result.problems:
                    reason, message = result.problems[0]
                    attachment.conditions.append(condition("ResolvedRefs", False, reason, message, observed))
                else:
                    attachment.conditions.append(condition("ResolvedRefs", True, "ResolvedRefs", "", observed))
                if result.invalid and not unsupported:
                    # The spec's PartiallyInvalid: the rules left out are named, the others are served.
                    message = "rules not served: " + "; ".join(result.invalid)
                    attachment.conditions.append(
                        condition("PartiallyInvalid", True, "UnsupportedValue", message, observed)
                    )
            attachments += ours
    settle_hostname_owners([a for a in attachments if a.accepted], owners)
    forget_built(
        {
            (kind, shapes.ns(r), shapes.name(r))
            for kind, rs in ((HTTP_ROUTE, world.http_routes), (GRPC_ROUTE, world.grpc_routes))
            for r in rs
        }
    )
    return attachments


def scheme_of(attachment: Attachment, gateway: ServedGateway) -> str | None:
    """The visitor's scheme (`http`, `https`) an attachment serves, when its Gateway has both HTTP and HTTPS
    listeners and it attaches to listeners of one of them; None: either scheme."""
    if {listener.spec["protocol"] for listener in gateway.valid_listeners} != {"HTTP", "HTTPS"}:
        return None
    protocols = {listener.spec["protocol"] for listener in attachment.listeners}
    return protocols.pop().lower() if len(protocols) == 1 else None


def unusual_port(attachment: Attachment) -> int | None:
    """The one port of the listeners an attachment serves, when it is not their protocol's usual one (80, 443);
    None otherwise (listeners of several ports cannot be told apart by traffic: the class claims no
    HTTPRouteParentRefPort)."""
    ports = {(listener.spec["protocol"], listener.spec["port"]) for listener in attachment.listeners}
    if len(ports) != 1:
        return None
    protocol, port = ports.pop()
    return None if DEFAULT_PORTS.get(protocol) == port else port
