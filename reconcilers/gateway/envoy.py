"""Envoy's side of the data plane: the resource types served over xDS, the listener every request enters by, and
the bootstrap an Envoy starts from (it names the kflare process as its xDS server and nothing else)."""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
from typing import Any, TypedDict

from pydantic import JsonValue

EnvoyJSON = dict[str, JsonValue]
"""An Envoy resource, or a piece of one, in the proto3 JSON mapping Envoy reads."""


# ---- the bootstrap, as far as kflare reads or extends it: the rest is EnvoyJSON --------------------------------------


class SocketAddress(TypedDict):
    address: str
    port_value: int


class Address(TypedDict):
    socket_address: SocketAddress


class Admin(TypedDict):
    address: Address


class HeaderValue(TypedDict):
    key: str
    value: str


class GrpcService(TypedDict, total=False):
    envoy_grpc: EnvoyJSON
    initial_metadata: list[HeaderValue]


class AdsConfig(TypedDict, total=False):
    api_type: str
    transport_api_version: str
    set_node_on_first_message_only: bool
    grpc_services: list[GrpcService]


class DynamicResources(TypedDict, total=False):
    ads_config: AdsConfig
    lds_config: EnvoyJSON
    cds_config: EnvoyJSON


class StaticResources(TypedDict, total=False):
    clusters: list[EnvoyJSON]
    listeners: list[EnvoyJSON]


class Bootstrap(TypedDict, total=False):
    node: EnvoyJSON
    admin: Admin
    dynamic_resources: DynamicResources
    static_resources: StaticResources


LISTENER = "type.googleapis.com/envoy.config.listener.v3.Listener"
ROUTE_CONFIGURATION = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
CLUSTER_LOAD_ASSIGNMENT = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
DOWNSTREAM_TLS_CONTEXT = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"
CORS = "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"
CORS_POLICY = "type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy"
CORS_FILTER = "envoy.filters.http.cors"
HTTP_PROTOCOL_OPTIONS = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
CARES_RESOLVER = "type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig"

TYPES = {
    "clusters": CLUSTER,
    "endpoints": CLUSTER_LOAD_ASSIGNMENT,
    "listeners": LISTENER,
    "routes": ROUTE_CONFIGURATION,
}
"""The key of each resource type served, in the order a change is pushed: a cluster before the endpoints and
routes that name it, a listener before the routes it asks for (make before break)."""

XDS_CLUSTER = "kflare-xds"
INGRESS = "kflare-ingress"
INGRESS_TLS = "kflare-ingress-tls"
TOKEN_HEADER = "authorization"
"""The gRPC metadata Envoy presents its xDS token in (`Bearer <token>`), as the initial metadata of the ADS
stream."""


PLANE_TOKEN_PREFIX = "kflare-plane."


def plane_token(master: str, plane: str) -> str:
    """The xDS credential of one Gateway's own data plane (`plane`: its node cluster): the plane's name and an HMAC of
    it under the installation's token. A plane's Secret holds this, never the installation's token, so whoever reads
    it can fetch that plane's configuration and no other's; rotating the installation's token rotates every plane's."""
    name = base64.urlsafe_b64encode(plane.encode()).decode().rstrip("=")
    return f"{PLANE_TOKEN_PREFIX}{name}.{_plane_mac(master, plane)}"


def plane_of_token(master: str, token: str) -> str | None:
    """The plane a `plane_token` is for, when it is one under `master`; None otherwise."""
    if not master or not token.startswith(PLANE_TOKEN_PREFIX):
        return None
    name, _, mac = token.removeprefix(PLANE_TOKEN_PREFIX).partition(".")
    try:
        plane = base64.urlsafe_b64decode(name + "=" * (-len(name) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    if not plane or not hmac.compare_digest(mac.encode(), _plane_mac(master, plane).encode()):
        return None
    return plane


def _plane_mac(master: str, plane: str) -> str:
    return hmac.new(master.encode(), f"kflare-xds-plane:{plane}".encode(), hashlib.sha256).hexdigest()


def with_token(bootstrap: Bootstrap, token: str) -> Bootstrap:
    """`bootstrap` (as the chart renders it) presenting `token` on its ADS stream instead of the one it holds."""
    out = copy.deepcopy(bootstrap)
    for service in out["dynamic_resources"]["ads_config"]["grpc_services"]:
        for entry in service.get("initial_metadata") or []:
            if entry.get("key") == TOKEN_HEADER:
                entry["value"] = f"Bearer {token}"
    return out


def config_source() -> EnvoyJSON:
    """Every resource comes over the one ADS stream the bootstrap opens."""
    return {"resource_api_version": "V3", "ads": {}}


SERVER_NAME_HEADER = "x-kflare-server-name"
"""The server name the TLS listener's chain was chosen for ("*": its default chain), which routes read to tell a
misdirected request (`xds.https_listeners.misdirected`): set before routing on every request of a chain, whatever the
client sent, removed on every other listener, and never sent on to a backend."""
HEADER_MUTATION = "type.googleapis.com/envoy.extensions.http.early_header_mutation.header_mutation.v3.HeaderMutation"


def connection_manager(stat_prefix: str, *, trusted_hops: int = 1, server_name: str | None = None) -> EnvoyJSON:
    """The HTTP connection manager of the data plane's listeners, routing by RDS. `trusted_hops`: 1 for those
    cloudflared sends requests to; 0 for the one clients reach directly, whose scheme and address Envoy then takes
    from the connection (what such a client sends in X-Forwarded-* is not believed). `server_name`: the TLS
    listener's chain's (SERVER_NAME_HEADER); None on the other listeners, which drop a client's claim of one."""
    said: EnvoyJSON = (
        {"remove": SERVER_NAME_HEADER}
        if server_name is None
        else {
            "append": {
                "header": {"key": SERVER_NAME_HEADER, "value": server_name},
                "append_action": "OVERWRITE_IF_EXISTS_OR_ADD",
            }
        }
    )
    hcm: EnvoyJSON = {
        "@type": HCM,
        "stat_prefix": stat_prefix,
        "codec_type": "AUTO",
        "rds": {"route_config_name": INGRESS, "config_source": config_source()},
        # Before routing: what the routes read of the listener (a header, as no route can match on SNI itself).
        "early_header_mutation_extensions": [
            {
                "name": "envoy.http.early_header_mutation.header_mutation",
                "typed_config": {"@type": HEADER_MUTATION, "mutations": [said]},
            }
        ],
        "http_filters": [
            # CORS, for the routes whose policy asks (typed_per_filter_config); the others pass through.
            {"name": CORS_FILTER, "typed_config": {"@type": CORS}},
            # suppress_envoy_headers: no x-envoy-* header is added towards backends or clients.
            {"name": "envoy.filters.http.router", "typed_config": {"@type": ROUTER, "suppress_envoy_headers": True}},
        ],
        # On cloudflared's listeners the one hop trusted is cloudflared in the same pod: it hands on the edge's
        # X-Forwarded-Proto (the visitor's scheme, which redirects and the HTTP/HTTPS listeners go by) and
        # X-Forwarded-For ending in the visitor. Trusting it makes the visitor the client address, which is never
        # internal (no address is): Envoy then strips the x-envoy-* control headers (timeouts, retries) a visitor
        # sends instead of obeying them.
        "use_remote_address": True,
        "xff_num_trusted_hops": trusted_hops,
        "internal_address_config": {"cidr_ranges": [{"address_prefix": "192.0.2.255", "prefix_len": 32}]},
        # WebSockets (Grafana Live, Jupyter, Argo CD...): cloudflared hands a visitor's upgrade on as an HTTP/1.1
        # `Upgrade: websocket` request, which Envoy refuses (403) unless the upgrade is allowed.
        "upgrade_configs": [{"upgrade_type": "websocket"}],
        "normalize_path": True,
        "merge_slashes": True,
        "http2_protocol_options": {},
    }
    return {"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}


def ingress_listener(address: str, port: int) -> EnvoyJSON:
    """The plaintext listener cloudflared sends every HTTP request to. It never changes with routes (those are in
    RDS), so a route change drains no connection."""
    return {
        "@type": LISTENER,
        "name": INGRESS,
        "address": {"socket_address": {"address": address, "port_value": port}},
        "filter_chains": [{"filters": [connection_manager("ingress")]}],
    }


def ingress_tls_listener(address: str, port: int, cert_file: str, key_file: str) -> EnvoyJSON:
    """The TLS listener cloudflared sends gRPC to: cloudflared has no cleartext HTTP/2 to an origin, and gRPC needs
    HTTP/2 (its status is in trailers, which HTTP/1.1 drops). Same routes as the plaintext listener; the certificate
    is the data plane's origin certificate, which cloudflared checks against its CA."""
    tls: EnvoyJSON = {
        "@type": DOWNSTREAM_TLS_CONTEXT,
        "common_tls_context": {
            "alpn_protocols": ["h2", "http/1.1"],
            "tls_certificates": [{"certificate_chain": {"filename": cert_file}, "private_key": {"filename": key_file}}],
        },
    }
    return {
        "@type": LISTENER,
        "name": INGRESS_TLS,
        "address": {"socket_address": {"address": address, "port_value": port}},
        "filter_chains": [
            {
                "filters": [connection_manager("ingress_tls")],
                "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": tls},
            }
        ],
    }


def eds_cluster(name: str, *, http2: bool) -> EnvoyJSON:
    cluster: EnvoyJSON = {
        "@type": CLUSTER,
        "name": name,
        "type": "EDS",
        "connect_timeout": "5s",
        "eds_cluster_config": {"service_name": name, "eds_config": config_source()},
    }
    return _speaking(cluster, http2=http2)


def dns_cluster(name: str, host: str, port: int, *, http2: bool) -> EnvoyJSON:
    """A cluster of the addresses a DNS name resolves to (an ExternalName Service), resolved again as DNS says.
    The name is looked up as it is written, without the pod's search domains: `other.team` would otherwise be
    completed into `other.team.svc.cluster.local`, another namespace's Service that the name does not show."""
    assignment = load_assignment(name, [(host, port)])
    del assignment["@type"]
    cluster: EnvoyJSON = {
        "@type": CLUSTER,
        "name": name,
        "type": "STRICT_DNS",
        "connect_timeout": "5s",
        "dns_lookup_family": "V4_PREFERRED",
        "respect_dns_ttl": True,
        "typed_dns_resolver_config": {
            "name": "envoy.network.dns_resolver.cares",
            "typed_config": {"@type": CARES_RESOLVER, "dns_resolver_options": {"no_default_search_domain": True}},
        },
        "load_assignment": assignment,
    }
    return _speaking(cluster, http2=http2)


def _speaking(cluster: EnvoyJSON, *, http2: bool) -> EnvoyJSON:
    """`cluster`, speaking HTTP/2 (h2c) to its endpoints when asked, else HTTP/1.1."""
    if http2:
        cluster["typed_extension_protocol_options"] = {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": HTTP_PROTOCOL_OPTIONS,
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        }
    return cluster


def load_assignment(name: str, addresses: list[tuple[str, int]]) -> EnvoyJSON:
    return {
        "@type": CLUSTER_LOAD_ASSIGNMENT,
        "cluster_name": name,
        "endpoints": [
            {
                "lb_endpoints": [
                    {"endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}}
                    for host, port in addresses
                ]
            }
        ]
        if addresses
        else [],
    }


def ads_config(token: str) -> AdsConfig:
    """The one delta ADS stream every resource comes over: to the kflare process (the `kflare-xds` cluster), with
    the token in the stream's initial metadata."""
    return {
        "api_type": "DELTA_GRPC",
        "transport_api_version": "V3",
        "set_node_on_first_message_only": True,
        "grpc_services": [
            {
                "envoy_grpc": {
                    "cluster_name": XDS_CLUSTER,
                    # A refused stream (a standby, a leader not synced yet) is tried again soon: the leader is one
                    # of the replicas behind the same Service.
                    "retry_policy": {"retry_back_off": {"base_interval": "0.25s", "max_interval": "4s"}},
                },
                "initial_metadata": [{"key": TOKEN_HEADER, "value": f"Bearer {token}"}],
            }
        ],
    }


def xds_cluster(host: str, port: int) -> EnvoyJSON:
    """The kflare process as Envoy reaches it: gRPC, so HTTP/2."""
    assignment = load_assignment(XDS_CLUSTER, [(host, port)])
    del assignment["@type"]
    return {
        "name": XDS_CLUSTER,
        "type": "STRICT_DNS",
        "dns_lookup_family": "V4_ONLY",
        "connect_timeout": "1s",
        "load_assignment": assignment,
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": HTTP_PROTOCOL_OPTIONS,
                # One stream per connection: a stream a standby refused is tried again on a new connection, which
                # the Service may send to another replica (on the same one it would reach the standby forever).
                "common_http_protocol_options": {"max_requests_per_connection": 1},
                "explicit_http_config": {
                    # Pings find a controller that vanished without closing the connection (a node lost), so that
                    # Envoy reconnects to the next leader instead of waiting on a dead stream.
                    "http2_protocol_options": {"connection_keepalive": {"interval": "15s", "timeout": "5s"}}
                },
            }
        },
    }


def bootstrap(
    *,
    node_id: str,
    xds_host: str,
    xds_port: int,
    token: str,
    admin_port: int,
    ca_file: str | None = None,
    server_name: str | None = None,
    client_cert: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """`bootstrap_config`, as the plain JSON object the processes and tools that start an Envoy write out and read
    back (their readers index into it freely)."""
    return dict(
        bootstrap_config(
            node_id=node_id,
            xds_host=xds_host,
            xds_port=xds_port,
            token=token,
            admin_port=admin_port,
            ca_file=ca_file,
            server_name=server_name,
            client_cert=client_cert,
        )
    )


def bootstrap_config(
    *,
    node_id: str,
    xds_host: str,
    xds_port: int,
    token: str,
    admin_port: int,
    ca_file: str | None = None,
    server_name: str | None = None,
    client_cert: tuple[str, str] | None = None,
) -> Bootstrap:
    """An Envoy bootstrap that takes listeners and clusters (then routes and endpoints) from kflare's delta ADS;
    over TLS, checked against `ca_file` for `server_name` (the xDS host by default), when a CA is given, presenting
    the `client_cert` (certificate file, key file) when the listener asks for one (--gateway-xds-client-ca-file)."""
    source = config_source()
    cluster = xds_cluster(xds_host, xds_port)
    out: Bootstrap = {
        "node": {"id": node_id, "cluster": "kflare-data-plane"},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}},
        "dynamic_resources": {"ads_config": ads_config(token), "lds_config": source, "cds_config": source},
        "static_resources": {"clusters": [cluster]},
    }
    if ca_file is not None:
        name = server_name or xds_host
        context: EnvoyJSON = {
            "validation_context": {
                "trusted_ca": {"filename": ca_file},
                "match_typed_subject_alt_names": [
                    {"san_type": "IP_ADDRESS" if _is_ip(name) else "DNS", "matcher": {"exact": name}}
                ],
            }
        }
        if client_cert is not None:
            context["tls_certificates"] = [
                {"certificate_chain": {"filename": client_cert[0]}, "private_key": {"filename": client_cert[1]}}
            ]
        cluster["transport_socket"] = {
            "name": "envoy.transport_sockets.tls",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                "sni": name,
                # HTTP/2 over TLS is agreed by ALPN: without it a gRPC server may take the connection for HTTP/1.1.
                "common_tls_context": {"alpn_protocols": ["h2"], **context},
            },
        }
    return out


def _is_ip(value: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
