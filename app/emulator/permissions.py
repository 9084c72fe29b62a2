"""API tokens and the permission scheme the emulator enforces.

A token is owned by a user (``owner: "user"``, verified at ``/user/tokens/verify``) or by an account
(``owner: "account"`` with ``account_id``, verified at ``/accounts/{account_id}/tokens/verify``). What it may do is
three things together:

``permissions``
    a list of grants ``"<resource>:<level>"``; ``level`` is ``read`` or ``edit`` and ``edit`` implies ``read``.
    ``"*"`` (or ``"*:edit"``) grants everything, ``"*:read"`` reads everything. Resources today, with the Cloudflare
    permission each stands for:

    ===================  ==========================================
    ``account``          Account Settings (read / edit)
    ``zone``             Zone (read / edit): list, create, change, delete zones
    ``dns``              DNS (read / edit): DNS records of a zone
    ``workers_scripts``  Workers Scripts (read / edit)
    ``workers_routes``   Workers Routes (read / edit), on a zone
    ``workers_kv``       Workers KV Storage (read / edit)
    ``workers_r2``       Workers R2 Storage (read / edit)
    ``d1``               D1 (read / edit)
    ``rulesets``         the zone's rules of every phase: WAF, rate limiting, transforms, redirects, cache,
                         configuration and origin rules (read / edit)
    ``lists``            Account Filter Lists (read / edit)
    ``tunnels``          Cloudflare Tunnel (read / edit)
    ===================  ==========================================

    Object types register their resource with :func:`register_resource` (see each module of
    :mod:`app.emulator.kinds`); a grant naming an unknown resource is refused at seeding time so that typos surface.
``accounts``
    which accounts the token reaches: ``"*"`` (default: every account, as for a user who belongs to all of them) or a
    list of account IDs. An account-owned token reaches its own account only.
``zones``
    ``"*"`` (default) or a list of zone IDs or names the token is restricted to, like a token whose zone resources are
    "specific zones".

Example (a state-file ``tokens`` entry)::

    {"name": "dns-editor", "owner": "account", "account_id": "<32 hex>",
     "permissions": ["zone:read", "dns:edit"], "zones": ["example.com"]}

Rate-limit budgets follow Cloudflare: account-owned tokens each have their own; the user-owned tokens of one user
(field ``user``, default ``"default"``) share one.

A ``status`` of ``disabled``, an ``expires_on`` in the past or a ``not_before`` in the future makes the token unusable:
every call is refused as for an unknown token, but the verify endpoints still answer with the token's status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, cast

from pydantic import JsonValue

from app.emulator.ids import iso, utcnow

Level = Literal["read", "edit"]
Owner = Literal["user", "account"]
TokenStatus = Literal["active", "disabled", "expired"]

_RESOURCES: set[str] = set()


def register_resource(*names: str) -> None:
    _RESOURCES.update(names)


@dataclass(frozen=True)
class Grant:
    resource: str  # "*" for every resource
    level: Level

    @classmethod
    def parse(cls, text: str) -> Grant:
        resource, _, level = text.strip().partition(":")
        level = level or ("edit" if resource == "*" else "")
        if level not in ("read", "edit"):
            raise ValueError(f"permission {text!r}: expected '<resource>:read' or '<resource>:edit'")
        if resource != "*" and resource not in _RESOURCES:
            raise ValueError(f"permission {text!r}: unknown resource {resource!r}, known: {sorted(_RESOURCES)}")
        return cls(resource, cast(Level, level))

    def allows(self, resource: str, level: Level) -> bool:
        return self.resource in ("*", resource) and (self.level == "edit" or level == "read")

    def __str__(self) -> str:
        return f"{self.resource}:{self.level}"


@dataclass
class Token:
    id: str
    value: str
    name: str
    owner: Owner
    grants: tuple[Grant, ...]
    account_id: str | None = None  # the owning account of an account-owned token
    user: str = "default"
    accounts: tuple[str, ...] | None = None  # None: every account
    zones: tuple[str, ...] | None = None  # None: every zone; else zone IDs or names
    status: TokenStatus = "active"
    expires_on: datetime | None = None
    not_before: datetime | None = None
    issued_on: datetime = field(default_factory=utcnow)

    def current_status(self, now: datetime | None = None) -> TokenStatus:
        if self.status != "active":
            return self.status
        if self.expires_on is not None and self.expires_on <= (now or utcnow()):
            return "expired"
        return "active"

    def usable(self, now: datetime | None = None) -> bool:
        moment = now or utcnow()
        if self.current_status(moment) != "active":
            return False
        return self.not_before is None or self.not_before <= moment

    @property
    def bucket(self) -> str:
        """The rate-limit budget this token draws on."""
        return f"token:{self.id}" if self.owner == "account" else f"user:{self.user}"

    def can(self, resource: str, level: Level) -> bool:
        return any(grant.allows(resource, level) for grant in self.grants)

    def reaches_account(self, account_id: str) -> bool:
        if self.owner == "account":
            return account_id == self.account_id
        return self.accounts is None or account_id in self.accounts

    def reaches_zone(self, zone_id: str, zone_name: str, account_id: str) -> bool:
        if not self.reaches_account(account_id):
            return False
        return self.zones is None or zone_id in self.zones or zone_name in self.zones

    @property
    def zone_restricted(self) -> bool:
        return self.zones is not None

    def describe(self) -> dict[str, JsonValue]:
        """The token as the state file writes it, secret included: the admin API is for tests."""
        out: dict[str, JsonValue] = {
            "id": self.id,
            "value": self.value,
            "name": self.name,
            "owner": self.owner,
            "permissions": [str(grant) for grant in self.grants],
            "accounts": "*" if self.accounts is None else list(self.accounts),
            "zones": "*" if self.zones is None else list(self.zones),
            "status": self.status,
            "issued_on": iso(self.issued_on),
        }
        if self.owner == "account":
            out["account_id"] = self.account_id
            out["accounts"] = [self.account_id]
        else:
            out["user"] = self.user
        if self.expires_on is not None:
            out["expires_on"] = iso(self.expires_on)
        if self.not_before is not None:
            out["not_before"] = iso(self.not_before)
        return out
