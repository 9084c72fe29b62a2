"""Gateway API objects to the IR: every status decided (the classes', the Gateways' and their listeners', the
ListenerSets', the routes', the BackendTLSPolicies'), each plane's virtual hosts and clusters, the hostnames
published."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping

from reconcilers.gateway import shapes
from reconcilers.gateway.gatewayapi import https_listeners
from reconcilers.gateway.gatewayapi.attach import isolating_hosts, not_served
from reconcilers.gateway.gatewayapi.backends import UNRESOLVED, Resolver
from reconcilers.gateway.gatewayapi.builds import weighted_in
from reconcilers.gateway.gatewayapi.client_certificates import Certificates
from reconcilers.gateway.gatewayapi.listener_sets import ServedListenerSet
from reconcilers.gateway.gatewayapi.listener_sets import listener_sets as served_sets
from reconcilers.gateway.gatewayapi.policies import BackendTLS
from reconcilers.gateway.gatewayapi.routes import attachments_of, scheme_of, unusual_port
from reconcilers.gateway.gatewayapi.rules import for_scheme, on_port
from reconcilers.gateway.gatewayapi.status import (
    GRPC_ROUTE,
    ServedClass,
    ServedGateway,
    TunnelState,
    class_status,
    gateway_status,
)
from reconcilers.gateway.gatewayapi.world import World, listener_set_parent, publishes_dns
from reconcilers.gateway.ir import IR, Hostname, ParentStatus, PlaneIR
from reconcilers.gateway.ir.routes import RouteIR
from reconcilers.gateway.ir.status import ClassStatus
from reconcilers.gateway.owners import Owners
from reconcilers.gateway.planes import Plane, finalized
from reconcilers.gateway.shapes import ListenerSet, ObjectKey, RouteKey, condition


def class_statuses(world: World) -> tuple[dict[str, ClassStatus], dict[str, ServedClass | None]]:
    """The status of each class of this controller, and what serving each takes (None: it is not accepted)."""
    status_of: dict[str, ClassStatus] = {}
    served: dict[str, ServedClass | None] = {}
    for cls in world.classes:
        if world.ours.ours(cls):
            status_of[shapes.name(cls)], served[shapes.name(cls)] = class_status(
                cls,
                world.tunnel,
                world.installed_bundle,
                world.installed_channel,
                world.ours,
                every_gateway_own_plane=world.every_gateway_own_plane,
            )
    return status_of, served


def to_ir(world: World) -> IR:
    """What each plane serves and every status, decided from `world`."""
    class_status_of, served_classes = class_statuses(world)

    certificates = Certificates(world.secret, world.grants, world.config_map)
    gateways: dict[ObjectKey, ServedGateway] = {}
    for gateway in world.gateways:
        class_name = gateway["spec"]["gatewayClassName"]
        if gateway["metadata"].get("deletionTimestamp") and finalized(gateway):
            continue  # its own plane is being taken down: nothing of it is served or published any more
        if class_name in served_classes:
            served, choice = served_classes[class_name], world.planes.get(shapes.key(gateway))
            if isinstance(choice, Plane) and served is not None:
                served = ServedClass(_plane_tunnel(world, choice), choice.tunnel_key)
            gateways[shapes.key(gateway)] = gateway_status(
                gateway,
                class_name,
                served,
                certificates,
                plane=choice.cluster if isinstance(choice, Plane) else "",
                refusal=choice if isinstance(choice, str) else None,
            )

    # Each Gateway's ListenerSets, merged into its listeners before any route attaches.
    sets_of: dict[ObjectKey, list[ListenerSet]] = defaultdict(list)
    for ls in world.listener_sets:
        if (gkey := listener_set_parent(ls)) is not None and gkey in gateways:
            sets_of[gkey].append(ls)
    labels_of = {shapes.name(n): shapes.labels(n) for n in world.namespaces}
    listener_sets: dict[ObjectKey, ServedListenerSet] = {}
    for gkey, declared in sets_of.items():
        gateways[gkey].listener_sets = served_sets(gateways[gkey], declared, labels_of, certificates)
        listener_sets.update((shapes.key(ls.listener_set), ls) for ls in gateways[gkey].listener_sets)
    tls = BackendTLS(world.backend_tls_policies, world.config_map)
    resolver = Resolver(world.services, world.slices, world.grants, tls, world.external_backends)
    owners = Owners.of(world.zones, world.namespaces, world.tenancy_label)
    attachments = attachments_of(world, gateways, resolver, listener_sets, owners)
    ancestors: dict[ObjectKey, set[ObjectKey]] = defaultdict(set)
    # Gateway API: a route's (and a policy's) entry carries the controllerName of its Gateway's class.
    controller_of_class = {shapes.name(c): world.ours.controller_of(c) for c in world.classes}
    controller_of = {
        gkey: controller_of_class.get(g.gateway["spec"]["gatewayClassName"], "") for gkey, g in gateways.items()
    }

    vhosts: dict[str, dict[str, list[RouteIR]]] = defaultdict(lambda: defaultdict(list))
    published: dict[str, tuple[bool, ObjectKey | None, set[RouteKey], list[bool]]] = {}
    route_parents: dict[RouteKey, list[ParentStatus]] = {}
    unresolved = False
    """Whether the shared plane's routes send a share to the unresolved cluster (asked of the builds: a walk of a
    thousand routes' configuration took longer than the rest of a change)."""
    for attachment in attachments:
        rkey = attachment.key
        if attachment.accepted:
            # A route partly refused (hostnames its namespace may not publish, or that another's route owns) is
            # accepted for the others, and says which it is not served for.
            note = not_served(attachment.dropped) if attachment.dropped else ""
            attachment.conditions.insert(
                0, condition("Accepted", True, "Accepted", note, shapes.generation(attachment.route))
            )
            for listener in attachment.listeners + attachment.counted:
                listener.attached += 1
            for policy in attachment.build.policies:
                ancestors[policy].add(attachment.gateway)
            parent = gateways[attachment.gateway]
            unresolved |= not parent.plane and attachment.build.unresolved
            scheme = scheme_of(attachment, parent)
            built = attachment.build.result.routes
            routes = built if scheme is None else [for_scheme(r, scheme) for r in built]
            port = unusual_port(attachment)
            if port is not None:
                routes = [on_port(r, port) for r in routes]
            plane_vhosts = vhosts[parent.plane]
            for hostname in attachment.hostnames:
                existing = {route.name for route in plane_vhosts[hostname]}
                plane_vhosts[hostname] += [r for r in routes if r.name not in existing]
                if hostname != "*":
                    entry = published.setdefault(
                        hostname, (attachment.kind == GRPC_ROUTE, parent.tunnel_key, set(), [False])
                    )
                    entry[2].add(rkey)
                    entry[3][0] = entry[3][0] or publishes_dns(parent.gateway)
        route_parents.setdefault(rkey, []).append(
            {
                "parentRef": attachment.parent,
                "controllerName": controller_of[attachment.gateway],
                "conditions": attachment.conditions,
            }
        )

    for plane in {"", *(g.plane for g in gateways.values() if g.usable)}:
        for hostname in isolating_hosts({k: g for k, g in gateways.items() if g.plane == plane}):
            vhosts[plane].setdefault(hostname, [])
    clusters, endpoints = resolver.resources({UNRESOLVED} if unresolved else set())
    planes = {"": PlaneIR(vhosts[""], clusters, endpoints)}
    planes.update((g.plane, _own_plane(vhosts[g.plane], resolver)) for g in gateways.values() if g.plane)
    chains = https_listeners.chains(gateways.values(), world.secret, owners)
    for plane, found in chains.items():
        if plane in planes:
            planes[plane] = dataclasses.replace(planes[plane], server_names=tuple(c.server_name for c in found))
    return IR(
        planes=planes,
        https_chains=chains,
        class_status=class_status_of,
        gateway_status={key: served.status() for key, served in gateways.items()},
        route_parents=route_parents,
        hostnames=[
            Hostname(name, grpc, tunnel, tuple(sorted(routes)), dns[0])
            for name, (grpc, tunnel, routes, dns) in sorted(published.items())
        ],
        classes_in_use={gateway["spec"]["gatewayClassName"] for gateway in (g.gateway for g in gateways.values())},
        policy_ancestors=tls.statuses(ancestors, controller_of),
        listener_set_status={key: ls.status() for key, ls in listener_sets.items()},
    )


def _own_plane(vhosts: Mapping[str, list[RouteIR]], resolver: Resolver) -> PlaneIR:
    """A Gateway's own plane: its routes, and the clusters resolved (the xDS stage keeps those they name)."""
    clusters, endpoints = resolver.resources(weighted_in(r for routes in vhosts.values() for r in routes))
    return PlaneIR(vhosts, clusters, endpoints, own=True)


def _plane_tunnel(world: World, plane: Plane) -> TunnelState:
    found = world.tunnel(*plane.tunnel_key)
    if found is not None:
        return found
    if plane.token is not None:
        return TunnelState(
            False,
            f"the Tunnel {plane.namespace}/{plane.name} of the Gateway's own data plane is not made yet: it adopts the"
            f" tunnel of the connector token in Secret {plane.namespace}/{plane.token[0]} (the Gateway's"
            " TunnelNotAdopted events say what keeps it)",
        )
    return TunnelState(
        False, f"the Tunnel {plane.namespace}/{plane.name} of the Gateway's own data plane is being made"
    )
