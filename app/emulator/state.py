"""The in-memory store: one :class:`Table` per object type (:class:`~app.emulator.collection.Kind`), plus the tokens.

Objects are kept as the JSON objects the API returns, so a route renders them by copying. Child tables (a zone's DNS
records, an account's zones) index rows by their parent's key, which makes scoped lists cheap and deletes cascade.
A row's key is its ID, or for objects Cloudflare addresses by name (Workers, R2 buckets) the name under its parent.

Everything runs on the event loop and no route awaits between reading and writing the store, so each request sees
and leaves a consistent state without locks.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from app.emulator.permissions import Token

if TYPE_CHECKING:
    from app.emulator.collection import Kind

Obj = dict[str, Any]


class Table:
    """Objects of one type by key, optionally each under a parent in another table."""

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

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def __iter__(self) -> Iterator[Obj]:
        return iter(list(self._rows.values()))

    def items(self) -> list[tuple[str, Obj]]:
        return list(self._rows.items())

    def get(self, key: str) -> Obj | None:
        return self._rows.get(key)

    def parent_id(self, key: str) -> str | None:
        return self._parent_of.get(key)

    def add(self, obj: Obj, parent_id: str | None = None, *, key: str | None = None) -> Obj:
        """Insert or replace ``obj`` (keyed by ``key``, default its ``id``); a child row needs its parent's key."""
        if (self.parent is None) != (parent_id is None):
            raise ValueError(f"{self.kind}: parent ID {'required' if self.parent else 'not expected'}")
        row_key: str = obj["id"] if key is None else key
        old_parent = self._parent_of.get(row_key)
        if old_parent is not None and old_parent != parent_id:
            self._by_parent[old_parent].pop(row_key, None)
        self._rows[row_key] = obj
        if parent_id is not None:
            self._by_parent.setdefault(parent_id, {})[row_key] = obj
            self._parent_of[row_key] = parent_id
        return obj

    def remove(self, key: str, *, cascade: bool = True) -> Obj | None:
        obj = self._rows.pop(key, None)
        if obj is None:
            return None
        parent_id = self._parent_of.pop(key, None)
        if parent_id is not None:
            siblings = self._by_parent.get(parent_id, {})
            siblings.pop(key, None)
            if not siblings:
                self._by_parent.pop(parent_id, None)
        if cascade:
            for child in self.children:
                child.remove_under(key)
        return obj

    def under(self, parent_id: str) -> list[Obj]:
        return list(self._by_parent.get(parent_id, {}).values())

    def count_under(self, parent_id: str) -> int:
        return len(self._by_parent.get(parent_id, {}))

    def remove_under(self, parent_id: str) -> None:
        for key in list(self._by_parent.get(parent_id, {})):
            self.remove(key)

    def copy_under(self, parent_id: str) -> dict[str, Obj]:
        """A deep copy of one parent's rows, for all-or-nothing batches: change the copy, then :meth:`replace_under`."""
        return copy.deepcopy(self._by_parent.get(parent_id, {}))

    def replace_under(self, parent_id: str, rows: dict[str, Obj]) -> None:
        for key in set(self._by_parent.get(parent_id, {})) - set(rows):
            self.remove(key)
        for key, obj in rows.items():
            self.add(obj, parent_id, key=key)

    def clear(self) -> None:
        self._rows.clear()
        self._by_parent.clear()
        self._parent_of.clear()


class Store:
    """A table per kind, parents before children, in the order the kinds are given."""

    def __init__(self, kinds: Sequence[Kind]) -> None:
        self.kinds: tuple[Kind, ...] = tuple(kinds)
        self._kinds = {kind.name: kind for kind in kinds}
        self._tables: dict[str, Table] = {}
        for kind in kinds:
            parent = None
            if kind.parent is not None:
                if kind.parent not in self._tables:
                    raise ValueError(f"{kind.name}: its parent {kind.parent} must come first")
                parent = self._tables[kind.parent]
            self._tables[kind.name] = Table(kind.name, parent)
        self._tokens: dict[str, Token] = {}
        self._token_ids: dict[str, str] = {}  # secret value -> token ID

    def table(self, name: str) -> Table:
        return self._tables[name]

    def kind(self, name: str) -> Kind:
        return self._kinds[name]

    @property
    def accounts(self) -> Table:
        return self._tables["accounts"]

    @property
    def zones(self) -> Table:
        return self._tables["zones"]

    def counts(self) -> dict[str, int]:
        """Objects per kind: what a benchmark polls to see when everything is in Cloudflare, for the price of a
        few bytes where the state would be megabytes."""
        return {name: len(table) for name, table in self._tables.items()}

    def clear(self) -> None:
        for table in self._tables.values():
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
