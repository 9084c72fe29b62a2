"""Warnings on admission: what is allowed but will not work as the user probably expects.

A TunnelConfiguration's hostname that no Zone of the tunnel's account contains and no DNSRecord names cannot receive
traffic: the object is allowed (the record may come next) and the API server shows the warning to the client
(`kubectl apply` prints it). The webhook reads the cluster's objects through `ListObjects`, the controller's caches
when this replica leads and a bounded read of the API server otherwise; if they cannot be read in time, no warning is
given, and the reconciler reports the same in status.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from pydantic import JsonValue

from app.api import ResourceClass
from app.api.tunnel import TunnelConfiguration, uncovered_hostnames

log = logging.getLogger(__name__)

ListObjects = Callable[[str, str | None], Awaitable[list[Mapping[str, JsonValue]]]]
"""The objects of a kflare kind, in a namespace (None: all namespaces): `Cluster.list`."""

ADVICE_TIMEOUT: Final = 2.0
"""Seconds the warnings may take; the API server waits at most 30 s for the whole review (10 s by default)."""


def _mapping(value: object) -> Mapping[str, JsonValue]:
    return value if isinstance(value, Mapping) else {}


def _spec(obj: Mapping[str, JsonValue]) -> Mapping[str, JsonValue]:
    return _mapping(obj.get("spec"))


async def _tunnel_warnings(obj: Mapping[str, object], namespace: str, objects: ListObjects) -> list[str]:
    try:
        config = TunnelConfiguration.model_validate(obj)
    except ValueError:
        return []
    tunnels = await objects("Tunnel", namespace)
    tunnel = next((t for t in tunnels if _mapping(t.get("metadata")).get("name") == config.spec.tunnel_ref.name), None)
    if tunnel is None:
        return []  # its account is unknown until it exists
    account = _mapping(_spec(tunnel).get("accountRef")).get("name")
    zones = [
        str(_spec(z)["name"])
        for z in await objects("Zone", None)
        if _mapping(_spec(z).get("accountRef")).get("name") == account and _spec(z).get("name")
    ]
    records = [str(_spec(r)["name"]) for r in await objects("DNSRecord", namespace) if _spec(r).get("name")]
    return [
        f"spec.ingress: no DNSRecord or Zone of account {account} covers {host}: requests for it cannot reach the "
        "tunnel until a DNSRecord (with tunnelRef) points it there"
        for host in uncovered_hostnames(config.spec.hostnames(), zones, records)
    ]


async def warnings_for(
    model: ResourceClass, obj: object, namespace: str, objects: ListObjects | None
) -> tuple[str, ...]:
    """The warnings about an object the webhook allows (none when they cannot be worked out in time)."""
    if objects is None or model is not TunnelConfiguration or not isinstance(obj, Mapping):
        return ()
    try:
        async with asyncio.timeout(ADVICE_TIMEOUT):
            return tuple(await _tunnel_warnings(obj, namespace, objects))
    except Exception as exc:  # advice is a courtesy: never fail or delay an admission for it
        log.info("no admission warnings for %s %s: %r", model.info.kind, namespace, exc)
        return ()
