"""The state format: what ``--state FILE`` and ``POST /__emulator/state`` take and ``GET /__emulator/state`` returns.

One JSON object with four optional lists; IDs (32 hex) and token values are generated when left out::

    {
      "accounts": [{"id": "<32 hex>", "name": "Acme", "type": "standard"}],
      "tokens": [
        {"name": "admin", "value": "admin-secret", "permissions": ["*"]},
        {"name": "dns", "owner": "account", "account_id": "<32 hex>",
         "permissions": ["zone:read", "dns:edit"], "zones": ["example.com"]}
      ],
      "zones": [
        {"name": "example.com", "account_id": "<32 hex>", "status": "active", "plan": "free",
         "dns_records": [{"type": "A", "name": "www", "content": "192.0.2.1", "proxied": true}]}
      ],
      "dns_records": [{"zone": "example.com", "type": "TXT", "name": "@", "content": "hello"}]
    }

Tokens follow :mod:`app.emulator.permissions`. A zone's ``account_id`` may be left out when there is exactly one
account. Seeded zones default to ``status: "active"`` (they stand for zones that already exist); ``plan`` is one of
``free``, ``pro``, ``business``, ``enterprise``. DNS records take the API's create body, nested under their zone or at
the top level with ``zone_id`` or ``zone`` (the zone's name), and may fix ``id``, ``created_on`` and ``modified_on``.
Seeded objects obey the same rules as the API (uniqueness, quotas, validation). An object whose ``id`` already exists
replaces it. Seeding is all-or-nothing: an invalid state changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from app.emulator.envelope import JSON, CloudflareError, pointer_of
from app.emulator.ids import is_id, is_token_value, new_id, new_token_value, parse_iso
from app.emulator.objects import dns, zones
from app.emulator.objects.accounts import new_account
from app.emulator.permissions import Grant, Token
from app.emulator.state import Obj, Store


class SeedError(ValueError):
    """The state cannot be applied; the message names the offending entry."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AccountSeed(_Strict):
    id: str | None = None
    name: str
    type: Literal["standard", "enterprise"] = "standard"
    created_on: str | None = None
    settings: dict[str, Any] | None = None


class TokenSeed(_Strict):
    id: str | None = None
    value: str | None = None
    name: str = "token"
    owner: Literal["user", "account"] = "user"
    account_id: str | None = None
    user: str = "default"
    permissions: list[str]
    accounts: list[str] | Literal["*"] = "*"
    zones: list[str] | Literal["*"] = "*"
    status: Literal["active", "disabled", "expired"] = "active"
    expires_on: datetime | None = None
    not_before: datetime | None = None
    issued_on: datetime | None = None


class RecordSeed(BaseModel):
    """A DNS record create body plus where it goes; other fields of a dumped record are ignored."""

    model_config = ConfigDict(extra="allow")

    zone_id: str | None = None
    zone: str | None = None
    id: str | None = None
    created_on: str | None = None
    modified_on: str | None = None


class ZoneSeed(_Strict):
    id: str | None = None
    name: str
    account_id: str | None = None
    status: zones.ZoneStatus = "active"
    plan: zones.PlanName = "free"
    type: zones.ZoneType = "full"
    paused: bool = False
    created_on: str | None = None
    modified_on: str | None = None
    activated_on: str | None = None
    dns_records: list[RecordSeed] = []


class StateSeed(_Strict):
    accounts: list[AccountSeed] = []
    tokens: list[TokenSeed] = []
    zones: list[ZoneSeed] = []
    dns_records: list[RecordSeed] = []


DEFAULT_STATE: JSON = {
    "accounts": [{"name": "Emulated Account"}],
    "tokens": [{"name": "emulator", "permissions": ["*"]}],
}


def parse_state(raw: Mapping[str, Any] | StateSeed) -> StateSeed:
    if isinstance(raw, StateSeed):
        return raw
    try:
        return StateSeed.model_validate(raw)
    except ValidationError as exc:
        message, _ = pointer_of(exc)
        raise SeedError(f"invalid state: {message}") from None


def _id(value: str | None, where: str) -> str:
    if value is None:
        return new_id()
    if not is_id(value):
        raise SeedError(f"{where}: id {value!r} is not 32 lowercase hex characters")
    return value


def _timestamp(value: str | None, where: str) -> str | None:
    if value is None:
        return None
    try:
        parse_iso(value)
    except ValueError:
        raise SeedError(f"{where}: {value!r} is not an RFC 3339 timestamp") from None
    return value


class _Seeder:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.created: JSON = {"accounts": [], "tokens": [], "zones": [], "dns_records": []}

    def account(self, seed: AccountSeed, where: str) -> None:
        account = new_account(
            seed.name,
            account_id=_id(seed.id, where),
            account_type=seed.type,
            created_on=_timestamp(seed.created_on, where),
            settings=seed.settings,
        )
        self.store.accounts.add(account)
        self.created["accounts"].append({"id": account["id"], "name": account["name"]})

    def token(self, seed: TokenSeed, where: str) -> None:
        try:
            grants = tuple(Grant.parse(text) for text in seed.permissions)
        except ValueError as exc:
            raise SeedError(f"{where}: {exc}") from None
        if seed.owner == "account" and (seed.account_id is None or seed.account_id not in self.store.accounts):
            raise SeedError(f"{where}: an account-owned token needs the account_id of a known account")
        if seed.owner == "user" and seed.account_id is not None:
            raise SeedError(f"{where}: account_id is for account-owned tokens (owner: account)")
        value = seed.value or new_token_value()
        if not is_token_value(value):
            raise SeedError(f"{where}: token values use letters, digits, '-' and '_' only")
        token = Token(
            id=_id(seed.id, where),
            value=value,
            name=seed.name,
            owner=seed.owner,
            grants=grants,
            account_id=seed.account_id,
            user=seed.user,
            accounts=None if seed.accounts == "*" else tuple(seed.accounts),
            zones=None if seed.zones == "*" else tuple(seed.zones),
            status=seed.status,
            expires_on=seed.expires_on,
            not_before=seed.not_before,
        )
        if seed.issued_on is not None:
            token.issued_on = seed.issued_on
        try:
            self.store.add_token(token)
        except ValueError as exc:
            raise SeedError(f"{where}: {exc}") from None
        self.created["tokens"].append({"id": token.id, "name": token.name, "value": token.value, "owner": token.owner})

    def zone(self, seed: ZoneSeed, where: str) -> None:
        account_id = seed.account_id
        if account_id is None:
            accounts = list(self.store.accounts)
            if len(accounts) != 1:
                raise SeedError(f"{where}: account_id is needed unless there is exactly one account")
            account_id = accounts[0]["id"]
        account = self.store.accounts.get(account_id)
        if account is None:
            raise SeedError(f"{where}: unknown account {account_id}")
        zone = zones.new_zone(
            account,
            seed.name,
            zone_id=_id(seed.id, where),
            zone_type=seed.type,
            status=seed.status,
            plan=seed.plan,
            paused=seed.paused,
            created_on=_timestamp(seed.created_on, where),
            activated_on=_timestamp(seed.activated_on, where),
        )
        if seed.modified_on is not None:
            zone["modified_on"] = _timestamp(seed.modified_on, where)
        same_name = zones.find_by_name(self.store.zones.under(account_id), zone["name"])
        if same_name is not None and same_name["id"] != zone["id"]:
            raise SeedError(f"{where}: zone {zone['name']} already exists in account {account_id}")
        self.store.zones.add(zone, account_id)
        self.created["zones"].append({"id": zone["id"], "name": zone["name"]})
        for index, record in enumerate(seed.dns_records):
            self.record(record, f"{where}.dns_records[{index}]", zone)

    def _zone_for(self, seed: RecordSeed, where: str) -> Obj:
        if seed.zone_id is not None:
            zone = self.store.zones.get(seed.zone_id)
            if zone is None:
                raise SeedError(f"{where}: unknown zone_id {seed.zone_id}")
            return zone
        if seed.zone is None:
            raise SeedError(f"{where}: a top-level DNS record needs zone_id or zone")
        matches = [z for z in self.store.zones if z["name"] == seed.zone.lower().rstrip(".")]
        if len(matches) != 1:
            raise SeedError(f"{where}: zone {seed.zone!r} names {len(matches)} zones; use zone_id")
        return matches[0]

    def record(self, seed: RecordSeed, where: str, zone: Obj | None = None) -> None:
        zone = zone or self._zone_for(seed, where)
        body_fields = {key: value for key, value in seed.model_dump(exclude_unset=True).items() if key != "zone"}
        body = dns.RecordInput.model_validate({**body_fields, "id": _id(seed.id, where)})
        previous = self.store.dns_records.get(body.id or "")
        if previous is not None and self.store.dns_records.parent_id(previous["id"]) != zone["id"]:
            raise SeedError(f"{where}: record {previous['id']} belongs to another zone")
        record = dns.build_record(zone, body)
        given = {**(seed.model_extra or {}), "created_on": seed.created_on, "modified_on": seed.modified_on}
        for stamp in ("created_on", "modified_on", "comment_modified_on", "tags_modified_on"):
            value = _timestamp(given.get(stamp), where)
            if value is not None and (stamp in ("created_on", "modified_on") or stamp in record):
                record[stamp] = value
        siblings = self.store.dns_records.under(zone["id"])
        dns.check_conflicts(siblings, record)
        dns.check_quota(zone, len(siblings) + (0 if previous else 1))
        self.store.dns_records.add(record, zone["id"])
        self.created["dns_records"].append(
            {"id": record["id"], "zone_id": zone["id"], "name": record["name"], "type": record["type"]}
        )


def _apply(store: Store, state: StateSeed) -> JSON:
    seeder = _Seeder(store)
    steps: list[tuple[str, list[Any], Any]] = [
        ("accounts", state.accounts, seeder.account),
        ("tokens", state.tokens, seeder.token),
        ("zones", state.zones, seeder.zone),
        ("dns_records", state.dns_records, seeder.record),
    ]
    for section, items, apply in steps:
        for index, item in enumerate(items):
            where = f"{section}[{index}]"
            try:
                apply(item, where)
            except CloudflareError as exc:
                reasons = "; ".join(
                    e["message"] + "".join(f" ({c['message']})" for c in e.get("error_chain", [])) for e in exc.errors
                )
                raise SeedError(f"{where}: {reasons}") from None
    return seeder.created


def apply_seed(store: Store, raw: Mapping[str, Any] | StateSeed) -> JSON:
    """Add (or replace by ID) the objects of ``raw``; on any error restore the previous state and raise SeedError."""
    state = parse_state(raw)
    before = dump_state(store)
    try:
        return _apply(store, state)
    except SeedError:
        store.clear()
        _apply(store, parse_state(before))
        raise


def dump_state(store: Store) -> JSON:
    """The whole store in the state format; seeding it into an empty store rebuilds the same objects."""
    zone_seeds = []
    for zone in store.zones:
        zone_seeds.append(
            {
                "id": zone["id"],
                "name": zone["name"],
                "account_id": zone["account"]["id"],
                "status": zone["status"],
                "plan": zones.plan_of(zone),
                "type": zone["type"],
                "paused": zone["paused"],
                "created_on": zone["created_on"],
                "modified_on": zone["modified_on"],
                "activated_on": zone["activated_on"],
            }
        )
    records = [{"zone_id": store.dns_records.parent_id(record["id"]), **record} for record in store.dns_records]
    tokens = []
    for token in store.tokens():
        described = token.describe()
        if token.owner == "account":
            described.pop("accounts")
        tokens.append(described)
    return {
        "accounts": [dict(account) for account in store.accounts],
        "tokens": tokens,
        "zones": zone_seeds,
        "dns_records": records,
    }
