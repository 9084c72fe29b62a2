"""The in-memory store: one :class:`Table` per object type, plus the API tokens.

Objects are kept as the JSON objects the API returns, so a route renders them by copying. Child tables (a zone's DNS
records, an account's zones) index rows by their parent, which makes scoped lists cheap and deletes cascade.

Everything runs on the event loop and no route awaits between reading and writing the store, so each request sees
and leaves a consistent state without locks.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from app.emulator.permissions import Token

Obj = dict[str, Any]


class Table:
    """Objects of one type keyed by ID, optionally each under a parent in another table."""

    def __init__(self, kind: str, parent: Table | None = None) -> None:
        self.kind = kind
        self.parent = parent
        self.children: list[Table] = []
        self._rows: dict[str, Obj] = {}
        self._by_parent: dict[str, dict[str, Obj]] = {}
        self._parent_of: dict[str, str] = {}
        if parent is not None:
            parent.children.append(self)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, object_id: object) -> bool:
        return object_id in self._rows

    def __iter__(self) -> Iterator[Obj]:
        return iter(list(self._rows.values()))

    def get(self, object_id: str) -> Obj | None:
        return self._rows.get(object_id)

    def parent_id(self, object_id: str) -> str | None:
        return self._parent_of.get(object_id)

    def add(self, obj: Obj, parent_id: str | None = None) -> Obj:
        """Insert or replace ``obj`` (keyed by its ``id``); a child row needs its parent's ID."""
        if (self.parent is None) != (parent_id is None):
            raise ValueError(f"{self.kind}: parent ID {'required' if self.parent else 'not expected'}")
        object_id = obj["id"]
        old_parent = self._parent_of.get(object_id)
        if old_parent is not None and old_parent != parent_id:
            self._by_parent[old_parent].pop(object_id, None)
        self._rows[object_id] = obj
        if parent_id is not None:
            self._by_parent.setdefault(parent_id, {})[object_id] = obj
            self._parent_of[object_id] = parent_id
        return obj

    def remove(self, object_id: str, *, cascade: bool = True) -> Obj | None:
        obj = self._rows.pop(object_id, None)
        if obj is None:
            return None
        parent_id = self._parent_of.pop(object_id, None)
        if parent_id is not None:
            siblings = self._by_parent.get(parent_id, {})
            siblings.pop(object_id, None)
            if not siblings:
                self._by_parent.pop(parent_id, None)
        if cascade:
            for child in self.children:
                child.remove_under(object_id)
        return obj

    def under(self, parent_id: str) -> list[Obj]:
        return list(self._by_parent.get(parent_id, {}).values())

    def count_under(self, parent_id: str) -> int:
        return len(self._by_parent.get(parent_id, {}))

    def remove_under(self, parent_id: str) -> None:
        for object_id in list(self._by_parent.get(parent_id, {})):
            self.remove(object_id)

    def copy_under(self, parent_id: str) -> dict[str, Obj]:
        """A deep copy of one parent's rows, for all-or-nothing batches: change the copy, then :meth:`replace_under`."""
        return copy.deepcopy(self._by_parent.get(parent_id, {}))

    def replace_under(self, parent_id: str, rows: dict[str, Obj]) -> None:
        for object_id in set(self._by_parent.get(parent_id, {})) - set(rows):
            self.remove(object_id)
        for obj in rows.values():
            self.add(obj, parent_id)

    def clear(self) -> None:
        self._rows.clear()
        self._by_parent.clear()
        self._parent_of.clear()


class Store:
    def __init__(self) -> None:
        self.accounts = Table("accounts")
        self.zones = Table("zones", parent=self.accounts)
        self.dns_records = Table("dns_records", parent=self.zones)
        self.tables = [self.accounts, self.zones, self.dns_records]
        self._tokens: dict[str, Token] = {}
        self._token_ids: dict[str, str] = {}  # secret value -> token ID

    def clear(self) -> None:
        for table in self.tables:
            table.clear()
        self._tokens.clear()
        self._token_ids.clear()

    # Tokens

    def add_token(self, token: Token) -> Token:
        old = self._tokens.get(token.id)
        if old is not None:
            self._token_ids.pop(old.value, None)
        owner = self._token_ids.get(token.value)
        if owner is not None and owner != token.id:
            raise ValueError(f"token {token.name!r}: another token already has this value")
        self._tokens[token.id] = token
        self._token_ids[token.value] = token.id
        return token

    def remove_token(self, token_id: str) -> None:
        token = self._tokens.pop(token_id, None)
        if token is not None:
            self._token_ids.pop(token.value, None)

    def token(self, token_id: str) -> Token | None:
        return self._tokens.get(token_id)

    def token_by_value(self, value: str) -> Token | None:
        token_id = self._token_ids.get(value)
        return None if token_id is None else self._tokens.get(token_id)

    def tokens(self) -> list[Token]:
        return list(self._tokens.values())
