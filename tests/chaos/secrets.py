"""Every secret value of the chaos session, in one registry, so that scenario 5 can search for each of them in
everything the controllers produced.

Scenarios make their token and secret values with `secret_value()` (random, unique, registered) and register the
values they did not choose (tokens the emulator issues, what the controller writes into Secrets) with `register()`
or `register_secret_data()`."""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping

SECRETS: set[str] = set()
"""The values to search for; short values are left out (they would match by chance)."""

FRAGMENTS: set[str] = set()
"""Pieces of random values (their first and last characters): a value cut short in a message still counts."""

MIN_LENGTH = 12
FRAGMENT = 12


def register(value: str, *, random_part: str | None = None) -> str:
    """Search for `value`; and for the ends of `random_part` (the part of it that is random, if it has one long
    enough: a fixed prefix would be found where it means nothing)."""
    if len(value) >= MIN_LENGTH:
        SECRETS.add(value)
    if random_part is not None and len(random_part) >= 2 * FRAGMENT:
        FRAGMENTS.update((random_part[:FRAGMENT], random_part[-FRAGMENT:]))
    return value


def secret_value(prefix: str = "chaos-secret") -> str:
    """A fresh random value, registered: use it for every token and secret value a scenario makes up."""
    random_part = os.urandom(18).hex()
    return register(f"{prefix}-{random_part}", random_part=random_part)


SECRET_KEYS = frozenset({"s", "secret", "TunnelSecret", "tunnel_secret"})
"""Keys of the secret parts of JSON documents in Secrets (a tunnel's token and credentials file also hold IDs,
which status shows on purpose)."""


def _secret_leaves(value: object) -> list[str]:
    if isinstance(value, Mapping):
        found = [str(item) for key, item in value.items() if key in SECRET_KEYS and isinstance(item, str)]
        return found + [leaf for item in value.values() for leaf in _secret_leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _secret_leaves(item)]
    return []


def _json_inside(value: str) -> object:
    """The JSON document a value is, or that it encodes in base64 (a tunnel token); None if neither."""
    for text in (value, _b64(value)):
        if text:
            try:
                return json.loads(text)
            except ValueError:
                continue
    return None


def _b64(value: str) -> str | None:
    try:
        return base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def register_secret_data(data: Mapping[str, str] | None) -> int:
    """Register the values of a Secret's `data` (base64), and the secret parts of those that are JSON documents
    (a tunnel's credentials and token); returns how many values were new."""
    before = len(SECRETS)
    for encoded in (data or {}).values():
        value = _b64(encoded)
        if value is None:
            continue
        register(value)
        for leaf in _secret_leaves(_json_inside(value)):
            register(leaf, random_part=leaf)
    return len(SECRETS) - before
