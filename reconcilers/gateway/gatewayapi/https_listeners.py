"""The certificates a data plane serves clients that reach it directly (in the cluster, through the plane's Service)
rather than through Cloudflare: each HTTPS listener's own, chosen by SNI.

Visitors coming through the tunnel get the zone's certificate at Cloudflare's edge; a client connecting to the data
plane's Service gets the certificate of the Gateway listener whose hostname its SNI names (a listener without a
hostname gives the default certificate). One chain per distinct server name of a plane: Envoy refuses a listener
whose chains match the same name twice, so the oldest Gateway (then namespace/name, then listener order) keeps a
name claimed twice.

The chains are a function of the Gateways and their certificate Secrets only: a route's change leaves the listener as
it is (Envoy would drain its connections on a listener change). The xDS stage makes the listener
(`reconcilers.gateway.xds.https_listeners`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Sequence

from reconcilers.gateway import shapes
from reconcilers.gateway.gatewayapi.status import ServedGateway
from reconcilers.gateway.ir import Chain
from reconcilers.gateway.owners import Owners
from reconcilers.gateway.shapes import Gateway, ListenerSet, Secret


def chains(
    gateways: Iterable[ServedGateway], secret: Callable[[str, str], Secret | None], owners: Owners
) -> dict[str, tuple[Chain, ...]]:
    """Per data plane ("" the shared one, else a Gateway's own plane's xDS cluster), the chains of its Gateways' valid
    HTTPS listeners terminating TLS, one per server name. A listener is valid only once its certificate resolves
    (`status.listener`), so every one here has a certificate to serve. A listener's hostname its namespace may not
    publish (`owners`) gets no chain: another team's name would be served this certificate, checked against these
    CAs, and the name's requests on the default chain refused as misdirected; nor does a listener without hostname
    whose namespace may not publish every name (`*`)."""
    taken: dict[str, dict[str | None, Chain]] = {}
    for served in sorted(gateways, key=lambda g: shapes.age_key(g.gateway)):
        for listener in served.valid_listeners:
            tls = listener.spec.get("tls") or {}
            if listener.spec["protocol"] != "HTTPS" or tls.get("mode", "Terminate") != "Terminate":
                continue
            plane = taken.setdefault(served.plane, {})
            if listener.hostname in plane:
                continue
            owner = listener.owner  # the Gateway or the ListenerSet declaring it
            # A listener without hostname is the plane's default chain, every name's: only a namespace that may
            # publish every name (no policy holds it back) may have its certificate shown for the others' names.
            if owners.refusal(shapes.ns(owner), listener.hostname or "*"):
                continue
            pem = _certificate(owner, tls.get("certificateRefs") or [], secret)
            if pem is not None:
                where = f"{shapes.ns(owner)}/{shapes.name(owner)}/{listener.name}"
                plane[listener.hostname] = Chain(listener.hostname, *pem, where, listener.frontend.validation)
    return {
        plane: tuple(sorted(found.values(), key=lambda c: (c.server_name is None, c.server_name or "")))
        for plane, found in taken.items()
        if found
    }


def _certificate(
    gateway: Gateway | ListenerSet,
    refs: Sequence[shapes.SecretObjectReference],
    secret: Callable[[str, str], Secret | None],
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
