"""A tunnel's ingress document (its remote configuration), as kflare compares and writes it: shared by the
TunnelConfiguration kind and the Gateway class, the two writers of the document.

Two documents are the same when their normal forms are (host names without case, empty `originRequest`s and false
switches left out, a top-level `originRequest` or `warp-routing` counted only when they say something), so an idle
reconcile writes nothing and Cloudflare's `version` stays put; when they differ, one PUT replaces the document.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import JsonValue

from app.api.tunnel import CATCH_ALL_404
from app.cloudflare.client import CloudflareClient
from app.cloudflare.errors import NotFound
from app.cloudflare.models import TunnelConfiguration

RESET: dict[str, JsonValue] = {"ingress": [{"service": CATCH_ALL_404}]}
"""What a tunnel is left with when nothing configures it (Cloudflare refuses an empty configuration)."""


def _prune(value: JsonValue) -> JsonValue:
    """`value` without what says nothing: None, false, empty objects."""
    if isinstance(value, dict):
        pruned = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v not in (None, False, {}, [])}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def _normal_rule(rule: JsonValue) -> dict[str, JsonValue]:
    if not isinstance(rule, dict):
        return {"invalid": rule}
    out: dict[str, JsonValue] = {}
    host = rule.get("hostname")
    if host not in (None, "", "*"):
        out["hostname"] = str(host).rstrip(".").lower()
    if rule.get("path") not in (None, ""):
        out["path"] = rule["path"]
    out["service"] = rule.get("service")
    origin = _prune(rule.get("originRequest"))
    if origin:
        out["originRequest"] = origin
    return out


def normalise(config: Mapping[str, JsonValue] | None) -> dict[str, JsonValue]:
    """A configuration as kflare compares it."""
    if not config:
        return {"ingress": []}
    ingress = config.get("ingress") or []
    rules = ingress if isinstance(ingress, list) else [ingress]  # not a list: one rule that is not valid
    out: dict[str, JsonValue] = {"ingress": [_normal_rule(rule) for rule in rules]}
    for key, value in config.items():
        if key == "ingress":
            continue
        if key == "warp-routing" and not (isinstance(value, dict) and value.get("enabled")):
            continue
        pruned = _prune(value)
        if pruned not in (None, False, {}, [], ""):
            out[key] = pruned
    return out


def same(a: Mapping[str, JsonValue] | None, b: Mapping[str, JsonValue] | None) -> bool:
    return normalise(a) == normalise(b)


def says_something(config: Mapping[str, JsonValue] | None) -> bool:
    """Whether a tunnel's configuration is more than nothing or the reset a deletion leaves."""
    normal = normalise(config)
    return normal != {"ingress": []} and normal != normalise(RESET)


async def read(client: CloudflareClient, account_id: str, tunnel_id: str) -> TunnelConfiguration | None:
    try:
        return await client.get_tunnel_configuration(account_id, tunnel_id)
    except NotFound:
        return None


async def put(
    client: CloudflareClient, account_id: str, tunnel_id: str, config: Mapping[str, JsonValue]
) -> TunnelConfiguration:
    return await client.put_tunnel_configuration(account_id, tunnel_id, config)


@dataclass
class KnownDocuments:
    """What Cloudflare holds for each tunnel, as last read or written, so that a writer fed by many resources reads
    a document once and then compares with what it knows: an idle reconcile costs no call. What is known is read
    again after `ttl` (someone may have edited the tunnel elsewhere) and forgotten on any failed write."""

    ttl: float = 600.0
    held: dict[tuple[str, str], tuple[float, dict[str, JsonValue]]] = field(default_factory=dict)

    async def holds(
        self, client: CloudflareClient, account_id: str, tunnel_id: str, config: Mapping[str, JsonValue]
    ) -> bool:
        """Whether Cloudflare holds `config` (one GET when what it holds is not known)."""
        key = (account_id, tunnel_id)
        now = time.monotonic()
        known = self.held.get(key)
        if known is None or now - known[0] > self.ttl:
            current = await read(client, account_id, tunnel_id)
            known = (now, normalise(current.config if current is not None else None))
            self.held[key] = known
        return known[1] == normalise(config)

    async def current(self, client: CloudflareClient, account_id: str, tunnel_id: str) -> dict[str, JsonValue]:
        """What Cloudflare holds, normalised (one GET when it is not known)."""
        await self.holds(client, account_id, tunnel_id, {})
        return dict(self.held[(account_id, tunnel_id)][1])

    async def sync(
        self, client: CloudflareClient, account_id: str, tunnel_id: str, config: Mapping[str, JsonValue]
    ) -> bool:
        """Make Cloudflare hold `config` (one GET when it is not known, one PUT when it differs); True when written."""
        if await self.holds(client, account_id, tunnel_id, config):
            return False
        key = (account_id, tunnel_id)
        self.held.pop(key, None)
        await put(client, account_id, tunnel_id, config)
        self.held[key] = (time.monotonic(), normalise(config))
        return True

    def forget(self, tunnel_id: str) -> None:
        """Read the tunnel's document again next time (another writer may have written it meanwhile)."""
        for key in [k for k in self.held if k[1] == tunnel_id]:
            del self.held[key]
