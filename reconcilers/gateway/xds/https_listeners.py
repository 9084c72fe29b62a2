"""The data plane's TLS listener for clients that reach it directly rather than through Cloudflare: one filter chain
per certificate the Gateway API stage chose (`reconcilers.gateway.gatewayapi.https_listeners`), matched by SNI."""

from __future__ import annotations

from collections.abc import Sequence

from reconcilers.gateway import envoy
from reconcilers.gateway.envoy import EnvoyJSON
from reconcilers.gateway.ir import Chain

GATEWAY_HTTPS = "kflare-gateway-https"
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
    out: EnvoyJSON = {
        "name": f"sni:{chain.server_name}" if chain.server_name else "default",
        "filters": [envoy.connection_manager("gateway_https", trusted_hops=0)],
        "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": tls},
    }
    if chain.server_name is not None:
        out["filter_chain_match"] = {"server_names": [chain.server_name]}
    return out
