"""The state format: what ``--state FILE`` and ``POST /__emulator/state`` take and ``GET /__emulator/state`` returns.

One JSON object with one optional list per object type (:class:`~app.emulator.collection.Kind`, by its ``name``) and
``tokens``; IDs and token values are generated when left out::

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
      "dns_records": [{"zone": "example.com", "type": "TXT", "name": "@", "content": "hello"}],
      "kv_namespaces": [{"title": "cache"}]
    }

Tokens follow :mod:`app.emulator.permissions`. An entry of any other type is what the API's create call takes (each
kind documents its extras), placed under its parent in one of two ways: nested in the parent's entry under the child
type's name, or at the top level with the parent named by the kind's ``parent_field`` (``account_id``, ``zone_id``,
...; an account-scoped object may leave it out when there is exactly one account). Entries may fix their ID and their
timestamps. Seeded objects obey the same rules as the API (uniqueness, quotas, validation). An object whose ID already
exists replaces it. Seeding is all-or-nothing: an invalid state changes nothing. A dump seeds back to the same objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from app.emulator.envelope import JSON, CloudflareError, pointer_of
from app.emulator.ids import is_id, is_token_value, new_id, new_token_value
from app.emulator.permissions import Grant, Token
from app.emulator.state import Obj, Store

if TYPE_CHECKING:
    from app.emulator.collection import Kind


class SeedError(ValueError):
    """The state cannot be applied; the message names the offending entry."""


class TokenSeed(BaseModel):
    model_config = ConfigDict(extra="forbid")

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


DEFAULT_STATE: JSON = {
    "accounts": [{"name": "Emulated Account"}],
    "tokens": [{"name": "emulator", "permissions": ["*"]}],
}


def _token(store: Store, raw: JsonValue, where: str) -> JSON:
    try:
        seed = TokenSeed.model_validate(raw)
    except ValidationError as exc:
        raise SeedError(f"{where}: {pointer_of(exc)[0]}") from None
    if seed.id is not None and not is_id(seed.id):
        raise SeedError(f"{where}: id {seed.id!r} is not 32 lowercase hex characters")
    try:
        grants = tuple(Grant.parse(text) for text in seed.permissions)
    except ValueError as exc:
        raise SeedError(f"{where}: {exc}") from None
    if seed.owner == "account" and (seed.account_id is None or seed.account_id not in store.accounts):
        raise SeedError(f"{where}: an account-owned token needs the account_id of a known account")
    if seed.owner == "user" and seed.account_id is not None:
        raise SeedError(f"{where}: account_id is for account-owned tokens (owner: account)")
    value = seed.value or new_token_value()
    if not is_token_value(value):
        raise SeedError(f"{where}: token values use letters, digits, '-' and '_' only")
    token = Token(
        id=seed.id or new_id(),
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
        store.add_token(token)
    except ValueError as exc:
        raise SeedError(f"{where}: {exc}") from None
    return {"id": token.id, "name": token.name, "value": token.value, "owner": token.owner}


class _Seeder:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.created: dict[str, list[JSON]] = {"tokens": [], **{kind.name: [] for kind in store.kinds}}
        self._children = {
            kind.name: [child for child in store.kinds if child.parent == kind.name] for kind in store.kinds
        }

    def entry(self, kind: Kind, raw: JsonValue, where: str, parent: tuple[Obj, str] | None = None) -> None:
        if not isinstance(raw, dict):
            raise SeedError(f"{where}: an entry is a JSON object")
        entry = dict(raw)
        nested = {child.name: entry.pop(child.name) for child in self._children[kind.name] if child.name in entry}
        if kind.parent is not None and parent is None:
            parent = kind.find_parent(self.store, entry, where)
        parent_obj, parent_key = parent if parent is not None else (None, None)
        try:
            obj = kind.seed(self.store, entry, parent_obj, parent_key, where)
        except CloudflareError as exc:
            reasons = "; ".join(
                e["message"] + "".join(f" ({c['message']})" for c in e.get("error_chain", [])) for e in exc.errors
            )
            raise SeedError(f"{where}: {reasons}") from None
        self.created[kind.name].append(kind.summary(obj, parent_key))
        key = kind.key_of(obj, parent_key)
        for child_name, items in nested.items():
            child = self.store.kind(child_name)
            if not isinstance(items, list):
                raise SeedError(f"{where}.{child_name}: a list is expected")
            for index, item in enumerate(items):
                self.entry(child, item, f"{where}.{child_name}[{index}]", (obj, key))


def _apply(store: Store, raw: Mapping[str, JsonValue]) -> dict[str, list[JSON]]:
    known = {"tokens", *(kind.name for kind in store.kinds)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise SeedError(f"invalid state: unknown section {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    sections: dict[str, list[JsonValue]] = {}
    for section, items in raw.items():
        if not isinstance(items, list):
            raise SeedError(f"invalid state: {section} is a list")
        sections[section] = items
    seeder = _Seeder(store)
    # Accounts first: tokens may belong to one; then every kind, parents before children.
    ordered: list[tuple[str, Kind | None]] = [("accounts", store.kind("accounts")), ("tokens", None)]
    ordered += [(kind.name, kind) for kind in store.kinds if kind.name != "accounts"]
    for section, kind in ordered:
        for index, item in enumerate(sections.get(section, [])):
            where = f"{section}[{index}]"
            if kind is None:
                seeder.created["tokens"].append(_token(store, item, where))
            else:
                seeder.entry(kind, item, where)
    return seeder.created


def apply_seed(store: Store, raw: Mapping[str, JsonValue]) -> dict[str, list[JSON]]:
    """Add (or replace by ID) the objects of ``raw``; on any error restore the previous state and raise SeedError."""
    before = dump_state(store)
    try:
        return _apply(store, raw)
    except SeedError:
        store.clear()
        _apply(store, before)
        raise


def dump_state(store: Store) -> JSON:
    """The whole store in the state format; seeding it into an empty store rebuilds the same objects."""
    tokens: list[JsonValue] = []
    for token in store.tokens():
        described = token.describe()
        if token.owner == "account":
            described.pop("accounts")
        tokens.append(described)
    state: JSON = {"tokens": tokens}
    for kind in store.kinds:
        table = kind.table(store)
        state[kind.name] = [kind.dump(store, obj, table.parent_id(key)) for key, obj in table.items()]
    return state
