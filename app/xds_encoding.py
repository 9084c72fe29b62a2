"""Envoy's resources as the xDS listener (`app.xds`) pushes them: the snapshot's JSON encoded into protobuf.

Encoding is most of the listener's cost, so each resource (each virtual host) is encoded once per content and shared
by every stream; versions are content hashes, so two leaders that compute the same resources hold the same versions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.filters.http.cors.v3 import cors_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2
from envoy.extensions.http.early_header_mutation.header_mutation.v3 import header_mutation_pb2
from envoy.extensions.network.dns_resolver.cares.v3 import cares_dns_resolver_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2, json_format
from google.protobuf.message import Message

from reconcilers.gateway import envoy

# Every type a resource's typed_config may name must be in the descriptor pool for the JSON to encode.
_NESTED = (
    cors_pb2,
    router_pb2,
    tls_inspector_pb2,
    http_connection_manager_pb2,
    header_mutation_pb2,
    tls_pb2,
    http_protocol_options_pb2,
    cares_dns_resolver_pb2,
)
_MESSAGES: Final[dict[str, type[Message]]] = {
    "clusters": cluster_pb2.Cluster,
    "endpoints": endpoint_pb2.ClusterLoadAssignment,
    "listeners": listener_pb2.Listener,
    "routes": route_pb2.RouteConfiguration,
    "virtual_hosts": route_components_pb2.VirtualHost,
}
VIRTUAL_HOST: Final = "type.googleapis.com/envoy.config.route.v3.VirtualHost"
WIRE_TYPES: Final = {**envoy.TYPES, "virtual_hosts": VIRTUAL_HOST}
"""What goes on the wire, in push order: each RouteConfiguration of the snapshot without its virtual hosts (it names
VHDS as their source), then each virtual host as a resource of its own, named `<route configuration>/<domain>`,
so that a change to one route sends that hostname's virtual host and nothing else."""
Document = Mapping[str, object]
"""One resource as the snapshot holds it: the JSON form of its message."""
Resources = Mapping[str, Mapping[str, Document]]
"""A snapshot's resources: by type key, then by name."""
VHDS: Final = {"config_source": {"ads": {}, "resource_api_version": "V3"}}


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _parse(resource: Document, message: Message) -> bytes:
    body = {k: v for k, v in resource.items() if k != "@type"}
    json_format.ParseDict(body, message)
    return bytes(message.SerializeToString(deterministic=True))


@dataclass(frozen=True)
class Encoded:
    """One resource as it is pushed: its Resource message (name, version, the packed message) and its size."""

    name: str
    version: str
    message: discovery_pb2.Resource
    size: int


@dataclass
class TypeView:
    """The resources of one type in a snapshot, encoded."""

    resources: dict[str, Encoded] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    """Names whose JSON does not encode: left as they are in Envoy (never sent, never removed)."""
    version: str = ""


@dataclass
class View:
    """A snapshot, encoded (`generation` is the store's)."""

    generation: int
    types: dict[str, TypeView]


def wire_resources(resources: Resources) -> dict[str, Mapping[str, Document]]:
    """The snapshot's resources as they are served: each RouteConfiguration's virtual hosts taken out of it (it
    gets VHDS instead) and served as resources of their own, each named `<route configuration>/<its name>` (Envoy
    keeps a VHDS virtual host by its `name`, and removes one by its resource name: the two must be the same)."""
    out = {key: value for key, value in resources.items() if key != "routes"}
    routes: dict[str, Document] = {}
    hosts: dict[str, Document] = {}
    for name, configuration in resources.get("routes", {}).items():
        routes[name] = {**{k: v for k, v in configuration.items() if k != "virtual_hosts"}, "vhds": VHDS}
        virtual_hosts = configuration.get("virtual_hosts") or []
        for host in virtual_hosts if isinstance(virtual_hosts, list) else []:
            full = f"{name}/{host.get('name')}"
            hosts[full] = {**host, "name": full}
    out["routes"], out["virtual_hosts"] = routes, hosts
    return out


class Encoder:
    """Encodes snapshots, each resource once per content: a resource (a virtual host among them) equal to the one
    encoded before is not encoded again."""

    def __init__(self) -> None:
        self._resources: dict[tuple[str, str], tuple[Document, Encoded]] = {}
        self.failures: list[tuple[str, str, str]] = []
        """(type key, name, error) of the resources of the last `encode` that did not encode."""

    def encode(self, generation: int, resources: Resources) -> View:
        kept: dict[tuple[str, str], tuple[Document, Encoded]] = {}
        self.failures = []
        types: dict[str, TypeView] = {}
        wire = wire_resources(resources)
        for key in WIRE_TYPES:
            view = TypeView()
            for name, resource in wire.get(key, {}).items():
                cached = self._resources.get((key, name))
                if cached is not None and (cached[0] is resource or cached[0] == resource):
                    encoded = cached[1]
                else:
                    try:
                        encoded = self._encode(key, name, resource)
                    except (json_format.ParseError, TypeError, ValueError) as exc:
                        view.failed.add(name)
                        self.failures.append((key, name, str(exc)))
                        continue
                kept[(key, name)] = (resource, encoded)
                view.resources[name] = encoded
            listing = "".join(f"{n}\0{e.version}\n" for n, e in sorted(view.resources.items()))
            view.version = _hash(listing.encode())
            types[key] = view
        self._resources = kept
        return View(generation, types)

    def _encode(self, key: str, name: str, resource: Document) -> Encoded:
        value = _parse(resource, _MESSAGES[key]())
        version = _hash(value)
        message = discovery_pb2.Resource(
            name=name, version=version, resource=any_pb2.Any(type_url=WIRE_TYPES[key], value=value)
        )
        return Encoded(name, version, message, message.ByteSize())
