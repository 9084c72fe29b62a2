"""The data plane's TLS listener for clients that reach it directly (in the cluster, through the plane's Service)
rather than through Cloudflare: it serves each HTTPS listener's own certificate, chosen by SNI.

Visitors coming through the tunnel get the zone's certificate at Cloudflare's edge; a client connecting to the data
plane's Service gets the certificate of the Gateway listener whose hostname its SNI names (a listener without a
hostname gives the default certificate). One filter chain per distinct server name of a plane: Envoy refuses a
listener whose chains match the same name twice, so the oldest Gateway (then namespace/name, then listener order)
keeps a name claimed twice.

The chains are a function of the Gateways and their certificate Secrets only: a route's change leaves the listener as
it is (Envoy would drain its connections on a listener change).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from reconcilers.gateway import envoy, shapes
from reconcilers.gateway.shapes import JSON, Gateway, Secret
from reconcilers.gateway.status import ServedGateway

GATEWAY_HTTPS = "kflare-gateway-https"
TLS_INSPECTOR = "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"


@dataclass(frozen=True)
class Chain:
    """One certificate the listener serves, for the clients whose SNI is `server_name` (None: any other client)."""

    server_name: str | None
    certificate: str
    """PEM, as the Secret's tls.crt holds it."""
    key: str
    """PEM of the private key: it goes into the xDS stream (authenticated, over TLS) and nowhere else."""
    gateway: str
    """`namespace/name/listener` it is the certificate of (what a status or a test can tell it by)."""

    def __repr__(self) -> str:  # the key is never printed, whatever prints a chain
        return f"Chain({self.server_name!r}, {self.gateway})"


def chains(
    gateways: Iterable[ServedGateway], secret: Callable[[str, str], Secret | None]
) -> dict[str, tuple[Chain, ...]]:
    """Per data plane ("" the shared one, else a Gateway's own plane's xDS cluster), the chains of its Gateways' valid
    HTTPS listeners terminating TLS, one per server name. A listener is valid only once its certificate resolves
    (`status.listener`), so every one here has a certificate to serve."""
    taken: dict[str, dict[str | None, Chain]] = {}
    for served in sorted(gateways, key=lambda g: shapes.age_key(g.gateway)):
        for listener in served.valid_listeners:
            tls = listener.spec.get("tls") or {}
            if listener.spec["protocol"] != "HTTPS" or tls.get("mode", "Terminate") != "Terminate":
                continue
            plane = taken.setdefault(served.plane, {})
            if listener.hostname in plane:
                continue
            pem = _certificate(served.gateway, tls.get("certificateRefs") or [], secret)
            if pem is not None:
                where = f"{shapes.ns(served.gateway)}/{shapes.name(served.gateway)}/{listener.name}"
                plane[listener.hostname] = Chain(listener.hostname, *pem, where)
    return {
        plane: tuple(sorted(found.values(), key=lambda c: (c.server_name is None, c.server_name or "")))
        for plane, found in taken.items()
        if found
    }


def _certificate(
    gateway: Gateway, refs: Sequence[shapes.SecretObjectReference], secret: Callable[[str, str], Secret | None]
) -> tuple[str, str] | None:
    """The PEM certificate and key of a listener's first certificateRef: Gateway API's core support is one reference,
    and Envoy would refuse two certificates of the same key type in one chain."""
    if not refs:
        return None
    ref = refs[0]
    found = secret(ref.get("namespace") or shapes.ns(gateway), ref["name"])
    data = found.get("data") or {} if found is not None else {}
    try:
        return base64.b64decode(data["tls.crt"]).decode(), base64.b64decode(data["tls.key"]).decode()
    except (KeyError, binascii.Error, UnicodeDecodeError, TypeError):
        return None


def listeners(address: str, port: int | None, found: Sequence[Chain]) -> list[JSON]:
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


def _filter_chain(chain: Chain) -> JSON:
    tls = {
        "@type": envoy.DOWNSTREAM_TLS_CONTEXT,
        "common_tls_context": {
            "alpn_protocols": ["h2", "http/1.1"],
            "tls_certificates": [
                {"certificate_chain": {"inline_string": chain.certificate}, "private_key": {"inline_string": chain.key}}
            ],
        },
    }
    out: JSON = {
        "name": f"sni:{chain.server_name}" if chain.server_name else "default",
        "filters": [envoy.connection_manager("gateway_https", trusted_hops=0)],
        "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": tls},
    }
    if chain.server_name is not None:
        out["filter_chain_match"] = {"server_names": [chain.server_name]}
    return out
