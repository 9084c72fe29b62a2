"""The data plane's TLS listener for clients that reach it directly rather than through Cloudflare: one filter chain
per certificate the Gateway API stage chose (`reconcilers.gateway.gatewayapi.https_listeners`), matched by SNI."""

from __future__ import annotations

from collections.abc import Sequence

from reconcilers.gateway import envoy
from reconcilers.gateway.envoy import EnvoyJSON
from reconcilers.gateway.ir import Chain

GATEWAY_HTTPS = "kflare-gateway-https"
DEFAULT_CHAIN = "*"
TLS_INSPECTOR = "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"


def listeners(address: str, port: int | None, found: Sequence[Chain]) -> list[EnvoyJSON]:
    """The TLS listener of `found` on `port` (none without a chain or a port): the same routes as cloudflared's
    listeners, but no hop is trusted, so Envoy says the scheme (X-Forwarded-Proto `https`) and the client address
    from the connection itself, whatever the client sends."""
    if port is None or not found:
        return []
    return [
        {
            "@type": envoy.LISTENER,
            "name": GATEWAY_HTTPS,
            "address": {"socket_address": {"address": address, "port_value": port}},
            "listener_filters": [
                {"name": "envoy.filters.listener.tls_inspector", "typed_config": {"@type": TLS_INSPECTOR}}
            ],
            "filter_chains": [_filter_chain(chain) for chain in found],
        }
    ]


def _filter_chain(chain: Chain) -> EnvoyJSON:
    common: EnvoyJSON = {
        "alpn_protocols": ["h2", "http/1.1"],
        "tls_certificates": [
            {"certificate_chain": {"inline_string": chain.certificate}, "private_key": {"inline_string": chain.key}}
        ],
    }
    tls: EnvoyJSON = {"@type": envoy.DOWNSTREAM_TLS_CONTEXT, "common_tls_context": common}
    if chain.validation is not None:
        # The listener's client certificate validation: required, or (AllowInsecureFallback) asked for and let pass.
        trusted: EnvoyJSON = {"trusted_ca": {"inline_string": chain.validation.ca}}
        if not chain.validation.required:
            trusted["trust_chain_verification"] = "ACCEPT_UNTRUSTED"
        common["validation_context"] = trusted
        tls["require_client_certificate"] = chain.validation.required
    manager = envoy.connection_manager("gateway_https", trusted_hops=0, server_name=chain.server_name or DEFAULT_CHAIN)
    out: EnvoyJSON = {
        "name": f"sni:{chain.server_name}" if chain.server_name else "default",
        "filters": [manager],
        "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": tls},
    }
    if chain.server_name is not None:
        out["filter_chain_match"] = {"server_names": [chain.server_name]}
    return out


def owner(hostname: str, server_names: Sequence[str | None]) -> str:
    """The chain whose requests a virtual host's hostname belongs to: the most specific server name that matches it
    (the name itself, else the longest wildcard whose suffix it ends with), else the default chain."""
    named = [name for name in server_names if name is not None]
    if hostname in named:
        return hostname
    wildcards = [name for name in named if name.startswith("*.") and hostname.endswith(name[1:]) and hostname != "*"]
    return max(wildcards, key=len) if wildcards else DEFAULT_CHAIN


def misdirected(hostname: str, server_names: Sequence[str | None]) -> list[EnvoyJSON]:
    """The route answering 421 Misdirected Request to a request of another chain than the one `hostname` belongs to
    (a client that chose a certificate by SNI, then asked for a name another listener serves); none without chains
    (no request then carries a server name: only the TLS listener's do)."""
    if not server_names:
        return []
    mine = owner(hostname, server_names)
    return [
        {
            "match": {
                "prefix": "/",
                "headers": [
                    {"name": envoy.SERVER_NAME_HEADER, "present_match": True},
                    {"name": envoy.SERVER_NAME_HEADER, "string_match": {"exact": mine}, "invert_match": True},
                ],
            },
            "direct_response": {"status": 421, "body": {"inline_string": "misdirected request\n"}},
        }
    ]
